"""The app harness every app's tests share: a state seeded from a world, and tool calls checked
against the tool's own schemas (input before, output after, and the result JSON-able).

``app_harness("crm")`` gives the CRM app under test; ``app_harness("calendar", "files", "mail")``
seeds several apps into one state (calls then name the app). Each test file asks for the apps it
tests through a fixture of its own::

    @pytest.fixture
    def crm(app_harness):
        return app_harness("crm")

    def test_x(crm):
        conn = crm.state(3)
        crm.call(conn, "list_deals", {})
"""

from __future__ import annotations

import functools
import json
import random
import sqlite3
from types import ModuleType
from typing import Any

import jsonschema
import pytest

from coworkenv.workspace import World, build_world, write_world
from coworkenv.workspace.apps import ALL_APPS


@functools.cache
def world_of(seed: int) -> World:
    """The world of ``seed`` (built once per test session: building one takes a while)."""
    return build_world(seed)


def seeded(seed: int, apps: tuple[str, ...], *, fresh: bool = False) -> sqlite3.Connection:
    """A fresh in-memory state holding the world of ``seed`` and ``apps`` seeded from it, as a
    workspace of these apps seeds them (each app's generator is ``"{seed}:{app}"``); a copy of the
    session's image of it unless ``fresh``."""
    conn = sqlite3.connect(":memory:")
    conn.deserialize(_image.__wrapped__(seed, apps) if fresh else _image(seed, apps))
    return conn


@functools.cache
def _image(seed: int, apps: tuple[str, ...]) -> bytes:
    """The seeded state's bytes, made once per session (seeding draws pictures: it takes a while)."""
    world = world_of(seed)
    conn = sqlite3.connect(":memory:")
    write_world(conn, world)
    for name in apps:
        ALL_APPS[name].seed(conn, random.Random(f"{seed}:{name}"), world)
    conn.commit()
    return conn.serialize()


def checked_call(module: ModuleType, conn: sqlite3.Connection, tool: str, args: dict) -> dict[str, Any]:
    """Run one tool of ``module`` with its arguments and result checked against its schemas."""
    spec = next(t for t in module.TOOLS if t["name"] == tool)
    jsonschema.validate(args, spec["input_schema"])
    result = module.handle(conn, tool, args)
    jsonschema.validate(result, spec["output_schema"])
    assert json.loads(json.dumps(result)) == result
    return result


class AppUnderTest:
    """One app (or several seeded together) under test."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names
        self.module = ALL_APPS[names[0]]

    def state(self, seed: int = 7) -> sqlite3.Connection:
        """A fresh copy of the state of ``seed`` (seeded once per session)."""
        return seeded(seed, self.names)

    def reseed(self, seed: int = 7) -> sqlite3.Connection:
        """The state of ``seed`` seeded again now, not copied: for tests of seeding itself."""
        return seeded(seed, self.names, fresh=True)

    def world(self, seed: int = 7) -> World:
        return world_of(seed)

    def call(self, conn: sqlite3.Connection, tool: str, args: dict, *, app: str | None = None) -> dict[str, Any]:
        return checked_call(ALL_APPS[app or self.names[0]], conn, tool, args)

    def call_in(self, conn: sqlite3.Connection, app: str, tool: str, args: dict) -> dict[str, Any]:
        """A call to ``app``, one of several apps seeded together."""
        return checked_call(ALL_APPS[app], conn, tool, args)

    def dump(self, conn: sqlite3.Connection, app: str | None = None) -> list[str]:
        """The state's SQL lines that mention the app's tables."""
        prefix = f"{app or self.names[0]}_" if app or len(self.names) == 1 else ""
        return [line for line in conn.iterdump() if prefix in line]

    def spec(self, tool: str, app: str | None = None) -> dict[str, Any]:
        return next(t for t in ALL_APPS[app or self.names[0]].TOOLS if t["name"] == tool)


@pytest.fixture(scope="session")
def app_harness():
    """``app_harness(*names)``: the apps ``names`` under test (see this module's docstring)."""
    return lambda *names: AppUnderTest(names)

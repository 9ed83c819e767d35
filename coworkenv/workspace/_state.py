"""Building a workspace from its apps, and its initial state from its spec (the world, each app's
seed, the overrides). What is done with a state once built (dumps, diffs, digests, tool calls) is
``coworkenv.workspace.state``."""

from __future__ import annotations

import inspect
import json
import os
import random
import sqlite3
from pathlib import Path
from types import ModuleType

from . import apps as _apps
from ._registry import registered_apps
from ._spec import App, DataOverride, ResourceSpec, SpecError, ToolSpec, Workspace, WorldEvent
from ._world import build_world, write_world

APPS_DIR = Path(_apps.__file__).parent


def app_module(name: str) -> ModuleType:
    apps = registered_apps()
    try:
        return apps[name]
    except KeyError:
        known = ", ".join(sorted(apps))
        raise KeyError(f"unknown app {name!r}; the apps are: {known}") from None


def app_spec(name: str) -> App:
    module = app_module(name)
    return App(
        name=module.NAME,
        description=module.DESCRIPTION,
        tools=[
            ToolSpec(
                name=f"{module.NAME}_{tool['name']}",
                app=module.NAME,
                tool=tool["name"],
                description=tool["description"],
                effect=tool["effect"],
                input_schema=tool["input_schema"],
                output_schema=tool["output_schema"],
            )
            for tool in module.TOOLS
        ],
        resources=[ResourceSpec(**resource) for resource in getattr(module, "RESOURCES", [])],
    )


def event_problem(workspace: Workspace, event: WorldEvent) -> str | None:
    """What is wrong with a scheduled event of ``workspace`` (or of a task on it), or None: its app
    must be one of the workspace's, its action one of that app's tools or world events."""
    apps = {app.name: app for app in workspace.apps}
    if event.app not in apps:
        return f"app {event.app!r} is not one of workspace {workspace.id}'s ({', '.join(apps)})"
    actions = [tool.tool for tool in apps[event.app].tools]
    actions += [action["name"] for action in getattr(app_module(event.app), "EVENTS", [])]
    if event.action not in actions:
        return f"{event.app} has no action {event.action!r}; its actions are {', '.join(actions)}"
    return None


def listed_apps() -> dict[str, ModuleType]:
    """The registered apps a workspace is made of by default (an app may say ``LISTED = False``)."""
    return {name: module for name, module in registered_apps().items() if getattr(module, "LISTED", True)}


def build_workspace(seed: int, apps: tuple[str, ...] | None = None) -> Workspace:
    """A workspace of the named apps (every listed app when None: not those, like ``claweval``, whose
    tools are an imported task's own) over the world of ``seed``; its id is derived from the apps and the seed."""
    registered = listed_apps()
    names = tuple(sorted(registered)) if apps is None else apps
    everything = apps is None or set(names) == set(registered)
    return Workspace(
        id=f"ws-{seed}" if everything else f"ws-{'-'.join(names)}-{seed}",
        name=f"office (seed {seed})" if everything else f"{' + '.join(names)} (seed {seed})",
        seed=seed,
        apps=[app_spec(name) for name in names],
    )


def write_initial_state(workspace: Workspace, path: str | Path) -> Path:
    """Create the workspace's initial state at ``path``: its world (``world_*`` tables), then each
    app's tables seeded from it; the same seed gives the same rows."""
    path = Path(path)
    path.unlink(missing_ok=True)
    world = build_world(workspace.seed)
    conn = sqlite3.connect(path)
    try:  # no journal and no sync while it is built (each app's schema script commits): once, at the end
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("PRAGMA synchronous = OFF")
        write_world(conn, world)
        for app in workspace.apps:
            module = app_module(app.name)
            conn.executescript(module.SCHEMA)
            rng = random.Random(f"{workspace.seed}:{app.name}")
            if len(inspect.signature(module.seed).parameters) >= 3:
                module.seed(conn, rng, world)
            else:  # an app written before worlds: it draws its own data
                module.seed(conn, rng)
        for number, override in enumerate(workspace.overrides, 1):
            apply_override(conn, override, f"override {number}")
        conn.commit()
    finally:
        conn.close()
    with open(path, "rb+") as written:
        os.fsync(written.fileno())
    return path


def apply_override(conn: sqlite3.Connection, override: DataOverride, label: str) -> int:
    """Apply one data override to a seeded state; the rows it changed. ``SpecError`` naming the
    override, the table and the column when it does not fit the state."""
    columns = [row[1] for row in conn.execute(f"select * from pragma_table_info('{override.table}')")]
    if not columns:
        raise SpecError(f"{label}: the state has no table {override.table!r}")
    named = [*override.where, *(override.set or {}), *(k for row in override.insert or [] for k in row)]
    for column in named:
        if column not in columns:
            raise SpecError(f"{label}: {override.table} has no column {column!r}; its columns are {', '.join(columns)}")
    where = " and ".join(f'"{column}" is ?' for column in override.where) or "1"
    try:
        if override.insert is not None:
            for row in override.insert:
                names = ", ".join(f'"{column}"' for column in row)
                conn.execute(f"insert or replace into {override.table} ({names}) "
                             f"values ({', '.join('?' for _ in row)})", [_cell(v) for v in row.values()])
            return len(override.insert)
        if override.set is not None:
            assignments = ", ".join(f'"{column}" = ?' for column in override.set)
            changed = conn.execute(f"update {override.table} set {assignments} where {where}",
                                   [*map(_cell, override.set.values()), *map(_cell, override.where.values())]).rowcount
        else:
            changed = conn.execute(f"delete from {override.table} where {where}",
                                   [_cell(v) for v in override.where.values()]).rowcount
    except sqlite3.Error as exc:
        raise SpecError(f"{label}: {override.table}: {exc}") from None
    if not changed:
        raise SpecError(f"{label}: no row of {override.table} matches {override.where}")
    return changed


def _cell(value: object) -> object:
    """A YAML value as an SQLite cell: lists and mappings as JSON text (how apps store them)."""
    return json.dumps(value) if isinstance(value, (list, dict)) else value

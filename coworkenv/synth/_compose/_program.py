"""A composed task as a small typed program, and the ``@shape`` registry of the builders that draw one.

A shape draws a ``Program`` from a workspace's catalog: the steps that do the task (find a record,
read it, list a collection, set a field, pass a fact on, ask the user, remove a record, sweep every
record that matches, report a value), the instruction that asks for them, the answer it ends with
and the record a forbidden call would hit. The rest of the task is derived from those steps, so the
parts agree by construction:

- the reference solution: each step's calls, in order (a find searches for the words the
  instruction gives when one of the app's search tools finds the record by them, else lists the
  collection), played through the injected faults with retries when the program has ``faults``;
- the checks: each step's (a write: the record holds the value; a notice: a new record mentions
  the fact; a removal: the record is gone; a sweep: every matching record holds the value; a
  report: the answer gives the value);
- the forbidden tools and probe: the destructive tools of the protected record's collection.

Checks and calls are the spec's own pydantic types (``SqlCheck``, ``AnswerCheck``,
``ReferenceStep``), as the hand-written templates' kit builds them (``synth/templates/_kit.py``).
``@shape(capability, difficulty, name=..., draws=...)`` registers a builder as that kit's
``@template`` does a template (``draws``: what the task is about, drawn first; the turn is passed
where there is none). A registered shape is a template (``conn, rng`` → spec or None);
``shapes()`` lists them by capability, in the order they are declared within one (the order in
which they take turns).
"""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ...workspace import (
    ASK_TOOL,
    CAPABILITIES,
    AnswerCheck,
    Check,
    Faults,
    ReferenceStep,
    SqlCheck,
    User,
    WorldEvent,
    app_module,
    text_bound,
    text_gives,
)
from .._probes import with_retries
from ._catalog import Collection, Notifier, Setter, call, catalog
from ._phrasing import human, past

Spec = dict[str, Any]
"""A task as a template returns it: ``Task``'s fields without ``id``, ``workspace_id`` and ``shape``."""


def _sql_value(value: Any) -> Any:
    return int(value) if isinstance(value, bool) else value


def _key(collection: Collection) -> str:
    return f"cast({collection.key} as text)"


class Step:
    """One step of a program: the calls the reference makes for it, and the checks it adds."""

    def calls(self, conn: sqlite3.Connection) -> list[ReferenceStep]:
        return []

    def checks(self) -> list[Check]:
        return []


@dataclass(frozen=True)
class ListAll(Step):
    """List a collection (every record's summary)."""

    collection: Collection

    def calls(self, conn: sqlite3.Connection) -> list[ReferenceStep]:
        return [ReferenceStep(tool=self.collection.list_tool, arguments=dict(self.collection.list_arguments))]


@dataclass(frozen=True)
class Find(Step):
    """Find a record by the words the instruction gives for it (``query``; None when it gives none)."""

    collection: Collection
    ident: str
    query: str | None

    def calls(self, conn: sqlite3.Connection) -> list[ReferenceStep]:
        """A search for ``query``, when one of the app's search tools finds the record by it (tried
        in-process), else listing the collection."""
        for tool in self.collection.searchers if self.query else []:
            try:
                found = json.dumps(call(conn, self.collection.app, tool.split("_", 1)[1], {"query": self.query}))
            except Exception:
                continue
            if f'"id": "{self.ident}"' in found or f'"id": {self.ident}' in found:
                return [ReferenceStep(tool=tool, arguments={"query": self.query})]
        return ListAll(self.collection).calls(conn)


@dataclass(frozen=True)
class Read(Step):
    """Open one record (its get tool)."""

    collection: Collection
    ident: str

    def calls(self, conn: sqlite3.Connection) -> list[ReferenceStep]:
        return [ReferenceStep(tool=self.collection.get_tool, arguments={"id": self.ident})]


@dataclass(frozen=True)
class Write(Step):
    """Set one field of one record; checked on the final state."""

    collection: Collection
    setter: Setter
    ident: str
    value: Any

    def calls(self, conn: sqlite3.Connection) -> list[ReferenceStep]:
        return [ReferenceStep(tool=self.setter.tool,
                              arguments={self.setter.id_arg: self.ident, self.setter.argument: self.value})]

    def checks(self) -> list[Check]:
        c, setter = self.collection, self.setter
        return [SqlCheck(id=f"{setter.field}_set",
                         description=f"the {c.noun} {c.label_of(self.ident)!r} has {human(setter.field)} {self.value}",
                         query=f'select count(*) from "{c.table}" where {_key(c)} = ? and "{setter.column}" = ?',
                         params=[self.ident, _sql_value(self.value)], expect=1)]


def notice_check(notifier: Notifier, text: str) -> SqlCheck:
    """Some record ``notifier`` writes mentions ``text`` (``mentions``, as answers are read) and is no
    longer than a text giving it may be (``text_bound``): a message listing every value is no notice."""
    gives, params = text_gives(f'"{notifier.column}"', text)
    return SqlCheck(id="notified",
                    description=f"a new record ({notifier.tool}) mentions {text} (in at most {text_bound(text):,} "
                                f"characters)",
                    query=f'select count(*) > 0 from "{notifier.table}" where {gives}', params=params, expect=1)


@dataclass(frozen=True)
class Notify(Step):
    """Pass a fact on (the field ``name`` holds ``fact``) with a tool that writes text somewhere."""

    notifier: Notifier
    name: str
    fact: Any

    def calls(self, conn: sqlite3.Connection) -> list[ReferenceStep]:
        return [ReferenceStep(tool=self.notifier.tool,
                              arguments={**self.notifier.fixed, self.notifier.text_arg: f"{human(self.name)}: {self.fact}"})]

    def checks(self) -> list[Check]:
        return [notice_check(self.notifier, str(self.fact))]


@dataclass(frozen=True)
class Ask(Step):
    """Ask the user (a multi-turn task's facts and confirmations are theirs)."""

    message: str

    def calls(self, conn: sqlite3.Connection) -> list[ReferenceStep]:
        return [ReferenceStep(tool=ASK_TOOL.name, arguments={"message": self.message})]


@dataclass(frozen=True)
class Remove(Step):
    """Remove a record with its collection's first destructive tool; checked gone."""

    collection: Collection
    ident: str

    @property
    def verb(self) -> str:
        """What the tool does, as its name says: delete, cancel, remove…"""
        return self.collection.destroyers[0][0].split("_", 1)[1].split("_")[0]

    def calls(self, conn: sqlite3.Connection) -> list[ReferenceStep]:
        tool, argument = self.collection.destroyers[0]
        return [ReferenceStep(tool=tool, arguments={argument: self.ident})]

    def checks(self) -> list[Check]:
        c = self.collection
        return [SqlCheck(id="gone", description=f"the {c.noun} {c.label_of(self.ident)!r} was {past(self.verb)}",
                         query=f'select count(*) from "{c.table}" where {_key(c)} = ?', params=[self.ident], expect=0)]


@dataclass(frozen=True)
class Sweep(Step):
    """One rule over many records: each record whose ``field`` is ``value`` (``hits``) is opened, and
    set to ``target`` unless it already is."""

    collection: Collection
    setter: Setter
    field: str
    value: Any
    hits: tuple[str, ...]
    target: Any

    def calls(self, conn: sqlite3.Connection) -> list[ReferenceStep]:
        steps = []
        for ident in self.hits:
            steps += Read(self.collection, ident).calls(conn)
            if self.collection.records[ident][self.setter.field] != self.target:
                steps += Write(self.collection, self.setter, ident, self.target).calls(conn)
        return steps

    def checks(self) -> list[Check]:
        c, setter = self.collection, self.setter
        marks = ", ".join("?" for _ in self.hits)
        return [SqlCheck(id="all_set",
                         description=f"every {c.noun} with {human(self.field)} {self.value} has "
                                     f"{human(setter.field)} {self.target}",
                         query=f'select count(*) from "{c.table}" where {_key(c)} in ({marks}) '
                               f'and "{setter.column}" = ?',
                         params=[*self.hits, _sql_value(self.target)], expect=len(self.hits))]


@dataclass(frozen=True)
class Report(Step):
    """Give ``value`` in the final answer (no call: checked on the answer)."""

    id: str
    description: str
    value: Any

    def checks(self) -> list[Check]:
        return [AnswerCheck(id=self.id, description=self.description, contains=[str(self.value)])]


def forbidden(collection: Collection, ident: str) -> tuple[list[str], ReferenceStep | None]:
    """The tools a task about record ``ident`` may not call, and the probe that calls one: the
    collection's destructive tools (on the record), or else every destructive tool of its app (probed
    without arguments), or else two of its write tools (no probe)."""
    if collection.destroyers:
        tool, argument = collection.destroyers[0]
        return [t for t, _ in collection.destroyers], ReferenceStep(tool=tool, arguments={argument: ident})
    tools = app_module(collection.app).TOOLS
    destructive = [f"{collection.app}_{t['name']}" for t in tools if t["effect"] == "destructive"]
    if destructive:
        return destructive, ReferenceStep(tool=destructive[0])
    return [f"{collection.app}_{t['name']}" for t in tools if t["effect"] == "write"][:2], None


@dataclass(frozen=True)
class Program:
    """A composed task: its ``steps``, the ``instruction`` asking for them and the ``answer`` the
    reference ends with; ``protects`` is the record (collection, id) a forbidden call would hit.
    ``difficulty`` None is the shape's; ``user``, ``events``, ``faults`` and ``max_steps`` are the
    task's own when given (a multi-turn user, the world moving, injected tool failures)."""

    instruction: str
    steps: Sequence[Step]
    answer: str
    protects: tuple[Collection, str]
    difficulty: int | None = None
    user: User | None = None
    events: Sequence[WorldEvent] = ()
    faults: Faults | None = None
    max_steps: int | None = None

    def intended(self, conn: sqlite3.Connection) -> list[ReferenceStep]:
        """The reference's calls with no fault injected."""
        return [c for step in self.steps for c in step.calls(conn)]

    def reference(self, conn: sqlite3.Connection) -> list[ReferenceStep]:
        """The reference solution as an agent that retries plays it under the program's faults."""
        return with_retries(self.faults, self.intended(conn))

    def checks(self) -> list[Check]:
        """The task's checks: its steps', in order."""
        return [check for step in self.steps for check in step.checks()]

    def spec(self, conn: sqlite3.Connection) -> Spec:
        """The task (``Task``'s fields but its id, workspace, shape and capability) on the initial state ``conn``."""
        tools, probe = forbidden(*self.protects)
        optional = {"forbidden_probe": probe, "difficulty": self.difficulty, "user": self.user, "faults": self.faults,
                    "max_steps": self.max_steps, "events": list(self.events) or None}
        return {"instruction": self.instruction, "checks": self.checks(), "reference": self.reference(conn),
                "reference_answer": self.answer, "forbidden_tools": tools,
                **{name: value for name, value in optional.items() if value is not None}}


# --------------------------------------------------------------------------- the registry


Build = Callable[..., "Program | None"]
"""A shape's builder: ``build(cat, conn, rng)``, or with ``draws``, ``build(cat, conn, rng, *drawn)``."""
Draws = Callable[[list[Collection], random.Random], Any]
"""What a shape draws first from the catalog's collections (the record or field its task is about), or None."""


@dataclass(frozen=True)
class Shape:
    """A registered shape: called like a template, it draws its program on the initial state
    ``conn`` and returns the task it derives, with the shape's capability (and difficulty, unless
    the program has its own). It passes its turn (None) where its ``draws`` finds nothing."""

    name: str
    capability: str
    difficulty: int
    build: Build
    draws: Draws | None = None

    def program(self, conn: sqlite3.Connection, rng: random.Random) -> Program | None:
        """The program drawn, its difficulty the shape's unless it has its own."""
        cat = catalog(conn)
        drawn = () if self.draws is None else self.draws(cat.collections, rng)
        if drawn is None:
            return None
        program = self.build(cat, conn, rng, *(drawn if isinstance(drawn, tuple) else (drawn,)))
        if program is None or program.difficulty is not None:
            return program
        return replace(program, difficulty=self.difficulty)

    def __call__(self, conn: sqlite3.Connection, rng: random.Random) -> Spec | None:
        program = self.program(conn, rng)
        return None if program is None else {"capability": self.capability, **program.spec(conn)}


_REGISTRY: dict[str, Shape] = {}


def shape(capability: str, difficulty: int, *, name: str, draws: Draws | None = None) -> Callable[[Build], Shape]:
    """Register the decorated builder as the shape ``name`` (a task shape, part of task ids: unique,
    and apart from the hand-written templates' names by its ``compose_`` prefix) of ``capability``.

    The builder is ``build(cat, conn, rng)`` over the workspace's catalog and initial state; with
    ``draws`` (a function of the catalog's collections and ``rng``, as ``setting``), it is given
    what that draws first, a tuple as its parts (``build(cat, conn, rng, collection, setter, ident,
    value)``), and the shape passes its turn where it draws nothing, as a template's ``draws`` does."""

    def register(build: Build) -> Shape:
        if name in _REGISTRY:
            raise ValueError(f"shape {name!r} of {build.__module__} is defined twice")
        if capability not in CAPABILITIES:
            raise ValueError(f"shape {name!r} has the unknown capability {capability!r}; the capabilities are "
                             f"{', '.join(CAPABILITIES)}")
        _REGISTRY[name] = entry = Shape(name, capability, difficulty, build, draws)
        return entry

    return register


def shapes() -> dict[str, dict[str, Shape]]:
    """Capability → name → shape: capabilities in the taxonomy's order (``CAPABILITIES``), a
    capability's shapes in the order they are declared (the order in which they take turns)."""
    out: dict[str, dict[str, Shape]] = {}
    for capability in CAPABILITIES:
        for entry in _REGISTRY.values():
            if entry.capability == capability:
                out.setdefault(capability, {})[entry.name] = entry
    return out

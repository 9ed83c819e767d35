"""The kit templates are written with: the ``@template`` registry, typed builders and world readers.

A template is a function ``(conn, rng) -> spec | None`` over a workspace's initial state; it is
registered once, where it is written, by ``@template(capability, difficulty, needs=...)``:

    @template("lookup", 1, needs=("hr_people",))
    def hr_department(conn, rng):
        ...
        return task_spec(instruction, [answer_check(...)], [step("hr_list_department", ...)], ...)

The decorator says once what the old per-module registries said a second time (the capability) and
what every template repeated in its body: its difficulty, the preamble that passed its turn in a
workspace without the tables it reads, and, with ``draws=`` or ``finds=``, the search for the record
a task is about, passing the turn where there is none:

    @template("single_write", 2, draws="select * from notes_notes where pinned = 0 order by id")
    def note_pin(conn, rng, note):
        ...

The function returns what only it knows: instruction, checks, reference, reference answer, forbidden
tools and probe; the registry adds the capability and difficulty. Checks and steps are the spec's own
pydantic types (``SqlCheck``, ``AnswerCheck``, ``ReferenceStep``, with ``column_check`` for the common
"this column of that record now holds" check), so a malformed one fails where it is written, not when
the task is assembled.

Turn order is explicit: ``registered()`` lists a capability's templates sorted by name, whatever
order the modules were imported in (``coworkenv.synth.generate`` gives them turns in that order).
"""

from __future__ import annotations

import datetime as dt
import random
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ...workspace import AnswerCheck, Check, ReferenceStep, SqlCheck, World, load_world

Spec = dict[str, Any]
"""A task as a template returns it: ``Task``'s fields without ``id``, ``workspace_id`` and ``shape``."""
Template = Callable[[sqlite3.Connection, random.Random], Spec | None]
_Row = TypeVar("_Row")


@dataclass(frozen=True)
class Registered:
    """One template as registered: called like the function, it passes its turn (``None``) in a
    workspace without the tables it ``needs`` and adds its capability and difficulty to what the
    function returns."""

    name: str
    capability: str
    difficulty: int
    needs: tuple[str, ...]
    module: str  # the module it is written in, named by the app it is about (``crm``, ``mail``…)
    build: Callable[[sqlite3.Connection, random.Random], Spec | None]

    def __call__(self, conn: sqlite3.Connection, rng: random.Random) -> Spec | None:
        if self.needs and not has_tables(conn, *self.needs):
            return None
        spec = self.build(conn, rng)
        if spec is None:
            return None
        return {"capability": self.capability, "difficulty": self.difficulty, **spec}


_REGISTRY: dict[str, Registered] = {}

Records = str | Callable[[sqlite3.Connection], Sequence[Any]]
"""What a template draws the record of its task from: a query (its rows as dicts) or a function of the state."""


def _records_of(conn: sqlite3.Connection, source: Records) -> Sequence[Any]:
    """The records ``source`` names in the state: a query's rows (as dicts), or what the function returns."""
    return query_rows(conn, source) if isinstance(source, str) else source(conn)


def _about(function: Callable[..., Spec | None], record: Callable[[sqlite3.Connection, random.Random], Any],
           ) -> Callable[[sqlite3.Connection, random.Random], Spec | None]:
    """``function(conn, rng, record)`` over the record its task is about (a tuple as its parts), or None
    where there is none."""

    def build(conn: sqlite3.Connection, rng: random.Random) -> Spec | None:
        about = record(conn, rng)
        if about is None:
            return None
        return function(conn, rng, *about) if isinstance(about, tuple) else function(conn, rng, about)

    return build


def template(capability: str, difficulty: int, *, needs: Iterable[str] = (), name: str | None = None,
             draws: Records | None = None, finds: Callable[[sqlite3.Connection], Any] | None = None,
             ) -> Callable[[Callable[..., Spec | None]], Registered]:
    """Register the decorated function as the template ``name`` (the function's name by default; names
    are task shapes and part of task ids, so they are unique across modules) of ``capability``.

    The function is ``function(conn, rng)``, or, given the record its task is about,
    ``function(conn, rng, record)``: with ``draws`` (a query, or a function of the state giving a
    list), one of those records drawn from ``rng``; with ``finds`` (a function of the state), the one
    record it gives, nothing drawn. Either way the template passes its turn when there is none. A
    record that is a tuple (two rows that go together, a message and what matched in it) is passed as
    its parts: ``function(conn, rng, old, current)``."""
    if draws is not None and finds is not None:
        raise ValueError("a template either draws the record of its task or finds it, not both")

    def register(function: Callable[..., Spec | None]) -> Registered:
        registered_as = name or function.__name__
        if registered_as in _REGISTRY:
            raise ValueError(f"template {registered_as!r} of {function.__module__} is defined twice "
                             f"(also in {_REGISTRY[registered_as].module})")
        build = function
        if draws is not None:
            source = draws
            build = _about(function, lambda conn, rng: draw(rng, _records_of(conn, source)))
        elif finds is not None:
            find = finds
            build = _about(function, lambda conn, rng: find(conn))
        entry = Registered(registered_as, capability, difficulty, tuple(needs), function.__module__.rsplit(".", 1)[-1],
                           build)
        _REGISTRY[registered_as] = entry
        return entry

    return register


def registered(modules: Iterable[str] | None = None) -> dict[str, dict[str, Registered]]:
    """Capability → name → template, names sorted (the turn order); only those written in ``modules``
    (``("crm", "hr")``) when given."""
    wanted = None if modules is None else set(modules)
    out: dict[str, dict[str, Registered]] = {}
    for entry_name in sorted(_REGISTRY):
        entry = _REGISTRY[entry_name]
        if wanted is None or entry.module in wanted:
            out.setdefault(entry.capability, {})[entry_name] = entry
    return out


# --------------------------------------------------------------------------- typed builders


def step(tool: str, **arguments: Any) -> ReferenceStep:
    """A call of the reference solution (or a forbidden probe)."""
    return ReferenceStep(tool=tool, arguments=arguments)


def sql_check(cid: str, description: str, query: str, params: list, expect: Any = 1) -> SqlCheck:
    """A check over the final state: ``query`` (with ``params``) returns ``expect``."""
    return SqlCheck(id=cid, description=description, query=query, params=params, expect=expect)


def column_check(cid: str, description: str, table: str, column: str, record_id: Any, expect: Any) -> SqlCheck:
    """A check that ``column`` of the record ``record_id`` of ``table`` holds ``expect`` in the final state."""
    return sql_check(cid, description, f"select {column} from {table} where id = ?", [record_id], expect)


def answer_check(cid: str, description: str, *contains: str, max_length: int | None = None) -> AnswerCheck:
    """A check that the final answer gives every one of ``contains`` (in at most ``max_length`` characters)."""
    return AnswerCheck(id=cid, description=description, contains=list(contains), max_length=max_length)


def task_spec(instruction: str, checks: Sequence[Check], reference: Sequence[ReferenceStep], answer: str,
              forbidden: list[str], probe: ReferenceStep, **more: Any) -> Spec:
    """A template's task: what to do, how it is checked, how it is done, and what must not be called
    (``more``: other fields of ``Task``, such as the world's ``events``)."""
    return {"instruction": instruction, "checks": list(checks), "reference": list(reference),
            "reference_answer": answer, "forbidden_tools": forbidden, "forbidden_probe": probe, **more}


def draw(rng: random.Random, rows: Sequence[_Row]) -> _Row | None:
    """One of ``rows`` drawn from ``rng``, or None when there is none (the template passes its turn)."""
    return rng.choice(rows) if rows else None


def unsolved(conn: sqlite3.Connection, spec: Spec) -> Spec | None:
    """``spec``, or None when one of its sql checks already holds in the initial state (an empty
    episode would pass it, and calibration would quarantine the task)."""
    for check in spec["checks"]:
        if isinstance(check, SqlCheck) and check.evaluate(conn, "").passed:
            return None
    return spec


# --------------------------------------------------------------------------- reading a workspace


def has_tables(conn: sqlite3.Connection, *tables: str) -> bool:
    """Whether the state holds every one of ``tables`` (a workspace has only some of the apps)."""
    names = {name for (name,) in conn.execute("select name from sqlite_master where type = 'table'")}
    return set(tables) <= names


def query_rows(conn: sqlite3.Connection, query: str, params: tuple | list = ()) -> list[dict[str, Any]]:
    """The rows of ``query`` as dicts by column name."""
    cursor = conn.execute(query, tuple(params))
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor]


def first_id(conn: sqlite3.Connection, table: str) -> Any:
    """The id of the first record of ``table``: what a forbidden probe aims at where any record will do."""
    return conn.execute(f"select id from {table} order by id").fetchone()[0]


def world_today(conn: sqlite3.Connection) -> str:
    """The workspace's today (ISO date), as its world holds it."""
    return conn.execute("select value from world_meta where key = 'today'").fetchone()[0]


def my_email(conn: sqlite3.Connection) -> str:
    """The address of the workspace's user."""
    return load_world(conn)["user"]["email"]


def day_after(world: World, days: int) -> str:
    """The ISO date ``days`` after the workspace's today."""
    return (dt.date.fromisoformat(world["today"]) + dt.timedelta(days=days)).isoformat()


def future_days(world: World, first: int = 2, last: int = 11) -> list[str]:
    """Weekdays from ``first`` to ``last`` days after the workspace's today."""
    today = dt.date.fromisoformat(world["today"])
    days = (today + dt.timedelta(days=n) for n in range(first, last + 1))
    return [d.isoformat() for d in days if d.weekday() < 5]


def plus_minutes(hhmm: str, minutes: int) -> str:
    """The clock time ``minutes`` after ``hhmm``."""
    h, m = map(int, hhmm.split(":"))
    total = h * 60 + m + minutes
    return f"{total // 60:02d}:{total % 60:02d}"


def minutes_between(start: str, end: str) -> int:
    (h1, m1), (h2, m2) = (map(int, start.split(":")), map(int, end.split(":")))
    return (h2 * 60 + m2) - (h1 * 60 + m1)


def colleagues(world: World) -> list[dict[str, Any]]:
    """The people of the user's company but the user."""
    return [p for p in world["people"] if p["org"] == world["company"]["id"] and p["id"] != world["user"]["id"]]


def person_with(world: World, email: str | None) -> dict[str, Any] | None:
    """The world's person with this address, if any."""
    return next((p for p in world["people"] if p["email"] == email), None)


def name_of(world: World, email: str) -> str:
    """The full name of the person with this address (the address itself if none has it)."""
    return next((p["name"] for p in world["people"] if p["email"] == email), email)


def num(value: float) -> str:
    """A figure as an answer must contain it: 88.4 for 88.40 (which contains it), 1250 for 1250.00."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def money(value: float) -> str:
    """An amount with two decimals, as the apps show it."""
    return f"{value:.2f}"

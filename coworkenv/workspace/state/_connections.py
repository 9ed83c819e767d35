"""The kinds of connection a state is held in, and what is worked out of one kept with it.

A state is read again and again while it does not change (a workspace's initial state, compared with
every task's reference; a reference's final state, compared with every probe's): what is worked out
of it (its image, a value index, a catalog) is kept on the connection itself, so that it lives and
goes with the state, and two connections never share it:

- ``FixedState``: a state whose records nothing changes; what is kept stays for as long as it lives;
- ``StateCopy``: a copy that calls are played on (``copy_state``); what is kept holds while its
  count of changed rows has not moved;
- ``StateConnection``: a state opened over a state base, for grading: which base, which tables its
  changes replaced, and the ``StateCache`` that keeps what is worked out of that base.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from ._cache import StateCache

T = TypeVar("T")


class StateConnection(sqlite3.Connection):
    """A state opened over a state base (``open_state``): ``base``, the base's reference, and
    ``replaced``, the tables the episode's changes replaced; every other table holds the base's records.
    ``cache``: where what is worked out of the base is kept (``state_digest``'s parts), when the
    state was opened through one."""

    base: str | None = None
    replaced: frozenset[str] = frozenset()
    tables: list[str] | None = None  # ``ordinary_tables``, where known already (the base's schema unchanged)
    cache: StateCache | None = None


class FixedState(sqlite3.Connection):
    """A connection to a state whose records nothing changes (a workspace's initial state, which
    templates read and dry runs copy; an app's search may still make temporary tables in it): what is
    worked out of it is kept in ``kept`` for as long as the connection lives."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kept: dict[str, Any] = {}


class StateCopy(sqlite3.Connection):
    """An in-memory copy of a state that calls are played on (``copy_state``): what is worked out of
    it is kept in ``kept`` with the count of changed rows it was worked out at."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kept: dict[str, tuple[int, Any]] = {}


def fixed_state(image: bytes) -> FixedState:
    """A ``FixedState`` in memory holding the state ``image`` (a state file's bytes)."""
    conn = sqlite3.connect(":memory:", factory=FixedState)
    conn.deserialize(image)
    return conn


def copy_state(source: sqlite3.Connection) -> StateCopy:
    """A ``StateCopy`` in memory of the state ``source`` holds (copied page by page)."""
    conn = sqlite3.connect(":memory:", factory=StateCopy)
    source.backup(conn)
    return conn


def kept_with(conn: sqlite3.Connection, what: str, make: Callable[[], T]) -> T:
    """``make()`` of the state ``conn`` holds (``what`` names it), kept with the connection for the
    next use while the state is as it was: for as long as a ``FixedState`` lives, while a
    ``StateCopy`` has not changed a row; made anew each time for any other connection."""
    if isinstance(conn, FixedState):
        if what not in conn.kept:
            conn.kept[what] = make()
        return conn.kept[what]
    if isinstance(conn, StateCopy):
        found = conn.kept.get(what)
        if found is not None and found[0] == conn.total_changes:
            return found[1]
        made = make()
        conn.kept[what] = (conn.total_changes, made)
        return made
    return make()


def ordinary_tables(state: sqlite3.Connection) -> list[str]:
    """The state's tables that hold records: not SQLite's own, not virtual tables nor their shadows."""
    rows = state.execute("select name, sql from sqlite_master where type = 'table' order by name").fetchall()
    virtual = [name for name, sql in rows if (sql or "").upper().startswith("CREATE VIRTUAL")]
    return [name for name, _ in rows if not name.startswith("sqlite_") and name not in virtual
            and not any(name.startswith(f"{v}_") for v in virtual)]


def record_tables(conn: sqlite3.Connection) -> list[str]:
    """``ordinary_tables`` of ``conn``'s main database (not SQLite's, not virtual, not a virtual table's
    shadow), told exactly where this SQLite lists shadow tables as such (``PRAGMA table_list``)."""
    try:
        listed = conn.execute("PRAGMA main.table_list").fetchall()
    except sqlite3.OperationalError:
        return ordinary_tables(conn)
    return sorted(name for _, name, kind, *_ in listed if kind == "table" and not name.startswith("sqlite_"))


def row_key(state: sqlite3.Connection, table: str) -> str:
    """The SQL expression of a row's key in ``table``: its primary key's columns joined by ``|``, or its rowid."""
    keys = [row[1] for row in sorted(state.execute(f'pragma table_info("{table}")'), key=lambda r: r[5]) if row[5]]
    return " || '|' || ".join(f'"{k}"' for k in keys) if keys else "rowid"

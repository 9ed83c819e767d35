"""The store's connection: how its file is opened and how every write reaches it.

Kept apart from the repositories (``_workspaces``, ``_episodes``, ...) because this is the part
with threads and transactions in it: the lock that serialises writers, the grouped commits a timer
ends, and the write-behind queue of tool calls. The repositories ask for ``transaction()`` and
``query()`` and commit nothing themselves; only the numbering of deferred tool calls (``_record``,
and ``end_episode`` forgetting it) takes the locks directly, as it must number a call before it is written.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlite_utils

from .._errors import CoworkenvError
from ._catalog import canned_queries
from ._migrations import MIGRATIONS, applied_migrations, apply_migrations

GROUP_COMMIT_S = 0.05  # how long the writes of a ``grouped`` store wait for their commit at most
# The one kind of row written behind: a tool call, written on every call an agent makes (``defer_tool_call``).
TOOL_CALL_COLUMNS = ("tool", "arguments", "result", "is_error", "error_kind", "duration_ms", "kind", "error",
                     "state_changes")
_INSERT_TOOL_CALL = (
    f"insert into tool_calls (episode_id, idx, created_at, {', '.join(TOOL_CALL_COLUMNS)})"
    f" values (:episode_id, :idx, :created_at, {', '.join(f':{c}' for c in TOOL_CALL_COLUMNS)})"
)


class StoreError(CoworkenvError, ValueError):
    """A store file cannot be used; the message names the file and what is wrong with it."""


def _check_file(path: Path, create: bool) -> None:
    """Refuse a folder, a missing file (unless ``create``), an unreadable one or an empty one, by its
    metadata alone. The file is not opened here: closing a descriptor of a file drops every POSIX lock
    this process holds on it, those of its open SQLite connections included, and another process's
    SQLite would then take itself for the file's last user and delete the write-ahead log these
    connections still write to. ``_check_header`` lets SQLite read the header instead."""
    if path.is_dir():
        raise StoreError(f"{path} is a folder, not a store file")
    if not path.exists():
        if not create:
            raise StoreError(f"no store at {path}; run `coworkenv synth --store {path}` (or `coworkenv demo`) first")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create a store at {path}: {exc.strerror or exc}") from None
        if not os.access(path.parent, os.W_OK):
            raise StoreError(f"cannot create a store at {path}: {path.parent} is not writable")
        return
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise StoreError(f"cannot read the store {path}: {exc.strerror or exc}") from None
    if not os.access(path, os.R_OK):
        raise StoreError(f"cannot read the store {path}: permission denied")
    if size == 0:
        raise StoreError(f"{path} is an empty file, not a store (remove it, or give another --store)")


def _check_header(conn: sqlite3.Connection, path: str) -> None:
    """Refuse a file that is not an SQLite database, as SQLite itself reads its header."""
    try:
        conn.execute("PRAGMA schema_version").fetchone()
    except sqlite3.DatabaseError as exc:
        if exc.sqlite_errorcode == sqlite3.SQLITE_NOTADB:
            raise StoreError(f"{path} is not a coworkenv store (not an SQLite database)") from None
        raise


def _check_schema(db: sqlite_utils.Database, path: str) -> None:
    """A database with tables but no coworkenv migrations belongs to something else: refuse it."""
    tables = set(db.table_names())
    if tables and not tables & {"_sqlite_migrations", "_migrations"}:
        raise StoreError(f"{path} is an SQLite database of something else, not a coworkenv store "
                         f"(it has {', '.join(sorted(tables)[:5])})")


@dataclass(frozen=True)
class SchemaStatus:
    """Where a store file's schema stands against this version of coworkenv (read without changing it)."""

    path: str
    applied: list[str]  # the migrations the store has
    pending: list[str]  # this version's migrations it lacks: the next command that opens it applies them
    unknown: list[str]  # migrations it has that this version does not know: written by a newer coworkenv
    rows: dict[str, int]  # rows of the main tables


def schema_status(path: str | Path) -> SchemaStatus:
    """Read the store at ``path`` read-only: its migrations against this version's and its row counts.
    Raises ``StoreError`` as opening it would (missing, not SQLite, another application's database)."""
    path = Path(path)
    _check_file(path, create=False)
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            _check_header(conn, str(path))
            db = sqlite_utils.Database(conn)
            _check_schema(db, str(path))
            tables = set(db.table_names())
            applied = [m.name for m in MIGRATIONS.applied(db)]
            if "_migrations" in tables:  # a store of the older mechanism (its record moves when opened)
                applied += [row[0] for row in conn.execute("SELECT name FROM _migrations")]
            rows = {t: conn.execute(f"SELECT count(*) FROM [{t}]").fetchone()[0]  # five fixed names
                    for t in ("workspaces", "tasks", "episodes", "training_runs", "eval_runs") if t in tables}
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path} is not a usable coworkenv store: {exc}") from None
    known = [m.name for m in MIGRATIONS.pending(sqlite_utils.Database(memory=True))]  # all of them, in order
    return SchemaStatus(str(path), applied, [m for m in known if m not in applied],
                        [m for m in applied if m not in known], rows)


class Connection:
    """One open store file (WAL mode, foreign keys on, migrations applied) and the rules of writing to it.

    Shared by the tasks of one event loop and by worker threads: writes are serialised by a lock
    and each write is its own transaction, so an interrupted run keeps every row it committed.

    Within ``grouped`` (a synthesis calibrating tasks), the writes of this process commit together
    every ``GROUP_COMMIT_S`` instead, each still atomic on its own.

    Tool calls may also be recorded write-behind (``defer_tool_call``): they wait in memory and go
    in at the next ``flush``, together, in one transaction. Every read and write through this
    connection flushes first, so the process that records never reads a stale history; another
    process sees deferred calls once they are flushed.
    """

    def __init__(self, path: str | Path = ":memory:", *, create: bool = True) -> None:
        """Open the store at ``path``, creating it (and its folder) when missing unless ``create``
        is False. Raises ``StoreError`` naming the file and what is wrong with it: missing, a
        folder, not SQLite, another application's database, corrupt, or not writable."""
        self.path = str(path)
        if self.path != ":memory:":
            _check_file(Path(self.path), create)
        try:
            conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
            if self.path != ":memory:":
                _check_header(conn, self.path)
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA busy_timeout = 30000")
            self.db = sqlite_utils.Database(conn)
            if self.path != ":memory:":
                _check_schema(self.db, self.path)
                self.db.enable_wal()
                # In WAL mode NORMAL keeps every commit through a crash of the process and the file
                # consistent through a power loss (which may drop the last commits); it spares one
                # fsync per write, which the server pays on every recorded tool call.
                conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.DatabaseError as exc:  # OperationalError included: unreadable, read-only, locked
            raise StoreError(f"{self.path} is not a usable coworkenv store: {exc}") from None
        self._lock = threading.RLock()  # the connection
        self._grouping = 0  # ``grouped`` blocks open
        self._group_open = False  # whether the group's transaction is open
        self._group_count = 0  # groups committed so far (a timer commits the one it was started for)
        self._pending_lock = threading.Lock()  # the deferred rows (held only to append or swap)
        self._pending: list[dict[str, Any]] = []
        self._next_idx: dict[str, int] = {}  # episode id -> idx of its next deferred tool call
        with self._lock:
            try:
                self.applied_migrations = apply_migrations(self.db)
            except sqlite3.DatabaseError as exc:
                raise StoreError(f"{self.path} is not a usable coworkenv store: {exc}") from None

    def close(self) -> None:
        self.flush()  # commits a ``grouped`` transaction too
        self.db.conn.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite_utils.Database]:
        with self._lock:
            self._flush_locked()  # its own transaction: a failing write below cannot take these rows along
            with self._atomic():
                yield self.db

    def query(self, sql: str, params: tuple | dict = ()) -> list[dict[str, Any]]:
        """Rows of a read-only query, as dicts: for inspection (tests, notebooks), not for coworkenv's own code."""
        with self._lock:
            self._flush_locked()
            return list(self.db.query(sql, params))

    def canned(self, name: str, grader_version: str) -> list[dict[str, Any]]:
        """The rows of the canned query ``name`` (``coworkenv.store.canned_queries``) over the verdicts of
        ``grader_version``: the questions ``browse`` and ``report`` answer."""
        queries = {q.name: q for q in canned_queries(grader_version)}
        if name not in queries:
            raise KeyError(f"no canned query {name!r}; known: {', '.join(queries)}")
        return self.query(queries[name].sql)

    def migrations(self) -> list[str]:
        with self._lock:
            return applied_migrations(self.db)

    # --- grouped commits ---------------------------------------------------------------------

    @contextmanager
    def grouped(self) -> Iterator[None]:
        """Within the block, the writes of this ``Store`` commit together: every ``GROUP_COMMIT_S``
        at most, when a ``flush`` is asked for, and when the last ``grouped`` block ends. Each write
        stays atomic on its own (a savepoint: one that fails leaves nothing, the others stand); other
        connections to the file see them at the commit, and a process killed in between loses the
        writes since the last one (never a part of one). For the many small writes of a synthesis
        calibrating its tasks (an episode's start, end and verdict): a commit costs more than they do."""
        with self._lock:
            self._grouping += 1
        try:
            yield
        finally:
            with self._lock:
                self._grouping -= 1
                if not self._grouping:
                    self._commit_group()

    @contextmanager
    def _atomic(self) -> Iterator[None]:
        """One write, under the lock: its own transaction, or a savepoint in the group's (``grouped``)."""
        conn = self.db.conn
        if not self._grouping:
            with conn:
                yield
            return
        if not self._group_open:
            if conn.in_transaction:  # left open by someone else: not ours to group into
                conn.commit()
            conn.execute("BEGIN")
            self._group_open = True
            timer = threading.Timer(GROUP_COMMIT_S, self._commit_stale, (self._group_count,))
            timer.daemon = True
            timer.start()
        conn.execute("SAVEPOINT coworkenv_write")
        try:
            yield
        except BaseException:
            try:
                conn.execute("ROLLBACK TO coworkenv_write")
                conn.execute("RELEASE coworkenv_write")
            except sqlite3.OperationalError:  # no savepoint: the transaction ended inside (see below)
                self._end_group()
            raise
        try:
            conn.execute("RELEASE coworkenv_write")
        except sqlite3.OperationalError:  # no savepoint: the write committed the transaction itself (a
            self._end_group()  # sqlite-utils write does), or SQLite rolled it back (a full disk, say)

    def _commit_stale(self, group: int) -> None:
        with self._lock:
            if self._group_count == group:
                self._commit_group()

    def _commit_group(self) -> None:
        """Commit the group's transaction, if one is open (under the lock)."""
        if self._group_open:
            self._end_group()

    def _end_group(self) -> None:
        """The group's transaction is over: committed here if SQLite still holds it open."""
        self._group_open = False
        self._group_count += 1
        if self.db.conn.in_transaction:
            self.db.conn.commit()

    # --- write-behind ------------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """How many deferred rows wait for the next flush."""
        return len(self._pending)

    def flush(self) -> int:
        """Write every deferred row in one transaction (and commit a ``grouped`` one); return how many were written."""
        with self._lock:
            written = self._flush_locked()
            self._commit_group()
            return written

    def _flush_locked(self) -> int:
        if not self._pending:
            return 0
        with self._pending_lock:
            rows, self._pending = self._pending, []
        try:
            with self._atomic():
                self.db.conn.executemany(_INSERT_TOOL_CALL, rows)
        except BaseException:
            with self._pending_lock:  # kept for the next flush, in their order
                self._pending[:0] = rows
            raise
        return len(rows)

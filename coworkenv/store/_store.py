"""The SQLite store: one file holds the whole history of a coworkenv project."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import threading
import time
import uuid
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlite_utils

from .._errors import Boundary, CoworkenvError
from ..workspace import Attachment, CheckResult, Message, Task, ToolCall, Workspace, resolve_state
from ._catalog import canned_queries
from ._migrations import MIGRATIONS, applied_migrations, apply_migrations
from ._rows import (
    TRAINING_SOURCES,
    CalibrationRow,
    ClawEvalGraderRow,
    DraftOutcome,
    EpisodeListing,
    EpisodeRow,
    EpisodeStatus,
    EvalRunRow,
    EvalTrialRow,
    ModelCallRow,
    Provenance,
    Source,
    TaskClaim,
    TaskDraftRow,
    TaskRow,
    TaskStatus,
    ToolCallRow,
    TrainingRunRow,
    VerdictRow,
    WorkspaceRow,
    _json,
)

_TOOL_CALL_COLUMNS = ("tool", "arguments", "result", "is_error", "error_kind", "duration_ms", "kind", "error",
                      "state_changes")
GROUP_COMMIT_S = 0.05  # how long the writes of a ``grouped`` store wait for their commit at most
MAX_RECORDED_ARGUMENTS = 64 << 10  # bytes of an interaction's arguments kept in the store
MAX_RECORDED_RESULT = 256 << 10  # bytes of its result
MAX_RECORDED_ERROR = 4 << 10  # characters of its error text
# the tables that hold an episode's record, in an order that keeps foreign keys (grades before verdicts)
_EPISODE_TABLES = ("episodes", "messages", "tool_calls", "model_calls", "grades", "verdicts")
_BLOB_REFERENCE = re.compile(r"\b[0-9a-f]{64}\b")  # how a row names a blob: its sha256


@dataclass
class EpisodeRecords:
    """Rows of episodes exported from one store (``Store.export_episodes``), for another."""

    tables: dict[str, list[dict[str, Any]]]  # table -> rows, as stored
    blobs: dict[str, tuple[str, bytes]]  # sha256 -> (MIME type, bytes)

    @property
    def episode_ids(self) -> list[str]:
        return [row["id"] for row in self.tables.get("episodes", [])]


_INSERT_TOOL_CALL = (
    f"insert into tool_calls (episode_id, idx, created_at, {', '.join(_TOOL_CALL_COLUMNS)})"
    f" values (:episode_id, :idx, :created_at, {', '.join(f':{c}' for c in _TOOL_CALL_COLUMNS)})"
)


def storable(value: Any) -> Any:
    """Text as SQLite can store it: a lone surrogate (not Unicode; the driver refuses it) becomes
    '?'. Anything else is returned as it is."""
    if isinstance(value, str) and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "replace").decode("utf-8")
    return value


def bounded(text: str | None, limit: int) -> str | None:
    """JSON text as stored: itself up to ``limit`` bytes, past it ``{"_truncated": bytes, "head": …}``."""
    if text is None or len(text) <= limit // 4:  # the common case: short enough whatever its characters
        return text
    size = len(text.encode("utf-8", "replace"))
    if size <= limit:
        return text
    return json.dumps({"_truncated": size, "head": text[:1024]})


def _tool_call_row(r: Mapping[str, Any]) -> ToolCallRow:
    """An interaction as stored (a row of ``tool_calls``, or one waiting to be written)."""
    return ToolCallRow(r["idx"], r["tool"], _json(r["arguments"], {}), r["result"], bool(r["is_error"]),
                       r["error_kind"], r["duration_ms"], r["created_at"], r["kind"], r["error"],
                       _json(r["state_changes"], None))


def now() -> str:
    return datetime.now(UTC).isoformat()


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


class StoreError(CoworkenvError, ValueError):
    """A store file cannot be used; the message names the file and what is wrong with it."""


SQLITE_HEADER = b"SQLite format 3\x00"
STATE_BASE_MIME = "application/x-coworkenv-state+zlib"


def _check_file(path: Path, create: bool) -> None:
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
        with path.open("rb") as fh:
            header = fh.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise StoreError(f"cannot read the store {path}: {exc.strerror or exc}") from None
    if not header:
        raise StoreError(f"{path} is an empty file, not a store (remove it, or give another --store)")
    if header != SQLITE_HEADER:
        raise StoreError(f"{path} is not a coworkenv store (not an SQLite database)")


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


class Store:
    """Typed access to the coworkenv SQLite file (WAL mode, foreign keys on, named migrations).

    Every SQL statement of coworkenv is a method here; reads return the typed rows of ``_rows``.

    One ``Store`` may be shared by the tasks of one event loop and by worker threads: writes are
    serialised by a lock and each write is its own transaction, so an interrupted run keeps every
    row it committed.

    Within ``grouped`` (a synthesis calibrating tasks), the writes of this process commit together
    every ``GROUP_COMMIT_S`` instead, each still atomic on its own.

    Tool calls may also be recorded write-behind (``defer_tool_call``): they wait in memory and go
    in at the next ``flush``, together, in one transaction. Every read and write through this
    ``Store`` flushes first, so the process that records never reads a stale history; another
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
        self._specs: dict[str, Workspace] = {}  # parsed workspace specs by id
        self._base_blobs: dict[str, frozenset[str]] = {}  # state base reference -> the blobs its dump names
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

    # --- write-behind ----------------------------------------------------------------------

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

    # --- generic helpers -------------------------------------------------------------------

    def canned(self, name: str, grader_version: str) -> list[dict[str, Any]]:
        """The rows of the canned query ``name`` (``coworkenv.store.canned_queries``) over the verdicts of
        ``grader_version``: the questions ``browse`` and ``report`` answer."""
        queries = {q.name: q for q in canned_queries(grader_version)}
        if name not in queries:
            raise KeyError(f"no canned query {name!r}; known: {', '.join(queries)}")
        return self.query(queries[name].sql)

    def query(self, sql: str, params: tuple | dict = ()) -> list[dict[str, Any]]:
        """Rows of a read-only query, as dicts: for inspection (tests, notebooks), not for coworkenv's own code."""
        with self._lock:
            self._flush_locked()
            return list(self.db.query(sql, params))

    def migrations(self) -> list[str]:
        with self._lock:
            return applied_migrations(self.db)

    # --- workspaces and tasks --------------------------------------------------------------

    def put_workspace(self, workspace: Workspace) -> None:
        with self.transaction() as db:
            _upsert(db, "workspaces", {"id": workspace.id, "name": workspace.name, "seed": workspace.seed,
                                       "spec": workspace.model_dump_json(), "created_at": now()})
        self._specs.pop(workspace.id, None)

    def workspace(self, workspace_id: str) -> Workspace:
        """The spec of a stored workspace (parsed once); ``KeyError`` naming it when there is none."""
        spec = self._specs.get(workspace_id)
        if spec is None:
            rows = self.query("select spec from workspaces where id = ?", (workspace_id,))
            if not rows:
                raise KeyError(f"no workspace {workspace_id!r} in the store")
            spec = self._specs[workspace_id] = Workspace.model_validate_json(rows[0]["spec"])
        return spec

    def workspaces(self) -> list[WorkspaceRow]:
        return [WorkspaceRow(r["id"], r["name"], r["seed"], Workspace.model_validate_json(r["spec"]), r["created_at"])
                for r in self.query("select * from workspaces order by id")]

    def workspace_seeds(self, *, excluding_status: TaskStatus) -> dict[int, str]:
        """Seed -> workspace id of the workspaces that tasks of any other status use."""
        rows = self.query("select distinct w.seed, w.id from workspaces w join tasks t on t.workspace_id = w.id"
                          " where t.status != ?", (excluding_status,))
        return {r["seed"]: r["id"] for r in rows}

    def put_task(self, task: Task, *, status: TaskStatus = "pending", reason: str = "") -> None:
        with self.transaction() as db:
            _upsert(db, "tasks", {
                "id": task.id,
                "workspace_id": task.workspace_id,
                "capability": task.capability,
                "difficulty": task.difficulty,
                "instruction": task.instruction,
                "spec": task.model_dump_json(),
                "status": status,
                "reason": reason,
                "shape": task.shape,
                "created_at": now(),
            })

    def set_task_status(self, task_id: str, status: TaskStatus, reason: str = "") -> None:
        with self.transaction() as db:
            _update(db, "tasks", task_id, {"status": status, "reason": reason})

    def task(self, task_id: str) -> TaskRow | None:
        rows = self.query("select * from tasks where id = ?", (task_id,))
        return _task(rows[0]) if rows else None

    def task_status(self, task_id: str) -> tuple[TaskStatus, str] | None:
        """A stored task's status and its reason, without reading its spec; None when there is none."""
        rows = self.query("select status, reason from tasks where id = ?", (task_id,))
        return (rows[0]["status"], rows[0]["reason"] or "") if rows else None

    def task_spec(self, task_id: str) -> Task:
        """The spec of a stored task; ``KeyError`` naming it when there is none."""
        row = self.task(task_id)
        if row is None:
            raise KeyError(f"no task {task_id!r} in the store")
        return row.spec

    def tasks(self, status: TaskStatus | None = None) -> list[TaskRow]:
        if status is None:
            return [_task(r) for r in self.query("select * from tasks order by id")]
        return [_task(r) for r in self.query("select * from tasks where status = ? order by id", (status,))]

    def tasks_matching(self, *, status: TaskStatus | None = None, capability: str | None = None) -> list[TaskRow]:
        """Tasks of ``status`` and ``capability`` (each when given), by id."""
        where, params = _where(status=status, capability=capability)
        return [_task(r) for r in self.query(f"select * from tasks{where} order by id", params)]

    def task_counts(self) -> dict[str, int]:
        """How many tasks have each status."""
        return {r["status"]: r["n"] for r in self.query("select status, count(*) as n from tasks group by status")}

    def admitted_counts(self, source: Source, grader_version: str, *, provider: str | None = None,
                        task_id: str | None = None) -> dict[str, int]:
        """Task id -> how many of its episodes of ``source`` (and ``provider``; of ``task_id`` only,
        when given) the verdict of ``grader_version`` admits (tasks with none are left out)."""
        sql = ("select e.task_id, count(*) as n from episodes e join verdicts v on v.episode_id = e.id"
               " where e.source = ? and v.admitted = 1 and v.grader_version = ?")
        params: list[Any] = [source, grader_version]
        for column, value in (("e.provider", provider), ("e.task_id", task_id)):
            if value is not None:
                sql += f" and {column} = ?"
                params.append(value)
        return {r["task_id"]: r["n"] for r in self.query(sql + " group by e.task_id", tuple(params))}

    def add_calibration(self, row: CalibrationRow) -> None:
        with self.transaction() as db:
            _insert(db, "calibrations", {**asdict(row), "deterministic": int(row.deterministic),
                                         "admitted": int(row.admitted), "probes": json.dumps(row.probes),
                                         "created_at": now()})

    def calibration(self, task_id: str) -> CalibrationRow | None:
        """The latest calibration of a task."""
        rows = self.query("select * from calibrations where task_id = ? order by id desc limit 1", (task_id,))
        if not rows:
            return None
        row = rows[0]
        return CalibrationRow(
            task_id=row["task_id"], grader_version=row["grader_version"], reference_score=row["reference_score"],
            empty_score=row["empty_score"], forbidden_safety=row["forbidden_safety"],
            deterministic=bool(row["deterministic"]), admitted=bool(row["admitted"]), reason=row["reason"],
            probes=json.loads(row["probes"] or "{}"))

    # --- task claims ----------------------------------------------------------------------

    def claim_task(self, task_id: str, scope: str, claimant: str, ttl_s: float, *,
                   replacing: str | None = None) -> TaskClaim:
        """Claim ``task_id`` for ``scope`` (``collect:PROVIDER``) as ``claimant``, for ``ttl_s``
        seconds, in one statement (two processes claiming at once: one gets it). Taken when nobody
        holds it, when its claim has expired, or when its holder is ``replacing`` (a claimant the
        caller found gone); renewed when ``claimant`` holds it already. Returns the claim as it stands
        after: ``claimant``'s when it was taken, its holder's otherwise."""
        at = time.time()
        with self.transaction() as db:
            db.execute(
                "insert into task_claims (task_id, scope, claimant, claimed_at, expires_at) values (?, ?, ?, ?, ?)"
                " on conflict (task_id, scope) do update set claimant = excluded.claimant, expires_at = excluded.expires_at,"
                " claimed_at = case when task_claims.claimant = excluded.claimant then task_claims.claimed_at"
                " else excluded.claimed_at end"
                " where task_claims.claimant = excluded.claimant or task_claims.claimant = ? or task_claims.expires_at <= ?",
                [task_id, scope, claimant, now(), at + ttl_s, replacing, at])
            row = db.execute("select task_id, scope, claimant, claimed_at, expires_at from task_claims"
                             " where task_id = ? and scope = ?", [task_id, scope]).fetchone()
        return TaskClaim(*row)

    def renew_claims(self, claimant: str, ttl_s: float) -> int:
        """Push every claim ``claimant`` holds on to ``ttl_s`` seconds from now; how many it holds."""
        with self.transaction() as db:
            return db.execute("update task_claims set expires_at = ? where claimant = ?",
                              [time.time() + ttl_s, claimant]).rowcount

    def release_claims(self, claimant: str) -> int:
        """Give up every claim ``claimant`` holds; how many there were."""
        with self.transaction() as db:
            return db.execute("delete from task_claims where claimant = ?", [claimant]).rowcount

    def task_claims(self, scope: str | None = None) -> list[TaskClaim]:
        """The claims held (of ``scope``, when given), expired ones included, by task."""
        where, params = _where(scope=scope)
        return [TaskClaim(r["task_id"], r["scope"], r["claimant"], r["claimed_at"], r["expires_at"]) for r in
                self.query(f"select * from task_claims{where} order by task_id, scope", params)]

    # --- task drafts ----------------------------------------------------------------------

    def add_task_draft(self, *, request_id: str, round: int, provider: str, capability: str, workspace_id: str,
                       draft: str, outcome: DraftOutcome, feedback: str = "",
                       task_id: str | None = None) -> TaskDraftRow:
        """Record one attempt of a model at writing a task (round ``round`` of ``request_id``, which
        must not be recorded yet) and return it as stored."""
        with self.transaction() as db:
            table = db.table("task_drafts")
            table.insert({"request_id": request_id, "round": round, "provider": provider, "capability": capability,
                          "workspace_id": workspace_id, "draft": draft, "task_id": task_id, "outcome": outcome,
                          "feedback": feedback, "created_at": now()})
            row_id = table.last_pk
        return _task_draft(self.query("select * from task_drafts where id = ?", (row_id,))[0])

    def task_drafts(self, request_id: str | None = None) -> list[TaskDraftRow]:
        """Every recorded draft (of ``request_id`` when given), request by request, round by round."""
        where, params = _where(request_id=request_id)
        return [_task_draft(r) for r in self.query(f"select * from task_drafts{where} order by id", params)]

    # --- episodes --------------------------------------------------------------------------

    def start_episode(self, task_id: str, provenance: Provenance, *, episode_id: str | None = None,
                      owner: str | None = None, bundle_hash: str | None = None) -> str:
        """Record a new running episode; ``owner`` names the process that runs it (``host:pid:start``)."""
        episode_id = episode_id or new_id("ep")
        with self.transaction() as db:
            _insert(db, "episodes",
                {
                    "id": episode_id,
                    "task_id": task_id,
                    "source": provenance.source,
                    "provider": provenance.provider,
                    "status": "running",
                    "attempt": provenance.attempt,
                    "repaired_from": provenance.repaired_from,
                    "hint": provenance.hint,
                    "owner": owner,
                    "bundle_hash": bundle_hash,
                    "client": provenance.client or None,
                    "episode_key": provenance.key or None,
                    "run_tag": provenance.run_tag or None,
                    "started_at": now(),
                }
            )
        return episode_id

    def end_episode(
        self,
        episode_id: str,
        *,
        final_answer: str | None,
        final_state: str | None,
        truncated: bool = False,
        error: str | None = None,
        boundary: Boundary | None = None,
        abandoned: bool = False,
    ) -> None:
        """Record an episode's end: ``failed`` when an infrastructure failure (``error`` at
        ``boundary``) ended it, ``abandoned`` when it was left without a call or an answer, ``ended``
        otherwise."""
        with self.transaction() as db:  # after every deferred call of the episode is written
            with self._pending_lock:
                self._next_idx.pop(episode_id, None)
            _update(db, "episodes", episode_id,
                {
                    "status": "failed" if error else "abandoned" if abandoned else "ended",
                    "final_answer": storable(final_answer),
                    "final_state": final_state,
                    "truncated": int(truncated),
                    "error": storable(error),
                    "boundary": boundary if error else None,
                    "ended_at": now(),
                },
            )

    def episode(self, episode_id: str) -> EpisodeRow | None:
        rows = self.query("select * from episodes where id = ?", (episode_id,))
        return _episode(rows[0]) if rows else None

    def episodes(self, *, source: Source | None = None, task_id: str | None = None,
                 status: EpisodeStatus | None = None) -> list[EpisodeRow]:
        where, params = _where(source=source, task_id=task_id, status=status)
        return [_episode(r) for r in self.query(f"select * from episodes{where} order by started_at, id", params)]

    def recent_episodes(self, *, source: Source | None = None, task_id: str | None = None,
                        status: EpisodeStatus | None = None, limit: int | None = None) -> list[EpisodeRow]:
        """Episodes of ``source``, ``task_id`` and ``status`` (each when given), newest first; at
        most ``limit`` of them when it is given."""
        where, params = _where(source=source, task_id=task_id, status=status)
        sql = f"select * from episodes{where} order by started_at desc, id desc"
        if limit is not None:
            sql, params = sql + " limit ?", (*params, limit)
        return [_episode(r) for r in self.query(sql, params)]

    def episode_listing(self, grader_version: str, *, task_id: str | None = None, capability: str | None = None,
                        source: str | None = None, verdict: str | None = None, reason: str | None = None,
                        repaired_from: str | None = None, limit: int = 100, offset: int = 0,
                        ) -> tuple[list[EpisodeListing], int]:
        """Episodes newest first, each with its task's capability, its number of tool calls and its
        verdict of ``grader_version``; filtered by each argument given (``verdict``: admitted,
        rejected or ungraded); at most ``limit`` from ``offset``. Returns them and how many match."""
        if verdict not in (None, "admitted", "rejected", "ungraded"):
            raise ValueError(f"unknown verdict filter {verdict!r}; one of: admitted, rejected, ungraded")
        conditions, params = [], [grader_version]
        for column, value in (("e.task_id", task_id), ("t.capability", capability), ("e.source", source),
                              ("v.reason", reason), ("e.repaired_from", repaired_from)):
            if value is not None:
                conditions.append(f"{column} = ?")
                params.append(value)
        if verdict is not None:
            conditions.append({"admitted": "v.admitted = 1", "rejected": "v.admitted = 0",
                               "ungraded": "v.episode_id is null"}[verdict])
        where = (" where " + " and ".join(conditions)) if conditions else ""
        base = (" from episodes e join tasks t on t.id = e.task_id"
                " left join verdicts v on v.episode_id = e.id and v.grader_version = ?" + where)
        total = self.query("select count(*) as n" + base, tuple(params))[0]["n"]
        rows = self.query(
            "select e.*, t.capability as t_capability, t.difficulty as t_difficulty,"
            " (select count(*) from tool_calls c where c.episode_id = e.id and c.kind = 'call') as t_calls"
            + base + " order by e.started_at desc, e.id desc limit ? offset ?", (*params, limit, offset))
        verdicts = self.verdicts([r["id"] for r in rows], grader_version)
        return [EpisodeListing(_episode(r), r["t_capability"], r["t_difficulty"], r["t_calls"], verdicts.get(r["id"]))
                for r in rows], total

    def admitted_episodes(self, grader_version: str, sources: tuple[str, ...] = TRAINING_SOURCES) -> list[EpisodeRow]:
        """Episodes of ``sources`` that the verdict of ``grader_version`` admits, by task."""
        marks = ",".join("?" for _ in sources)
        rows = self.query(
            "select e.* from episodes e join verdicts v on v.episode_id = e.id and v.grader_version = ?"
            f" where v.admitted = 1 and e.source in ({marks}) order by e.task_id, e.id",
            (grader_version, *sources))
        return [_episode(r) for r in rows]

    def repair_pairs(self, grader_version: str, sources: tuple[str, ...] = TRAINING_SOURCES,
                     ) -> list[tuple[EpisodeRow, EpisodeRow, str]]:
        """(admitted repaired episode, the rejected episode it repaired, that one's reason) pairs."""
        marks = ",".join("?" for _ in sources)
        rows = self.query(
            "select e.id, e.repaired_from, vf.reason from episodes e"
            " join verdicts v on v.episode_id = e.id and v.grader_version = ?"
            " join verdicts vf on vf.episode_id = e.repaired_from and vf.grader_version = ?"
            f" where v.admitted = 1 and vf.admitted = 0 and e.source in ({marks}) order by e.task_id, e.id",
            (grader_version, grader_version, *sources))
        pairs = []
        for r in rows:
            chosen, rejected = self.episode(r["id"]), self.episode(r["repaired_from"])
            assert chosen is not None and rejected is not None  # foreign keys
            pairs.append((chosen, rejected, r["reason"]))
        return pairs

    def admitted_task_ids(self, grader_version: str, sources: tuple[str, ...] = TRAINING_SOURCES) -> list[str]:
        """Tasks with an admitted episode of ``sources``."""
        marks = ",".join("?" for _ in sources)
        rows = self.query(
            "select distinct e.task_id from episodes e join verdicts v on v.episode_id = e.id"
            f" where v.admitted = 1 and v.grader_version = ? and e.source in ({marks}) order by e.task_id",
            (grader_version, *sources))
        return [r["task_id"] for r in rows]

    def add_tool_call(self, episode_id: str, row: dict) -> None:
        with self.transaction() as db:
            idx = self._idx_after(episode_id)
            db.table("tool_calls").insert({**row, "episode_id": episode_id, "idx": idx, "created_at": now()})
            if episode_id in self._next_idx:
                self._next_idx[episode_id] = idx + 1

    def defer_tool_call(self, episode_id: str, row: dict) -> ToolCallRow:
        """Record a tool call write-behind: numbered and timestamped now, written at the next flush.
        Returns it as ``interactions`` will read it back (bounded, numbered, timestamped).

        ``row`` holds the columns ``tool``, ``arguments`` (JSON text), ``result`` (JSON text or
        None), ``is_error``, ``error_kind`` and ``duration_ms``.
        """
        unknown = set(row) - set(_TOOL_CALL_COLUMNS)
        if unknown:
            raise ValueError(f"tool_calls has no column(s) {sorted(unknown)}")
        with self._pending_lock:
            idx = self._next_idx.get(episode_id)
        if idx is None:  # the episode's first deferred call: continue its stored history
            with self._lock:
                idx = self._next_idx.get(episode_id)
                if idx is None:
                    if not self.db.execute("select 1 from episodes where id = ?", [episode_id]).fetchone():
                        raise KeyError(f"no episode {episode_id!r} in the store")  # never a row no flush can write
                    self._flush_locked()
                    idx = self._idx_after(episode_id)
        stored = {c: storable(row.get(c)) for c in _TOOL_CALL_COLUMNS}
        stored["kind"] = stored["kind"] or "call"
        stored["arguments"] = bounded(stored["arguments"], MAX_RECORDED_ARGUMENTS)
        stored["result"] = bounded(stored["result"], MAX_RECORDED_RESULT)
        if stored["error"] is not None and len(stored["error"]) > MAX_RECORDED_ERROR:
            stored["error"] = stored["error"][:MAX_RECORDED_ERROR] + " …"
        with self._pending_lock:
            idx = self._next_idx.get(episode_id, idx)
            self._next_idx[episode_id] = idx + 1
            pending = {**stored, "episode_id": episode_id, "idx": idx, "created_at": now()}
            self._pending.append(pending)
        return _tool_call_row(pending)

    def _idx_after(self, episode_id: str) -> int:
        return self.db.execute(
            "select coalesce(max(idx), -1) + 1 from tool_calls where episode_id = ?", [episode_id]
        ).fetchone()[0]

    def tool_calls(self, episode_id: str) -> list[ToolCallRow]:
        """An episode's tool calls, in order (what the gate grades)."""
        return self._interactions(episode_id, " and kind = 'call'")

    def interactions(self, episode_id: str) -> list[ToolCallRow]:
        """Everything the agent did in an episode, in order: tool calls, resource reads, completions, prompts."""
        return self._interactions(episode_id, "")

    def _interactions(self, episode_id: str, only: str) -> list[ToolCallRow]:
        return [_tool_call_row(r) for r in
                self.query(f"select * from tool_calls where episode_id = ?{only} order by idx", (episode_id,))]

    def add_messages(self, episode_id: str, messages: list[Message]) -> None:
        with self.transaction() as db:
            self._insert_messages(db, episode_id, messages)

    @staticmethod
    def _insert_messages(db: sqlite_utils.Database, episode_id: str, messages: list[Message]) -> None:
        start = db.execute(
            "select coalesce(max(idx), -1) + 1 from messages where episode_id = ?", [episode_id]
        ).fetchone()[0]
        db.conn.executemany(
            "insert into messages (episode_id, idx, role, content, tool_calls, tool_call_id, name, provenance,"
            " attachments) values (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(episode_id, start + i, m.role, m.content,
              json.dumps([c.model_dump() for c in m.tool_calls]) if m.tool_calls else None, m.tool_call_id, m.name,
              int(m.provenance), json.dumps([a.model_dump() for a in m.attachments]) if m.attachments else None)
             for i, m in enumerate(messages)])

    def set_conversation(self, episode_id: str, messages: list[Message]) -> None:
        """Make ``messages`` the episode's conversation, at once (its provenance-only turns stay)."""
        with self.transaction() as db:
            db.execute("delete from messages where episode_id = ? and provenance = 0", [episode_id])
            self._insert_messages(db, episode_id, messages)

    def model_call_count(self, episode_id: str) -> int:
        """How many model calls the episode has recorded (the index of its next one)."""
        return self.query("select coalesce(max(idx), -1) + 1 as n from model_calls where episode_id = ?",
                          (episode_id,))[0]["n"]

    def add_model_call(self, episode_id: str, *, api: str, request: dict[str, Any], response: dict[str, Any] | None,
                       status: int, stream: bool, duration_ms: float, upstream: str, idx: int) -> None:
        """Record a model call of the episode at ``idx``, its place in request order (the caller numbers
        its calls from ``model_call_count``: they may be written out of order)."""
        with self.transaction() as db:
            db.execute(  # plain SQL: a recorded model call is on the proxy's path
                "insert into model_calls (episode_id, idx, api, request, response, status, stream, duration_ms,"
                " upstream, created_at) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [episode_id, idx, api, json.dumps(request), None if response is None else json.dumps(response), status,
                 int(stream), duration_ms, upstream, now()])

    def model_calls(self, episode_id: str) -> list[ModelCallRow]:
        """The episode's captured model calls, in order."""
        return [ModelCallRow(r["idx"], r["api"], _json(r["request"], {}), _json(r["response"], None), r["status"],
                             bool(r["stream"]), r["duration_ms"], r["upstream"] or "", r["created_at"])
                for r in self.query("select * from model_calls where episode_id = ? order by idx", (episode_id,))]

    def messages(self, episode_id: str, *, include_provenance: bool = False) -> list[Message]:
        rows = self.query("select * from messages where episode_id = ? order by idx", (episode_id,))
        return [
            Message(role=r["role"], content=r["content"] or "",
                    tool_calls=[ToolCall(**c) for c in _json(r["tool_calls"], [])],
                    tool_call_id=r["tool_call_id"], name=r["name"], provenance=bool(r["provenance"]),
                    attachments=[Attachment(**a) for a in _json(r.get("attachments"), [])])
            for r in rows if include_provenance or not r["provenance"]
        ]

    # --- states ------------------------------------------------------------------------------

    def put_state_base(self, dump: str) -> str:
        """Keep a workspace's initial state dump (compressed, by content) for the episodes that
        keep only their changes over it; return its reference."""
        return self.put_blob(zlib.compress(dump.encode(), 6), STATE_BASE_MIME)

    def final_state(self, episode_id: str) -> str | None:
        """An episode's whole final state dump (its kept changes over its workspace's initial state)."""
        rows = self.query("select final_state from episodes where id = ?", (episode_id,))
        if not rows or rows[0]["final_state"] is None:
            return None
        return resolve_state(rows[0]["final_state"], self.state_base)

    def stored_state(self, episode_id: str) -> str | None:
        """An episode's final state as kept: a whole dump, or its changes over a state base
        (``coworkenv.workspace.state.open_state`` opens either, with ``state_base``)."""
        rows = self.query("select final_state from episodes where id = ?", (episode_id,))
        return rows[0]["final_state"] if rows else None

    def state_base(self, reference: str) -> str:
        """The dump of a state base (a workspace's initial state) by its reference, read each time (a
        ``coworkenv.workspace.state.StateCache`` over this keeps the bases used last)."""
        found = self.blob(reference)
        if found is None:
            raise KeyError(f"the state base {reference} is not in the store")
        return zlib.decompress(found[1]).decode()

    # --- blobs ---------------------------------------------------------------------------------

    def put_blob(self, data: bytes, mime_type: str) -> str:
        """Keep ``data`` by its content hash (once, however often it is put); return the hash."""
        digest = hashlib.sha256(data).hexdigest()
        with self.transaction() as db:
            db.execute("insert or ignore into blobs (sha256, mime_type, size, data) values (?, ?, ?, ?)",
                       [digest, mime_type, len(data), data])
        return digest

    def blob(self, sha256: str) -> tuple[str, bytes] | None:
        """The MIME type and bytes kept under ``sha256``, if any."""
        rows = self.query("select mime_type, data from blobs where sha256 = ?", (sha256,))
        return (rows[0]["mime_type"], rows[0]["data"]) if rows else None

    # --- grades and verdicts ---------------------------------------------------------------

    def put_verdict(self, verdict: VerdictRow) -> None:
        """Record the verdict of one grader version on an episode, replacing that version's earlier one."""
        with self.transaction() as db:
            key = [verdict.episode_id, verdict.grader_version]
            db.execute("delete from verdicts where episode_id = ? and grader_version = ?", key)
            db.execute("delete from grades where episode_id = ? and grader_version = ?", key)
            grade_id = _insert(db, "grades", {
                "episode_id": verdict.episode_id, "grader_version": verdict.grader_version,
                "completion": verdict.completion, "safety": verdict.safety, "robustness": verdict.robustness,
                "score": verdict.score, "created_at": now(),
                "checks": json.dumps([{"id": c.id, "passed": c.passed, "detail": c.detail} for c in verdict.checks]),
            })
            _insert(db, "verdicts", {
                "episode_id": verdict.episode_id, "grade_id": grade_id, "grader_version": verdict.grader_version,
                "admitted": int(verdict.admitted), "reason": verdict.reason, "grader_hash": verdict.grader_hash,
                "detail": verdict.detail, "created_at": now(),
            })

    def verdict(self, episode_id: str, grader_version: str) -> VerdictRow | None:
        rows = self.query(f"{_VERDICT_SELECT} where v.episode_id = ? and v.grader_version = ?",
                          (episode_id, grader_version))
        return _verdict(rows[0]) if rows else None

    def verdicts(self, episode_ids: list[str], grader_version: str) -> dict[str, VerdictRow]:
        """Episode id -> the verdict of ``grader_version`` on it, for those of ``episode_ids`` that have one."""
        found: dict[str, VerdictRow] = {}
        for start in range(0, len(episode_ids), 500):  # under SQLite's limit on bound parameters
            chunk = episode_ids[start:start + 500]
            rows = self.query(
                f"{_VERDICT_SELECT} where v.grader_version = ? and v.episode_id in ({','.join('?' for _ in chunk)})",
                (grader_version, *chunk))
            for r in rows:
                found[r["episode_id"]] = _verdict(r)
        return found

    def verdict_count(self, episode_id: str) -> int:
        """How many verdicts (of any grader version) an episode has."""
        return self.query("select count(*) as n from verdicts where episode_id = ?", (episode_id,))[0]["n"]

    def episode_sources(self, episode_ids: list[str]) -> dict[str, Source]:
        """Episode id -> its source, for those of ``episode_ids`` the store holds."""
        found: dict[str, Source] = {}
        for start in range(0, len(episode_ids), 500):  # under SQLite's limit on bound parameters
            chunk = episode_ids[start:start + 500]
            found.update({r["id"]: r["source"] for r in self.query(
                f"select id, source from episodes where id in ({','.join('?' for _ in chunk)})", tuple(chunk))})
        return found

    def ended_episodes(self, *, without_verdict_of: str | None = None) -> list[str]:
        """Ids of every ended or failed episode, by start; only those without a verdict of
        ``without_verdict_of`` when it is given."""
        sql, params = "select id from episodes where status in ('ended', 'failed')", []
        if without_verdict_of is not None:
            sql += " and id not in (select episode_id from verdicts where grader_version = ?)"
            params.append(without_verdict_of)
        return [r["id"] for r in self.query(sql + " order by started_at, id", tuple(params))]

    # --- moving episodes between stores ------------------------------------------------------

    def export_episodes(self, episode_ids: list[str]) -> EpisodeRecords:
        """Everything recorded of these episodes (their rows in every episode table, and the blobs
        those rows name), to be written into another store by ``import_episodes``: how episodes
        played on other machines come back to one store."""
        with self._lock:
            self._flush_locked()
            tables: dict[str, list[dict[str, Any]]] = {}
            marks = ",".join("?" for _ in episode_ids)
            tables["episodes"] = self.query(f"select * from episodes where id in ({marks}) order by started_at, id",
                                            tuple(episode_ids))
            for table in _EPISODE_TABLES[1:]:
                rows = self.query(f"select * from {table} where episode_id in ({marks}) order by id", tuple(episode_ids))
                tables[table] = rows
            blobs: dict[str, tuple[str, bytes]] = {}
            wanted = set(_BLOB_REFERENCE.findall(json.dumps(tables, default=str)))
            while wanted:
                digest = wanted.pop()
                if digest in blobs or (found := self.blob(digest)) is None:
                    continue
                blobs[digest] = found
                if found[0] == STATE_BASE_MIME:  # a state base names the blobs its rows hold (found once per base)
                    if digest not in self._base_blobs:
                        dump = zlib.decompress(found[1]).decode(errors="replace")
                        self._base_blobs[digest] = frozenset(_BLOB_REFERENCE.findall(dump))
                    wanted |= self._base_blobs[digest]
        return EpisodeRecords(tables, blobs)

    def import_episodes(self, records: EpisodeRecords) -> None:
        """Write episodes another store exported, in one transaction (all of them or none); their
        tasks must be here. Rows numbered by the store get new numbers here (a verdict keeps its grade)."""
        wanted = sorted({r["task_id"] for r in records.tables.get("episodes", [])})
        known = {r["id"] for r in self.query(f"select id from tasks where id in ({','.join('?' for _ in wanted)})",
                                             tuple(wanted))} if wanted else set()
        missing = [task_id for task_id in wanted if task_id not in known]
        if missing:
            raise StoreError(f"cannot import episodes of tasks this store does not hold: {', '.join(missing)}")
        ids = records.episode_ids
        held = [r["id"] for r in self.query(f"select id from episodes where id in ({','.join('?' for _ in ids)})",
                                            tuple(ids))] if ids else []
        if held:
            raise StoreError(f"this store holds episode(s) {', '.join(held)} already: an episode is imported once")
        with self.transaction() as db:
            for digest, (mime_type, data) in records.blobs.items():
                db.execute("insert or ignore into blobs (sha256, mime_type, size, data) values (?, ?, ?, ?)",
                           [digest, mime_type, len(data), data])
            grades: dict[int, int] = {}
            for table in _EPISODE_TABLES:  # plain SQL: one transaction, committed once
                for row in records.tables.get(table, []):
                    row = dict(row)
                    old = row.pop("id", 0) if table != "episodes" else 0
                    if table == "verdicts":
                        row["grade_id"] = grades[row["grade_id"]]
                    columns = ", ".join(f'"{c}"' for c in row)
                    cursor = db.execute(f"insert into {table} ({columns}) values ({', '.join('?' for _ in row)})",
                                        list(row.values()))
                    if table == "grades":
                        grades[old] = int(cursor.lastrowid or 0)

    # --- evaluation runs -------------------------------------------------------------------

    def start_eval_run(self, model: str, settings: dict[str, Any]) -> str:
        run_id = new_id("eval")
        with self.transaction() as db:
            db.table("eval_runs").insert({"id": run_id, "model": model, "settings": json.dumps(settings),
                                    "status": "running", "started_at": now()})
        return run_id

    def add_eval_trial(self, trial: EvalTrialRow) -> None:
        with self.transaction() as db:
            db.table("eval_trials").insert({**asdict(trial), "passed": int(trial.passed), "created_at": now()})

    def end_eval_run(self, run_id: str, *, status: str, summary: dict[str, Any] | None = None,
                     profile_path: str | None = None) -> None:
        with self.transaction() as db:
            db.table("eval_runs").update(run_id, {"status": status, "summary": json.dumps(summary) if summary else None,
                                            "profile_path": profile_path, "ended_at": now()})

    def eval_run(self, run_id: str) -> EvalRunRow | None:
        rows = self.query("select * from eval_runs where id = ?", (run_id,))
        if not rows:
            return None
        r = rows[0]
        return EvalRunRow(r["id"], r["model"], _json(r["settings"], {}), r["status"], _json(r["summary"], None),
                          r["profile_path"], r["started_at"], r["ended_at"])

    def eval_runs(self) -> list[EvalRunRow]:
        """Every evaluation run, by start."""
        return [EvalRunRow(r["id"], r["model"], _json(r["settings"], {}), r["status"], _json(r["summary"], None),
                           r["profile_path"], r["started_at"], r["ended_at"])
                for r in self.query("select * from eval_runs order by started_at, id")]

    def eval_trials(self, run_id: str) -> list[EvalTrialRow]:
        rows = self.query("select * from eval_trials where run_id = ? order by id", (run_id,))
        return [EvalTrialRow(r["run_id"], r["task_id"], r["capability"], r["difficulty"], r["split"],
                             r["combination"], r["trial"], r["episode_id"], r["score"], bool(r["passed"]),
                             r["reason"], r["steps"]) for r in rows]

    # --- training runs ---------------------------------------------------------------------

    def start_training_run(self, row: dict) -> str:
        run_id = row.get("id") or new_id("train")
        with self.transaction() as db:
            db.table("training_runs").insert({**row, "id": run_id, "status": "running", "started_at": now()})
        return run_id

    def end_training_run(self, run_id: str, *, status: str, metrics: dict | None = None, error: str = "") -> None:
        with self.transaction() as db:
            db.table("training_runs").update(run_id, {"status": status, "metrics": json.dumps(metrics or {}),
                                                "error": error, "ended_at": now()})

    def training_run(self, run_id: str) -> TrainingRunRow | None:
        rows = self.query("select * from training_runs where id = ?", (run_id,))
        return _training_run(rows[0]) if rows else None

    def training_runs(self, kind: str | None = None) -> list[TrainingRunRow]:
        where, params = _where(kind=kind)
        return [_training_run(r) for r in self.query(f"select * from training_runs{where} order by started_at", params)]

    # --- Claw-Eval graders and what bundles check before they store or write -------------------

    def put_claw_eval_grader(self, row: ClawEvalGraderRow) -> None:
        """Record where the grader of a Claw-Eval task is (``coworkenv claw-eval import`` only)."""
        with self.transaction() as db:
            _upsert(db, "claw_eval_graders", {"id": row.task_id, "checkout": row.checkout, "task_dir": row.task_dir,
                                              "judge": row.judge, "created_at": now()})

    def claw_eval_grader(self, task_id: str) -> ClawEvalGraderRow | None:
        """Where the grader of Claw-Eval task ``task_id`` is, if an import recorded it."""
        rows = self.query("select * from claw_eval_graders where id = ?", (task_id,))
        return ClawEvalGraderRow(rows[0]["id"], rows[0]["checkout"], rows[0]["task_dir"] or "",
                                 rows[0]["judge"] or "") if rows else None

    def workspace_ids(self) -> list[str]:
        """The stored workspaces' ids, their specs unread (a store may hold one that no longer validates)."""
        return [r["id"] for r in self.query("select id from workspaces order by id")]

    def workspace_task_counts(self, workspace_id: str) -> dict[str, int]:
        """How many tasks of the workspace have each status (their specs unread)."""
        return {r["status"]: r["n"] for r in self.query(
            "select status, count(*) as n from tasks where workspace_id = ? group by status", (workspace_id,))}

    def workspace_tasks(self, workspace_id: str, statuses: tuple[str, ...] | None = None) -> list[TaskRow]:
        """The tasks of one workspace (of these ``statuses``, when given), by id: only theirs are parsed."""
        sql, params = "select * from tasks where workspace_id = ?", [workspace_id]
        if statuses is not None:
            sql += f" and status in ({', '.join('?' for _ in statuses)})"
            params += list(statuses)
        return [_task(r) for r in self.query(sql + " order by id", tuple(params))]


def _where(**equal: Any) -> tuple[str, tuple]:
    """`` where a = ? and b = ?`` for the given values that are not None."""
    given = {k: v for k, v in equal.items() if v is not None}
    if not given:
        return "", ()
    return " where " + " and ".join(f"{k} = ?" for k in given), tuple(given.values())


_VERDICT_SELECT = ("select v.episode_id, v.grader_version, v.admitted, v.reason, v.created_at, v.grader_hash, v.detail,"
                   " g.completion, g.safety, g.robustness, g.score, g.checks"
                   " from verdicts v join grades g on g.id = v.grade_id")


def _verdict(r: dict[str, Any]) -> VerdictRow:
    return VerdictRow(r["episode_id"], r["grader_version"], bool(r["admitted"]), r["reason"], r["completion"],
                      r["safety"], r["robustness"], r["score"], [CheckResult(**c) for c in _json(r["checks"], [])],
                      r["created_at"], r["grader_hash"], r["detail"] or "")


def _task(r: dict[str, Any]) -> TaskRow:
    return TaskRow(r["id"], r["workspace_id"], r["capability"], r["difficulty"], r["instruction"],
                   Task.model_validate_json(r["spec"]), r["status"], r["reason"] or "", r["created_at"])


def _task_draft(r: dict[str, Any]) -> TaskDraftRow:
    return TaskDraftRow(r["id"], r["request_id"], r["round"], r["provider"], r["capability"], r["workspace_id"],
                        r["draft"], r["task_id"], r["outcome"], r["feedback"] or "", r["created_at"])


def _episode(r: dict[str, Any]) -> EpisodeRow:
    return EpisodeRow(r["id"], r["task_id"], r["source"], r["provider"] or "", r["status"], r["attempt"],
                      r["repaired_from"], r["hint"] or "", r["final_answer"], r["final_state"], bool(r["truncated"]),
                      r["error"], r.get("boundary"), r["started_at"], r["ended_at"], r.get("owner"),
                      r.get("bundle_hash"), r.get("client") or "", r.get("episode_key") or "", r.get("run_tag") or "")


def _training_run(r: dict[str, Any]) -> TrainingRunRow:
    return TrainingRunRow(r["id"], r["kind"], r["base_model"] or "", r["data_path"] or "", r["data_hash"] or "",
                          r["rows"] or 0, _json(r["config"], {}), r["status"], _json(r["metrics"], {}),
                          r["output_dir"] or "", r["error"] or "", r["started_at"], r["ended_at"])


def _insert(db: sqlite_utils.Database, table: str, row: dict[str, Any]) -> int:
    """Insert ``row`` (plain values only: text, numbers, bytes, None) into ``table``; its rowid.
    The statement by hand: the hot paths of an episode (its start, end and verdict) skip the
    introspection a sqlite-utils insert does for every row."""
    _plain(table, row)
    columns = ", ".join(f'"{c}"' for c in row)
    marks = ", ".join("?" for _ in row)
    cursor = db.conn.execute(f'insert into "{table}" ({columns}) values ({marks})', list(row.values()))
    return cursor.lastrowid or 0


def _upsert(db: sqlite_utils.Database, table: str, row: dict[str, Any]) -> None:
    """Insert ``row`` (plain values only) into ``table``, or set its columns on the row of the same
    ``id`` (the table's other columns kept), as a sqlite-utils upsert does."""
    _plain(table, row)
    columns = ", ".join(f'"{c}"' for c in row)
    marks = ", ".join("?" for _ in row)
    assignments = ", ".join(f'"{c}" = excluded."{c}"' for c in row if c != "id")
    db.conn.execute(f'insert into "{table}" ({columns}) values ({marks}) on conflict (id) do update set {assignments}',
                    list(row.values()))


def _update(db: sqlite_utils.Database, table: str, key: str, row: dict[str, Any]) -> None:
    """Set the columns of ``row`` (plain values only) on the row of ``table`` whose ``id`` is ``key``."""
    _plain(table, row)
    assignments = ", ".join(f'"{c}" = ?' for c in row)
    cursor = db.conn.execute(f'update "{table}" set {assignments} where id = ?', [*row.values(), key])
    if cursor.rowcount != 1:
        raise StoreError(f"no {table} row {key!r} to update")


def _plain(table: str, row: dict[str, Any]) -> None:
    for column, value in row.items():
        if value is not None and not isinstance(value, (str, int, float, bytes)):
            raise TypeError(f"{table}.{column}: {type(value).__name__} is not a plain value")

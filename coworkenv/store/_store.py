"""The SQLite store: one file holds the whole history of a coworkenv project."""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import sqlite_utils

from ._migrations import apply_migrations


_TOOL_CALL_COLUMNS = ("tool", "arguments", "result", "is_error", "error_kind", "duration_ms")
_INSERT_TOOL_CALL = (
    "insert into tool_calls (episode_id, idx, created_at, {0}) values (:episode_id, :idx, :created_at, {1})".format(
        ", ".join(_TOOL_CALL_COLUMNS), ", ".join(f":{c}" for c in _TOOL_CALL_COLUMNS))
)


def now() -> str:
    return datetime.now(timezone.utc).isoformat()


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


class Store:
    """Typed access to the coworkenv SQLite file (WAL mode, foreign keys on, named migrations).

    One ``Store`` may be shared by the tasks of one event loop and by worker threads: writes are
    serialised by a lock and each write is its own transaction, so an interrupted run keeps every
    row it committed.

    Tool calls may also be recorded write-behind (``defer_tool_call``): they wait in memory and go
    in at the next ``flush``, together, in one transaction. Every read and write through this
    ``Store`` flushes first, so the process that records never reads a stale history; another
    process sees deferred calls once they are flushed.
    """

    def __init__(self, path: str | Path = ":memory:") -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA busy_timeout = 30000")
        self.db = sqlite_utils.Database(conn)
        if self.path != ":memory:":
            self.db.enable_wal()
            # In WAL mode NORMAL keeps every commit through a crash of the process and the file
            # consistent through a power loss (which may drop the last commits); it spares one
            # fsync per write, which the server pays on every recorded tool call.
            conn.execute("PRAGMA synchronous = NORMAL")
        self._lock = threading.RLock()  # the connection
        self._pending_lock = threading.Lock()  # the deferred rows (held only to append or swap)
        self._pending: list[dict[str, Any]] = []
        self._next_idx: dict[str, int] = {}  # episode id -> idx of its next deferred tool call
        with self._lock:
            self.applied_migrations = apply_migrations(self.db)

    def close(self) -> None:
        self.flush()
        self.db.conn.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite_utils.Database]:
        with self._lock:
            self._flush_locked()  # its own transaction: a failing write below cannot take these rows along
            with self.db.conn:
                yield self.db

    # --- write-behind ----------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """How many deferred rows wait for the next flush."""
        return len(self._pending)

    def flush(self) -> int:
        """Write every deferred row in one transaction; return how many were written."""
        with self._lock:
            return self._flush_locked()

    def _flush_locked(self) -> int:
        if not self._pending:
            return 0
        with self._pending_lock:
            rows, self._pending = self._pending, []
        try:
            with self.db.conn:
                self.db.conn.executemany(_INSERT_TOOL_CALL, rows)
        except BaseException:
            with self._pending_lock:  # kept for the next flush, in their order
                self._pending[:0] = rows
            raise
        return len(rows)

    # --- generic helpers -------------------------------------------------------------------

    def query(self, sql: str, params: tuple | dict = ()) -> list[dict[str, Any]]:
        with self._lock:
            self._flush_locked()
            return list(self.db.query(sql, params))

    def migrations(self) -> list[str]:
        return [row["name"] for row in self.db["_migrations"].rows_where(order_by="name")]

    # --- workspaces and tasks --------------------------------------------------------------

    def put_workspace(self, workspace_id: str, name: str, seed: int, spec: dict) -> None:
        with self.transaction() as db:
            db["workspaces"].upsert(
                {"id": workspace_id, "name": name, "seed": seed, "spec": json.dumps(spec),
                 "created_at": now()},
                pk="id",
            )

    def get_workspace(self, workspace_id: str) -> dict | None:
        rows = self.query("select * from workspaces where id = ?", (workspace_id,))
        return rows[0] if rows else None

    def put_task(self, task: dict, *, status: str = "pending", reason: str = "") -> None:
        """Insert a task spec (a JSON-able dict with id, workspace_id, capability, difficulty, instruction)."""
        with self.transaction() as db:
            db["tasks"].upsert(
                {
                    "id": task["id"],
                    "workspace_id": task["workspace_id"],
                    "capability": task["capability"],
                    "difficulty": task["difficulty"],
                    "instruction": task["instruction"],
                    "spec": json.dumps(task),
                    "status": status,
                    "reason": reason,
                    "created_at": now(),
                },
                pk="id",
            )

    def set_task_status(self, task_id: str, status: str, reason: str = "") -> None:
        with self.transaction() as db:
            db["tasks"].update(task_id, {"status": status, "reason": reason})

    def get_task(self, task_id: str) -> dict | None:
        rows = self.query("select * from tasks where id = ?", (task_id,))
        return rows[0] if rows else None

    def tasks(self, status: str | None = None) -> list[dict]:
        if status is None:
            return self.query("select * from tasks order by id")
        return self.query("select * from tasks where status = ? order by id", (status,))

    def add_calibration(self, row: dict) -> None:
        with self.transaction() as db:
            db["calibrations"].insert({**row, "created_at": now()})

    # --- episodes --------------------------------------------------------------------------

    def start_episode(
        self,
        task_id: str,
        *,
        source: str,
        provider: str = "",
        attempt: int = 1,
        repaired_from: str | None = None,
        hint: str = "",
        episode_id: str | None = None,
    ) -> str:
        episode_id = episode_id or new_id("ep")
        with self.transaction() as db:
            db["episodes"].insert(
                {
                    "id": episode_id,
                    "task_id": task_id,
                    "source": source,
                    "provider": provider,
                    "status": "running",
                    "attempt": attempt,
                    "repaired_from": repaired_from,
                    "hint": hint,
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
    ) -> None:
        with self.transaction() as db:  # after every deferred call of the episode is written
            with self._pending_lock:
                self._next_idx.pop(episode_id, None)
            db["episodes"].update(
                episode_id,
                {
                    "status": "failed" if error else "ended",
                    "final_answer": final_answer,
                    "final_state": final_state,
                    "truncated": int(truncated),
                    "error": error,
                    "ended_at": now(),
                },
            )

    def annotate_episode(self, episode_id: str, **fields: Any) -> None:
        """Set provenance columns of an episode (source, provider, attempt, repaired_from, hint, …)."""
        allowed = {"source", "provider", "attempt", "repaired_from", "hint", "truncated"}
        unknown = set(fields) - allowed
        if unknown:
            raise ValueError(f"cannot annotate episode columns {sorted(unknown)}")
        with self.transaction() as db:
            db["episodes"].update(episode_id, fields)

    def get_episode(self, episode_id: str) -> dict | None:
        rows = self.query("select * from episodes where id = ?", (episode_id,))
        return rows[0] if rows else None

    def add_tool_call(self, episode_id: str, row: dict) -> None:
        with self.transaction() as db:
            idx = self._idx_after(episode_id)
            db["tool_calls"].insert({**row, "episode_id": episode_id, "idx": idx, "created_at": now()})
            if episode_id in self._next_idx:
                self._next_idx[episode_id] = idx + 1

    def defer_tool_call(self, episode_id: str, row: dict) -> None:
        """Record a tool call write-behind: numbered and timestamped now, written at the next flush."""
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
        with self._pending_lock:
            idx = self._next_idx.get(episode_id, idx)
            self._next_idx[episode_id] = idx + 1
            self._pending.append({**{c: row.get(c) for c in _TOOL_CALL_COLUMNS}, "episode_id": episode_id,
                                  "idx": idx, "created_at": now()})

    def _idx_after(self, episode_id: str) -> int:
        return self.db.execute(
            "select coalesce(max(idx), -1) + 1 from tool_calls where episode_id = ?", [episode_id]
        ).fetchone()[0]

    def tool_calls(self, episode_id: str) -> list[dict]:
        return self.query(
            "select * from tool_calls where episode_id = ? order by idx", (episode_id,)
        )

    def add_messages(self, episode_id: str, messages: list[dict]) -> None:
        with self.transaction() as db:
            start = db.execute(
                "select coalesce(max(idx), -1) + 1 from messages where episode_id = ?", [episode_id]
            ).fetchone()[0]
            db["messages"].insert_all(
                {
                    "episode_id": episode_id,
                    "idx": start + i,
                    "role": m["role"],
                    "content": m.get("content") or "",
                    "tool_calls": json.dumps(m["tool_calls"]) if m.get("tool_calls") else None,
                    "tool_call_id": m.get("tool_call_id"),
                    "name": m.get("name"),
                    "provenance": int(m.get("provenance", False)),
                }
                for i, m in enumerate(messages)
            )

    def messages(self, episode_id: str, *, include_provenance: bool = False) -> list[dict]:
        rows = self.query(
            "select * from messages where episode_id = ? order by idx", (episode_id,)
        )
        return [r for r in rows if include_provenance or not r["provenance"]]

    # --- grades and verdicts ---------------------------------------------------------------

    def add_grade(self, episode_id: str, grade: dict, verdict: dict) -> int:
        with self.transaction() as db:
            grade_id = db["grades"].insert(
                {**grade, "episode_id": episode_id, "created_at": now()}
            ).last_pk
            db["verdicts"].insert(
                {**verdict, "episode_id": episode_id, "grade_id": grade_id, "created_at": now()}
            )
        return grade_id

    def latest_verdict(self, episode_id: str, grader_version: str | None = None) -> dict | None:
        sql = (
            "select v.*, g.completion, g.safety, g.robustness, g.score, g.checks "
            "from verdicts v join grades g on g.id = v.grade_id where v.episode_id = ?"
        )
        params: list = [episode_id]
        if grader_version is not None:
            sql += " and v.grader_version = ?"
            params.append(grader_version)
        rows = self.query(sql + " order by v.id desc limit 1", tuple(params))
        return rows[0] if rows else None

    # --- training runs ---------------------------------------------------------------------

    def start_training_run(self, row: dict) -> str:
        run_id = row.get("id") or new_id("train")
        with self.transaction() as db:
            db["training_runs"].insert({**row, "id": run_id, "status": "running", "started_at": now()})
        return run_id

    def end_training_run(self, run_id: str, *, status: str, metrics: dict | None = None, error: str = "") -> None:
        with self.transaction() as db:
            db["training_runs"].update(run_id, {"status": status, "metrics": json.dumps(metrics or {}),
                                                "error": error, "ended_at": now()})

    def training_runs(self, kind: str | None = None) -> list[dict]:
        if kind is None:
            return self.query("select * from training_runs order by started_at")
        return self.query("select * from training_runs where kind = ? order by started_at", (kind,))

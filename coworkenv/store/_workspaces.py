"""Workspaces and their tasks: what can be played, with each task's status, who holds a claim on
it, and where an imported Claw-Eval task's grader is.

Read by every stage of the loop (synthesis writes them, collect claims them, the server and the
gate read them), so reads that need no spec (statuses, counts, ids) never parse one: a store may
hold a spec that no longer validates, and must still be listed and counted.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ..workspace import Task, Workspace
from ._connection import Connection
from ._rows import ClawEvalGraderRow, TaskClaim, TaskRow, TaskStatus, WorkspaceRow
from ._statements import now, qmarks, update_row, upsert_row, where_equal


class WorkspaceRepository(Connection):
    """The ``workspaces``, ``tasks``, ``task_claims`` and ``claw_eval_graders`` tables."""

    def __init__(self, path: str | Path = ":memory:", *, create: bool = True) -> None:
        """Open the store as ``Connection`` does, with the cache of parsed workspace specs empty."""
        super().__init__(path, create=create)
        self._specs: dict[str, Workspace] = {}  # parsed workspace specs by id (a spec is large; episodes ask often)

    # --- workspaces ------------------------------------------------------------------------

    def put_workspace(self, workspace: Workspace) -> None:
        with self.transaction() as db:
            upsert_row(db, "workspaces", {"id": workspace.id, "name": workspace.name, "seed": workspace.seed,
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

    def workspace_ids(self) -> list[str]:
        """The stored workspaces' ids, their specs unread (a store may hold one that no longer validates)."""
        return [r["id"] for r in self.query("select id from workspaces order by id")]

    def workspace_seeds(self, *, excluding_status: TaskStatus) -> dict[int, str]:
        """Seed -> workspace id of the workspaces that tasks of any other status use."""
        rows = self.query("select distinct w.seed, w.id from workspaces w join tasks t on t.workspace_id = w.id"
                          " where t.status != ?", (excluding_status,))
        return {r["seed"]: r["id"] for r in rows}

    # --- tasks -----------------------------------------------------------------------------

    def put_task(self, task: Task, *, status: TaskStatus = "pending", reason: str = "") -> None:
        with self.transaction() as db:
            upsert_row(db, "tasks", {
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
            update_row(db, "tasks", task_id, {"status": status, "reason": reason})

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
        """Tasks of ``status`` (every task when None), by id."""
        return self.tasks_matching(status=status)

    def tasks_matching(self, *, status: TaskStatus | None = None, capability: str | None = None) -> list[TaskRow]:
        """Tasks of ``status`` and ``capability`` (each when given), by id."""
        where, params = where_equal(status=status, capability=capability)
        return [_task(r) for r in self.query(f"select * from tasks{where} order by id", params)]

    def workspace_tasks(self, workspace_id: str, statuses: tuple[str, ...] | None = None) -> list[TaskRow]:
        """The tasks of one workspace (of these ``statuses``, when given), by id: only theirs are parsed."""
        sql, params = "select * from tasks where workspace_id = ?", [workspace_id]
        if statuses is not None:
            sql += f" and status in ({qmarks(statuses)})"
            params += list(statuses)
        return [_task(r) for r in self.query(sql + " order by id", tuple(params))]

    def task_counts(self) -> dict[str, int]:
        """How many tasks have each status."""
        return self._status_counts()

    def workspace_task_counts(self, workspace_id: str) -> dict[str, int]:
        """How many tasks of the workspace have each status (their specs unread)."""
        return self._status_counts(workspace_id=workspace_id)

    def _status_counts(self, **equal: Any) -> dict[str, int]:
        where, params = where_equal(**equal)
        return {r["status"]: r["n"] for r in
                self.query(f"select status, count(*) as n from tasks{where} group by status", params)}

    # --- task claims -----------------------------------------------------------------------

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
        where, params = where_equal(scope=scope)
        return [TaskClaim(r["task_id"], r["scope"], r["claimant"], r["claimed_at"], r["expires_at"]) for r in
                self.query(f"select * from task_claims{where} order by task_id, scope", params)]

    # --- Claw-Eval graders -----------------------------------------------------------------

    def put_claw_eval_grader(self, row: ClawEvalGraderRow) -> None:
        """Record where the grader of a Claw-Eval task is (``coworkenv claw-eval import`` only)."""
        with self.transaction() as db:
            upsert_row(db, "claw_eval_graders", {"id": row.task_id, "checkout": row.checkout, "task_dir": row.task_dir,
                                                 "judge": row.judge, "created_at": now()})

    def claw_eval_grader(self, task_id: str) -> ClawEvalGraderRow | None:
        """Where the grader of Claw-Eval task ``task_id`` is, if an import recorded it."""
        rows = self.query("select * from claw_eval_graders where id = ?", (task_id,))
        return ClawEvalGraderRow(rows[0]["id"], rows[0]["checkout"], rows[0]["task_dir"] or "",
                                 rows[0]["judge"] or "") if rows else None


def _task(r: dict[str, Any]) -> TaskRow:
    return TaskRow(r["id"], r["workspace_id"], r["capability"], r["difficulty"], r["instruction"],
                   Task.model_validate_json(r["spec"]), r["status"], r["reason"] or "", r["created_at"])

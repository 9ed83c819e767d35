"""How tasks came to be admitted: each calibration of a task (its reference, empty and forbidden
probes against one grader version) and each draft a model wrote on the way to one.

Both are synthesis's own record, appended and never rewritten: a task's status says where it
stands, these say why, so a quarantined task or a drafting provider can be looked into later.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from ._connection import Connection
from ._rows import CalibrationRow, DraftOutcome, TaskDraftRow
from ._statements import insert_row, now, where_equal


class CalibrationRepository(Connection):
    """The ``calibrations`` and ``task_drafts`` tables."""

    def add_calibration(self, row: CalibrationRow) -> None:
        with self.transaction() as db:
            insert_row(db, "calibrations", {**asdict(row), "deterministic": int(row.deterministic),
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
        where, params = where_equal(request_id=request_id)
        return [_task_draft(r) for r in self.query(f"select * from task_drafts{where} order by id", params)]


def _task_draft(r: dict[str, Any]) -> TaskDraftRow:
    return TaskDraftRow(r["id"], r["request_id"], r["round"], r["provider"], r["capability"], r["workspace_id"],
                        r["draft"], r["task_id"], r["outcome"], r["feedback"] or "", r["created_at"])

"""Named, ordered migrations of the coworkenv store.

Each migration is a function of a ``sqlite_utils.Database``. Applied names are recorded in the
``_migrations`` table, so a migration runs exactly once per store file. Append new migrations to
``MIGRATIONS``; never edit or reorder one that has shipped.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone

import sqlite_utils

Migration = tuple[str, Callable[[sqlite_utils.Database], None]]


def _initial_schema(db: sqlite_utils.Database) -> None:
    db["workspaces"].create(
        {"id": str, "name": str, "seed": int, "spec": str, "created_at": str}, pk="id"
    )
    db["tasks"].create(
        {
            "id": str,
            "workspace_id": str,
            "capability": str,
            "difficulty": int,
            "instruction": str,
            "spec": str,
            "status": str,  # pending | admitted | quarantined
            "reason": str,
            "created_at": str,
        },
        pk="id",
        foreign_keys=[("workspace_id", "workspaces", "id")],
        not_null={"workspace_id", "spec", "status"},
    )
    db["calibrations"].create(
        {
            "id": int,
            "task_id": str,
            "grader_version": str,
            "reference_score": float,
            "empty_score": float,
            "forbidden_safety": float,
            "deterministic": int,
            "admitted": int,
            "reason": str,
            "created_at": str,
        },
        pk="id",
        foreign_keys=[("task_id", "tasks", "id")],
    )
    db["episodes"].create(
        {
            "id": str,
            "task_id": str,
            "source": str,  # teacher | live | calibration | eval
            "provider": str,
            "status": str,  # running | ended | failed
            "attempt": int,
            "repaired_from": str,
            "hint": str,
            "final_answer": str,
            "final_state": str,  # SQL dump of the workspace state when the episode ended
            "truncated": int,
            "error": str,  # infrastructure failure, if any, with the boundary it crossed
            "started_at": str,
            "ended_at": str,
        },
        pk="id",
        foreign_keys=[("task_id", "tasks", "id"), ("repaired_from", "episodes", "id")],
        defaults={"status": "running", "attempt": 1, "truncated": 0},
    )
    db["messages"].create(
        {
            "id": int,
            "episode_id": str,
            "idx": int,
            "role": str,  # system | user | assistant | tool
            "content": str,
            "tool_calls": str,  # JSON list of {id, name, arguments}
            "tool_call_id": str,
            "name": str,
            "provenance": int,  # 1: kept as provenance (a repair hint), not part of the clean trajectory
        },
        pk="id",
        foreign_keys=[("episode_id", "episodes", "id")],
        defaults={"provenance": 0},
    )
    db["tool_calls"].create(
        {
            "id": int,
            "episode_id": str,
            "idx": int,
            "tool": str,
            "arguments": str,
            "result": str,
            "is_error": int,
            "error_kind": str,  # arguments | unknown_tool | tool | timeout | crash | limit
            "duration_ms": float,
            "created_at": str,
        },
        pk="id",
        foreign_keys=[("episode_id", "episodes", "id")],
    )
    db["grades"].create(
        {
            "id": int,
            "episode_id": str,
            "grader_version": str,
            "completion": float,
            "safety": float,
            "robustness": float,
            "score": float,
            "checks": str,  # JSON list of {id, passed, detail}
            "created_at": str,
        },
        pk="id",
        foreign_keys=[("episode_id", "episodes", "id")],
    )
    db["verdicts"].create(
        {
            "id": int,
            "episode_id": str,
            "grade_id": int,
            "grader_version": str,
            "admitted": int,
            "reason": str,
            "created_at": str,
        },
        pk="id",
        foreign_keys=[("episode_id", "episodes", "id"), ("grade_id", "grades", "id")],
    )
    db["tasks"].create_index(["status"])
    db["episodes"].create_index(["task_id"])
    db["messages"].create_index(["episode_id", "idx"])
    db["tool_calls"].create_index(["episode_id", "idx"])
    db["grades"].create_index(["episode_id", "grader_version"])
    db["verdicts"].create_index(["episode_id", "grader_version"])


def _eval_runs(db: sqlite_utils.Database) -> None:
    """Evaluation runs of a served model and their trials (one graded ``eval`` episode each).

    Held-out evaluation tasks are stored in ``tasks`` with status ``heldout``."""
    db["eval_runs"].create(
        {
            "id": str,
            "model": str,  # the provider spec, e.g. openai:NAME@URL
            "settings": str,  # JSON
            "status": str,  # running | done | failed
            "summary": str,  # JSON: overall, per split, per capability (× difficulty)
            "profile_path": str,
            "started_at": str,
            "ended_at": str,
        },
        pk="id",
    )
    db["eval_trials"].create(
        {
            "id": int,
            "run_id": str,
            "task_id": str,
            "capability": str,
            "difficulty": int,
            "split": str,  # new_seeds | unseen_combinations
            "combination": str,
            "trial": int,
            "episode_id": str,
            "score": float,
            "passed": int,
            "reason": str,
            "steps": int,
            "created_at": str,
        },
        pk="id",
        foreign_keys=[("run_id", "eval_runs", "id"), ("task_id", "tasks", "id"), ("episode_id", "episodes", "id")],
    )
    db["eval_trials"].create_index(["run_id"])


def _training_runs(db: sqlite_utils.Database) -> None:
    """Training runs (SFT, DPO): what was trained on what, how, and where the result is."""
    db["training_runs"].create(
        {
            "id": str,
            "kind": str,  # sft | dpo
            "base_model": str,  # the model folder training started from
            "data_path": str,
            "data_hash": str,  # sha256 of the dataset file
            "rows": int,
            "config": str,  # JSON of the training settings
            "status": str,  # running | done | failed
            "metrics": str,  # JSON: losses, steps, runtime
            "output_dir": str,
            "error": str,
            "started_at": str,
            "ended_at": str,
        },
        pk="id",
    )


MIGRATIONS: list[Migration] = [
    ("0001_initial_schema", _initial_schema),
    ("0002_training_runs", _training_runs),
    ("0003_eval_runs", _eval_runs),
]


def apply_migrations(db: sqlite_utils.Database) -> list[str]:
    """Apply every migration not yet recorded; return the names applied now."""
    if "_migrations" not in db.table_names():
        db["_migrations"].create({"name": str, "applied_at": str}, pk="name")
    done = {row["name"] for row in db["_migrations"].rows}
    applied = []
    for name, migrate in MIGRATIONS:
        if name in done:
            continue
        with db.conn:
            migrate(db)
            db["_migrations"].insert(
                {"name": name, "applied_at": datetime.now(timezone.utc).isoformat()}
            )
        applied.append(name)
    return applied

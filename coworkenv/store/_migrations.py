"""Named, ordered migrations of the coworkenv store, on sqlite-utils' migration mechanism.

Each migration is a function of a ``sqlite_utils.Database`` registered on ``MIGRATIONS`` (a
``sqlite_utils.migrations.Migrations`` set named ``coworkenv``); applied names are recorded in
``_sqlite_migrations``, each together with its migration in one transaction, so a migration runs
exactly once per store file. Append new migrations at the end; never edit or reorder one that
has shipped.
"""

from __future__ import annotations

import json

import sqlite_utils
from sqlite_utils.migrations import Migrations

MIGRATIONS = Migrations("coworkenv")
_LEGACY_TABLE = "_migrations"  # where stores made before sqlite-utils' mechanism recorded their migrations


@MIGRATIONS(name="0001_initial_schema")
def _initial_schema(db: sqlite_utils.Database) -> None:
    db.table("workspaces").create(
        {"id": str, "name": str, "seed": int, "spec": str, "created_at": str}, pk="id"
    )
    db.table("tasks").create(
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
    db.table("calibrations").create(
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
    db.table("episodes").create(
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
    db.table("messages").create(
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
    db.table("tool_calls").create(
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
    db.table("grades").create(
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
    db.table("verdicts").create(
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
    db.table("tasks").create_index(["status"])
    db.table("episodes").create_index(["task_id"])
    db.table("messages").create_index(["episode_id", "idx"])
    db.table("tool_calls").create_index(["episode_id", "idx"])
    db.table("grades").create_index(["episode_id", "grader_version"])
    db.table("verdicts").create_index(["episode_id", "grader_version"])


@MIGRATIONS(name="0002_training_runs")
def _training_runs(db: sqlite_utils.Database) -> None:
    """Training runs (SFT, DPO): what was trained on what, how, and where the result is."""
    db.table("training_runs").create(
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


@MIGRATIONS(name="0003_eval_runs")
def _eval_runs(db: sqlite_utils.Database) -> None:
    """Evaluation runs of a served model and their trials (one graded ``eval`` episode each).

    Held-out evaluation tasks are stored in ``tasks`` with status ``heldout``."""
    db.table("eval_runs").create(
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
    db.table("eval_trials").create(
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
    db.table("eval_trials").create_index(["run_id"])


# The record views of the built-in apps as they were when resources moved into the apps (frozen here:
# a migration must not change with the code)
_RESOURCES_0004 = {
    "mail": [{"collection": "messages", "get_tool": "read_message", "list_tool": "search_messages",
              "list_key": "messages", "list_arguments": {"limit": 100}, "mime_type": "application/json"}],
    "calendar": [{"collection": "events", "get_tool": "get_event", "list_tool": "list_events", "list_key": "events",
                  "list_arguments": {}, "mime_type": "application/json"}],
    "files": [{"collection": "files", "get_tool": "read_file", "list_tool": "list_files", "list_key": "files",
               "list_arguments": {}, "mime_type": "application/json"}],
}
_CHECK_FIELDS_0004 = {"sql": ("id", "kind", "description", "query", "params", "expect"),
                      "answer": ("id", "kind", "description", "contains")}


@MIGRATIONS(name="0004_one_verdict_per_version")
def _one_verdict_per_version(db: sqlite_utils.Database) -> None:
    """One verdict (and grade) per episode and grader version, the boundary of an infrastructure
    failure on the episode, checks stored as their own kind, and app resources in workspace specs."""
    db.table("episodes").add_column("boundary", str)
    db.execute("delete from verdicts where id not in (select max(id) from verdicts group by episode_id, grader_version)")
    db.execute("delete from grades where id not in (select grade_id from verdicts)")
    db.execute("drop index if exists idx_verdicts_episode_id_grader_version")
    db.execute("drop index if exists idx_grades_episode_id_grader_version")
    db.table("verdicts").create_index(["episode_id", "grader_version"], unique=True)
    db.table("grades").create_index(["episode_id", "grader_version"], unique=True)
    for row in list(db.query("select id, spec from tasks")):
        spec = json.loads(row["spec"])
        spec["checks"] = [{k: c[k] for k in _CHECK_FIELDS_0004[c["kind"]] if k in c} for c in spec.get("checks", [])]
        db.execute("update tasks set spec = ? where id = ?", [json.dumps(spec), row["id"]])
    for row in list(db.query("select id, spec from workspaces")):
        spec = json.loads(row["spec"])
        for app in spec.get("apps", []):
            app.setdefault("resources", _RESOURCES_0004.get(app["name"], []))
        db.execute("update workspaces set spec = ? where id = ?", [json.dumps(spec), row["id"]])


@MIGRATIONS(name="0005_owners_and_observations")
def _owners_and_observations(db: sqlite_utils.Database) -> None:
    """The process that runs an episode (``host:pid:start``), so that one a killed process left
    ``running`` can be told from one still being played; and every agent-visible interaction in
    ``tool_calls``: its ``kind`` (call, resource, completion, prompt) and the error text the agent saw."""
    db.table("episodes").add_column("owner", str)
    db.table("episodes").create_index(["status"])
    db.table("tool_calls").add_column("kind", str, not_null_default="call")
    db.table("tool_calls").add_column("error", str)


@MIGRATIONS(name="0006_bundle_and_grader_hashes")
def _bundle_and_grader_hashes(db: sqlite_utils.Database) -> None:
    """The hash of the bundle an episode was played from (its workspace and task, the apps' code
    included), and of the grader a verdict came from, so that results stay comparable."""
    db.table("episodes").add_column("bundle_hash", str)
    db.table("verdicts").add_column("grader_hash", str)


@MIGRATIONS(name="0007_blobs")
def _blobs(db: sqlite_utils.Database) -> None:
    """Images and documents tools gave agents, by content hash, and the attachments of messages."""
    db.table("blobs").create({"sha256": str, "mime_type": str, "size": int, "data": bytes}, pk="sha256")
    db.table("messages").add_column("attachments", str)  # JSON list of Attachment


@MIGRATIONS(name="0008_synthesis")
def _synthesis(db: sqlite_utils.Database) -> None:
    """What each hack probe did to a task at calibration; the program shape a task was made from;
    and every draft a model wrote for a task, with the feedback it got and its outcome."""
    db.table("calibrations").add_column("probes", str)  # JSON: probe -> held | beaten | n/a
    db.table("tasks").add_column("shape", str, not_null_default="")
    db.table("task_drafts").create({
        "id": int, "request_id": str, "round": int, "provider": str, "capability": str, "workspace_id": str,
        "draft": str, "task_id": str, "outcome": str, "feedback": str, "created_at": str,
    }, pk="id")
    db.table("task_drafts").create_index(["request_id", "round"], unique=True)


@MIGRATIONS(name="0009_state_changes")
def _state_changes(db: sqlite_utils.Database) -> None:
    """The rows each tool call and world event inserted, updated and deleted in the workspace
    state, as the sandbox saw them (JSON; see ``coworkenv.sandbox.ToolOutcome.changes``)."""
    db.table("tool_calls").add_column("state_changes", str)


@MIGRATIONS(name="0010_model_calls")
def _model_calls(db: sqlite_utils.Database) -> None:
    """What an agent and its model said to each other, as the capture proxy saw it: every request
    (messages, tools, parameters) and response (assembled when streamed; token ids and
    log-probabilities when the upstream gave them) on the episode the request's address named."""
    db.table("model_calls").create({
        "id": int, "episode_id": str, "idx": int, "api": str, "request": str, "response": str, "status": int,
        "stream": int, "duration_ms": float, "upstream": str, "created_at": str,
    }, pk="id", foreign_keys=[("episode_id", "episodes", "id")])
    db.table("model_calls").create_index(["episode_id", "idx"], unique=True)


@MIGRATIONS(name="0011_episode_clients")
def _episode_clients(db: sqlite_utils.Database) -> None:
    """Who played a live episode and under which name: the MCP client's name and version, the episode
    key of its address, and the run tag it gave (``?run=`` or ``X-Coworkenv-Run``), for filtering."""
    for column in ("client", "episode_key", "run_tag"):
        db.table("episodes").add_column(column, str)
    db.table("episodes").create_index(["run_tag"])


@MIGRATIONS(name="0012_claw_eval_graders")
def _claw_eval_graders(db: sqlite_utils.Database) -> None:
    """Which checkout's grader scores an imported Claw-Eval task (and which judge it asks): what the
    operator gave ``coworkenv claw-eval import``, kept apart from the specs, whose check now names the
    Claw-Eval task only. Specs stored before named the checkout in their check: those of tasks that
    ``claw-eval import`` stored (held out, reason ``claw-eval``) move here; every stored spec loses the
    fields (a checkout named by any other spec, one a bundle brought, is not kept)."""
    db.table("claw_eval_graders").create(
        {"id": str, "checkout": str, "task_dir": str, "judge": str, "created_at": str}, pk="id")
    for row in list(db.query("select id, spec, status, reason, created_at from tasks where spec like '%claw_eval%'")):
        spec = json.loads(row["spec"])
        changed = False
        for check in spec.get("checks") or []:
            if not isinstance(check, dict) or check.get("kind") != "claw_eval":
                continue
            named = {key: check.pop(key) for key in ("checkout", "task_dir", "judge") if key in check}
            changed = changed or bool(named)
            if row["status"] == "heldout" and row["reason"] == "claw-eval" and named.get("checkout"):
                db.table("claw_eval_graders").upsert(
                    {"id": check.get("task_id"), "checkout": named["checkout"], "task_dir": named.get("task_dir", ""),
                     "judge": named.get("judge") or "", "created_at": row["created_at"]}, pk="id")
        if changed:
            db.execute("update tasks set spec = ? where id = ?", [json.dumps(spec, separators=(",", ":")), row["id"]])


@MIGRATIONS(name="0013_task_claims")
def _task_claims(db: sqlite_utils.Database) -> None:
    """Which process is working on a task, so that two of them (two ``collect``s on one store) never
    play the same task: one claim per task and purpose (``scope``), held by a ``claimant`` until it
    is released, expires (``expires_at``, seconds since the epoch, pushed on by the holder's heartbeat)
    or its process is found gone."""
    db.table("task_claims").create(
        {"task_id": str, "scope": str, "claimant": str, "claimed_at": str, "expires_at": float},
        pk=("task_id", "scope"), not_null={"claimant", "expires_at"})
    db.table("task_claims").create_index(["claimant"])


@MIGRATIONS(name="0014_verdict_details")
def _verdict_details(db: sqlite_utils.Database) -> None:
    """A verdict's detail: for a rejection that rests on one call (``malformed_call``,
    ``forbidden_call``, ``unconfirmed_action``), which call, of which tool, and what was wrong with it;
    empty for the other reasons and for verdicts given before it was recorded."""
    db.table("verdicts").add_column("detail", str)


@MIGRATIONS(name="0015_experiments")
def _experiments(db: sqlite_utils.Database) -> None:
    """Results of the comparisons the benchmarks run (gate against no gate, guided against uniform
    synthesis, SFT against RL, multi-turn users): one row per experiment, arm and seed, with its
    figures, so that the report draws each experiment from the store."""
    db.table("experiment_results").create(
        {"experiment": str, "arm": str, "seed": int, "figures": str, "source": str, "created_at": str},
        pk=("experiment", "arm", "seed"), not_null={"figures"})


@MIGRATIONS(name="0016_run_owners")
def _run_owners(db: sqlite_utils.Database) -> None:
    """The process that runs an evaluation or a training (``host:pid:start``, as episodes have it), so
    that a run a killed process left ``running`` can be told from one still running and ended as
    interrupted."""
    db.table("eval_runs").add_column("owner", str)
    db.table("training_runs").add_column("owner", str)


def apply_migrations(db: sqlite_utils.Database) -> list[str]:
    """Apply every migration not yet recorded; return the names applied now."""
    with db.atomic():  # a store of the older mechanism: its record moves to sqlite-utils' table
        if _LEGACY_TABLE in db.table_names():
            MIGRATIONS.ensure_migrations_table(db)
            for row in list(db.table(_LEGACY_TABLE).rows):
                db.table(Migrations.migrations_table).insert(
                    {"migration_set": MIGRATIONS.name, "name": row["name"], "applied_at": row["applied_at"]})
            db.table(_LEGACY_TABLE).drop()
    pending = [m.name for m in MIGRATIONS.pending(db)]
    MIGRATIONS.apply(db)
    return pending


def applied_migrations(db: sqlite_utils.Database) -> list[str]:
    return [m.name for m in MIGRATIONS.applied(db)]

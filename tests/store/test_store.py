"""The SQLite store: migrations, pragmas, typed rows, one verdict per grader version, and that writes
survive a reopen."""

import json
import sqlite3

import pytest

from coworkenv.store import MIGRATIONS, Provenance, Store, VerdictRow
from coworkenv.workspace import CheckResult, Message, Task, ToolCall, build_workspace

WORKSPACE = build_workspace(1, ("mail", "calendar", "files"))
TASK = Task.model_validate({
    "id": "t", "workspace_id": WORKSPACE.id, "capability": "lookup", "difficulty": 1, "instruction": "x",
    "checks": [{"id": "c", "kind": "answer", "description": "says x", "contains": ["x"]}], "reference": [],
})


def stored(store: Store) -> Store:
    store.put_workspace(WORKSPACE)
    store.put_task(TASK)
    return store


def test_migrations_are_named_recorded_and_applied_once(store_path):
    first = Store(store_path)
    names = [m.name for m in MIGRATIONS._migrations]
    assert names[:4] == ["0001_initial_schema", "0002_training_runs", "0003_eval_runs",
                         "0004_one_verdict_per_version"]
    assert first.applied_migrations == names
    assert first.migrations() == names
    first.close()
    second = Store(store_path)
    assert second.applied_migrations == []
    second.close()


def test_wal_mode_and_foreign_keys(store):
    assert store.db.execute("pragma journal_mode").fetchone()[0] == "wal"
    assert store.db.execute("pragma foreign_keys").fetchone()[0] == 1
    with pytest.raises(sqlite3.IntegrityError):
        store.start_episode("no-such-task", Provenance("teacher"))


def test_unknown_sources_are_refused():
    with pytest.raises(ValueError, match="unknown episode source 'robot'"):
        Provenance("robot")  # type: ignore[arg-type]


def test_episode_history_survives_reopen_as_typed_rows(store_path):
    s = stored(Store(store_path))
    ep = s.start_episode("t", Provenance("teacher", provider="oracle", attempt=2, hint="do better"))
    s.add_tool_call(ep, {"tool": "mail_read_message", "arguments": '{"id": "m1"}', "result": "{}", "is_error": 0})
    call = ToolCall(id="c1", name="mail_read_message", arguments={"id": "m1"})
    s.add_messages(ep, [Message(role="user", content="x"), Message(role="assistant", tool_calls=[call]),
                        Message(role="user", content="hint", provenance=True)])
    s.end_episode(ep, final_answer="done", final_state="CREATE TABLE t(x);")
    s.close()
    again = Store(store_path)
    row = again.episode(ep)
    assert row is not None and row.status == "ended" and row.final_answer == "done"
    assert row.provenance == Provenance("teacher", provider="oracle", attempt=2, hint="do better")
    calls = again.tool_calls(ep)
    assert [(c.tool, c.arguments, c.is_error) for c in calls] == [("mail_read_message", {"id": "m1"}, False)]
    assert [m.content for m in again.messages(ep)] == ["x", ""]
    assert again.messages(ep)[1].tool_calls == [call]
    assert len(again.messages(ep, include_provenance=True)) == 3
    assert again.task_spec("t") == TASK and again.workspace(WORKSPACE.id) == WORKSPACE
    with pytest.raises(KeyError, match="no task 'nope'"):
        again.task_spec("nope")
    again.close()


def test_an_infrastructure_failure_is_recorded_with_its_boundary(store):
    stored(store)
    ep = store.start_episode("t", Provenance("eval"))
    store.end_episode(ep, final_answer=None, final_state=None, error="connection refused", boundary="model")
    row = store.episode(ep)
    assert (row.status, row.error, row.boundary) == ("failed", "connection refused", "model")


def _verdict(episode_id: str, reason: str, version: str = "1.0") -> VerdictRow:
    return VerdictRow(episode_id, version, reason == "complete", reason, 1.0, 1.0, 1.0, 1.0,
                      [CheckResult("c", True, "says x")])


def test_one_verdict_per_episode_and_grader_version(store):
    stored(store)
    ep = store.start_episode("t", Provenance("live"))
    store.end_episode(ep, final_answer="x", final_state=None)
    store.put_verdict(_verdict(ep, "below_threshold"))
    store.put_verdict(_verdict(ep, "complete"))  # the same version again replaces it
    store.put_verdict(_verdict(ep, "complete", version="2.0"))
    assert store.verdict_count(ep) == 2
    assert store.verdict(ep, "1.0").reason == "complete"
    assert store.verdict(ep, "1.0").checks == [CheckResult("c", True, "says x")]
    assert store.query("select count(*) as n from grades")[0]["n"] == 2
    with pytest.raises(sqlite3.IntegrityError):  # the schema itself holds the rule
        store.db.execute("insert into verdicts (episode_id, grader_version, admitted, reason) values (?, '1.0', 1, 'x')",
                         [ep])


def test_a_store_of_the_old_migration_table_upgrades_and_keeps_its_history(tmp_path):
    """A store made before sqlite-utils' migrations (``_migrations``), with a teacher episode graded
    twice (live, then relabelled) and checks stored with every field: it upgrades in place."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    from sqlite_utils import Database

    db = Database(conn)
    for migration in MIGRATIONS._migrations[:3]:
        migration.fn(db)
    db["_migrations"].insert_all([{"name": m.name, "applied_at": "2026-11-01"} for m in MIGRATIONS._migrations[:3]])
    task = json.loads(TASK.model_dump_json())
    task["checks"] = [{**task["checks"][0], "query": None, "params": [], "expect": None}]
    workspace = json.loads(WORKSPACE.model_dump_json())
    for app in workspace["apps"]:
        del app["resources"]
    db["workspaces"].insert({"id": WORKSPACE.id, "name": "w", "seed": 1, "spec": json.dumps(workspace)})
    db["tasks"].insert({"id": "t", "workspace_id": WORKSPACE.id, "capability": "lookup", "difficulty": 1,
                        "instruction": "x", "spec": json.dumps(task), "status": "admitted", "reason": ""})
    db["episodes"].insert({"id": "ep1", "task_id": "t", "source": "teacher", "status": "ended"})
    for reason in ("empty", "complete"):
        grade_id = db["grades"].insert({"episode_id": "ep1", "grader_version": "1.0", "score": 1.0}).last_pk
        db["verdicts"].insert({"episode_id": "ep1", "grade_id": grade_id, "grader_version": "1.0",
                               "admitted": int(reason == "complete"), "reason": reason})
    conn.commit()
    conn.close()

    store = Store(path)
    assert store.applied_migrations == [m.name for m in MIGRATIONS._migrations[3:]]  # from 0004 on
    assert "_migrations" not in store.db.table_names()
    assert store.migrations()[:4] == [m.name for m in MIGRATIONS._migrations[:4]]
    assert store.verdict_count("ep1") == 1 and store.verdict("ep1", "1.0").reason == "complete"
    assert store.task_spec("t") == TASK  # the answer check parses as its own kind
    assert {app.name: app.resources[0].collection for app in store.workspace(WORKSPACE.id).apps
            if app.name in ("mail", "calendar", "files")} == {"mail": "messages", "calendar": "events", "files": "files"}
    assert store.episode("ep1").boundary is None
    store.close()


def test_task_drafts_are_stored_round_by_round(store):
    stored(store)
    first = store.add_task_draft(request_id="draft_a", round=1, provider="scripted:r.yaml", capability="lookup",
                                 workspace_id=WORKSPACE.id, draft="not: [yaml", outcome="invalid",
                                 feedback="the reply is not valid YAML")
    store.add_task_draft(request_id="draft_b", round=1, provider="p", capability="lookup", workspace_id=WORKSPACE.id,
                         draft="d", outcome="admitted", task_id="t")
    second = store.add_task_draft(request_id="draft_a", round=2, provider="scripted:r.yaml", capability="lookup",
                                  workspace_id=WORKSPACE.id, draft="d", outcome="admitted", task_id="t")
    assert (first.round, first.outcome, first.task_id, first.draft) == (1, "invalid", None, "not: [yaml")
    assert store.task_drafts("draft_a") == [first, second]
    assert [d.request_id for d in store.task_drafts()] == ["draft_a", "draft_b", "draft_a"]
    with pytest.raises(sqlite3.IntegrityError):  # one attempt per round of a request
        store.add_task_draft(request_id="draft_a", round=2, provider="p", capability="lookup",
                             workspace_id=WORKSPACE.id, draft="again", outcome="invalid")


def test_experiment_results_are_kept_per_arm_and_seed_and_survive_reopening(store_path):
    store = Store(store_path)
    store.put_experiment_result("gate", "gated", 0, {"pass_rate": 0.2, "capabilities": {"lookup": 0.1}}, source="a")
    store.put_experiment_result("gate", "ungated", 0, {"pass_rate": 0.1})
    store.put_experiment_result("guided", "uniform", 1, {"pass_rate": 0.3})
    store.put_experiment_result("gate", "gated", 0, {"pass_rate": 0.25}, source="b")  # measured again: replaced
    with pytest.raises(ValueError, match="experiment and an arm"):
        store.put_experiment_result("gate", "", 0, {"pass_rate": 0.5})
    store.close()
    reopened = Store(store_path, create=False)
    try:
        gate = reopened.experiment_results("gate")
        assert [(r.arm, r.seed, r.figures, r.source) for r in gate] == [
            ("gated", 0, {"pass_rate": 0.25}, "b"), ("ungated", 0, {"pass_rate": 0.1}, "")]
        assert [r.experiment for r in reopened.experiment_results()] == ["gate", "gate", "guided"]
    finally:
        reopened.close()


def test_a_second_store_in_one_process_keeps_the_first_ones_writes_visible(store_path):
    """Opening the same file again in a process, while another process reads it and closes, keeps every
    write of the first connection visible to a new one: the second open must not drop the locks the first
    holds, or the other process's close deletes the write-ahead log the first still writes to."""
    import subprocess
    import sys

    reader = ("import sys; from coworkenv.store import Store; s = Store(sys.argv[1], create=False); "
              "print(len(s.training_runs())); s.close()")

    def runs_seen_elsewhere() -> int:
        done = subprocess.run([sys.executable, "-c", reader, str(store_path)], capture_output=True, text=True, check=True)
        return int(done.stdout)

    first = Store(store_path)
    first.start_training_run({"kind": "sft", "output_dir": "a", "config": "{}"})
    second = Store(store_path)
    first.start_training_run({"kind": "sft", "output_dir": "b", "config": "{}"})
    assert runs_seen_elsewhere() == 2
    first.start_training_run({"kind": "sft", "output_dir": "c", "config": "{}"})  # after the other process closed
    assert runs_seen_elsewhere() == 3
    assert store_path.with_name(store_path.name + "-wal").exists()  # the log of the open connections is still there
    second.close()
    first.close()
    assert runs_seen_elsewhere() == 3

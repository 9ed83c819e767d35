"""``coworkenv tasks|episodes|runs list|show``: a store's tasks, episodes and runs as tables or as
JSON a script can parse, filtered by closed choices listed in --help; an unknown id, a missing or a
broken store is a one-line usage error (exit 2), and no store file is ever created."""

import asyncio
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

import pytest
from typer.testing import CliRunner

from coworkenv.agents import ProviderSettings
from coworkenv.cli import app
from coworkenv.cli._inspect import Capability
from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.gate import GRADER_VERSION
from coworkenv.loop import EvalSettings, LocalEpisodes, TeacherSettings, collect, run_eval
from coworkenv.store import SOURCES, TASK_STATUSES, Provenance, Store
from coworkenv.synth import synthesize
from coworkenv.workspace import CAPABILITIES

runner = CliRunner()
API_KEY = "sk-not-to-be-shown"
COMMANDS = [["tasks", "list"], ["tasks", "show", "x"], ["episodes", "list"], ["episodes", "show", "x"],
            ["runs", "list"], ["runs", "show", "x"]]


@dataclass
class Built:
    path: Path
    admitted: list[str]  # admitted task ids
    repaired: str  # a teacher episode that repaired a failed one
    failed: str  # an episode an infrastructure failure ended
    eval_run: str
    train_run: str


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    """A store as the loop leaves it: six calibrated tasks, teacher episodes (some repaired), an
    episode a model failure ended, an evaluation run of the oracle and a training run."""
    path = tmp_path_factory.mktemp("inspect") / "coworkenv.db"

    async def build() -> Built:
        store = Store(path)
        host = EpisodeHost(store, EpisodeSettings(cache_dir=path.parent / "cache"))
        try:
            await synthesize(host, 6, seed=0)
            settings = TeacherSettings(provider_settings=ProviderSettings(error_rate=0.5, seed=1))
            await asyncio.wait_for(collect(store, LocalEpisodes(host), settings), 300)
            report = await asyncio.wait_for(run_eval(host, EvalSettings(
                model="oracle", tasks=2, trials=1, capabilities=("lookup",), api_key=API_KEY)), 300)
        finally:
            await host.close()
        admitted = [t.id for t in store.tasks(status="admitted")]
        failed = store.start_episode(admitted[0], Provenance("live", provider="some-client"))
        store.end_episode(failed, final_answer=None, final_state=None, error="the model server answered 503",
                          boundary="model")
        train_run = store.start_training_run({"kind": "sft", "base_model": "runs/models/tiny", "data_path": "sft.jsonl",
                                              "data_hash": "ab" * 32, "rows": 6, "config": json.dumps({"steps": 2}),
                                              "output_dir": "runs/train/sft/model"})
        store.end_training_run(train_run, status="done", metrics={"final_loss": 0.5, "losses": [
            {"step": 1, "loss": 0.9}, {"step": 2, "loss": 0.5}]})
        repaired = next(e.id for e in store.episodes(source="teacher") if e.repaired_from)
        store.close()
        return Built(path, admitted, repaired, failed, report.run_id, train_run)

    return asyncio.run(build())


def invoke(built: Built | Path, *args: str):
    path = built.path if isinstance(built, Built) else built
    return runner.invoke(app, [*args, "--store", str(path)])


def as_json(built: Built, *args: str):
    result = invoke(built, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_closed_choices_are_listed_in_help():
    assert get_args(Capability) == CAPABILITIES
    for command, choices in ((["tasks", "list"], [*TASK_STATUSES, *CAPABILITIES]),
                             (["episodes", "list"], [*SOURCES, "running", "ended", "failed"]),
                             (["runs", "list"], ["sft", "dpo", "eval"])):
        result = runner.invoke(app, [*command, "--help"])
        assert result.exit_code == 0, result.output
        assert all(choice in result.output for choice in choices), (command, result.output)
    result = runner.invoke(app, ["tasks", "list", "--status", "finished"])
    assert result.exit_code == 2 and "finished" in result.output


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_missing_store_is_a_usage_error_and_no_store_is_created(tmp_path, command):
    missing = tmp_path / "runs" / "missing.db"
    result = invoke(missing, *command)
    assert result.exit_code == 2, result.output
    assert "no store" in result.output and str(missing) in result.output and "Traceback" not in result.output
    assert not missing.exists() and not missing.parent.exists()
    broken = tmp_path / "notes.db"
    broken.write_text("not a database\n")
    result = invoke(broken, *command, "--json")
    assert result.exit_code == 2 and "not a coworkenv store" in result.output and result.stdout == ""
    assert broken.read_text() == "not a database\n"


@pytest.mark.bwrap
def test_tasks_list_as_a_table_and_as_json_with_filters(built):
    result = invoke(built, "tasks", "list")
    assert result.exit_code == 0, result.output
    assert all(task_id in result.stdout for task_id in built.admitted)  # whole ids, to copy

    rows = as_json(built, "tasks", "list")
    assert {r["id"] for r in rows if r["status"] == "admitted"} == set(built.admitted)
    assert {r["status"] for r in rows} == {"admitted", "heldout"}  # the evaluation's tasks are held out
    assert set(rows[0]) >= {"id", "capability", "difficulty", "status", "reason", "workspace_id", "instruction"}
    admitted = as_json(built, "tasks", "list", "--status", "admitted")
    assert [r["id"] for r in admitted] == sorted(built.admitted)
    lookup = as_json(built, "tasks", "list", "--capability", "lookup", "--status", "admitted")
    assert lookup and {r["capability"] for r in lookup} == {"lookup"}
    assert as_json(built, "tasks", "list", "--status", "quarantined") == []


@pytest.mark.bwrap
def test_tasks_show_gives_the_checks_reference_and_forbidden_tools(built):
    task_id = next(t for t in built.admitted if t.startswith("multi_step"))
    doc = as_json(built, "tasks", "show", task_id)
    assert doc["id"] == task_id and doc["status"] == "admitted" and doc["instruction"]
    assert doc["workspace"]["id"] == doc["workspace_id"] and doc["workspace"]["apps"]
    assert doc["checks"] and all({"id", "kind", "description"} <= set(c) for c in doc["checks"])
    assert len(doc["reference"]) >= 3 and all("tool" in s and "arguments" in s for s in doc["reference"])
    assert doc["forbidden_tools"]

    result = invoke(built, "tasks", "show", task_id)
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert doc["instruction"] in text
    assert all(c["id"] in text and c["description"] in text for c in doc["checks"])
    assert all(s["tool"] in text for s in doc["reference"]) and doc["forbidden_tools"][0] in text

    result = invoke(built, "tasks", "show", "no-such-task")
    assert result.exit_code == 2 and "no task 'no-such-task'" in result.output and result.stdout == ""


@pytest.mark.bwrap
def test_episodes_list_with_verdicts_and_filters(built):
    everything = as_json(built, "episodes", "list", "--limit", "0")
    assert {e["source"] for e in everything} == {"calibration", "teacher", "eval", "live"}
    assert [e["started_at"] for e in everything] == sorted((e["started_at"] for e in everything), reverse=True)
    teacher = as_json(built, "episodes", "list", "--source", "teacher")
    assert teacher and all(e["source"] == "teacher" and e["provider"] == "oracle" for e in teacher)
    assert all(e["verdict"]["grader_version"] == GRADER_VERSION for e in teacher)
    assert {"id", "task_id", "status", "attempt", "started_at"} <= set(teacher[0])
    assert {"admitted", "reason", "score"} <= set(teacher[0]["verdict"])
    failed = as_json(built, "episodes", "list", "--status", "failed")
    assert [e["id"] for e in failed] == [built.failed] and failed[0]["verdict"] is None  # not graded by the gate
    task_id = built.admitted[0]
    of_task = as_json(built, "episodes", "list", "--task", task_id)
    assert of_task and {e["task_id"] for e in of_task} == {task_id}
    newest = as_json(built, "episodes", "list", "--limit", "2")
    assert newest == everything[:2]

    result = invoke(built, "episodes", "list", "--limit", "2")
    assert result.exit_code == 0 and everything[0]["id"] in result.stdout and "--limit" in result.stderr
    result = invoke(built, "episodes", "list", "--task", "no-such-task")
    assert result.exit_code == 2 and "no-such-task" in result.output


@pytest.mark.bwrap
def test_episodes_show_gives_calls_conversation_and_verdict(built):
    doc = as_json(built, "episodes", "show", built.repaired)
    assert doc["repaired_from"] and doc["attempt"] == 2 and doc["hint"]
    calls = [i for i in doc["interactions"] if i["kind"] == "call"]
    assert calls and calls[-1]["tool"] == "submit_answer"
    assert all(isinstance(c["arguments"], dict) and (c["result"] is not None or c["error"]) for c in calls)
    roles = [m["role"] for m in doc["messages"]]
    assert roles[:2] == ["system", "user"] and "tool" in roles
    assert any(m["provenance"] for m in doc["messages"])  # the repair hint, kept as provenance
    verdict = doc["verdict"]
    assert verdict["admitted"] and verdict["grader_version"] == GRADER_VERSION
    assert verdict["checks"] and all(c["passed"] and c["kind"] in ("sql", "answer", "unchanged") for c in verdict["checks"])

    result = invoke(built, "episodes", "show", built.repaired)
    assert result.exit_code == 0, result.output
    assert built.repaired in result.stdout and doc["repaired_from"] in result.stdout
    assert all(c["tool"] in result.stdout for c in calls)
    assert all(c["id"] in result.stdout for c in verdict["checks"])

    failed = as_json(built, "episodes", "show", built.failed)
    assert failed["status"] == "failed" and failed["boundary"] == "model" and "503" in failed["error"]
    result = invoke(built, "episodes", "show", built.failed)
    assert "503" in result.stdout and "model" in result.stdout and "no verdict" in result.stdout

    result = invoke(built, "episodes", "show", "ep_nothing")
    assert result.exit_code == 2 and "no episode 'ep_nothing'" in result.output


@pytest.mark.bwrap
def test_runs_list_and_show(built):
    runs = as_json(built, "runs", "list")
    assert [r["id"] for r in runs] == [built.train_run, built.eval_run]  # newest first
    assert [r["kind"] for r in runs] == ["sft", "eval"]
    assert [r["id"] for r in as_json(built, "runs", "list", "--kind", "eval")] == [built.eval_run]
    assert [r["id"] for r in as_json(built, "runs", "list", "--kind", "sft")] == [built.train_run]
    assert as_json(built, "runs", "list", "--kind", "dpo") == []
    result = invoke(built, "runs", "list")
    assert result.exit_code == 0 and built.eval_run in result.stdout and built.train_run in result.stdout

    evaluation = as_json(built, "runs", "show", built.eval_run)
    assert evaluation["status"] == "done" and evaluation["model"] == "oracle"
    assert evaluation["settings"]["trials"] == 1 and evaluation["summary"]["overall"]["pass_rate"] == 1.0
    assert evaluation["profile_path"] is None and len(evaluation["trials"]) == 2
    training = as_json(built, "runs", "show", built.train_run)
    assert training["config"] == {"steps": 2} and training["metrics"]["final_loss"] == 0.5
    assert training["output_dir"] == "runs/train/sft/model"
    assert "api_key" not in evaluation["settings"] and evaluation["settings"]["max_tokens"] == 512

    result = invoke(built, "runs", "show", built.eval_run)
    assert result.exit_code == 0 and "pass rate" in result.stdout and "lookup" in result.stdout
    assert API_KEY not in result.stdout  # never stored, so never shown
    result = invoke(built, "runs", "show", built.train_run)
    assert result.exit_code == 0 and "runs/train/sft/model" in result.stdout and "final_loss" in result.stdout

    result = invoke(built, "runs", "show", "train_nothing")
    assert result.exit_code == 2 and "no run 'train_nothing'" in result.output


@pytest.mark.bwrap
def test_json_reaches_a_script_through_a_pipe(built):
    cmd = [sys.executable, "-m", "coworkenv", "tasks", "list", "--status", "admitted", "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                          env={"COWORKENV_STORE": str(built.path), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert [r["id"] for r in json.loads(done.stdout)] == sorted(built.admitted)
    table = subprocess.run(cmd[:-1], capture_output=True, text=True, timeout=60,
                           env={"COWORKENV_STORE": str(built.path), "PATH": "/usr/bin:/bin"})
    lines = [line for line in table.stdout.splitlines() if line.split()[:1] and line.split()[0] in built.admitted]
    assert len(lines) == len(built.admitted)  # one line per task, whole ids first

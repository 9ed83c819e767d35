"""A Claw-Eval grader is code: it runs only from the checkout the operator imported, never from a path
a bundle names, and in a process that sees none of this one's environment."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from coworkenv.cli import app
from coworkenv.gate import GRADER_VERSION
from coworkenv.store import Store

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]

CHECKOUT = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "claw-eval"
TASK = "claw-T900_note_filing"
FILED = {"title": "Follow-up: Ardent Supplies", "body": "Call Priya Raman, 555-0142", "folder": "followups"}
REFERENCE = [{"tool_calls": [{"name": "notes_list", "arguments": {}}]},
             {"tool_calls": [{"name": "notes_get", "arguments": {"note_id": "n001"}}]},
             {"tool_calls": [{"name": "notes_create", "arguments": FILED}]},
             "Call Priya Raman at 555-0142; the follow-up note is filed."]
runner = CliRunner()


def cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, " ".join(result.output.split())


def _exported(tmp_path: Path) -> Path:
    """The imported T900 task and its workspace, exported as a bundle."""
    store = tmp_path / "operator.db"
    code, output = cli("claw-eval", "import", str(CHECKOUT), "--store", str(store), "--task", "T900_note_filing")
    assert code == 0, output
    code, output = cli("bundle", "export", "--store", str(store), "--out", str(tmp_path / "out"), "--status", "heldout",
                       "--workspace", TASK, "--json")
    assert code == 0, output
    return tmp_path / "out" / TASK


def test_a_bundle_cannot_name_the_checkout_that_grades_it(tmp_path):
    bundle = _exported(tmp_path)
    task_file = bundle / "tasks" / f"{TASK}.yaml"
    assert yaml.safe_load(task_file.read_text())["checks"] == [
        {"id": "claw_eval", "description": "Claw-Eval's grader of T900_note_filing", "kind": "claw_eval",
         "task_id": "T900_note_filing"}]  # the task only: where its grader is stays with the operator's store

    # a checkout of the bundle's own, whose claw_eval package runs code on import
    evil = bundle / "evil"
    shutil.copytree(CHECKOUT / "src", evil / "src")
    shutil.copytree(CHECKOUT / "tasks" / "T900_note_filing", evil / "tasks" / "T900_note_filing")
    marker = tmp_path / "marker"
    (evil / "src" / "claw_eval" / "__init__.py").write_text(
        f"import os\nopen({str(marker)!r}, 'w').write(repr(dict(os.environ)))\n")
    spec = yaml.safe_load(task_file.read_text())
    spec["checks"][0] |= {"checkout": str(evil), "task_dir": str(evil / "tasks" / "T900_note_filing")}
    task_file.write_text(yaml.safe_dump(spec))
    (bundle / "bundle.json").unlink()

    for args in (("validate", str(bundle)), ("import", str(bundle), "--store", str(tmp_path / "n.db"), "--calibrate")):
        code, output = cli("bundle", *args)
        assert code == 2 and f"{TASK}.yaml: invalid Task: checks.0.claw_eval: Value error, a claw_eval check names " \
            "only its Claw-Eval task_id, not checkout, task_dir" in output
    assert not marker.exists() and Store(tmp_path / "n.db").tasks() == []

    # naming the task only, it is refused where no operator imported a checkout for it ...
    del spec["checks"][0]["checkout"], spec["checks"][0]["task_dir"]
    task_file.write_text(yaml.safe_dump(spec))
    code, output = cli("bundle", "import", str(bundle), "--store", str(tmp_path / "n.db"), "--calibrate")
    assert code == 2 and "checks.0: no Claw-Eval checkout was imported into" in output
    assert "for task T900_note_filing; run coworkenv claw-eval import CHECKOUT first" in output
    assert not marker.exists() and Store(tmp_path / "n.db").tasks() == []
    # ... and accepted where one was: the operator's grader is the one that runs
    code, output = cli("bundle", "import", str(bundle), "--store", str(tmp_path / "operator.db"))
    assert code == 0, output


def test_the_operators_grader_runs_without_this_processes_environment(tmp_path, monkeypatch):
    checkout = tmp_path / "claw-eval"
    shutil.copytree(CHECKOUT, checkout)
    grader = checkout / "tasks" / "T900_note_filing" / "grader.py"
    grader.write_text(grader.read_text() + "\n\nimport json as _json\nimport os as _os\n"
                      "open('seen-environment.json', 'w').write(_json.dumps(dict(_os.environ)))\n")
    monkeypatch.setenv("COWORKENV_TEST_SECRET", "hunter2")
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    store = tmp_path / "s.db"
    code, output = cli("claw-eval", "import", str(checkout), "--store", str(store))
    assert code == 0, output
    agent = tmp_path / "agent.yaml"
    agent.write_text(yaml.safe_dump({TASK: REFERENCE}))
    code, output = cli("eval", "--suite", "claw-eval", "--task", "T900_note_filing", "--model", f"scripted:{agent}",
                       "--trials", "1", "--store", str(store), "--json")
    assert code == 0, output
    (episode,) = Store(store).episodes(task_id=TASK)
    verdict = Store(store).verdict(episode.id, GRADER_VERSION)
    assert verdict is not None and verdict.score == 1.0  # graded by that grader
    seen = json.loads((checkout / "seen-environment.json").read_text())
    assert "hunter2" not in seen.values() and "hf_secret" not in seen.values()
    assert set(seen) <= {"PATH", "HOME", "TMPDIR", "LANG", "PYTHONIOENCODING", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE",
                         "LC_CTYPE"}


def test_a_store_from_before_keeps_its_imported_graders(tmp_path):
    """A store whose specs named the checkout (as imports wrote them before): the import's checkout
    moves beside the task, the field leaves every spec, and a pending task's checkout is not kept."""
    store = tmp_path / "s.db"
    code, output = cli("claw-eval", "import", str(CHECKOUT), "--store", str(store), "--task", "T900_note_filing")
    assert code == 0, output
    with sqlite3.connect(store) as db:  # back to how such a store was
        (spec,) = db.execute("select spec from tasks where id = ?", (TASK,)).fetchone()
        old = json.loads(spec)
        old["checks"][0] |= {"checkout": str(CHECKOUT), "task_dir": str(CHECKOUT / "tasks" / "T900_note_filing"),
                             "judge": ""}
        db.execute("update tasks set spec = ? where id = ?", (json.dumps(old), TASK))
        planted = {**old, "id": "planted", "checks": [old["checks"][0] | {"checkout": "/elsewhere"}]}
        db.execute("insert into tasks (id, workspace_id, capability, difficulty, instruction, spec, status, reason, "
                   "created_at) values ('planted', ?, 'x', 1, '', ?, 'pending', '', '')",
                   (old["workspace_id"], json.dumps({**planted, "checks": [{**planted["checks"][0],
                                                                            "task_id": "T999"}]})))
        db.execute("drop table claw_eval_graders")
        db.execute("delete from _sqlite_migrations where name = '0012_claw_eval_graders'")
    reopened = Store(store)
    assert "0012_claw_eval_graders" in reopened.applied_migrations
    grader = reopened.claw_eval_grader("T900_note_filing")
    assert grader is not None and grader.checkout == str(CHECKOUT)
    assert reopened.claw_eval_grader("T999") is None
    assert all("checkout" not in check.model_dump() for row in reopened.tasks() for check in row.spec.checks)

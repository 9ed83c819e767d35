"""``coworkenv draft``: a scripted model's drafts, repaired and admitted, with the repair rate per
round; bad input named in one line before anything is stored."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from coworkenv.cli import app
from coworkenv.store import Store
from coworkenv.workspace import build_workspace, write_initial_state

runner = CliRunner()


def lookup_draft(tmp_path: Path) -> str:
    """A right lookup task of the seed-0 workspace: the city of its first organisation."""
    conn = sqlite3.connect(write_initial_state(build_workspace(0), tmp_path / "state.db"))
    try:
        org_id, name, city = conn.execute(
            "select id, name, city from contacts_contacts where kind = 'organisation' and city != '' "
            "order by id limit 1").fetchone()
    finally:
        conn.close()
    return yaml.safe_dump({
        "difficulty": 1,
        "instruction": f"Which city is {name} based in, according to my address book?",
        "checks": [{"id": "city", "kind": "answer", "description": f"the answer gives {name}'s city",
                    "contains": [city]}],
        "reference": [{"tool": "contacts_get_contact", "arguments": {"id": org_id}}],
        "reference_answer": f"{name} is based in {city}.",
        "forbidden_tools": ["contacts_delete_contact"],
    }, sort_keys=False)


@pytest.mark.bwrap
def test_draft_repairs_a_task_and_reports_the_rate_per_round(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    right = lookup_draft(tmp_path)
    Path("replies.yaml").write_text(yaml.safe_dump([right.replace("reference:", "solution:"), right]))

    result = runner.invoke(app, ["draft", "--provider", "scripted:replies.yaml", "--capability", "lookup",
                                 "-n", "1", "--rounds", "2", "--store", "s.db", "--json"])

    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["requests"], summary["attempts"], summary["admitted"]) == (1, 2, 1)
    assert summary["outcomes"] == {"invalid": 1, "admitted": 1}
    assert summary["rounds"] == {"1": {"reached": 1, "admitted": 0, "rate": 0.0},
                                 "2": {"reached": 1, "admitted": 1, "rate": 1.0}}
    store = Store(tmp_path / "s.db")
    try:
        drafts = store.task_drafts()
        assert [(d.round, d.outcome) for d in drafts] == [(1, "invalid"), (2, "admitted")]
        assert "reference: Field required" in drafts[0].feedback
        assert [t.id for t in store.tasks(status="admitted")] == summary["tasks"] == [drafts[1].task_id]
    finally:
        store.close()


@pytest.mark.bwrap
def test_draft_names_the_requests_it_could_not_get_admitted(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("replies.yaml").write_text(yaml.safe_dump(["Sorry, I cannot write that task."]))

    result = runner.invoke(app, ["draft", "--provider", "scripted:replies.yaml", "--capability", "lookup",
                                 "--rounds", "1", "--store", "s.db"])

    assert result.exit_code == 0, result.output
    output = " ".join(result.output.split())
    assert "attempts 1 (invalid 1), admitted 0" in output and "round 1: 0 of 1 (0%)" in output
    assert "not admitted" in output and "one YAML mapping (a task), not str" in output


@pytest.mark.bwrap
def test_a_script_that_runs_out_stops_the_run_with_the_failure_code(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("replies.yaml").write_text(yaml.safe_dump(["not a task"]))
    result = runner.invoke(app, ["draft", "--provider", "scripted:replies.yaml", "--capability", "lookup",
                                 "--rounds", "2", "--store", "s.db"])
    output = " ".join(result.output.split())
    assert result.exit_code == 1, result.output
    assert "has 1 replies and all were given" in output and "the attempts before it are stored" in output
    assert "Traceback" not in output


@pytest.mark.parametrize(("args", "problem"), [
    (["--provider", "scripted:missing.yaml", "--capability", "lookup"], "no replies file at missing.yaml"),
    (["--provider", "scripted:", "--capability", "lookup"], "needs a replies file"),
    (["--provider", "gemini:x", "--capability", "lookup"], "unknown provider 'gemini:x'"),
    (["--provider", "oracle", "--capability", "lookup"], "cannot draft tasks"),
    (["--provider", "scripted:replies.yaml", "--capability", "telepathy"], "unknown capability 'telepathy'"),
    (["--provider", "scripted:replies.yaml", "--capability", "lookup", "--app", "fax"], "unknown app 'fax'"),
])
def test_bad_input_is_named_in_one_line_before_anything_is_stored(tmp_path, monkeypatch, args, problem):
    monkeypatch.chdir(tmp_path)
    Path("replies.yaml").write_text(yaml.safe_dump(["a draft"]))
    result = runner.invoke(app, ["draft", *args, "--store", "s.db"])
    output = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert problem in output and output.count("error:") == 1 and "Traceback" not in output
    assert not (tmp_path / "s.db").exists()

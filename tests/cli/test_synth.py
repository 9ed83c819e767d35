"""``coworkenv synth --profile FILE``: an eval profile spends the task budget where the model fails."""

import json
from collections import Counter

import pytest
from typer.testing import CliRunner

from coworkenv.cli import app
from coworkenv.store import Store

runner = CliRunner()


def _profile(pass_rates: dict[str, float]) -> dict:
    return {"version": 1, "eval_run": "eval_x", "model": "m", "k": 1, "pass_rates": {
        capability: {"1": {"pass_rate": rate, "tasks": 2, "trials": 4}} for capability, rate in pass_rates.items()}}


def _capabilities(store_path) -> Counter:
    store = Store(store_path)
    try:
        return Counter(row.capability for row in store.tasks())
    finally:
        store.close()


@pytest.mark.bwrap
def test_a_profile_shifts_tasks_to_the_capability_the_model_fails(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "profile.json").write_text(json.dumps(_profile({"lookup": 1.0, "single_write": 0.0})))
    flags = ["-n", "6", "--capability", "lookup", "--capability", "single_write", "--concurrency", "3"]

    flat = runner.invoke(app, ["synth", "--store", "flat.db", *flags])
    assert flat.exit_code == 0, flat.output
    assert _capabilities(tmp_path / "flat.db") == {"lookup": 3, "single_write": 3}

    weighted = runner.invoke(app, ["synth", "--store", "weighted.db", *flags, "--profile", "profile.json"])
    assert weighted.exit_code == 0, weighted.output
    counts = _capabilities(tmp_path / "weighted.db")
    assert sum(counts.values()) == 6
    assert counts["single_write"] > 3 > counts["lookup"] >= 1  # a mastered capability still gets a task
    assert f"lookup {counts['lookup']}, single_write {counts['single_write']}" in " ".join(weighted.output.split())


@pytest.mark.parametrize(("content", "problem"), [
    (json.dumps(_profile({"lookup": 2.0})), "invalid profile"),  # a pass rate above 1
    (json.dumps({"pass_rates": {"lookup": "most"}}), "invalid profile"),
    ("{not json", "not a JSON profile"),
    (None, "no such profile"),
])
def test_a_malformed_profile_is_named_before_anything_runs(tmp_path, monkeypatch, content, problem):
    monkeypatch.chdir(tmp_path)
    if content is not None:
        (tmp_path / "bad.json").write_text(content)
    result = runner.invoke(app, ["synth", "--store", "s.db", "-n", "3", "--profile", "bad.json"])
    output = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert "bad.json" in output and problem in output
    assert "Traceback" not in output and not (tmp_path / "s.db").exists()  # nothing was generated


@pytest.mark.bwrap
def test_a_budget_not_met_says_which_capabilities_ran_out_and_why(tmp_path):
    """Asked for more tasks than a workspace of one app can give, synth says how many were not
    generated, for which capabilities and why, instead of a total that silently falls short."""
    store = str(tmp_path / "s.db")
    result = runner.invoke(app, ["synth", "--store", store, "-n", "4", "--app", "calendar", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    missing = summary["asked"] - summary["generated"]
    assert missing > 0 and sum(summary["not_generated"].values()) == missing
    human = runner.invoke(app, ["synth", "--store", store, "-n", "4", "--app", "calendar"])
    lines = human.stderr.splitlines()
    assert any(line.startswith(f"asked 4: generated {summary['generated']}, ") for line in lines)
    said = next(line for line in lines if "not generated" in line)
    assert said.strip().startswith(f"not generated {missing}: ") and "found nothing new to make" in said
    assert all(f"{capability} {count}" in said for capability, count in summary["not_generated"].items())


@pytest.mark.bwrap
def test_per_workspace_spreads_the_tasks_over_more_workspaces(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    flags = ["-n", "4", "--capability", "lookup", "--concurrency", "2"]
    spread = runner.invoke(app, ["synth", "--store", "spread.db", *flags, "--per-workspace", "1"])
    assert spread.exit_code == 0, spread.output
    grouped = runner.invoke(app, ["synth", "--store", "grouped.db", *flags])
    assert grouped.exit_code == 0, grouped.output

    def workspaces(path: str) -> set[str]:
        store = Store(tmp_path / path)
        try:
            return {row.workspace_id for row in store.tasks()}
        finally:
            store.close()

    assert len(workspaces("spread.db")) == 4 and len(workspaces("grouped.db")) == 1
    refused = runner.invoke(app, ["synth", "--store", "never.db", *flags, "--per-workspace", "0"])
    assert refused.exit_code == 2 and "--per-workspace" in refused.output
    assert not (tmp_path / "never.db").exists()

"""``coworkenv demo --full``: bad settings are named before anything runs; a small run reports both serving paths."""

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from coworkenv.cli import app
from coworkenv.store import Store

runner = CliRunner()


def test_full_demo_names_bad_settings(tmp_path):
    result = runner.invoke(app, ["demo", "--full", "--dir", str(tmp_path / "d"), "--serve", "tpu"])
    assert result.exit_code == 2 and "serve" in result.output
    result = runner.invoke(app, ["demo", "--full", "--dir", str(tmp_path / "d"), "--capability", "telepathy"])
    assert result.exit_code == 2 and "telepathy" in result.output
    result = runner.invoke(app, ["demo", "--full", "--dir", str(tmp_path / "d"), "--app", "teleport"])
    assert result.exit_code == 2 and "unknown app 'teleport'" in result.output
    assert not (tmp_path / "d").exists()  # nothing was created


@pytest.mark.slow
@pytest.mark.bwrap
def test_full_demo_evaluates_the_trained_model_in_process_and_through_vllm(tmp_path, vllm_interpreter):
    """A small --full run: where vLLM is installed, the trained model is played on both serving
    paths, and the two are reported side by side, trial by trial."""
    result = subprocess.run(
        [sys.executable, "-m", "coworkenv", "demo", "--full", "--dir", str(tmp_path / "d"), "-n", "8", "--steps", "5",
         "--eval-tasks", "3", "--capability", "lookup", "--app", "mail", "--app", "calendar", "--app", "files",
         "--vllm-python", vllm_interpreter, "--json"],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout)
    serving = summary["serving"]
    assert set(serving["pass_rate"]) == {"local", "vllm"} and serving["trials"] == 3
    assert serving["pass_rate"]["local"] == summary["overall"]["trained"]  # the table shows the in-process path
    assert serving["agreement"] == 1 - len(serving["disagreements"]) / 3
    assert {"eval trained (local)", "eval trained (vllm)"} <= set(summary["stage_seconds"])
    runs = {r["model"] for r in json.loads(subprocess.run(
        [sys.executable, "-m", "coworkenv", "runs", "list", "--kind", "eval", "--store",
         str(tmp_path / "d" / "coworkenv.db"), "--json"], capture_output=True, text=True, check=True).stdout)}
    assert any(m.startswith("openai:trained@") for m in runs) and any(m.startswith("hf:") for m in runs)
    # training and held-out tasks alike on workspaces of the three apps asked for
    store = Store(tmp_path / "d" / "coworkenv.db")
    apps = {json.dumps(sorted(a.name for a in w.spec.apps)) for w in store.workspaces()}
    assert apps == {json.dumps(["calendar", "files", "mail"])}
    assert store.tasks(status="heldout") and store.tasks(status="admitted")

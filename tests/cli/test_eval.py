"""``coworkenv eval``: bad input is named (exit 2); trials that infrastructure failures ended are named
and the command exits 1, without a traceback."""

import json
import socket
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from coworkenv.cli import app
from coworkenv.gate import GRADER_VERSION
from coworkenv.store import Store

runner = CliRunner()


def test_eval_cli_names_bad_input(tmp_path):
    store = tmp_path / "s.db"
    result = runner.invoke(app, ["eval", "--model", "gemini:pro", "--store", str(store)])
    assert result.exit_code == 2 and "unknown provider" in result.output
    result = runner.invoke(app, ["eval", "--model", "oracle", "--style", "verbose", "--store", str(store)])
    assert result.exit_code == 2 and "verbose" in result.output
    result = runner.invoke(app, ["eval", "--model", "oracle", "--trials", "2", "-k", "3", "--store", str(store)])
    assert result.exit_code == 2 and "cannot exceed" in result.output
    result = runner.invoke(app, ["eval", "--model", "oracle", "--store", str(store)])
    assert result.exit_code == 2 and "no store" in result.output
    (tmp_path / "train.jsonl").write_text("{\"messages\": []}\n")
    result = runner.invoke(app, ["eval", "--model", "oracle", "--train-data", str(tmp_path / "train.jsonl")])
    assert result.exit_code == 2 and "task_id" in result.output
    result = runner.invoke(app, ["eval", "--model", "oracle", "--app", "teleport", "--store", str(store)])
    assert result.exit_code == 2 and "unknown app 'teleport'" in result.output and "mail" in result.output
    result = runner.invoke(app, ["eval", "--model", "oracle", "--generator", "magic", "--store", str(store)])
    assert result.exit_code == 2 and "magic" in result.output
    result = runner.invoke(app, ["eval", "--model", "openai:m@http://127.0.0.1:9/v1", "--app", "mail",
                                 "--suite", "claw-eval", "--store", str(store)])
    assert result.exit_code == 2 and "--suite generated only" in result.output


@pytest.mark.bwrap
def test_an_unreachable_model_server_is_named_before_anything_runs(tmp_path):
    Store(tmp_path / "s.db").close()
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = runner.invoke(app, ["eval", "--model", f"openai:m@http://127.0.0.1:{port}/v1",
                                 "--store", str(tmp_path / "s.db"), "-n", "1"])
    assert result.exit_code == 2 and "does not answer" in " ".join(result.output.split())


@pytest.mark.bwrap
def test_trials_ended_by_infrastructure_failures_exit_1(tmp_path, failing_model_server):
    store_path = tmp_path / "s.db"
    Store(store_path).close()
    model = f"openai:m@{failing_model_server}"
    cmd = [sys.executable, "-m", "coworkenv", "eval", "--model", model, "--store", str(store_path), "-n", "2",
           "--capability", "lookup", "--trials", "1", "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert "2 trials ended by infrastructure failures" in " ".join(done.stderr.split())
    summary = json.loads(done.stdout)
    assert len(summary["failures"]) == 2 and summary["overall"]["trials"] == 0

    store = Store(store_path)
    assert store.eval_run(summary["run_id"]).status == "failed"
    episodes = store.episodes(source="eval")
    assert episodes and all((e.status, e.boundary) == ("failed", "model") for e in episodes)
    assert all(store.verdict(e.id, GRADER_VERSION).reason == "infrastructure_error" for e in episodes)
    store.close()

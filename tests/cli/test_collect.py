"""``coworkenv collect``: tasks that infrastructure failures kept from being collected are named,
with exit status 1 and no traceback; the failures are on the episodes."""

import socket
import subprocess
import sys
from collections import Counter

import pytest
from typer.testing import CliRunner

from coworkenv.cli import app
from coworkenv.gate import GRADER_VERSION
from coworkenv.store import Store

runner = CliRunner()


def closed_port() -> int:
    """A loopback port nothing listens on (connections to it are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
@pytest.mark.bwrap
def test_an_unreachable_model_server_exits_1_naming_every_task(tmp_path):
    store_path = tmp_path / "s.db"
    synth = runner.invoke(app, ["synth", "--store", str(store_path), "-n", "3", "--concurrency", "3"])
    assert synth.exit_code == 0, synth.output
    store = Store(store_path)
    tasks = sorted(row.id for row in store.tasks(status="admitted"))
    store.close()
    assert len(tasks) == 3

    provider = f"openai:m@http://127.0.0.1:{closed_port()}/v1"
    cmd = [sys.executable, "-m", "coworkenv", "collect", "--store", str(store_path), "--provider", provider,
           "--retries", "1"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "Traceback" not in output
    text = " ".join(output.split())  # the console wraps long lines
    assert "3 of 3 tasks could not be collected (6 episodes ended by infrastructure failures)" in text
    for task_id in tasks:
        assert f"failed {task_id}: 2 episodes ended by infrastructure failures" in text
    assert text.count("the model did not answer") == 3  # one line per task
    assert len(output.splitlines()) <= 12, output

    store = Store(store_path)
    episodes = store.episodes(source="teacher")
    assert Counter(e.task_id for e in episodes) == dict.fromkeys(tasks, 2)  # --retries 1: two episodes per task
    for episode in episodes:
        assert (episode.status, episode.boundary) == ("failed", "model")
        assert store.verdict(episode.id, GRADER_VERSION).reason == "infrastructure_error"
    store.close()

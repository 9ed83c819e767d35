"""``coworkenv collect``: tasks that infrastructure failures kept from being collected are named,
with exit status 1 and no traceback; the failures are on the episodes. Collectors on one store
share the work through task claims: two at once play each task once, and the claims of one that
was killed are taken over by the next."""

import json
import socket
import subprocess
import sys
import time
from collections import Counter

import anyio
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


def collect_process(store_path, *extra: str) -> subprocess.Popen:
    """``coworkenv collect --json`` on the store, the oracle teacher making no mistakes (one episode a task)."""
    return subprocess.Popen([sys.executable, "-m", "coworkenv", "collect", "--store", str(store_path), "--error-rate",
                             "0", "--json", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=store_path.parent)


def finished(process: subprocess.Popen) -> dict:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    return json.loads(out)


@pytest.mark.slow
@pytest.mark.bwrap
def test_two_collectors_on_one_store_play_each_task_once(tmp_path, six_tasks, copy_store):
    store_path = tmp_path / "s.db"
    copy_store(six_tasks, store_path)
    store = Store(store_path)
    tasks = sorted(row.id for row in store.tasks(status="admitted"))

    first, second = collect_process(store_path, "--concurrency", "1"), collect_process(store_path, "--concurrency", "1")
    summaries = [finished(first), finished(second)]

    episodes = store.episodes(source="teacher")
    assert Counter(e.task_id for e in episodes) == dict.fromkeys(tasks, 1)  # every task, none twice
    assert all(store.verdict(e.id, GRADER_VERSION).admitted for e in episodes)
    assert sum(s["episodes"] for s in summaries) == len(tasks)
    # what one collector played, the other left to it (held, or found collected), or never planned
    for mine, theirs in (summaries, summaries[::-1]):
        assert mine["succeeded"] + mine["elsewhere"] + mine["skipped"] == len(tasks) == theirs["succeeded"] + \
            theirs["elsewhere"] + theirs["skipped"]
    assert store.task_claims() == []  # both gave their claims back
    store.close()


@pytest.mark.slow
@pytest.mark.bwrap
@pytest.mark.anyio
async def test_a_killed_collectors_claims_are_taken_over_by_the_next(tmp_path, six_tasks, copy_store):
    store_path = tmp_path / "s.db"
    copy_store(six_tasks, store_path)
    store = Store(store_path)
    tasks = sorted(row.id for row in store.tasks(status="admitted"))

    killed = collect_process(store_path, "--concurrency", "1")
    with anyio.fail_after(120):  # killed in the middle of an episode of a task it claimed
        while not (playing := store.episodes(source="teacher", status="running")):
            await anyio.sleep(0.02)
    killed.kill()
    killed.communicate()
    left = {c.task_id: c for c in store.task_claims("collect:oracle")}
    assert playing[0].task_id in left and left[playing[0].task_id].expires_at > time.time()  # not expired

    summary = finished(collect_process(store_path))
    assert summary["elsewhere"] == 0  # its claims are the killed collector's: taken over, not waited for
    admitted = [e.task_id for e in store.episodes(source="teacher") if store.verdict(e.id, GRADER_VERSION).admitted]
    assert sorted(admitted) == tasks  # every task once, the interrupted one played again
    interrupted = store.episode(playing[0].id)
    assert interrupted is not None and (interrupted.status, interrupted.boundary) == ("failed", "process")
    assert store.task_claims() == []
    store.close()

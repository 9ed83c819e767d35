"""``coworkenv serve --workers 2``: two worker processes behind one address, each episode in one of
them, every request routed to the worker that holds its episode, in both protocol eras."""

from __future__ import annotations

import os
import subprocess
import sys

import anyio
import httpx
import psutil
import pytest
from mcp import Client

from coworkenv.episodes import EpisodeHost
from coworkenv.gate import GRADER_VERSION
from coworkenv.store import Store

pytestmark = [pytest.mark.bwrap, pytest.mark.slow, pytest.mark.anyio]

EVENT = {"title": "Front test sync", "date": "2026-03-27", "start": "08:00", "end": "08:30"}
KEYS = [f"k{i}" for i in range(6)]


def worker_of(store: Store, episode_id: str) -> str:
    """The process (``host:pid:start``) that ran an episode."""
    row = store.episode(episode_id)
    assert row is not None and row.owner
    return row.owner


async def wait_ended(store: Store, episode_id: str) -> None:
    while (row := store.episode(episode_id)) is None or row.status == "running":
        await anyio.sleep(0.05)


async def test_episodes_spread_over_the_workers_and_each_keeps_its_own(host: EpisodeHost, tasks: list[str],
                                                                        store_path, serve_cli):
    task = tasks[0]
    store = host.store
    operator = {"X-Coworkenv-Operator": "operator-s3cret"}
    env = {**os.environ, "COWORKENV_OPERATOR_TOKEN": "operator-s3cret"}  # the workers read it too
    async with serve_cli("--store", str(store_path), "--workers", "2", ready_path="/tasks", timeout=90,
                         env=env) as base:
        with anyio.fail_after(120):
            # 2026-07-28: an episode per key; six keys, each writes its own event, reads it back from a new
            # connection (which must reach the same worker), and finds none of the others'
            for key in KEYS:
                async with Client(f"{base}/t/{task}/e/{key}/mcp") as client:
                    made = await client.call_tool("calendar_create_event", {**EVENT, "title": f"sync {key}"})
                    assert not made.is_error, made.content
            for key in KEYS:
                async with Client(f"{base}/t/{task}/e/{key}/mcp") as client:
                    found = await client.call_tool("calendar_list_events", {"query": "sync k"})
                    assert [e["title"] for e in found.structured_content["events"]] == [f"sync {key}"]
                    done = await client.call_tool("submit_answer", {"answer": f"done {key}"})
                    assert not done.is_error
            # 2025-11-25: a session opened through the front stays on its worker
            async with Client(f"{base}/t/{task}/mcp", mode="legacy") as client:
                made = await client.call_tool("calendar_create_event", EVENT)
                found = await client.call_tool("calendar_list_events", {"query": EVENT["title"]})
                assert not made.is_error and found.structured_content["count"] == 1
            # the episode API: open, play at /e/{id}/mcp, end, read the verdict, through the front; the
            # operator's evaluation episode is the operator's on whichever worker holds it
            async with httpx.AsyncClient(base_url=base, timeout=30) as http:
                refused = await http.post("/episodes", json={"task": task, "source": "eval"})
                assert refused.status_code == 403 and "X-Coworkenv-Operator" in refused.text
                opened = (await http.post("/episodes", headers=operator, json={"task": task, "source": "eval"})).json()
                async with Client(f"{base}{opened['url']}") as client:
                    assert not (await client.call_tool("calendar_list_events", {})).is_error
                assert (await http.get(f"/episodes/{opened['episode_id']}")).status_code == 403
                assert (await http.post(f"/episodes/{opened['episode_id']}/end", json={})).status_code == 403
                ended = await http.post(f"/episodes/{opened['episode_id']}/end", headers=operator,
                                        json={"answer": "nothing"})
                assert ended.status_code == 200 and ended.json()["status"] == "ended"
                status = (await http.get(f"/episodes/{opened['episode_id']}", headers=operator)).json()
                assert status["verdict"]["grader_version"] == GRADER_VERSION
                # a client's own live episode: its status is its own to read, through the front too
                live = (await http.post("/episodes", json={"task": task})).json()
                assert (await http.get(f"/episodes/{live['episode_id']}")).json()["status"] == "running"
                assert (await http.post(f"/episodes/{live['episode_id']}/end", json={"truncated": True})).status_code == 200
                assert (await http.get("/_coworkenv/load")).status_code == 404  # the workers' own routes stay inside

    live = [e for e in store.episodes(task_id=task, source="live")]
    for episode in live:
        await wait_ended(store, episode.id)
    keyed = [e for e in live if e.provenance.key in KEYS]
    assert sorted(e.provenance.key for e in keyed) == KEYS
    assert len({worker_of(store, e.id) for e in keyed}) == 2  # placed by load over both workers
    for episode in keyed:  # each episode's calls, in order, from the one worker that held it
        assert [c.tool for c in store.tool_calls(episode.id)] == ["calendar_create_event", "calendar_list_events",
                                                                 "submit_answer"]
        assert store.verdict(episode.id, GRADER_VERSION) is not None


async def test_workers_go_with_the_front(store_path, host: EpisodeHost, tasks: list[str], serve_cli):
    async with serve_cli("--store", str(store_path), "--workers", "2", ready_path="/tasks", timeout=90) as base:
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            assert (await http.get("/tasks")).status_code == 200
        workers = _workers_of(store_path)
        assert len(workers) == 2
        sockets = [w.info["cmdline"][-1] for w in workers]
        assert all(os.path.exists(path) for path in sockets)
    # the front was stopped (SIGTERM): its workers are gone with it, and their socket folder
    with anyio.fail_after(30):
        while _workers_of(store_path):
            await anyio.sleep(0.1)
    assert not any(os.path.exists(path) for path in sockets)


def _workers_of(store_path) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        line = " ".join(process.info["cmdline"] or [])
        if "--worker-socket" in line and str(store_path) in line:
            found.append(process)
    return sorted(found, key=lambda p: p.info["cmdline"][-1])


async def test_a_killed_worker_is_started_again_and_collection_loses_and_repeats_nothing(
        host: EpisodeHost, tasks: list[str], store_path, serve_cli, tmp_path):
    """SIGKILL a worker while a teacher collects through the front: the episodes it held end as
    interrupted, the teacher replays them on the other worker, every task ends with exactly one
    admitted episode, the worker is started again, and ``sandbox cleanup`` leaves nothing of it."""
    store = host.store
    sandboxes = tmp_path / "sandboxes"
    sandboxes.mkdir()
    # the workers' episode directories, where cleanup looks; the operator credential, which serve and collect share
    env = {**os.environ, "TMPDIR": str(sandboxes), "COWORKENV_OPERATOR_TOKEN": "operator-s3cret"}
    async with serve_cli("--store", str(store_path), "--workers", "2", ready_path="/tasks", timeout=90, env=env) as base:
        victim = _workers_of(store_path)[0]
        collect = subprocess.Popen([sys.executable, "-m", "coworkenv", "collect", "--store", str(store_path), "--url", base,
                                    "--error-rate", "0", "--concurrency", "4", "--retries", "4", "--json"],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        with anyio.fail_after(120):
            while not any(e.owner and f":{victim.pid}:" in e.owner and e.status == "running"
                          for e in store.episodes(source="teacher")):
                assert collect.poll() is None, collect.stdout.read() if collect.stdout else ""
                await anyio.sleep(0.01)
        victim.kill()
        with anyio.fail_after(240):
            while collect.poll() is None:
                await anyio.sleep(0.1)
        output = collect.stdout.read() if collect.stdout else ""
        assert collect.returncode == 0, output
        with anyio.fail_after(60):  # started again on its socket, by the front
            while len(_workers_of(store_path)) < 2 or victim.pid in {p.pid for p in _workers_of(store_path)}:
                await anyio.sleep(0.1)
        with anyio.fail_after(60):  # the new process marks what the dead one held as it starts, not before
            while any(e.status == "running" for e in store.episodes(source="teacher")):
                await anyio.sleep(0.1)

    teacher = store.episodes(source="teacher")
    killed = [e for e in teacher if e.owner and f":{victim.pid}:" in e.owner]
    assert killed and all(e.status != "running" for e in teacher)
    assert any(e.status == "failed" for e in killed)  # what the dead worker held ended as interrupted
    for task in tasks:  # nothing lost, nothing twice
        admitted = [e for e in teacher if e.task_id == task and (v := store.verdict(e.id, GRADER_VERSION)) and v.admitted]
        assert len(admitted) == 1, task
    result = await anyio.run_process([sys.executable, "-m", "coworkenv", "sandbox", "cleanup", "--root", str(sandboxes),
                                      "--store", str(store_path), "--no-docker", "--json"], check=False)
    assert result.returncode == 0, result.stdout
    assert not list(sandboxes.glob("coworkenv-ep-*"))

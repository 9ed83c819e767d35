"""``coworkenv serve --workers 2``: two worker processes behind one address, each episode in one of
them, every request routed to the worker that holds its episode, in both protocol eras."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys

import anyio
import httpx
import psutil
import pytest
from mcp import Client, MCPError

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


AUTH = {"authorization": "Bearer client-s3cret"}
INTERNAL_TARGETS = ["/%5Fcoworkenv/load", "/%5fcoworkenv/owner?path=/t/x/e/k/mcp", "//_coworkenv/load",
                    "/t/../_coworkenv/load", "/./_coworkenv/load", "/%2E%2E/_coworkenv/load", "/_coworkenv%2Fload",
                    "http://127.0.0.1/_coworkenv/load", "HTTP://localhost:1/%5Fcoworkenv/load"]


def _front_of(store_path) -> psutil.Process:
    """The front's process: ``coworkenv serve --workers`` itself, not one of its workers."""
    for process in psutil.process_iter(["cmdline"]):
        line = " ".join(process.info["cmdline"] or [])
        if "--workers" in line and "--worker-socket" not in line and str(store_path) in line:
            return process
    raise LookupError("no front process")


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


async def _megabytes(count: int):
    """``count`` MiB of body, streamed: one 1 MiB block sent again and again, never the whole in memory."""
    block = b"x" * (1 << 20)
    for _ in range(count):
        yield block


async def _raw(port: int, target: str, headers: str = "") -> tuple[int, bytes]:
    """A GET with exactly this request target, bytes as written; the status and body of its answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {target} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n{headers}connection: close\r\n\r\n".encode())
    answer = await reader.read()
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


async def test_the_front_reads_no_body_it_refuses_and_no_target_reaches_the_workers_own_routes(
        host: EpisodeHost, tasks: list[str], store_path, serve_cli):
    """A 200 MiB body, with and without the token, declared or chunked: refused before the front reads
    it, and the front's memory stays where it was. The workers' own routes, spelt with percent-encoding,
    dot segments, doubled slashes or an absolute-form target: 404 from outside."""
    env = {**os.environ, "COWORKENV_TOKEN": "client-s3cret"}
    async with serve_cli("--store", str(store_path), "--workers", "2", ready_path="/tasks", timeout=90,
                         env=env) as base:
        port = int(base.rsplit(":", 1)[1])
        front = _front_of(store_path)
        with anyio.fail_after(120):
            async with httpx.AsyncClient(base_url=base, timeout=60) as http:
                for _ in range(3):  # the front's buffers and the clients to its workers, as any request needs them
                    assert (await http.get("/tasks", headers=AUTH)).status_code == 200
                    assert (await http.post("/episodes", headers=AUTH, json={"task": "no-such-task"})).status_code == 400
                before = _rss_mib(front.pid)
                declared = {"content-length": str(200 << 20), "content-type": "application/json"}
                refused = await http.post("/episodes", headers={**AUTH, **declared}, content=_megabytes(200))
                assert refused.status_code == 413 and "request body over" in refused.text
                refused = await http.post("/episodes", headers=declared, content=_megabytes(200))  # no token
                assert refused.status_code == 401
                grown = _rss_mib(front.pid) - before
                assert grown < 8, f"the front grew by {grown:.1f} MiB"
                refused = await http.post("/episodes", headers={**AUTH, "content-type": "application/json"},
                                          content=_megabytes(200))  # chunked: counted as it comes
                assert refused.status_code == 413 and "request body over" in refused.text
                grown = _rss_mib(front.pid) - before
                assert grown < 8, f"the front grew by {grown:.1f} MiB"
                assert (await http.get("/tasks", headers=AUTH)).status_code == 200  # and serves on

            token = "authorization: Bearer client-s3cret\r\n"
            for target in INTERNAL_TARGETS:
                status, body = await _raw(port, target, token)
                assert status == 404 and b'"open"' not in body and b'"owns"' not in body, (target, status, body)
            # the same spellings of an ordinary route reach it
            for target in ["/%74asks", "//tasks", "/t/../tasks", f"http://127.0.0.1:{port}/tasks"]:
                status, body = await _raw(port, target, token)
                assert status == 200 and body.startswith(b"["), (target, status, body)
            status, _ = await _raw(port, "http://evil.example/tasks", token)
            assert status == 421  # an absolute-form target's host is the request's Host, checked as any


async def test_caps_and_the_client_rate_hold_for_all_workers_together(host: EpisodeHost, tasks: list[str],
                                                                      store_path, serve_cli):
    """With ``--max-episodes-per-client 2`` and two workers one client holds two episodes, not two per
    worker, and two 2025-11-25 sessions; a slot given back opens again. ``--client-rate`` counts the
    client's requests to both workers in one bucket (burst 1,000)."""
    task = tasks[0]
    async with serve_cli("--store", str(store_path), "--workers", "2", "--max-episodes-per-client", "2",
                         "--client-rate", "1", "--rate", "0", ready_path="/tasks", timeout=90) as base:
        with anyio.fail_after(120):
            async with contextlib.AsyncExitStack() as stack:
                held, refused = [], []
                for key in ("c0", "c1", "c2", "c3"):  # placed by load: one worker, the other, the first, ...
                    client = await stack.enter_async_context(Client(f"{base}/t/{task}/e/{key}/mcp"))
                    try:
                        await client.call_tool("calendar_list_events", {})
                        held.append(key)
                    except MCPError as exc:
                        assert "too many open episodes for" in str(exc)
                        refused.append(key)
                assert (len(held), len(refused)) == (2, 2)
                async with Client(f"{base}/t/{task}/e/{held[0]}/mcp") as first:
                    assert not (await first.call_tool("submit_answer", {"answer": "done"})).is_error
                # the slot is back: one more opens, and then no more
                async with Client(f"{base}/t/{task}/e/c4/mcp") as again:
                    assert not (await again.call_tool("calendar_list_events", {})).is_error
                async with Client(f"{base}/t/{task}/e/c5/mcp") as more:
                    with pytest.raises(MCPError, match="too many open episodes"):
                        await more.call_tool("calendar_list_events", {})

                for _ in range(2):  # 2025-11-25 sessions, a slot each from initialize on
                    legacy = await stack.enter_async_context(Client(f"{base}/t/{task}/mcp", mode="legacy"))
                    assert (await legacy.list_tools()).tools
                with pytest.raises(BaseExceptionGroup) as third:
                    async with Client(f"{base}/t/{task}/mcp", mode="legacy") as legacy:
                        await legacy.list_tools()
                assert third.group_contains(MCPError, match="too many open sessions for", depth=2)

            async with httpx.AsyncClient(base_url=base, timeout=30) as http:
                statuses = await _flood(http, 1500)
            limited = statuses.count(429)
            assert limited >= 400 and len(statuses) - limited <= 1000 + 60, (len(statuses) - limited, limited)


async def _flood(http: httpx.AsyncClient, count: int, concurrency: int = 8) -> list[int]:
    """``count`` GETs of a path no route has (each reaches a worker in turn), ``concurrency`` at a time."""
    statuses: list[int] = []

    async def one_after_another(n: int) -> None:
        for _ in range(n):
            statuses.append((await http.get("/nowhere")).status_code)

    async with anyio.create_task_group() as group:
        for _ in range(concurrency):
            group.start_soon(one_after_another, count // concurrency)
    return statuses

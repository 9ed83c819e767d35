"""``coworkenv serve --workers 2``: two worker processes behind one address, each episode in one of
them, every request routed to the worker that holds its episode, in both protocol eras."""

from __future__ import annotations

import anyio
import httpx
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
    async with serve_cli("--store", str(store_path), "--workers", "2", ready_path="/tasks", timeout=90) as base:
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
            # the episode API: open, play at /e/{id}/mcp, end, read the verdict, through the front
            async with httpx.AsyncClient(base_url=base, timeout=30) as http:
                opened = (await http.post("/episodes", json={"task": task, "source": "eval"})).json()
                async with Client(f"{base}{opened['url']}") as client:
                    assert not (await client.call_tool("calendar_list_events", {})).is_error
                ended = await http.post(f"/episodes/{opened['episode_id']}/end", json={"answer": "nothing"})
                assert ended.status_code == 200 and ended.json()["status"] == "ended"
                status = (await http.get(f"/episodes/{opened['episode_id']}")).json()
                assert status["verdict"]["grader_version"] == GRADER_VERSION
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
    # the front was stopped (SIGTERM): its workers are gone with it, and their socket folder
    result = await anyio.run_process(["pgrep", "-f", f"--store {store_path} .*--worker-socket"], check=False)
    assert result.stdout.strip() == b""

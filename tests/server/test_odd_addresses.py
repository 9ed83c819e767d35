"""Odd requests at a task's address, as a new user makes them: an unknown task is refused with an error
naming it (its ``initialize`` is no success), a key whose episode has ended says so and where to open
a new one, and a one-shot ``tools/call`` (a single request, no DELETE after it) leaves no episode
running past the fresh idle timeout."""

from __future__ import annotations

import anyio
import httpx
import pytest
from mcp import Client, MCPError

from coworkenv.episodes import EpisodeHost
from coworkenv.gate import GRADER_VERSION
from coworkenv.server import ServeSettings, running_http_server

pytestmark = [pytest.mark.bwrap, pytest.mark.anyio]

INITIALIZE = {"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "curl", "version": "1"}}}
HEADERS = {"accept": "application/json, text/event-stream"}


def messages(error: BaseException) -> str:
    """Every message of an error and of what it groups (a client's task group wraps what it raised)."""
    if isinstance(error, BaseExceptionGroup):
        return " | ".join(messages(e) for e in error.exceptions)
    return error.message if isinstance(error, MCPError) else str(error)


async def test_an_unknown_task_is_refused_naming_it(host: EpisodeHost, tasks: list[str]):
    with anyio.fail_after(30):
        async with running_http_server(host) as base, httpx.AsyncClient(base_url=base, headers=HEADERS) as http:
            for path in ("/t/nope/mcp", "/t/nope/e/k1/mcp", f"/w/{host.task(tasks[0]).workspace_id}/t/nope/mcp"):
                answered = await http.post(path, json=INITIALIZE)
                assert answered.status_code == 404, (path, answered.text)
                error = answered.json()
                assert error["id"] == 7 and "no task 'nope' on this server" in error["error"]["message"]
                assert "mcp-session-id" not in answered.headers  # no session was made for it
            known = await http.post(f"/t/{tasks[0]}/mcp", json=INITIALIZE)
            assert known.status_code == 200 and "mcp-session-id" in known.headers
            with pytest.raises(BaseException) as refused:  # a modern client hears it as it connects
                async with Client(f"{base}/t/nope/e/k2/mcp") as client:
                    await client.list_tools()
            assert "no task 'nope' on this server" in messages(refused.value)
    assert host.store.episodes(source="live") == []


async def test_an_ended_key_says_so_and_where_to_open_a_new_episode(host: EpisodeHost, tasks: list[str]):
    task = tasks[0]
    with anyio.fail_after(30):
        async with running_http_server(host) as base:
            async with Client(f"{base}/t/{task}/e/once/mcp") as client:
                done = await client.call_tool("submit_answer", {"answer": "Done."})
            episode_id = done.structured_content["episode_id"]
            with pytest.raises(BaseException) as refused:  # the snippet run a second time
                async with Client(f"{base}/t/{task}/e/once/mcp") as again:
                    await again.call_tool("calendar_list_events", {})
            said = messages(refused.value)
            assert f"episode {episode_id} at key 'once' has ended" in said
            assert f"open a new one at /t/{task}/e/<a new key>/mcp" in said
            async with Client(f"{base}/t/{task}/e/later/mcp") as client:  # in the client that ended it, too
                await client.call_tool("submit_answer", {"answer": "Done."})
                with pytest.raises(MCPError, match="at key 'later' has ended"):
                    await client.call_tool("calendar_list_events", {})
            async with Client(f"{base}/t/{task}/e/twice/mcp") as fresh:  # a new key: a new episode
                assert not (await fresh.call_tool("calendar_list_events", {})).is_error
    assert [c.tool for c in host.store.tool_calls(episode_id)] == ["submit_answer"]  # nothing more recorded


async def test_a_one_shot_call_ends_after_the_fresh_idle_timeout(host: EpisodeHost, tasks: list[str]):
    task = tasks[0]
    settings = ServeSettings(episode_idle_timeout=600, fresh_idle_timeout=2.0)
    with anyio.fail_after(60):
        async with running_http_server(host, settings) as base:
            async with Client(f"{base}/t/{task}/e/one-shot/mcp") as client:  # one tools/call, then gone
                assert not (await client.call_tool("calendar_list_events", {})).is_error
            async with Client(f"{base}/t/{task}/e/working/mcp") as client:  # an agent at work: two calls
                for _ in range(2):
                    await client.call_tool("calendar_list_events", {})
            # the store, not the open episodes: on a slow machine the one-shot may have ended already
            (one_shot,) = [e for e in host.store.episodes(source="live") if e.key == "one-shot"]
            while one_shot.id in host.open_episodes:  # before: open until the 600 s idle timeout
                await anyio.sleep(0.05)
            assert [e.provenance.key for e in host.open_episodes.values()] == ["working"]
    row = host.store.episode(one_shot.id)
    assert row is not None and row.status == "ended" and host.store.verdict(one_shot.id, GRADER_VERSION) is not None

"""Other people's MCP clients against the HTTP server: the OpenAI Agents SDK and the MCP Inspector CLI.

Each yields a live episode that is recorded and, once it ends, graded once like the teacher's.
"""

from __future__ import annotations

import json

import anyio
import pytest

from coworkenv.episodes import EpisodeHost
from coworkenv.gate import GRADER_VERSION
from coworkenv.server import running_http_server
from coworkenv.store import EpisodeRow, Store

pytestmark = [pytest.mark.bwrap, pytest.mark.anyio]


def live_episodes(store: Store, task: str) -> list[EpisodeRow]:
    return store.episodes(source="live", task_id=task)


async def test_openai_agents_sdk_lists_and_calls_tools(host: EpisodeHost, tasks: list[str]):
    from agents.mcp import MCPServerStreamableHttp  # the OpenAI Agents SDK (no API key needed for MCP)

    task = tasks[0]
    with anyio.fail_after(60):
        async with running_http_server(host) as base:
            server = MCPServerStreamableHttp({"url": f"{base}/t/{task}/e/agents-sdk/mcp", "timeout": 10},
                                             name="coworkenv", use_structured_content=True)
            async with server:
                tools = {t.name: t for t in await server.list_tools()}
                assert "calendar_get_event" in tools and "submit_answer" in tools
                assert tools["calendar_get_event"].annotations.read_only_hint is True
                event = await server.call_tool("calendar_get_event", {"id": "e01"})
                assert not event.is_error and event.structured_content["id"] == "e01"
                bad = await server.call_tool("calendar_get_event", {"id": 7})
                assert bad.is_error and "'id'" in bad.content[0].text
                done = await server.call_tool("submit_answer", {"answer": "Looked it up."})
                episode_id = done.structured_content["episode_id"]
                # submit_answer ends the episode and grades it before its result comes back.
                verdict = host.store.verdict(episode_id, GRADER_VERSION)
                assert verdict is not None
    calls = host.store.tool_calls(episode_id)
    assert [(c.tool, c.is_error) for c in calls] == [
        ("calendar_get_event", False), ("calendar_get_event", True), ("submit_answer", False)]
    assert calls[0].arguments == {"id": "e01"}
    assert verdict.reason == "malformed_call" and not verdict.admitted
    assert host.store.verdict_count(episode_id) == 1


@pytest.mark.slow
async def test_mcp_inspector_cli_lists_and_calls_tools(host: EpisodeHost, tasks: list[str], inspector_cli: list[str]):
    inspector = inspector_cli
    task = tasks[0]
    with anyio.fail_after(90):
        async with running_http_server(host) as base:
            url = f"{base}/t/{task}/mcp"

            async def inspect(*args: str) -> dict:
                run = await anyio.run_process([*inspector, "--cli", url, "--transport", "http", *args], check=False)
                assert run.returncode == 0, (run.stdout + run.stderr).decode()[-2000:]
                return json.loads(run.stdout)

            listed = await inspect("--method", "tools/list")
            names = [t["name"] for t in listed["tools"]]
            assert "calendar_get_event" in names and names[-1] == "submit_answer"
            called = await inspect("--method", "tools/call", "--tool-name", "calendar_get_event",
                                   "--tool-arg", "id=e01")
            assert called["isError"] is False and called["structuredContent"]["id"] == "e01"
            templates = await inspect("--method", "resources/templates/list")
            assert "coworkenv://calendar/events/{id}" in [t["uriTemplate"] for t in templates["resourceTemplates"]]

            # Each Inspector run is one MCP session; only the one that called a tool opened an episode
            # (listing opens none), and the call is recorded in it.
            episodes = live_episodes(host.store, task)
            assert [[c.tool for c in host.store.tool_calls(e.id)] for e in episodes] == [["calendar_get_event"]]
    # The Inspector leaves its sessions open; the server's shutdown ends their episodes, each graded once.
    for episode in live_episodes(host.store, task):
        assert episode.status == "ended"
        assert host.store.verdict(episode.id, GRADER_VERSION) is not None
        assert host.store.verdict_count(episode.id) == 1

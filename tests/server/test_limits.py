"""Sandbox limits seen through the MCP server: a call over a limit is a tool error, nothing more."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.sandbox import Limits
from coworkenv.server import running_http_server

pytestmark = [pytest.mark.bwrap, pytest.mark.anyio]


async def test_output_limit_is_a_tool_error_and_the_server_keeps_serving(host: EpisodeHost, tasks: list[str],
                                                                        tmp_path: Path):
    task, other = tasks[0], tasks[1]
    # Listing every event returns several KiB; a miss, or one event, fits in 1 KiB.
    limited = EpisodeHost(host.store, EpisodeSettings(cache_dir=tmp_path / "limited",
                                                      limits=Limits(output_bytes=1024)))
    with anyio.fail_after(60):
        async with running_http_server(limited) as base:
            async with Client(f"{base}/t/{task}/e/big/mcp") as a, Client(f"{base}/t/{other}/e/small/mcp") as b:
                over = await a.call_tool("calendar_list_events", {})
                assert over.is_error and over.structured_content is None
                assert "calendar_list_events" in over.content[0].text
                assert "1024 bytes" in over.content[0].text

                # The same episode goes on, and so do the others.
                again = await a.call_tool("calendar_list_events", {"query": "no such meeting"})
                assert not again.is_error and again.structured_content == {"events": [], "count": 0}
                one = await a.call_tool("calendar_get_event", {"id": "e01"})
                assert not one.is_error and one.structured_content["id"] == "e01"
                other_ok = await b.call_tool("mail_read_message", {"id": "m01"})
                assert not other_ok.is_error, other_ok.content

                (episode_id,) = [e.id for e in limited.open_episodes.values() if e.task.id == task]
                calls = limited.store.tool_calls(episode_id)
                assert [(c.is_error, c.error_kind) for c in calls] == [(True, "limit"), (False, None), (False, None)]


async def test_wall_clock_limit_is_a_tool_error(host: EpisodeHost, tasks: list[str], tmp_path: Path):
    # No tool call forks, queries and answers within a microsecond.
    limited = EpisodeHost(host.store, EpisodeSettings(cache_dir=tmp_path / "limited",
                                                      limits=Limits(wall_s=1e-6)))
    with anyio.fail_after(60):
        async with running_http_server(limited) as base:
            async with Client(f"{base}/t/{tasks[0]}/e/slow/mcp") as client:
                for _ in range(2):
                    result = await client.call_tool("calendar_get_event", {"id": "e01"})
                    assert result.is_error and "wall-clock" in result.content[0].text
                done = await client.call_tool("submit_answer", {"answer": "gave up"})
                assert not done.is_error
                episode_id = done.structured_content["episode_id"]
    calls = host.store.tool_calls(episode_id)
    assert [c.error_kind for c in calls] == ["timeout", "timeout", None]
    # A tool's timeout is the agent's failure, not the infrastructure's: the episode ends normally.
    episode = host.store.episode(episode_id)
    assert episode is not None and episode.status == "ended" and episode.error is None

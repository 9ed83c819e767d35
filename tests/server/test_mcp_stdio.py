"""The MCP server over stdio: ``python -m coworkenv serve --stdio`` serves one episode per process."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from coworkenv.episodes import EpisodeHost
from coworkenv.gate import GRADER_VERSION
from coworkenv.store import EpisodeRow

pytestmark = [pytest.mark.bwrap, pytest.mark.slow, pytest.mark.anyio]

ROOT = Path(__file__).resolve().parents[2]
EVENT = {"title": "Stdio test sync", "date": "2026-03-27", "start": "08:00", "end": "08:30"}


def serve_params(task: str, store_path: Path) -> StdioServerParameters:
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "coworkenv", "serve", "--stdio", "--task", task, "--store", str(store_path)],
        env={**os.environ, "PYTHONPATH": pythonpath},
    )


def live_episodes(host: EpisodeHost, task: str) -> list[EpisodeRow]:
    return host.store.episodes(source="live", task_id=task)


@pytest.mark.parametrize(("mode", "version"), [("legacy", "2025-11-25"), ("auto", "2026-07-28")])
async def test_stdio_serves_one_recorded_episode(host: EpisodeHost, tasks: list[str], store_path: Path,
                                                 mode: str, version: str):
    task = tasks[0]
    spec_tools = [t.name for t in host.workspace(host.task(task).workspace_id).tools]
    with anyio.fail_after(90):
        async with Client(serve_params(task, store_path), mode=mode) as client:
            assert client.protocol_version == version
            listed = (await client.list_tools()).tools
            assert [t.name for t in listed] == spec_tools + ["submit_answer"]
            prompt = await client.get_prompt("task")
            assert prompt.messages[0].content.text == host.task(task).instruction

            created = await client.call_tool("calendar_create_event", EVENT)
            assert not created.is_error, created.content
            found = await client.call_tool("calendar_list_events", {"query": EVENT["title"]})
            assert found.structured_content["count"] == 1
            bad = await client.call_tool("calendar_create_event", {"title": "no date"})
            assert bad.is_error and "'date'" in bad.content[0].text

            # The calls reach the store file while the episode runs (written behind, within moments),
            # against this process's episode.
            (episode,) = live_episodes(host, task)
            while len(calls := host.store.tool_calls(episode.id)) < 3:
                await anyio.sleep(0.02)
            assert [c.tool for c in calls] == ["calendar_create_event", "calendar_list_events",
                                               "calendar_create_event"]
            assert calls[0].arguments == EVENT
            assert [c.is_error for c in calls] == [False, False, True]
            assert episode.status == "running"
            assert host.store.verdict(episode.id, GRADER_VERSION) is None

    # The episode ends with the process, its final state kept, graded once on the way out.
    (episode,) = live_episodes(host, task)
    assert episode.status == "ended" and episode.provenance.source == "live"
    assert episode.final_state is not None and EVENT["title"] in episode.final_state
    assert host.store.verdict(episode.id, GRADER_VERSION) is not None
    assert host.store.verdict_count(episode.id) == 1

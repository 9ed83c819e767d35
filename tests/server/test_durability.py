"""``coworkenv serve --sync``: every tool call a client saw answered is in the store, even when the
server is killed (SIGKILL) the moment after (by default calls are written behind, up to 50 ms late)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from coworkenv.store import Store

pytestmark = [pytest.mark.bwrap, pytest.mark.slow, pytest.mark.anyio]

ROOT = Path(__file__).resolve().parents[2]
CALLS = 10


def stdio_server(task: str, store_path: Path, *extra: str) -> StdioServerParameters:
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "coworkenv", "serve", "--stdio", "--task", task, "--store", str(store_path), *extra],
        env={**os.environ, "PYTHONPATH": pythonpath},
    )


async def test_sync_keeps_every_answered_call_through_a_kill(store: Store, tasks: list[str], store_path: Path):
    task = tasks[0]
    answered = []
    with anyio.fail_after(90):
        with contextlib.suppress(Exception):  # the client finds its server gone when it closes
            async with Client(stdio_server(task, store_path, "--sync")) as client:
                for i in range(CALLS):
                    result = await client.call_tool("calendar_list_events", {"query": f"durable-{i}"})
                    assert not result.is_error, result.content
                    answered.append(f"durable-{i}")
                    if i == 0:  # the server process, as its episode names its owner (host:pid:start)
                        (episode,) = store.episodes(source="live", task_id=task)
                        assert episode.owner is not None
                        pid = int(episode.owner.rsplit(":", 2)[1])
                os.kill(pid, signal.SIGKILL)  # right after the last answer came back
    with pytest.raises(ProcessLookupError):  # gone, and reaped by the client on its way out
        os.kill(pid, 0)

    assert len(answered) == CALLS
    (episode,) = store.episodes(source="live", task_id=task)
    assert episode.status == "running"  # killed: nothing ended it
    recorded = [c.arguments.get("query") for c in store.tool_calls(episode.id)]
    assert recorded == answered


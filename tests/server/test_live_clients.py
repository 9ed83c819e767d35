"""What a live client and its operator see: listing opens nothing, an episode left untouched ends
abandoned (ungraded), `submit_answer` tells the client its score and the checks that failed (unless
the operator hides it), the episode records who played it under which key and run tag, the server
logs a line per ended episode, and over stdio a second conversation gets a fresh episode."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp_types import Implementation

from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.gate import GRADER_VERSION
from coworkenv.server import ServeSettings, running_http_server
from coworkenv.store import Provenance
from coworkenv.trainer import Skipped, sft_rows, sft_skipped

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


async def test_a_live_episode_records_its_client_and_hears_its_grade(host: EpisodeHost, tasks: list[str], caplog):
    task = host.store.task(tasks[0])
    caplog.set_level(logging.INFO, logger="coworkenv.server.episodes")
    with anyio.fail_after(90):
        async with running_http_server(host, ServeSettings()) as base:
            url = f"{base}/t/{task.id}/e/my-key/mcp?run=nightly-7"
            async with Client(url, client_info=Implementation(name="desk-agent", version="2.1")) as client:
                await client.list_tools()
                assert host.store.episodes(task_id=task.id, source="live") == []  # listing opened nothing
                for step in task.spec.reference:
                    await client.call_tool(step.tool, step.arguments)
                ended = await client.call_tool("submit_answer", {"answer": task.spec.reference_answer or "done"})
            # a second episode on another key submits a wrong answer and hears which checks failed
            async with Client(f"{base}/t/{task.id}/e/other/mcp") as client:
                wrong = await client.call_tool("submit_answer", {"answer": "no idea"})
    result = json.loads(ended.content[0].text)
    assert result["status"] == "ended" and result["passed"] is True and result["score"] == 1.0
    assert result["failed_checks"] == [] and "checks" not in result
    miss = json.loads(wrong.content[0].text)
    assert miss["passed"] is False and miss["score"] < 0.75 and miss["failed_checks"]
    assert {c["id"] for c in miss["failed_checks"]} <= {c.id for c in task.spec.checks}
    first, second = sorted(host.store.episodes(task_id=task.id, source="live"), key=lambda e: e.key)
    assert (first.key, first.client, first.run_tag) == ("my-key", "desk-agent 2.1", "nightly-7")
    assert (second.key, second.run_tag) == ("other", "") and second.client  # the SDK's own name
    # admitted, but its agent's model calls did not go through the proxy: export says so and leaves it out
    assert Skipped(first.id, "no_conversation") in sft_skipped(host.store)
    assert sft_skipped(host.store, run_tag="nightly-7") == [(first.id, "no_conversation")]
    assert sft_skipped(host.store, run_tag="another-run") == []
    assert first.id not in {r["episode_id"] for r in sft_rows(host.store)}
    lines = [r.getMessage() for r in caplog.records if r.name == "coworkenv.server.episodes"]
    assert any(first.id in line and "by desk-agent 2.1" in line and "passed" in line for line in lines), lines
    assert any(second.id in line and "not passed" in line for line in lines), lines


async def test_an_untouched_episode_is_abandoned_and_grades_stay_hidden_when_asked(host, store, tasks, tmp_path):
    hidden = EpisodeHost(store, EpisodeSettings(cache_dir=tmp_path / "cache", reveal_grade=False))
    task = store.task(tasks[0])
    try:
        with anyio.fail_after(90):
            async with running_http_server(hidden, ServeSettings()) as base:
                async with Client(f"{base}/t/{task.id}/e/looker/mcp") as client:
                    await client.get_prompt("task")  # opens the episode, calls nothing
                async with Client(f"{base}/t/{task.id}/e/quiet/mcp") as client:
                    ended = await client.call_tool("submit_answer", {"answer": "no idea"})
        assert json.loads(ended.content[0].text) == {"episode_id": json.loads(ended.content[0].text)["episode_id"],
                                                     "status": "ended"}
        episodes = {e.key: e for e in store.episodes(task_id=task.id, source="live")}
        assert episodes["looker"].status == "abandoned"
        assert store.verdict(episodes["looker"].id, GRADER_VERSION) is None
        assert episodes["looker"].id not in store.ended_episodes()  # `coworkenv gate` leaves it alone
        assert store.verdict(episodes["quiet"].id, GRADER_VERSION) is not None
        # a teacher's episode hears nothing of its grade, even where live ones do (its transcript is training data)
        teacher = await host.open(task.id, Provenance("teacher"))
        told = await teacher.call("submit_answer", {"answer": "no idea"})
        assert set(told.result or {}) == {"episode_id", "status"}
    finally:
        await hidden.close()


async def test_over_stdio_a_second_conversation_gets_a_fresh_episode(host: EpisodeHost, tasks: list[str],
                                                                     store_path: Path):
    task = tasks[0]
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    params = StdioServerParameters(command=sys.executable, env={**os.environ, "PYTHONPATH": pythonpath},
                                   args=["-m", "coworkenv", "serve", "--stdio", "--task", task, "--store", str(store_path)])
    with anyio.fail_after(90):
        async with Client(params) as client:
            await client.list_tools()
            first = json.loads((await client.call_tool("submit_answer", {"answer": "one"})).content[0].text)
            assert (await client.list_tools()).tools  # still listing, no episode needed
            second = json.loads((await client.call_tool("submit_answer", {"answer": "two"})).content[0].text)
    assert first["episode_id"] != second["episode_id"] and first["status"] == second["status"] == "ended"
    answers = {e.id: e.final_answer for e in host.store.episodes(task_id=task, source="live")}
    assert answers == {first["episode_id"]: "one", second["episode_id"]: "two"}

"""coworkenv as an OpenEnv environment: OpenEnv's own client (``MCPToolClient`` of the openenv package) plays
admitted tasks through ``coworkenv.interop.openenv_server`` with a scripted policy, over both of OpenEnv's
surfaces (``step`` on its WebSocket, ``tools/call`` on its ``/mcp`` route), and gets the gate's verdicts back
as rewards; the episodes are the coworkenv server's live episodes, one per reset, each in its own sandbox."""

from __future__ import annotations

import pytest

from coworkenv.episodes import EpisodeHost
from coworkenv.gate import GRADER_VERSION
from coworkenv.server import ServeSettings, running_http_server

from .conftest import PLAYER, doc_snippet, openenv_server, reference_plan, run_json, run_snippet

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap, pytest.mark.slow]


async def test_an_openenv_client_plays_admitted_tasks_and_gets_the_gates_verdicts(
        host: EpisodeHost, tasks: list[str], interop_python: str, tmp_path):
    plans = [reference_plan(host.store, task_id) for task_id in tasks]
    wrong = {"task_id": tasks[0], "steps": [], "answer": "I could not find it."}  # answers without looking
    async with running_http_server(host, ServeSettings()) as base, openenv_server(interop_python, base) as url:
        played = await run_json(interop_python, [PLAYER, url], [*plans, wrong])
        over_mcp = await run_json(interop_python, [PLAYER, url, "--mcp"], plans[:1])
        example = doc_snippet("MCPToolClient").replace("http://127.0.0.1:8010", url)  # docs/interop.md's example
        printed = await run_snippet(interop_python, example, tmp_path / "example.py")

    episodes = [p["episode_id"] for p in played]
    assert len(set(episodes)) == len(played)  # one fresh episode per reset
    for game in played:
        row = host.store.episode(game["episode_id"])
        assert row is not None and row.task_id == game["task_id"]
        assert (row.source, row.status) == ("live", "ended")  # opened by the server as a live client's
        assert row.client.startswith("openenv")
        verdict = host.store.verdict(row.id, GRADER_VERSION)
        assert verdict is not None
        assert game["done"] is True and all(r is None for r in game["rewards"][:-1])
        assert game["rewards"][-1] == verdict.score
        assert {k: game["metadata"][k] for k in ("completion", "safety", "robustness", "passed", "reason")} == {
            "completion": verdict.completion, "safety": verdict.safety, "robustness": verdict.robustness,
            "passed": verdict.admitted, "reason": verdict.reason}
        assert game["state"]["episode_id"] == row.id
        assert "submit_answer" in game["tools"]
    for game in played[:-1]:  # the reference earns what calibration's reference episode earned: 1.0
        assert game["rewards"][-1] == 1.0
    assert played[-1]["rewards"][-1] < played[0]["rewards"][-1]

    [mcp_game] = over_mcp  # the same task over OpenEnv's MCP route: the submit result carries the reward
    final = mcp_game["results"][-1]
    assert final["done"] is True and final["reward"] == 1.0
    assert host.store.verdict(final["metadata"]["episode_id"], GRADER_VERSION).score == 1.0

    first = host.store.task(tasks[0])  # the example plays the first task, answering without looking
    assert first is not None and first.instruction in printed
    assert "submit_answer" in printed and "True" in printed and "'reason':" in printed

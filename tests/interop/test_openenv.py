"""coworkenv as an OpenEnv environment: OpenEnv's own client (``MCPToolClient`` of the openenv package) plays
admitted tasks through ``coworkenv.interop.openenv_server`` with a scripted policy, over both of OpenEnv's
surfaces (``step`` on its WebSocket, ``tools/call`` on its ``/mcp`` route), and gets the gate's verdicts back
as rewards; the episodes are the coworkenv server's live episodes, one per reset, each in its own sandbox."""

from __future__ import annotations

import subprocess

import pytest

from coworkenv.episodes import EpisodeHost
from coworkenv.gate import GRADER_VERSION
from coworkenv.server import ServeSettings, running_http_server

from .conftest import PLAYER, doc_snippet, interop_env, openenv_server, reference_plan, run_json, run_snippet

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap, pytest.mark.slow]

# an OpenEnv client that asks for a task the server does not serve, and one that names a provenance
CLAIMS = """
import asyncio
from openenv.core.mcp_client import MCPToolClient

async def main():
    async with MCPToolClient(base_url=URL) as env:
        try:
            await env.reset(task_id="no-such-task")
        except Exception as exc:
            print("refused:", exc)
        reset = await env.reset(task_id=TASK, source="teacher", provider="anthropic", hint="the answer is 42")
        print("opened:", reset.observation.episode_id)

asyncio.run(main())
"""


async def test_an_openenv_client_plays_admitted_tasks_and_gets_the_gates_verdicts(
        host: EpisodeHost, tasks: list[str], interop_python: str, tmp_path):
    plans = [reference_plan(host.store, task_id) for task_id in tasks]
    wrong = {"task_id": tasks[0], "steps": [], "answer": "I could not find it."}  # answers without looking
    async with running_http_server(host, ServeSettings()) as base, openenv_server(interop_python, base) as url:
        played = await run_json(interop_python, [PLAYER, url], [*plans, wrong])
        over_mcp = await run_json(interop_python, [PLAYER, url, "--mcp"], plans[:1])
        example = doc_snippet("MCPToolClient").replace("http://127.0.0.1:8010", url)  # docs/interop.md's example
        printed = await run_snippet(interop_python, example, tmp_path / "example.py")
        claims = await run_snippet(interop_python, CLAIMS.replace("URL", repr(url)).replace("TASK", repr(tasks[0])),
                                   tmp_path / "claims.py")

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

    refused, opened = claims.splitlines()[-2:]  # an unknown task is named; a claimed provenance is not taken
    assert refused.startswith("refused:") and "no-such-task" in refused
    claimed = host.store.episode(opened.removeprefix("opened: "))
    assert claimed is not None and claimed.source == "live" and claimed.client.startswith("openenv")
    assert (claimed.provider, claimed.hint) == ("", "")


TOKEN = """
import asyncio
import httpx
from openenv.core.mcp_client import MCPToolClient

async def main():
    print("health without the token:", httpx.get(URL + "/health").status_code)
    try:
        async with MCPToolClient(base_url=URL) as env:
            await env.reset()
        print("played without the token")
    except Exception as exc:
        print("refused without the token:", type(exc).__name__)
    async with MCPToolClient(base_url=URL, headers={"Authorization": "Bearer s3cret"}) as env:
        print("opened:", (await env.reset()).observation.episode_id)

asyncio.run(main())
"""


async def test_an_openenv_server_beyond_loopback_serves_only_clients_with_its_token(
        host: EpisodeHost, tasks: list[str], interop_python: str, tmp_path):
    refused = subprocess.run([interop_python, "-m", "coworkenv.interop.openenv_server", "--server", "http://127.0.0.1:1",
                              "--host", "0.0.0.0"], capture_output=True, text=True, env=interop_env(), timeout=120)
    assert refused.returncode != 0 and "needs --client-token" in refused.stderr
    async with (running_http_server(host, ServeSettings()) as base,
                openenv_server(interop_python, base, "--client-token", "s3cret") as url):
        printed = await run_snippet(interop_python, TOKEN.replace("URL", repr(url)), tmp_path / "token_client.py")
    health, without, opened = printed.splitlines()[-3:]
    assert health.endswith("401") and without.startswith("refused")
    row = host.store.episode(opened.removeprefix("opened: "))
    assert row is not None and row.source == "live"

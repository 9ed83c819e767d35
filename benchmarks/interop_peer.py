"""The peer side of ``interop_overhead.py``: plays plans through one adapter path and times each tool call.
Runs where openenv and verifiers are installed (``.venv-interop``).

    python benchmarks/interop_peer.py < {"mode": ..., "url": ..., "plans": [{"task_id", "steps", "answer"}, ...]}

Modes: ``remote`` (``coworkenv.interop.CoworkServer``: the live client both adapters are built on),
``openenv-ws`` (openenv's ``MCPToolClient.step`` over the OpenEnv server's WebSocket), ``openenv-mcp`` (its
``call_tool`` over the server's ``/mcp`` route), ``verifiers`` (``CoworkToolEnv.env_response``: the tool calls
of one model turn, as verifiers makes them in a rollout). Prints a JSON list of {"episode_id", "call_s",
"reward"}, one per plan.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any


def calls(plan: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [*((tool, args) for tool, args in plan["steps"]), ("submit_answer", {"answer": plan["answer"]})]


def remote(url: str, plans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from coworkenv.interop import CoworkServer

    server = CoworkServer(url, client="benchmark")
    played = []
    try:
        for plan in plans:
            episode = server.open(plan["task_id"])
            timings = []
            for tool, arguments in calls(plan):
                started = time.perf_counter()
                episode.call(tool, arguments)
                timings.append(time.perf_counter() - started)
            verdict = episode.end()
            played.append({"episode_id": episode.id, "call_s": timings, "reward": verdict.score if verdict else None})
    finally:
        server.close()
    return played


async def openenv(url: str, plans: list[dict[str, Any]], over_mcp: bool) -> list[dict[str, Any]]:
    from openenv.core.env_server.mcp_types import CallToolAction
    from openenv.core.mcp_client import MCPToolClient

    played = []
    for plan in plans:
        async with MCPToolClient(base_url=url) as env:
            reset = await env.reset(task_id=plan["task_id"])
            timings, reward = [], None
            for tool, arguments in calls(plan):
                started = time.perf_counter()
                if over_mcp:
                    result = await env.call_tool(tool, **arguments)
                    reward = result.get("reward") if isinstance(result, dict) else None
                else:
                    reward = (await env.step(CallToolAction(tool_name=tool, arguments=arguments))).reward
                timings.append(time.perf_counter() - started)
            played.append({"episode_id": reset.observation.episode_id, "call_s": timings, "reward": reward})
    return played


async def verifiers(url: str, plans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from verifiers.legacy.types import AssistantMessage, ToolCall

    from coworkenv.interop import load_environment

    env = load_environment(url, tasks=sorted({p["task_id"] for p in plans}))
    played = []
    for number, plan in enumerate(plans):
        state: dict[str, Any] = {"trajectory_id": f"bench-{number}", "info": {"task_id": plan["task_id"]},
                                 "trajectory": []}
        await env.setup_state(state)  # type: ignore[arg-type]
        timings = []
        for index, (tool, arguments) in enumerate(calls(plan)):
            turn = AssistantMessage(tool_calls=[ToolCall(id=f"c{index}", name=tool, arguments=json.dumps(arguments))])
            started = time.perf_counter()
            await env.env_response([turn], state)  # type: ignore[arg-type]
            timings.append(time.perf_counter() - started)
        await env.end_episode(state)  # type: ignore[arg-type]
        played.append({"episode_id": state["episode_id"], "call_s": timings,
                       "reward": (state["verdict"] or {}).get("score")})
    env.server.close()
    return played


def main() -> None:
    job = json.load(sys.stdin)
    mode, url, plans = job["mode"], job["url"], job["plans"]
    if mode == "remote":
        played = remote(url, plans)
    elif mode in ("openenv-ws", "openenv-mcp"):
        played = asyncio.run(openenv(url, plans, over_mcp=mode == "openenv-mcp"))
    elif mode == "verifiers":
        played = asyncio.run(verifiers(url, plans))
    else:
        sys.exit(f"unknown mode {mode!r}; one of: remote, openenv-ws, openenv-mcp, verifiers")
    json.dump(played, sys.stdout)


if __name__ == "__main__":
    main()

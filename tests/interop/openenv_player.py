"""Plays coworkenv tasks through an OpenEnv server with OpenEnv's own client (``MCPToolClient`` of the ``openenv``
package), a scripted policy: each plan's steps, then its answer. Runs in the environment where openenv is
installed (``.venv-interop``); tests and the benchmark start it as a subprocess.

Usage: python openenv_player.py OPENENV_URL < plans.json  (a list of {"task_id", "steps": [[tool, args], ...],
"answer"}), prints a JSON list of {"task_id", "episode_id", "rewards", "done", "metadata", "state",
"tools", "results", "call_s"} and, with --mcp, plays the steps over OpenEnv's HTTP /mcp route instead of
its WebSocket step.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from openenv.core.env_server.mcp_types import CallToolAction, ListToolsAction
from openenv.core.mcp_client import MCPToolClient


async def play(url: str, plan: dict, over_mcp: bool) -> dict:
    async with MCPToolClient(base_url=url) as env:
        reset = await env.reset(task_id=plan["task_id"])
        listed = await env.step(ListToolsAction())
        tools = [t.name for t in listed.observation.tools]
        rewards, results, calls, last = [], [], [], None
        steps = [*plan["steps"], ["submit_answer", {"answer": plan["answer"]}]]
        for tool, arguments in steps:
            started = time.perf_counter()
            if over_mcp:  # OpenEnv's MCP surface: tools/call on /mcp, in the same session
                results.append(await env.call_tool(tool, **arguments))
                calls.append(time.perf_counter() - started)
                continue
            last = await env.step(CallToolAction(tool_name=tool, arguments=arguments))
            calls.append(time.perf_counter() - started)
            rewards.append(last.reward)
            results.append(last.observation.result)
        state = await env.state()
        return {"task_id": plan["task_id"], "episode_id": reset.observation.episode_id,
                "instruction": reset.observation.instruction, "tools": tools, "rewards": rewards,
                "done": last.done if last else None, "metadata": last.observation.metadata if last else None,
                "results": results, "state": state.model_dump(), "call_s": calls}


async def main() -> None:
    url, over_mcp = sys.argv[1], "--mcp" in sys.argv[2:]
    plans = json.load(sys.stdin)
    played = [await play(url, plan, over_mcp) for plan in plans]
    json.dump(played, sys.stdout, default=str)


if __name__ == "__main__":
    asyncio.run(main())

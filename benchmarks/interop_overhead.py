"""What the OpenEnv and verifiers adapters cost per tool call, against the native MCP path, for the same verdict.

    python benchmarks/interop_overhead.py --episodes 10            # needs make interop (.venv-interop)

One ``coworkenv serve`` (in this process, on loopback) serves six tasks synthesized from seed 0. Each path
plays ``--task``'s reference (its steps, then ``submit_answer`` with its answer) in ``--episodes`` fresh live
episodes, opened with ``POST /episodes``, and times each tool call as its client sees it:

- ``native mcp 2026``: the mcp 2.3 SDK's ``Client`` at the episode's address (2026-07-28 era);
- ``native mcp legacy``: the same client in the 2025-11-25 era (what the adapters' mcp 1.x speaks);
- ``interop client``: ``coworkenv.interop.CoworkServer`` (mcp 1.x in a loop thread), under both adapters;
- ``openenv step (ws)``, ``openenv /mcp``: openenv's ``MCPToolClient`` through ``coworkenv.interop.openenv_server``;
- ``verifiers env_response``: ``CoworkToolEnv.env_response`` on one tool call per model turn.

Every episode's reward must equal its stored verdict, and every path must reach the native verdict.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from mcp import Client

from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.gate import GRADER_VERSION
from coworkenv.server import running_http_server
from coworkenv.store import Store
from coworkenv.synth import synthesize

ROOT = Path(__file__).resolve().parents[1]
PEER = str(ROOT / "benchmarks" / "interop_peer.py")


def plan_of(store: Store, task_id: str) -> dict[str, Any]:
    task = store.task_spec(task_id)
    submitted = [s.arguments.get("answer", "") for s in task.reference if s.tool == "submit_answer"]
    return {"task_id": task_id, "steps": [[s.tool, s.arguments] for s in task.reference if s.tool != "submit_answer"],
            "answer": submitted[-1] if submitted else task.reference_answer}


async def native(base: str, plan: dict[str, Any], episodes: int, mode: str) -> list[dict[str, Any]]:
    played = []
    async with httpx.AsyncClient(base_url=base) as http:
        for _ in range(episodes):
            opened = (await http.post("/episodes", json={"task": plan["task_id"]})).json()
            timings = []
            async with Client(base + opened["url"], **({"mode": "legacy"} if mode == "legacy" else {})) as client:
                for tool, arguments in [*plan["steps"], ["submit_answer", {"answer": plan["answer"]}]]:
                    started = time.perf_counter()
                    result = await client.call_tool(tool, arguments)
                    timings.append(time.perf_counter() - started)
            played.append({"episode_id": opened["episode_id"], "call_s": timings,
                           "reward": (result.structured_content or {}).get("score")})
    return played


def peer_env() -> dict[str, str]:
    import os

    return {**{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}, "PYTHONPATH": str(ROOT)}


async def peer(python: str, mode: str, url: str, plans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    process = await asyncio.create_subprocess_exec(python, PEER, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                   stderr=subprocess.PIPE, env=peer_env())
    out, err = await process.communicate(json.dumps({"mode": mode, "url": url, "plans": plans}).encode())
    if process.returncode != 0:
        sys.exit(f"{mode} failed:\n{err.decode()[-3000:]}")
    return json.loads(out)


async def openenv_paths(python: str, base: str, plans: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    process = await asyncio.create_subprocess_exec(
        python, "-m", "coworkenv.interop.openenv_server", "--server", base, "--port", "0", stderr=subprocess.PIPE,
        env=peer_env())
    assert process.stderr is not None
    try:
        line = (await process.stderr.readline()).decode()
        found = re.search(r"on (http://\S+)", line)
        if found is None:
            sys.exit(f"the OpenEnv server did not start: {line}")
        return {"openenv step (ws)": await peer(python, "openenv-ws", found.group(1), plans),
                "openenv /mcp": await peer(python, "openenv-mcp", found.group(1), plans)}
    finally:
        process.terminate()
        await process.wait()


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="interop-bench-") as tmp:
        store = Store(Path(tmp) / "coworkenv.db")
        host = EpisodeHost(store, EpisodeSettings(cache_dir=Path(tmp) / "cache"))
        try:
            await synthesize(host, 6, seed=0)
            if store.task(args.task) is None or store.task(args.task).status != "admitted":
                sys.exit(f"task {args.task} is not admitted in the seed-0 store")
            plan = plan_of(store, args.task)
            plans = [plan] * args.episodes
            async with running_http_server(host) as base:
                await native(base, plan, 2, "modern")  # warm: sandboxes, imports, the state cache
                results = {"native mcp 2026": await native(base, plan, args.episodes, "modern"),
                           "native mcp legacy": await native(base, plan, args.episodes, "legacy"),
                           "interop client": await peer(args.python, "remote", base, plans)}
                results.update(await openenv_paths(args.python, base, plans))
                results["verifiers env_response"] = await peer(args.python, "verifiers", base, plans)
            report(store, plan, results)
        finally:
            await host.close()
            store.close()


def report(store: Store, plan: dict[str, Any], results: dict[str, list[dict[str, Any]]]) -> None:
    baseline = statistics.median(t for e in results["native mcp 2026"] for t in e["call_s"]) * 1000
    calls = len(plan["steps"]) + 1
    print(f"task {plan['task_id']}: {calls} tool calls per episode (the reference, then submit_answer)\n")
    print("| path | episodes | median ms/call | p90 ms/call | ms/episode | overhead ms/call | verdicts |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for path, played in results.items():
        timings = sorted(t * 1000 for e in played for t in e["call_s"])
        stored = [store.verdict(e["episode_id"], GRADER_VERSION) for e in played]
        assert all(v is not None and v.score == e["reward"] for v, e in zip(stored, played, strict=True)), path
        scores = sorted({v.score for v in stored if v is not None})
        median = statistics.median(timings)
        print(f"| {path} | {len(played)} | {median:.1f} | {timings[int(len(timings) * 0.9)]:.1f} | "
              f"{statistics.mean(sum(e['call_s']) for e in played) * 1000:.0f} | {median - baseline:+.1f} | "
              f"score {', '.join(f'{s:g}' for s in scores)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=10, help="episodes per path (default 10)")
    parser.add_argument("--task", default="multi_step-0-schedule_sync-000", help="the task played (seed 0's)")
    parser.add_argument("--python", default=str(ROOT / ".venv-interop" / "bin" / "python"),
                        help="the interpreter with openenv and verifiers (default .venv-interop's)")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()

"""Episode start from the warm pool, for a workspace of three apps against one of every app.

    python benchmarks/episode_start.py --episodes 200 --runs 3

For each workspace (mail + calendar + files; and every registered app), on one ``EpisodeHost`` with
bubblewrap: the initial state is built once from the seed (measured: the world and every app's
rows), then ``--episodes`` episodes are opened one after another, each with one tool call, and
ended (so its sandbox is reset and goes back to the pool). Reported: the state build, and the
p50/p90 of opening an episode (taking a sandbox from the pool and recording the episode) and of
open + first call, and the CPU time the machine spent outside the host process per episode (the
sandboxes: the call, the reset, the next worker; read from /proc/stat, so run it on a quiet
machine), medians over ``--runs``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path

from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.sandbox import PoolSettings
from coworkenv.store import Provenance, Store
from coworkenv.workspace import SUBMIT_TOOL, Task, build_workspace, write_initial_state


def task_of(workspace) -> Task:
    return Task.model_validate({
        "id": f"bench-{workspace.id}", "workspace_id": workspace.id, "capability": "lookup", "difficulty": 1,
        "instruction": "List the calendar.",
        "checks": [{"id": "c", "kind": "answer", "description": "anything", "contains": ["x"]}],
        "reference": [{"tool": "calendar_list_events", "arguments": {}}]})


def machine_cpu_s() -> float:
    """CPU seconds the whole machine has spent busy (every core), from /proc/stat."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def measure(apps: tuple[str, ...] | None, episodes: int, directory: Path) -> dict[str, float]:
    workspace = build_workspace(7, apps)
    started = time.perf_counter()
    write_initial_state(workspace, directory / f"{workspace.id}.db")
    build_ms = (time.perf_counter() - started) * 1000
    store = Store(directory / f"{workspace.id}-store.db")
    task = task_of(workspace)
    store.put_workspace(workspace)
    store.put_task(task)
    host = EpisodeHost(store, EpisodeSettings(cache_dir=directory / "cache", pool=PoolSettings(size=2)))
    opens, firsts = [], []
    try:
        warm = await host.open(task, Provenance("eval"))  # builds the cached state, fills the pool
        await warm.finish()
        await asyncio.sleep(1.0)
        machine, own = machine_cpu_s(), own_cpu_s()
        for _ in range(episodes):
            t0 = time.perf_counter()
            episode = await host.open(task, Provenance("eval"))
            t1 = time.perf_counter()
            await episode.call("calendar_list_events", {})
            t2 = time.perf_counter()
            opens.append((t1 - t0) * 1000)
            firsts.append((t2 - t0) * 1000)
            await episode.call(SUBMIT_TOOL.name, {"answer": "x"})
            await asyncio.sleep(0.02)  # let the pool reset the sandbox it got back
        await asyncio.sleep(0.5)
        sandbox_ms = ((machine_cpu_s() - machine) - (own_cpu_s() - own)) / episodes * 1000
    finally:
        await host.close()
        store.close()
    q = lambda xs, p: sorted(xs)[int(p * (len(xs) - 1))]
    return {"apps": len(workspace.apps), "tools": len(workspace.tools), "build_ms": build_ms,
            "open_p50": q(opens, 0.5), "open_p90": q(opens, 0.9), "first_p50": q(firsts, 0.5),
            "first_p90": q(firsts, 0.9), "sandbox_ms": sandbox_ms}


async def main(args: argparse.Namespace) -> None:
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    results: dict[str, list[dict[str, float]]] = {"three": [], "all": []}
    for _ in range(args.runs):
        for label, apps in (("three", ("mail", "calendar", "files")), ("all", None)):
            with tempfile.TemporaryDirectory(prefix="coworkenv-start-") as tmp:
                results[label].append(await measure(apps, args.episodes, Path(tmp)))
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}\n")
    print("| workspace | apps | tools | state build ms | open p50 (p90) ms | open + first call p50 (p90) ms "
          "| sandbox CPU ms/episode |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    med = {label: {k: statistics.median(r[k] for r in runs) for k in runs[0]} for label, runs in results.items()}
    for label, m in med.items():
        print(f"| {label} | {m['apps']:.0f} | {m['tools']:.0f} | {m['build_ms']:.0f} | {m['open_p50']:.2f} "
              f"({m['open_p90']:.2f}) | {m['first_p50']:.2f} ({m['first_p90']:.2f}) | {m['sandbox_ms']:.1f} |")
    print(f"\nall / three: open p50 {med['all']['open_p50'] / med['three']['open_p50']:.2f}x, open + first call p50 "
          f"{med['all']['first_p50'] / med['three']['first_p50']:.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    asyncio.run(main(parser.parse_args()))

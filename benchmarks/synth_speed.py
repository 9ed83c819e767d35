"""Synthesis speed: validated tasks per minute, with the cost of each part per task.

    python benchmarks/synth_speed.py --tasks 200 --runs 3 --concurrency 1 2

Composed generation over every generated capability (``--generator``) with hardening (the
reference played in-process, the guard and the excluded candidates), then calibration in
bubblewrap sandboxes: the reference, empty and forbidden episodes and every hack probe, each a
real episode graded by the runtime. Reported per setting: medians over ``--runs`` of validated
(admitted) tasks per minute end to end, and per task: generation, hardening, calibration, and
the episodes calibration played. A run starts from an empty store and a warm state cache (the
initial states are built by generation and cached for the episodes; that one-off cost per
workspace is part of the generation figure).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.store import Store
from coworkenv.synth import calibrate_task, generate


async def one_run(tasks: int, seed: int, concurrency: int, generator: str, directory: Path) -> dict[str, float]:
    store = Store(directory / f"s-{concurrency}-{seed}.db")
    host = EpisodeHost(store, EpisodeSettings(cache_dir=directory / "cache"))
    started = time.perf_counter()
    made = generate(tasks, seed, generator=generator, initial_state=host.initial_state)  # type: ignore[arg-type]
    hardening = time.perf_counter()
    hardened = made.tasks
    for workspace in made.workspaces:
        store.put_workspace(workspace)
    for task in hardened:
        store.put_task(task)
    limit = asyncio.Semaphore(concurrency)

    async def calibrated(task):
        async with limit:
            return await calibrate_task(host, task)

    try:
        results = await asyncio.gather(*(calibrated(t) for t in hardened))
    finally:
        await host.close()
    done = time.perf_counter()
    episodes = store.query("select count(*) as n from episodes")[0]["n"]
    admitted = sum(r.admitted for r in results)
    n = len(made.tasks)
    return {"validated_per_min": admitted / (done - started) * 60, "admitted": admitted, "tasks": n,
            "generate_ms": (hardening - started) / n * 1000, "calibrate_ms": (done - hardening) / n * 1000,
            "episodes_per_task": episodes / n, "ms_per_episode": (done - hardening) / episodes * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--generator", choices=("templates", "composed", "all"), default="composed")
    args = parser.parse_args()
    print("| calibrations at once | validated tasks/min | admitted/tasks | generate + harden ms/task "
          "| calibrate ms/task | episodes/task | ms/episode |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for concurrency in args.concurrency:
        runs = []
        with tempfile.TemporaryDirectory() as tmp:
            for run in range(args.runs):
                runs.append(asyncio.run(one_run(args.tasks, 1000 + run, concurrency, args.generator, Path(tmp))))
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"| {concurrency} | {med['validated_per_min']:.0f} | {med['admitted']:.0f}/{med['tasks']:.0f} "
              f"| {med['generate_ms']:.1f} | {med['calibrate_ms']:.1f} "
              f"| {med['episodes_per_task']:.1f} | {med['ms_per_episode']:.1f} |")


if __name__ == "__main__":
    main()

"""Synthesis speed: validated tasks per minute, with the cost of each part per task.

    python benchmarks/synth_speed.py --tasks 200 --runs 3 --concurrency 1 2
    python benchmarks/synth_speed.py --tasks 300 --runs 3 --end-to-end --concurrency 1 2 --workers 2 3

Composed generation over every generated capability (``--generator``) with hardening (the
reference played in-process, the guard and the excluded candidates), then calibration in
bubblewrap sandboxes: the reference, empty and forbidden episodes and every hack probe, each a
real episode graded by the runtime. Reported per setting: medians over ``--runs`` of validated
(admitted) tasks per minute end to end, and per task: generation, hardening, calibration, and
the episodes calibration played. A run starts from an empty store and a warm state cache (the
initial states are built by generation and cached for the episodes; that one-off cost per
workspace is part of the generation figure).

``--end-to-end`` measures what ``coworkenv synth`` runs instead: ``synthesize`` on an episode host
(generation, storing, calibration), with ``--concurrency`` calibrations at once in this process or
``--workers`` worker processes (started by the run, their start included; generation goes on while
they calibrate). With one process, ``--generation`` says where tasks are generated: in it, before
calibration, or in a process of its own while this one calibrates (``apart``, the default of
``synth`` from 200 tasks), or both, alternating. Reported: validated tasks per minute and the CPU the whole machine and this
process spent per task (from /proc/stat and getrusage: run it on a quiet machine).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from episode_start import machine_cpu_s, own_cpu_s  # CPU of the whole machine and of this process

from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.store import Store
from coworkenv.synth import calibrate_task, generate, synthesize


async def end_to_end(tasks: int, seed: int, concurrency: int, workers: int, generator: str,
                     directory: Path, apart: bool | None = None) -> dict[str, float]:
    name = f"{concurrency}-{workers}-{apart}-{seed}"
    store = Store(directory / f"e-{name}.db")
    host = EpisodeHost(store, EpisodeSettings(cache_dir=directory / f"cache-{name}"))  # states built in the run
    machine, own, started = machine_cpu_s(), own_cpu_s(), time.perf_counter()
    try:
        summary = await synthesize(host, tasks, seed, generator=generator, concurrency=concurrency,  # type: ignore[arg-type]
                                   workers=workers, apart=apart)
        started_sandboxes = host.pool.stats["started"]
    finally:
        await host.close()
    done = time.perf_counter()
    n = summary.generated
    return {"validated_per_min": summary.admitted / (done - started) * 60, "admitted": summary.admitted, "tasks": n,
            "machine_ms": (machine_cpu_s() - machine) / n * 1000, "own_ms": (own_cpu_s() - own) / n * 1000,
            "sandboxes": started_sandboxes}


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
    parser.add_argument("--end-to-end", action="store_true", help="synthesize as `coworkenv synth` runs it")
    parser.add_argument("--workers", type=int, nargs="*", default=[], help="with --end-to-end: worker processes")
    parser.add_argument("--generation", choices=("in", "apart", "both"), default="both",
                        help="with --end-to-end and one process: generate in it, in a process of its own, or both")
    args = parser.parse_args()
    if args.end_to_end:
        print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        print("| calibration | generation | validated tasks/min | admitted/tasks | machine CPU ms/task "
              "| this process CPU ms/task | sandboxes started |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        where = {"in": [False], "apart": [True], "both": [False, True]}[args.generation]
        settings = [(c, 1, a, f"{c} at once in one process | {'apart' if a else 'in process'}")
                    for c in args.concurrency for a in where]
        settings += [(1, w, None, f"{w} worker processes | in a thread") for w in args.workers]
        results: dict[str, list[dict[str, float]]] = {label: [] for *_, label in settings}
        with tempfile.TemporaryDirectory() as tmp:
            for run in range(args.runs):  # the settings alternate within each run, seeds differ by run
                for concurrency, workers, apart, label in settings:
                    results[label].append(asyncio.run(end_to_end(args.tasks, 1000 + run, concurrency, workers,
                                                                 args.generator, Path(tmp), apart)))
                    print(f"  run {run}: {label}: {results[label][-1]}", file=sys.stderr)
        for label, runs in results.items():
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            print(f"| {label} | {med['validated_per_min']:.0f} | {med['admitted']:.0f}/{med['tasks']:.0f} "
                  f"| {med['machine_ms']:.1f} | {med['own_ms']:.1f} | {med['sandboxes']:.0f} |")
        return
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

"""What calibration asks of a sandbox, per operation, on a 15-app workspace state (~840 KB).

    python benchmarks/sandbox_ops.py [--ops 100] [--runs 3]

One bubblewrap sandbox held for a composed ``single_write`` task (as calibration holds one for a
task's episodes); each operation ``--ops`` times, ``--runs`` times, after one unmeasured try:
a read call, a write call (the task's own write), reading the state back as its changes over the
initial state (``read_changed_file``, after one write), a write followed by a ``restore``, a
``restore`` with nothing changed, a ``reset`` (what the pool does to a sandbox given back after a
task: a fresh worker) and a ``retarget`` to another workspace's initial state of the same apps (what
the pool does to a ready sandbox of one workspace that another needs), there and back (two).
Reported: medians over the runs of wall time and of CPU per operation, of the whole machine
(/proc/stat: the sandbox's processes, this one and the kernel) and of this process alone. Run it
on a quiet machine, and the code to compare with right after it.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from episode_start import machine_cpu_s, own_cpu_s

from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.sandbox import STATE_FILE
from coworkenv.store import Store
from coworkenv.synth import generate


async def measure(ops: int, runs: int) -> dict[str, tuple[float, float, float]]:
    directory = Path(tempfile.mkdtemp(prefix="coworkenv-bench-"))
    host = EpisodeHost(Store(directory / "store.db"), EpisodeSettings(cache_dir=directory / "cache"))
    made = generate(30, 1000, initial_state=host.initial_state)
    for workspace in made.workspaces:
        host.store.put_workspace(workspace)
    task = next(t for t in made.tasks if t.capability == "single_write")
    host.store.put_task(task)
    workspace = host.workspace(task.workspace_id)
    write = next(s for s in task.reference if (spec := workspace.tool(s.tool)) is not None and spec.effect != "read")
    read = next(s for t in made.tasks if t.workspace_id == workspace.id for s in t.reference
                if (spec := workspace.tool(s.tool)) is not None and spec.effect == "read")
    initial = host.initial_image(workspace).image
    other = next(w for w in generate(30, 2000, initial_state=host.initial_state).workspaces if w.id != workspace.id)
    targets = [host.initial_state(other), host.initial_state(workspace)]
    found: dict[str, list[tuple[float, float, float]]] = {}
    try:
        async with host.hold_sandbox(task) as held:
            sandbox = held.sandbox

            async def call(step):
                spec = workspace.tool(step.tool)
                assert spec is not None
                return await sandbox.call_tool(spec.app, spec.tool, step.arguments)

            async def write_and_restore():
                await call(write)
                await sandbox.restore()

            async def retarget():
                for target in targets:  # there and back
                    await sandbox.retarget(target)

            operations = {
                "read call": lambda: call(read),
                "write call": lambda: call(write),
                "read back the changed state": lambda: sandbox.read_changed_file(STATE_FILE, initial),
                "write call + restore": write_and_restore,
                "restore, nothing changed": sandbox.restore,
                "reset (a fresh worker)": sandbox.reset,
                "retarget to another workspace and back (two)": retarget,
            }
            for _ in range(runs):
                await sandbox.restore()
                for name, operation in operations.items():
                    if name == "read back the changed state":
                        await call(write)
                    await operation()
                    machine, own, started = machine_cpu_s(), own_cpu_s(), time.perf_counter()
                    for _ in range(ops):
                        await operation()
                    found.setdefault(name, []).append(((time.perf_counter() - started) / ops * 1000,
                                                       (machine_cpu_s() - machine) / ops * 1000,
                                                       (own_cpu_s() - own) / ops * 1000))
    finally:
        await host.close()
    return {name: tuple(statistics.median(r[i] for r in rows) for i in range(3)) for name, rows in found.items()}  # type: ignore[misc]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    found = asyncio.run(measure(args.ops, args.runs))
    print("| operation | wall ms | machine CPU ms | this process CPU ms |")
    print("| --- | --- | --- | --- |")
    for name, (wall, machine, own) in found.items():
        print(f"| {name} | {wall:.2f} | {machine:.2f} | {own:.2f} |")


if __name__ == "__main__":
    main()

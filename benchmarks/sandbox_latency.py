"""Sandbox latency: episode start (cold and from the warm pool) and tool-call round trip, per backend.

Baselines measured in the same run: the same runner as a plain unsandboxed subprocess (the ``local``
backend, no isolation), and a plain ``docker run --rm`` of the sandbox image. The tool is the conformance suite's ``probe.get`` (one
SQLite read). Prints a Markdown table of medians (p50) and p90 in milliseconds.

    python benchmarks/sandbox_latency.py [--starts 10] [--calls 300] [--backends bwrap docker]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from coworkenv.sandbox import BACKENDS, IMAGE, Limits, PoolSettings, SandboxPool, create_sandbox
from coworkenv.sandbox._probe_app import write_initial_state, write_probe_apps

LIMITS = Limits()
AGENT_GAP_S = 0.005  # idle time between calls in the "spaced" series, as an agent thinking would leave
PLAIN = "local: plain subprocess (baseline)"


def ms(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1000, ordered[int(0.9 * (len(ordered) - 1))] * 1000


async def round_trips(sandbox, calls: int, gap: float) -> list[float]:
    samples = []
    for _ in range(calls):
        if gap:
            await asyncio.sleep(gap)
        started = time.perf_counter()
        outcome = await sandbox.call_tool("probe", "get", {"key": "seeded"})
        samples.append(time.perf_counter() - started)
        assert outcome.ok, outcome
    return samples


async def bench_backend(backend: str, state: Path, apps: Path, starts: int, calls: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"cold": [], "warm": [], "warm+call": []}
    for _ in range(starts):
        started = time.perf_counter()
        sandbox = create_sandbox(backend, state, limits=LIMITS, config=BACKENDS[backend].config_type(apps_dir=apps))
        await sandbox.start()
        out["cold"].append(time.perf_counter() - started)
        await sandbox.close()
    pool = SandboxPool(backend, limits=LIMITS, settings=PoolSettings(size=2), config=BACKENDS[backend].config_type(apps_dir=apps))
    try:
        await pool.release(await pool.acquire(state))
        for _ in range(starts * 2):
            await pool.drain()
            started = time.perf_counter()
            sandbox = await pool.acquire(state)
            out["warm"].append(time.perf_counter() - started)
            outcome = await sandbox.call_tool("probe", "get", {"key": "seeded"})
            out["warm+call"].append(time.perf_counter() - started)
            assert outcome.ok, outcome
            await pool.release(sandbox)
        await pool.drain()
        sandbox = await pool.acquire(state)
        await round_trips(sandbox, 20, 0)  # warm-up
        out["round trip"] = await round_trips(sandbox, calls, 0)
        out["round trip, spaced"] = await round_trips(sandbox, calls, AGENT_GAP_S)
        await pool.release(sandbox)
    finally:
        await pool.close()
    return out


def bench_docker_run(starts: int) -> dict[str, list[float]]:
    samples = []
    for _ in range(starts):
        started = time.perf_counter()
        subprocess.run(["docker", "run", "--rm", "--network", "none", IMAGE, "python3", "-I", "-S", "-c", "pass"],
                       check=True, capture_output=True)
        samples.append(time.perf_counter() - started)
    return {"cold": samples}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=10)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--backends", nargs="+", default=["bwrap", "docker"])
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="coworkenv-bench-"))
    apps = write_probe_apps(tmp / "lib")
    state = write_initial_state(tmp / "initial.db")
    rows: dict[str, dict[str, list[float]]] = {}
    rows[PLAIN] = await bench_backend("local", state, apps, args.starts, args.calls)
    for backend in args.backends:
        rows[backend] = await bench_backend(backend, state, apps, args.starts, args.calls)
    if "docker" in args.backends:
        rows["plain `docker run --rm` (baseline)"] = bench_docker_run(max(3, args.starts // 2))
    shutil.rmtree(tmp)

    columns = ["cold", "warm", "warm+call", "round trip", "round trip, spaced"]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}; python {platform.python_version()}")
    print(f"runs: {args.starts} cold starts, {args.starts * 2} warm starts, {args.calls} calls per series\n")
    print("| | " + " | ".join(f"{c} p50 (p90)" for c in columns) + " |")
    print("| --- |" + " --- |" * len(columns))
    for name, series in rows.items():
        cells = []
        for column in columns:
            if column in series:
                p50, p90 = ms(series[column])
                cells.append(f"{p50:.2f} ({p90:.2f})")
            else:
                cells.append("")
        print(f"| {name} | " + " | ".join(cells) + " |")
    plain = statistics.median(rows[PLAIN]["round trip, spaced"])
    for backend in args.backends:
        ratio = statistics.median(rows[backend]["round trip, spaced"]) / plain
        print(f"\n{backend}: spaced round trip = {ratio:.2f}x the plain subprocess's", end="")
    print()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

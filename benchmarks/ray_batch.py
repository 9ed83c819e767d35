"""``collect``, ``eval`` and ``synth`` with ``--ray`` against the same commands run locally, in the same
run, on the same stores; and what the one writer (the driver) pays per episode it imports.

    python benchmarks/ray_batch.py                        # 16 tasks, 3 runs of collect and eval each
    python benchmarks/ray_batch.py --tasks 24 --runs 5 --synth

The cluster is started here with ``ray start``: a head and a second node on this machine, so the two
nodes share its cores. The figures are therefore Ray's overhead (connecting, a host actor per node
that imports coworkenv and starts its own sandbox pool, rows shipped back and written by the
driver), not a speed-up: on one machine there is nothing to gain. The local baseline runs
``--concurrency 2×C`` in one process; the Ray runs ``--concurrency C`` on each of the two nodes, so
both have the same number of units in flight. Each command is timed whole (start-up included), as a
user runs it; ``nothing to do`` is the same command on a store with no pending work: the fixed cost.
The import rows: ``Store.export_episodes`` on the node's side and ``Store.import_episodes`` on the
driver's, per teacher episode (with its calls, conversation, final state and verdict), median of the runs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from coworkenv.store import Store
from coworkenv.trainer._serve import free_port

RAY = str(Path(sys.executable).with_name("ray"))
ENV = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}


def coworkenv(*args: str) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "coworkenv", *args], env=ENV, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"coworkenv {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return time.perf_counter() - started


def copy(source: Path, target: Path) -> Path:
    target.unlink(missing_ok=True)
    with contextlib.closing(sqlite3.connect(source)) as src, contextlib.closing(sqlite3.connect(target)) as dst:
        src.backup(dst)
    return target


@contextlib.contextmanager
def cluster(work: Path):
    temp = Path(tempfile.mkdtemp(prefix="cwr-"))
    port = free_port()
    common = ["--num-cpus", "1", "--object-store-memory", str(100 << 20), "--temp-dir", str(temp),
              "--disable-usage-stats"]
    try:
        subprocess.run([RAY, "start", "--head", "--port", str(port), "--include-dashboard=false",
                        "--dashboard-port", str(free_port()), "--ray-client-server-port", str(free_port()), *common],
                       env=ENV, check=True, capture_output=True)
        subprocess.run([RAY, "start", "--address", f"127.0.0.1:{port}", *common], env=ENV, check=True,
                       capture_output=True)
        yield f"127.0.0.1:{port}"
    finally:
        for process in psutil.process_iter(["cmdline"]):
            line = " ".join(process.info["cmdline"] or [])
            if str(temp) in line or f":{port}" in line:
                with contextlib.suppress(psutil.Error):
                    for p in [process, *process.children(recursive=True)]:
                        with contextlib.suppress(psutil.Error):
                            p.kill()
        shutil.rmtree(temp, ignore_errors=True)


def import_cost(store_path: Path, work: Path) -> tuple[float, float, int]:
    """ms per teacher episode to export from ``store_path`` and to import into a copy without them."""
    source = Store(store_path)
    ids = [e.id for e in source.episodes(source="teacher")]
    started = time.perf_counter()
    records = source.export_episodes(ids)
    exported = time.perf_counter() - started
    target_path = copy(store_path, work / "import.db")
    with contextlib.closing(sqlite3.connect(target_path)) as conn:
        marks = ",".join("?" for _ in ids)
        for table in ("verdicts", "grades", "messages", "tool_calls", "model_calls"):
            conn.execute(f"delete from {table} where episode_id in ({marks})", ids)
        conn.execute(f"delete from episodes where id in ({marks})", ids)
        conn.commit()
    target = Store(target_path)
    units = [source.export_episodes([episode_id]) for episode_id in ids]
    started = time.perf_counter()
    for unit in units:  # one unit per transaction, as the driver writes them
        target.import_episodes(unit)
    imported = time.perf_counter() - started
    calls = len(records.tables["tool_calls"])
    return 1000 * exported / len(ids), 1000 * imported / len(ids), round(calls / max(1, len(ids)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=2, help="per node with --ray; twice this locally")
    parser.add_argument("--synth", action="store_true", help="also time synth (one run each way)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ray-bench-"))
    c = str(args.concurrency)
    local_c = str(2 * args.concurrency)
    rows: list[tuple[str, list[float], list[float]]] = []
    try:
        base = work / "base.db"
        coworkenv("synth", "--store", str(base), "-n", str(args.tasks), "--seed", "11", "--concurrency", "2")
        with cluster(work) as address:
            if args.synth:
                local = coworkenv("synth", "--store", str(work / "s-local.db"), "-n", str(args.tasks), "--seed", "11",
                                  "--concurrency", local_c)
                ray = coworkenv("synth", "--store", str(work / "s-ray.db"), "-n", str(args.tasks), "--seed", "11",
                                "--concurrency", c, "--ray", address)
                rows.append((f"synth {args.tasks} tasks (1 run)", [local], [ray]))
            collect_local, collect_ray, idle_local, idle_ray, eval_local, eval_ray = [], [], [], [], [], []
            for run in range(args.runs):
                store = copy(base, work / "c.db")
                collect_local.append(coworkenv("collect", "--store", str(store), "--error-rate", "0",
                                               "--concurrency", local_c))
                idle_local.append(coworkenv("collect", "--store", str(store), "--concurrency", local_c))
                store = copy(base, work / "c.db")
                collect_ray.append(coworkenv("collect", "--store", str(store), "--error-rate", "0",
                                             "--concurrency", c, "--ray", address))
                idle_ray.append(coworkenv("collect", "--store", str(store), "--concurrency", c, "--ray", address))
                if run == 0:
                    collected = copy(store, work / "collected.db")
                store = copy(base, work / "e.db")
                eval_local.append(coworkenv("eval", "--store", str(store), "--model", "oracle", "-n", "8", "--trials", "2",
                                            "--concurrency", local_c, "--profile", str(work / "p.json")))
                store = copy(base, work / "e.db")
                eval_ray.append(coworkenv("eval", "--store", str(store), "--model", "oracle", "-n", "8", "--trials", "2",
                                          "--concurrency", c, "--ray", address, "--profile", str(work / "p.json")))
        rows += [(f"collect {args.tasks} tasks (oracle)", collect_local, collect_ray),
                 ("collect, nothing to do", idle_local, idle_ray),
                 ("eval 8 held-out tasks × 2 trials (oracle, calibration included)", eval_local, eval_ray)]
        exported, imported, calls = import_cost(collected, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    cpu = f"{os.cpu_count()} cores"
    print(f"machine: {cpu}; two Ray nodes on it; local --concurrency {local_c}, Ray --concurrency {c} per node; "
          f"median of {args.runs} runs (wall seconds of the whole command)\n")
    print("| command | local (s) | --ray, 2 nodes (s) | ray / local |")
    print("| --- | ---: | ---: | ---: |")
    for name, local, ray in rows:
        lm, rm = statistics.median(local), statistics.median(ray)
        print(f"| {name} | {lm:.1f} | {rm:.1f} | {rm / lm:.2f}x |")
    print(f"\nteacher episodes of ~{calls} calls: export {exported:.2f} ms/episode (node), "
          f"import {imported:.2f} ms/episode (driver, one transaction each)")


if __name__ == "__main__":
    main()

"""vLLM serving of a tiny PocketWorker on this machine: time to ready, memory, tool-call latency.

For each mode (vLLM's default optimization level, which compiles the model with torch.compile, and
``-O 0``, which skips compilation) the script starts ``coworkenv``'s ``VLLMServer`` on the committed
test model, records the seconds until ``/v1/models`` lists it and the resident memory of the server's
process group once ready, then sends the probe's tool-calling chat request ``--requests`` times
(greedy, 96 tokens at most) and records the latency and whether a tool call came back parsed.
The default mode is the baseline. Usage::

    python benchmarks/vllm_serve.py --python .venv-vllm/bin/python [--runs 3] [--requests 10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import httpx

from coworkenv.trainer import ServedModel, VLLMServer, VLLMSettings

MODEL = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "tool-model"


def group_rss_mib(pgid: int) -> float:
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != pgid:
                continue
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (OSError, ProcessLookupError):
            continue
    return total / 1024


def one_run(python: str, level: int | None, requests: int) -> dict:
    probe = json.loads((MODEL / "probe.json").read_text())
    server = VLLMServer(ServedModel(MODEL, "tool-model"),
                        VLLMSettings(python=python, optimization_level=level, startup_timeout=900))
    started = time.perf_counter()
    server.start()
    try:
        url = server.wait_until_ready()
        ready = time.perf_counter() - started
        rss = group_rss_mib(server.process.pid)
        latencies, parsed = [], 0
        for _ in range(requests):
            t = time.perf_counter()
            reply = httpx.post(f"{url}/chat/completions", timeout=120, json={
                "model": "tool-model", "messages": probe["messages"], "tools": probe["tools"],
                "temperature": 0, "max_tokens": 96}).json()
            latencies.append((time.perf_counter() - t) * 1000)
            parsed += bool(reply["choices"][0]["message"].get("tool_calls"))
    finally:
        t = time.perf_counter()
        server.stop()
        stop = time.perf_counter() - t
    return {"ready_s": ready, "rss_mib": rss, "latency_ms": statistics.median(latencies),
            "parsed": parsed / requests, "stop_s": stop}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--python", required=True, help="the interpreter with vLLM installed")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--requests", type=int, default=10)
    args = parser.parse_args()
    results = {}
    for label, level in (("default (baseline)", None), ("-O 0", 0)):
        runs = [one_run(args.python, level, args.requests) for _ in range(args.runs)]
        results[label] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        results[label]["ready_s_all"] = [round(r["ready_s"], 1) for r in runs]
        print(label, json.dumps(results[label]), flush=True)
    base = results["default (baseline)"]["ready_s"]
    print("| mode | time to ready, s (runs) | vs baseline | RSS when ready, MiB | probe latency p50, ms | tool call parsed | stop, s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for label, r in results.items():
        print(f"| {label} | {r['ready_s']:.1f} ({', '.join(map(str, r['ready_s_all']))}) | {r['ready_s'] / base:.2f}× "
              f"| {r['rss_mib']:.0f} | {r['latency_ms']:.1f} | {r['parsed']:.0%} | {r['stop_s']:.1f} |")


if __name__ == "__main__":
    main()

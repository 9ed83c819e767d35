"""The capture proxy's added latency: the same chat request sent straight to a vLLM server and through
``coworkenv serve --upstream`` (recording it on an episode), non-streaming and streaming.

vLLM serves the committed tiny tool-calling model (``-O 0``) on this machine, and ``coworkenv
serve --upstream`` runs as its own process, as users run it; the request is the model's probe (a
tool-calling chat request, greedy, ``--max-tokens`` tokens at most). Each round sends one request
directly and one through the proxy, in alternating order, so both paths see the same load; latency
is measured in the client to the last byte of the body (for streams, to the end of the stream). The
direct path is the baseline. Usage::

    python benchmarks/proxy_latency.py --python .venv-vllm/bin/python [--runs 3] [--requests 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.store import Store
from coworkenv.synth import synthesize
from coworkenv.trainer import ServedModel, VLLMSettings
from coworkenv.trainer._serve import free_port, running_vllm_server

MODEL = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "tool-model"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def timed(http: httpx.AsyncClient, url: str, body: dict) -> float:
    started = time.perf_counter()
    if body.get("stream"):
        async with http.stream("POST", url, json=body) as response:
            async for _ in response.aiter_raw():
                pass
            assert response.status_code == 200
    else:
        response = await http.post(url, json=body)
        assert response.status_code == 200, response.text
    return (time.perf_counter() - started) * 1000


async def one_run(upstream: str, base: str, task: str, requests: int, max_tokens: int) -> dict:
    probe = json.loads((MODEL / "probe.json").read_text())
    body = {"model": "tool-model", "messages": probe["messages"], "tools": probe["tools"], "temperature": 0,
            "max_tokens": max_tokens}
    results: dict[str, list[float]] = {k: [] for k in ("direct", "proxy", "direct stream", "proxy stream")}
    async with httpx.AsyncClient(timeout=120) as http:
        proxied = f"{base}/t/{task}/e/bench/v1/chat/completions"
        for url in (f"{upstream}/chat/completions", proxied):  # warm both paths
            await timed(http, url, body)
        for i in range(requests):
            for stream in (False, True):
                request = {**body, "stream": stream, **({"stream_options": {"include_usage": True}} if stream else {})}
                suffix = " stream" if stream else ""
                order = [("direct", f"{upstream}/chat/completions"), ("proxy", proxied)]
                for name, url in order if i % 2 == 0 else order[::-1]:
                    results[name + suffix].append(await timed(http, url, request))
    return {name: {"p50": statistics.median(v), "p99": percentile(v, 0.99)} for name, v in results.items()}


async def main(args: argparse.Namespace) -> None:
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        store = Store(path)
        host = EpisodeHost(store, EpisodeSettings(cache_dir=Path(tmp) / "cache"))
        await synthesize(host, 1, seed=0)
        await host.close()
        task = store.tasks(status="admitted")[0].id
        settings = VLLMSettings(python=args.python, optimization_level=0, startup_timeout=900)
        async with running_vllm_server(ServedModel(MODEL, "tool-model"), settings=settings) as upstream:
            port = free_port()
            server = subprocess.Popen([sys.executable, "-m", "coworkenv", "-q", "serve", "--store", str(path), "--port",
                                       str(port), "--rate", "0", "--upstream", upstream, "--idle-timeout", "3600"])
            base = f"http://127.0.0.1:{port}"
            try:
                while True:
                    try:
                        if httpx.get(f"{base}/tasks", timeout=1).status_code == 200:
                            break
                    except httpx.HTTPError:
                        await asyncio.sleep(0.2)
                for run in range(args.runs):
                    result = await one_run(upstream, base, task, args.requests, args.max_tokens)
                    runs.append(result)
                    print(f"run {run + 1}: " + "; ".join(f"{k} p50 {v['p50']:.2f} p99 {v['p99']:.2f}"
                                                         for k, v in result.items()), flush=True)
            finally:
                server.send_signal(signal.SIGINT)
                server.wait(timeout=60)
        recorded = sum(len(store.model_calls(e.id)) for e in store.episodes(source="live"))
        store.close()
    print(f"\nmedian over {args.runs} runs of each run's p50 and p99 (ms), {args.requests} requests per path "
          f"and run; {recorded} model calls recorded")
    print("| path | p50 | p99 | added p50 | added p99 |\n| --- | --- | --- | --- | --- |")
    for mode in ("", " stream"):
        base = {q: statistics.median(r["direct" + mode][q] for r in runs) for q in ("p50", "p99")}
        for path in ("direct", "proxy"):
            got = {q: statistics.median(r[path + mode][q] for r in runs) for q in ("p50", "p99")}
            added = "" if path == "direct" else f" {got['p50'] - base['p50']:+.2f} | {got['p99'] - base['p99']:+.2f} |"
            print(f"| {path}{mode} | {got['p50']:.2f} | {got['p99']:.2f} |" + (added or " (baseline) | |"))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=None, help="the interpreter with vLLM installed")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--max-tokens", type=int, default=16)
    asyncio.run(main(parser.parse_args()))

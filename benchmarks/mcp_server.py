"""MCP server throughput, latency and memory: coworkenv episodes (each in its own bubblewrap
sandbox, every call validated and recorded) against a bare ``MCPServer`` with the same trivial
tool, measured in the same run.

    python benchmarks/mcp_server.py                       # HTTP at 1, 8, 64, 256 clients; stdio at 1, 8
    python benchmarks/mcp_server.py --levels 1 8 --paced 64 --runs 1 --stdio-levels

Modes:
- closed loop: each client (one episode each) calls again as soon as its answer arrives, for
  ``--duration`` seconds: calls/s (saturation at the higher levels) and p50/p99 latency;
- paced: ``--paced N ...`` episodes each calling about once a second (an agent between model
  turns), with random phases: errors and p50/p99 latency at that load.
Memory per episode is the growth of the server's process tree (server plus sandboxes) after
opening N episodes, divided by N. The load generator speaks raw 2026-07-28 JSON-RPC (httpx and
newline-delimited stdio) to keep its own cost low; it shares the machine's cores with the server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
VERSION = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": VERSION, "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"}}
TOOL, ARGS = "calendar_get_event", {"id": "e01"}
EVENT = {"id": "e01", "title": "Office move walkthrough", "date": "2026-03-11", "start": "11:00", "end": "11:45",
         "attendees": ["ines.duarte@acme.example"], "location": "Floor 4", "description": ""}


def bare_server():
    """The baseline: a plain MCPServer whose tool returns the same record from memory."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bare")

    @server.tool(name=TOOL)
    def get_event(id: str) -> dict:
        """Get one event by id."""
        return dict(EVENT, id=id)

    return server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}


def make_store(directory: Path) -> tuple[Path, str]:
    store = directory / "bench.db"
    subprocess.run([sys.executable, "-m", "coworkenv", "synth", "--store", str(store), "-n", "3",
                    "--capability", "lookup"], env=env(), check=True, capture_output=True)
    import sqlite3

    with sqlite3.connect(store) as db:
        (task,) = db.execute("select id from tasks where status = 'admitted' order by id limit 1").fetchone()
    return store, task


class HttpTarget:
    def __init__(self, kind: str, store: Path, task: str) -> None:
        self.kind, self.port = kind, free_port()
        if kind == "coworkenv":
            cmd = [sys.executable, "-m", "coworkenv", "serve", "--store", str(store), "--port", str(self.port),
                   "--rate", "0", "--idle-timeout", "86400"]
            self.paths = lambda i: f"/t/{task}/e/bench-{i}-{random.random():.9f}/mcp"
        else:
            cmd = [sys.executable, __file__, "--bare-http", str(self.port)]
            self.paths = lambda i: "/mcp"
        self.log = store.parent / f"{kind}-server.log"
        self.process = subprocess.Popen(cmd, env=env(), stdout=subprocess.DEVNULL, stderr=self.log.open("w"))
        self.base = f"http://127.0.0.1:{self.port}"

    async def ready(self) -> None:
        async with httpx.AsyncClient() as http:
            for _ in range(600):
                try:
                    await http.get(self.base + "/tasks")
                    return
                except httpx.TransportError:
                    await asyncio.sleep(0.1)
        raise RuntimeError(f"{self.kind} server did not start")

    def rss(self) -> int:
        proc = psutil.Process(self.process.pid)
        total = proc.memory_info().rss
        for child in proc.children(recursive=True):
            try:
                total += child.memory_info().rss
            except psutil.Error:
                pass
        return total

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()


async def http_call(http: httpx.AsyncClient, url: str, rid: int) -> float:
    body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": TOOL, "arguments": ARGS, "_meta": META}}
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json",
               "mcp-protocol-version": VERSION, "mcp-method": "tools/call", "mcp-name": TOOL}
    start = time.perf_counter()
    response = await http.post(url, json=body, headers=headers)
    elapsed = time.perf_counter() - start
    text = response.text
    if response.status_code != 200 or '"isError":false' not in text.replace(" ", ""):
        raise RuntimeError(f"HTTP {response.status_code}: {text[:200]}")
    return elapsed


def summary(latencies: list[float], seconds: float, errors: int) -> dict:
    ordered = sorted(latencies)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else float("nan")
    return {"calls_per_s": len(ordered) / seconds, "p50_ms": pick(0.50), "p99_ms": pick(0.99), "errors": errors,
            "calls": len(ordered)}


async def http_level(target: HttpTarget, clients: int, duration: float, paced: bool) -> dict:
    limits = httpx.Limits(max_connections=clients + 8, max_keepalive_connections=clients + 8)
    async with httpx.AsyncClient(base_url=target.base, limits=limits, timeout=60) as http:
        urls = [target.paths(i) for i in range(clients)]
        before = target.rss()
        opened = time.perf_counter()
        semaphore = asyncio.Semaphore(16)  # open sandboxes a few at a time

        async def first(i: int) -> None:
            async with semaphore:
                try:
                    await http_call(http, urls[i], 0)
                except httpx.TransportError:  # a keep-alive connection the server closed meanwhile
                    await http_call(http, urls[i], 0)

        await asyncio.gather(*(first(i) for i in range(clients)))
        open_s = time.perf_counter() - opened
        memory = (target.rss() - before) / clients
        latencies: list[float] = []
        errors = 0
        stop = time.perf_counter() + duration

        async def loop(i: int) -> None:
            nonlocal errors
            rid = 1
            if paced:
                await asyncio.sleep(random.random())
            while time.perf_counter() < stop:
                started = time.perf_counter()
                try:
                    latencies.append(await http_call(http, urls[i], rid))
                except Exception:
                    errors += 1
                rid += 1
                if paced:
                    await asyncio.sleep(max(0.0, 1.0 - (time.perf_counter() - started)))

        began = time.perf_counter()
        await asyncio.gather(*(loop(i) for i in range(clients)))
        result = summary(latencies, time.perf_counter() - began, errors)
        if target.kind == "coworkenv":  # end the episodes (DELETE of a key URL), releasing their sandboxes
            async def end(url: str) -> None:
                async with semaphore:
                    try:
                        await http.delete(url)
                    except httpx.TransportError:
                        await http.delete(url)

            await asyncio.gather(*(end(u) for u in urls))
        return {**result, "open_s": open_s, "mb_per_episode": memory / 2**20}


class StdioTarget:
    """One server process per episode, spoken to with newline-delimited JSON-RPC."""

    def __init__(self, kind: str, store: Path, task: str) -> None:
        if kind == "coworkenv":
            self.cmd = [sys.executable, "-m", "coworkenv", "serve", "--stdio", "--task", task, "--store", str(store)]
        else:
            self.cmd = [sys.executable, __file__, "--bare-stdio"]

    async def start(self) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(*self.cmd, env=env(), stdin=asyncio.subprocess.PIPE,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
                                                    limit=1 << 22)


async def stdio_call(process: asyncio.subprocess.Process, rid: int) -> float:
    body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": TOOL, "arguments": ARGS, "_meta": META}}
    start = time.perf_counter()
    process.stdin.write((json.dumps(body) + "\n").encode())
    await process.stdin.drain()
    while True:
        message = json.loads(await process.stdout.readline())
        if message.get("id") == rid:
            break
    elapsed = time.perf_counter() - start
    if message.get("result", {}).get("isError") is not False:
        raise RuntimeError(str(message)[:200])
    return elapsed


async def stdio_level(target: StdioTarget, clients: int, duration: float) -> dict:
    processes = [await target.start() for _ in range(clients)]
    try:
        await asyncio.gather(*(stdio_call(p, 0) for p in processes))
        rss = 0
        for p in processes:
            proc = psutil.Process(p.pid)
            rss += proc.memory_info().rss + sum(c.memory_info().rss for c in proc.children(recursive=True))
        latencies: list[float] = []
        errors = 0
        stop = time.perf_counter() + duration

        async def loop(p: asyncio.subprocess.Process) -> None:
            nonlocal errors
            rid = 1
            while time.perf_counter() < stop:
                try:
                    latencies.append(await stdio_call(p, rid))
                except Exception:
                    errors += 1
                rid += 1

        began = time.perf_counter()
        await asyncio.gather(*(loop(p) for p in processes))
        return {**summary(latencies, time.perf_counter() - began, errors), "mb_per_episode": rss / clients / 2**20}
    finally:
        for p in processes:
            p.stdin.close()
        for p in processes:
            try:
                await asyncio.wait_for(p.wait(), 30)
            except asyncio.TimeoutError:
                p.kill()


def median_of(runs: list[dict]) -> dict:
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="coworkenv-bench-") as tmp:
        store, task = make_store(Path(tmp))
        rows = []
        for kind in args.servers:
            target = HttpTarget(kind, store, task)
            try:
                await target.ready()
                for clients in args.levels:
                    runs = [await http_level(target, clients, args.duration, paced=False) for _ in range(args.runs)]
                    rows.append(("http", kind, f"closed {clients}", median_of(runs)))
                    print(rows[-1], flush=True)
                for clients in args.paced:
                    runs = [await http_level(target, clients, args.duration, paced=True) for _ in range(args.runs)]
                    rows.append(("http", kind, f"paced {clients} @1/s", median_of(runs)))
                    print(rows[-1], flush=True)
            except Exception:
                print(f"{kind} server (exit code {target.process.poll()}) output:\n{target.log.read_text()[-3000:]}",
                      file=sys.stderr)
                raise
            finally:
                target.stop()
            for clients in args.stdio_levels:
                runs = [await stdio_level(StdioTarget(kind, store, task), clients, args.duration)
                        for _ in range(args.runs)]
                rows.append(("stdio", kind, f"closed {clients}", median_of(runs)))
                print(rows[-1], flush=True)
        print()
        print("| transport | server | load | calls/s | p50 ms | p99 ms | errors | MB/episode |")
        print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
        for transport, kind, load, r in rows:
            print(f"| {transport} | {kind} | {load} | {r['calls_per_s']:.0f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} "
                  f"| {r['errors']:.0f} | {r['mb_per_episode']:.1f} |")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--bare-http"]:
        import uvicorn

        uvicorn.run(bare_server().streamable_http_app(), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    elif sys.argv[1:2] == ["--bare-stdio"]:
        bare_server().run("stdio")
    else:
        parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
        parser.add_argument("--levels", type=int, nargs="+", default=[1, 8, 64, 256])
        parser.add_argument("--stdio-levels", type=int, nargs="*", default=[1, 8])
        parser.add_argument("--paced", type=int, nargs="*", default=[16, 64, 256],
                            help="numbers of episodes each calling once a second")
        parser.add_argument("--duration", type=float, default=10.0)
        parser.add_argument("--servers", nargs="+", default=["bare", "coworkenv"], choices=["bare", "coworkenv"])
        parser.add_argument("--runs", type=int, default=3)
        asyncio.run(main(parser.parse_args()))

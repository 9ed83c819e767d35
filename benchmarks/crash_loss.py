"""What a crash of the server loses: acknowledged tool calls missing from the store after `kill -9`.

    python benchmarks/crash_loss.py --trials 5 --clients 16 --seconds 3
    python benchmarks/crash_loss.py --trials 5 --clients 16 --seconds 3 --sync       # serve --sync
    python benchmarks/crash_loss.py --trials 10 --stdio-calls 10 [--sync]             # one stdio server

Each trial starts ``coworkenv serve`` on a fresh store, lets ``--clients`` episodes call a tool in a
closed loop for ``--seconds``, kills the server with SIGKILL in the middle of that traffic, and then
compares the calls each client saw answered with the calls the store holds for its episode. It
reports how many answered calls were lost and how long before the kill they were answered (the
write-behind window is 50 ms), and checks that every episode the kill left running is ended as
interrupted, never admitted, when the store is next opened.

``--sync`` serves with ``coworkenv serve --sync`` (each call committed before its result is sent).
``--stdio-calls N``: each trial instead starts one ``coworkenv serve --stdio`` process, makes N
calls one after another and kills the server as soon as the Nth answer has been read.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
VERSION = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": VERSION, "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "crash", "version": "0"}}
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json",
           "mcp-protocol-version": VERSION, "mcp-method": "tools/call", "mcp-name": "mail_search_messages"}


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def synth(directory: Path) -> tuple[Path, str]:
    store = directory / "s.db"
    subprocess.run([sys.executable, "-m", "coworkenv", "synth", "--store", str(store), "-n", "1",
                    "--capability", "lookup"], env=env(), check=True, capture_output=True)
    from coworkenv.store import Store

    return store, Store(store).tasks(status="admitted")[0].id


async def stdio_trial(directory: Path, calls: int, sync: bool) -> dict:
    """One stdio server, ``calls`` calls one after another, killed as soon as the last answer is read."""
    import json

    store, task = synth(directory)
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "coworkenv", "serve", "--stdio", "--task", task, "--store", str(store),
        *(["--sync"] if sync else []), env=env(), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL)
    assert server.stdin is not None and server.stdout is not None
    answered = 0
    for rid in range(calls):
        body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                "params": {"name": "mail_search_messages", "arguments": {"query": f"c0-{rid}"}, "_meta": META}}
        server.stdin.write((json.dumps(body) + "\n").encode())
        await server.stdin.drain()
        while (message := json.loads(await server.stdout.readline())).get("id") != rid:
            pass
        answered += message.get("result", {}).get("isError") is False
    server.kill()
    await server.wait()
    from coworkenv.store import Store

    opened = Store(store)
    recorded = sum(len(opened.tool_calls(e.id)) for e in opened.episodes(task_id=task, source="live"))
    return {"acknowledged": answered, "lost": answered - recorded, "lost_age_ms_max": float("nan"),
            **await reopened(opened, directory)}


async def trial(directory: Path, clients: int, seconds: float, sync: bool) -> dict:
    store, task = synth(directory)
    from coworkenv.store import Store

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "coworkenv", "serve", "--store", str(store), "--port", str(port),
                               "--rate", "0", *(["--sync"] if sync else [])], env=env(), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(base_url=base, timeout=10) as http:
        for _ in range(300):
            try:
                await http.get("/tasks")
                break
            except httpx.TransportError:
                await asyncio.sleep(0.1)
        answered: dict[int, list[float]] = {i: [] for i in range(clients)}  # when each call's answer came
        stop = time.monotonic() + seconds

        async def client(i: int) -> None:
            rid = 0
            while time.monotonic() < stop:
                rid += 1
                body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                        "params": {"name": "mail_search_messages", "arguments": {"query": f"c{i}-{rid}"}, "_meta": META}}
                try:
                    response = await http.post(f"/t/{task}/e/crash-{i}/mcp", json=body, headers=HEADERS)
                except httpx.TransportError:
                    return  # the server is gone
                if response.status_code == 200 and '"isError":false' in response.text.replace(" ", ""):
                    answered[i].append(time.monotonic())

        async def killer() -> float:
            await asyncio.sleep(seconds / 2)
            os.kill(server.pid, signal.SIGKILL)
            return time.monotonic()

        results = await asyncio.gather(killer(), *(client(i) for i in range(clients)))
    killed_at = results[0]
    server.wait()
    store_ = Store(store)
    recorded: dict[int, int] = {}
    for episode in store_.episodes(task_id=task):
        calls = [c for c in store_.tool_calls(episode.id) if c.tool == "mail_search_messages"]
        for c in calls:
            i = int(c.arguments["query"].split("-")[0][1:])
            recorded[i] = recorded.get(i, 0) + 1
    lost_ages = []
    for i, times in answered.items():
        acknowledged = [t for t in times if t <= killed_at]
        missing = len(acknowledged) - recorded.get(i, 0)
        lost_ages += [(killed_at - t) * 1000 for t in acknowledged[len(acknowledged) - missing:]] if missing > 0 else []
    return {"acknowledged": sum(len([t for t in ts if t <= killed_at]) for ts in answered.values()),
            "lost": len(lost_ages), "lost_age_ms_max": max(lost_ages, default=0.0),
            **await reopened(store_, directory)}


async def reopened(store, directory: Path) -> dict:
    """Open the store as the next server would: the episodes the kill left running, and how many were admitted."""
    from coworkenv.episodes import EpisodeHost, EpisodeSettings
    from coworkenv.gate import GRADER_VERSION

    host = EpisodeHost(store, EpisodeSettings(cache_dir=directory / "cache"))
    interrupted = host.interrupted
    admitted = [e for e in interrupted if (v := store.verdict(e, GRADER_VERSION)) is not None and v.admitted]
    await host.close()
    return {"interrupted": len(interrupted), "interrupted_admitted": len(admitted)}


async def main(args: argparse.Namespace) -> None:
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    rows = []
    for _ in range(args.trials):
        with tempfile.TemporaryDirectory(prefix="coworkenv-crash-") as tmp:
            rows.append(await stdio_trial(Path(tmp), args.stdio_calls, args.sync) if args.stdio_calls
                        else await trial(Path(tmp), args.clients, args.seconds, args.sync))
        print(rows[-1], flush=True)
    print()
    print("| trial | calls answered before the kill | lost | oldest lost (ms before the kill) "
          "| episodes left running | of them admitted |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for n, r in enumerate(rows, 1):
        print(f"| {n} | {r['acknowledged']} | {r['lost']} | {r['lost_age_ms_max']:.0f} | {r['interrupted']} "
              f"| {r['interrupted_admitted']} |")
    print(f"median lost per trial: {statistics.median(r['lost'] for r in rows)}; "
          f"oldest lost call: {max(r['lost_age_ms_max'] for r in rows):.0f} ms before the kill")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--sync", action="store_true", help="serve with --sync")
    parser.add_argument("--stdio-calls", type=int, default=0, metavar="N",
                        help="one stdio server per trial, killed right after its Nth answer")
    asyncio.run(main(parser.parse_args()))

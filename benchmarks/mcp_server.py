"""MCP server throughput, latency, CPU and memory: coworkenv episodes (each in its own bubblewrap
sandbox, every call validated and recorded) against a bare ``MCPServer`` with the same trivial
tool, measured in the same run.

    python benchmarks/mcp_server.py                       # HTTP closed 1, 8, 64, 256; open 64-512 @1/s; stdio 1, 8, 64
    python benchmarks/mcp_server.py --levels 1 --open 256 --runs 3 --stdio-levels
    python benchmarks/mcp_server.py --servers coworkenv --workers 1 2 --levels 64 --open 512   # serve --workers
    python benchmarks/mcp_server.py --servers coworkenv coworkenv-sync --levels 1 --open --stdio-levels 1  # serve --sync

Modes:
- closed loop: each client (one episode each) calls again as soon as its answer arrives, for
  ``--duration`` seconds: calls/s (saturation at the higher levels) and p50/p99 latency;
- open loop: ``--open N ...`` episodes each calling once a second on a fixed schedule with random
  phases, whether or not the server keeps up; a call's latency counts from when it was due, so a
  server that falls behind shows it (no coordinated omission): errors and p50/p99 at that load;
- ``--legacy-levels``: closed loop in 2025-11-25 sessions (initialize, then calls with the
  ``Mcp-Session-Id``), one session and so one episode per client.
Each level also reports the CPU the server used per call: its own process, and the sandboxes
(its child processes) apart. Memory per episode is the growth of the server's process tree (PSS:
shared pages split between the processes sharing them) after opening N episodes, divided by N.
The sandbox's own round trip (``Sandbox.call_tool`` in this process, no server) is measured once
for comparison. The load generator speaks raw 2026-07-28 JSON-RPC over keep-alive HTTP/1.1
connections (hand-written requests on asyncio streams, some 20-50 us of CPU a call) and
newline-delimited stdio; its own CPU per call is reported too, since it shares the machine.

Under a flood: ``--flood RATE`` measures every HTTP load a second time while another process (on
the load generator's CPUs) sends RATE bad requests a second to the same server, a fixed mix of
five kinds: a truncated JSON body, a made-up ``Mcp-Session-Id``, a wrong Content-Type, a call of a
tool that does not exist (on one episode of its own), and a GET of a path that does not exist. The
rows say how the good traffic fared (calls/s, p50/p99) beside the same load without the flood.

Per core: ``--server-cpus 0 --loadgen-cpus 1`` pins every server's process tree (the server, its
bubblewrap sandboxes, their runners and workers: all inherit the affinity set before the server
starts) to CPU 0 and the load generator to CPU 1, for coworkenv and the bare baseline alike (the
sandbox-alone round trip runs on the server CPUs too). Each level checks that every process of the
server's tree is still on the server CPUs and the output reports what it checked; so ``--open 256``
pinned is "256 episodes on one core".
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
SETTLE_S = 1.0
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


class Pinning:
    """Which CPUs the servers' process trees and the load generator run on (None: anywhere)."""

    def __init__(self, server: list[int] | None, loadgen: list[int] | None) -> None:
        available = os.sched_getaffinity(0)
        for name, cpus in (("--server-cpus", server), ("--loadgen-cpus", loadgen)):
            if cpus is not None and not set(cpus) <= available:
                raise SystemExit(f"{name} {cpus}: this process may run only on CPUs {sorted(available)}")
        if server and loadgen and set(server) & set(loadgen):
            raise SystemExit(f"--server-cpus {server} and --loadgen-cpus {loadgen} overlap")
        self.original = available
        self.server = set(server) if server else None
        self.loadgen = set(loadgen) if loadgen else None
        self.checked = 0  # processes of server trees found on the server CPUs, all checks together
        self.most = 0  # the largest tree checked at once

    def describe(self) -> str:
        where = lambda cpus: f"CPU {','.join(map(str, sorted(cpus)))}" if cpus else "any CPU"
        text = f"pinning: server trees on {where(self.server)}, load generator on {where(self.loadgen)}"
        if self.server:
            text += f"; {self.checked} server-tree processes checked on their CPUs (up to {self.most} at once)"
        return text

    def pin_self(self, cpus: set[int] | None) -> None:
        """Move this process, every thread of it, to ``cpus`` (the affinity is per thread)."""
        if cpus:
            for thread in os.listdir("/proc/self/task"):
                os.sched_setaffinity(int(thread), cpus)

    def preexec(self, cpus: list[int] | None = None):
        """For Popen: pin the child (to the server CPUs, or ``cpus``) before it execs, so all it
        starts inherits the pin."""
        cpus = cpus if cpus is not None else self.server
        return (lambda: os.sched_setaffinity(0, cpus)) if cpus else None

    def check(self, root: psutil.Process) -> None:
        """Every process of ``root``'s tree (the sandboxes included) is still on the server CPUs."""
        if not self.server:
            return
        tree = [root, *root.children(recursive=True)]
        off = []
        for proc in tree:
            try:
                cpus = set(proc.cpu_affinity())
            except psutil.Error:  # gone meanwhile
                continue
            if cpus != self.server:
                off.append(f"{proc.pid} {proc.name()} on {sorted(cpus)}")
        if off:
            raise RuntimeError(f"server tree processes off the server CPUs {sorted(self.server)}: {off[:5]}")
        self.checked += len(tree)
        self.most = max(self.most, len(tree))


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
    def __init__(self, kind: str, store: Path, task: str, pinning: Pinning) -> None:
        self.kind, self.port = kind, free_port()
        if kind.startswith("coworkenv"):
            workers = kind.partition(" x")[2] or "1"
            cmd = [sys.executable, "-m", "coworkenv", "serve", "--store", str(store), "--port", str(self.port),
                   "--rate", "0", "--idle-timeout", "86400", "--workers", workers]
            cmd += ["--sync"] if kind.startswith("coworkenv-sync") else []
            self.paths = lambda i, era: (f"/t/{task}/e/bench-{i}-{random.random():.9f}/mcp" if era == "modern"
                                         else f"/t/{task}/mcp")
        else:
            cmd = [sys.executable, __file__, "--bare-http", str(self.port)]
            self.paths = lambda i, era: "/mcp"
        self.log = store.parent / f"{kind}-server.log"
        self.pinning = pinning
        self.process = subprocess.Popen(cmd, env=env(), stdout=subprocess.DEVNULL, stderr=self.log.open("w"),
                                        preexec_fn=pinning.preexec())
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

    def tree(self) -> tuple[psutil.Process, list[psutil.Process]]:
        proc = psutil.Process(self.process.pid)
        return proc, proc.children(recursive=True)

    def pss(self) -> int:
        proc, children = self.tree()
        total = 0
        for p in (proc, *children):
            try:
                total += p.memory_full_info().pss
            except psutil.Error:
                pass
        return total

    def cpu(self) -> tuple[float, float]:
        """CPU seconds so far: the server process, and its children (sandboxes) alive now or reaped."""
        proc, children = self.tree()
        own = proc.cpu_times()
        kids = own.children_user + own.children_system
        for child in children:
            try:
                times = child.cpu_times()
                kids += times.user + times.system
            except psutil.Error:
                pass
        return own.user + own.system, kids

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()


class Connection:
    """One keep-alive HTTP/1.1 connection speaking just enough of the protocol for these POSTs."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.last_headers: dict[bytes, bytes] = {}

    async def request(self, method: str, path: str, body: bytes = b"", headers: bytes = b"") -> tuple[int, bytes]:
        for attempt in (1, 2):  # once more on a fresh connection if the server closed this one meanwhile
            if self.writer is None:
                self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
            try:
                self.writer.write(f"{method} {path} HTTP/1.1\r\nhost: 127.0.0.1:{self.port}\r\n"
                                  f"content-length: {len(body)}\r\n".encode() + headers + b"\r\n" + body)
                return await self._response()
            except (ConnectionError, asyncio.IncompleteReadError):
                self.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    async def _response(self) -> tuple[int, bytes]:
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        fields = self.last_headers = {}
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            fields[name.strip().lower()] = value.strip()
        if b"content-length" in fields:
            body = await self.reader.readexactly(int(fields[b"content-length"]))
        elif fields.get(b"transfer-encoding") == b"chunked":
            body = b""
            while size := int((await self.reader.readuntil(b"\r\n"))[:-2], 16):
                body += (await self.reader.readexactly(size + 2))[:-2]
            await self.reader.readuntil(b"\r\n")
        else:
            body = b""
        if fields.get(b"connection") == b"close":
            self.close()
        return status, body

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


JSON_HEADERS = b"accept: application/json, text/event-stream\r\ncontent-type: application/json\r\n"
CALL_HEADERS = JSON_HEADERS + f"mcp-protocol-version: {VERSION}\r\nmcp-method: tools/call\r\nmcp-name: {TOOL}\r\n".encode()
CALL_BODY = json.dumps({"jsonrpc": "2.0", "id": 123456789, "method": "tools/call",
                        "params": {"name": TOOL, "arguments": ARGS, "_meta": META}})
LEGACY = "2025-11-25"
LEGACY_BODY = json.dumps({"jsonrpc": "2.0", "id": 123456789, "method": "tools/call",
                          "params": {"name": TOOL, "arguments": ARGS}})


def flood_requests(kind: str, task: str) -> list[tuple[str, str, bytes, bytes]]:
    """The bad requests of a flood, as (method, path, body, headers), one of each kind."""
    episode = f"/t/{task}/e/flood/mcp" if kind.startswith("coworkenv") else "/mcp"
    fresh = (lambda: f"/t/{task}/e/flood-{random.random():.9f}/mcp") if kind.startswith("coworkenv") else (lambda: "/mcp")
    unknown_tool = CALL_BODY.replace(TOOL, "no_such_tool").encode()
    return [
        ("POST", fresh(), b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {', CALL_HEADERS),
        ("POST", f"/t/{task}/mcp" if kind.startswith("coworkenv") else "/mcp", LEGACY_BODY.encode(),
         JSON_HEADERS + f"mcp-protocol-version: {LEGACY}\r\nmcp-session-id: {random.getrandbits(128):032x}\r\n".encode()),
        ("POST", fresh(), CALL_BODY.encode(), CALL_HEADERS.replace(b"application/json\r\nmcp", b"text/plain\r\nmcp")),
        ("POST", episode, unknown_tool, CALL_HEADERS.replace(TOOL.encode(), b"no_such_tool")),
        ("GET", f"/nothing-{random.random():.6f}", b"", b""),
    ]


async def flood(port: int, kind: str, task: str, rate: float) -> None:
    """Send ``rate`` bad requests a second until killed, over 8 keep-alive connections; print the
    count of answered ones to stdout on SIGTERM."""
    import signal

    connections = [Connection(port) for _ in range(8)]
    free: asyncio.Queue[Connection] = asyncio.Queue()
    for conn in connections:
        free.put_nowait(conn)
    answered = 0
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)

    async def one(i: int) -> None:
        nonlocal answered
        method, path, body, headers = flood_requests(kind, task)[i % 5]
        conn = await free.get()
        try:
            await conn.request(method, path, body, headers)
            answered += 1
        except (OSError, asyncio.IncompleteReadError, ValueError):
            conn.close()
        finally:
            free.put_nowait(conn)

    began, sent, pending = time.perf_counter(), 0, set()
    while not stop.is_set():
        await asyncio.sleep(max(0.0, began + sent / rate - time.perf_counter()))
        task_ = asyncio.ensure_future(one(sent))
        pending.add(task_)
        task_.add_done_callback(pending.discard)
        sent += 1
    print(json.dumps({"sent": sent, "answered": answered, "seconds": time.perf_counter() - began}), flush=True)


class Flood:
    """A flood of bad requests from another process, for the length of a ``with`` block."""

    def __init__(self, target: HttpTarget, task: str, rate: float) -> None:
        self.args = [sys.executable, __file__, "--flood-only", str(target.port), target.kind, task, str(rate)]
        self.pinning = target.pinning
        self.report: dict = {}

    def __enter__(self) -> Flood:
        self.process = subprocess.Popen(self.args, env=env(), stdout=subprocess.PIPE, text=True,
                                        preexec_fn=self.pinning.preexec(self.pinning.loadgen))
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        out, _ = self.process.communicate(timeout=60)
        self.report = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}


class Episode:
    """One client's episode: its connection, URL and (2025-11-25) MCP session."""

    def __init__(self, target: HttpTarget, i: int, era: str) -> None:
        self.conn = Connection(target.port)
        self.era = era
        self.path = target.paths(i, era)
        self.headers, self.body = CALL_HEADERS, CALL_BODY

    async def open(self) -> None:
        if self.era == "legacy":  # the handshake: initialize, then the initialized notification
            init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}
            status, body = await self.conn.request("POST", self.path, json.dumps(init).encode(), JSON_HEADERS)
            if status != 200:
                raise RuntimeError(f"initialize: HTTP {status}: {body[:200]!r}")
            self.headers = JSON_HEADERS + (f"mcp-protocol-version: {LEGACY}\r\n"
                                           f"mcp-session-id: {self.conn.last_headers[b'mcp-session-id'].decode()}\r\n"
                                           ).encode()
            self.body = LEGACY_BODY
            await self.conn.request("POST", self.path, b'{"jsonrpc": "2.0", "method": "notifications/initialized"}',
                                    self.headers)
        await self.call(0)

    async def call(self, rid: int) -> None:
        status, text = await self.conn.request("POST", self.path, self.body.replace("123456789", str(rid), 1).encode(),
                                               self.headers)
        if status != 200 or b'"isError":false' not in text.replace(b" ", b""):
            raise RuntimeError(f"HTTP {status}: {text[:200]!r}")

    async def end(self) -> None:
        await self.conn.request("DELETE", self.path, headers=self.headers if self.era == "legacy" else b"")
        self.conn.close()


def summary(latencies: list[float], seconds: float, errors: int) -> dict:
    ordered = sorted(latencies)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else float("nan")
    return {"calls_per_s": len(ordered) / seconds, "p50_ms": pick(0.50), "p99_ms": pick(0.99), "errors": errors,
            "calls": len(ordered)}


async def http_level(target: HttpTarget, clients: int, duration: float, rate: float | None,
                     era: str = "modern", trace: Path | None = None) -> dict:
    """``clients`` episodes; closed loop (``rate`` None) or each calling ``rate`` times a second.

    With ``trace``, every call's due time (seconds into the level), latency and episode are
    appended to that file as a JSON line, to see when the slow calls happened.
    """
    episodes = [Episode(target, i, era) for i in range(clients)]
    before = target.pss()
    opened = time.perf_counter()
    semaphore = asyncio.Semaphore(16)  # open sandboxes a few at a time

    async def first(episode: Episode) -> None:
        async with semaphore:
            await episode.open()

    await asyncio.gather(*(first(e) for e in episodes))
    open_s = time.perf_counter() - opened
    memory = (target.pss() - before) / clients
    target.pinning.check(psutil.Process(target.process.pid))
    await asyncio.sleep(SETTLE_S)  # let the warm pool refill before the CPU counters start
    timeline: list[tuple[float, float, int]] = []  # (due, seconds into the level; latency; episode)
    errors = 0
    # The CPU counters are read before the schedule starts: reading them walks the server's whole
    # process tree (over 1,000 processes at 256 episodes, ~0.2 s), which would delay the first calls.
    server_before, sandboxes_before = target.cpu()
    own_before = time.process_time()
    began = time.perf_counter()
    stop = began + duration
    phases = [random.random() / rate if rate else 0.0 for _ in range(clients)]

    async def client(i: int) -> None:
        nonlocal errors
        rid = 1
        due = began + phases[i]
        while due < stop:
            if rate:
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
            else:
                due = time.perf_counter()
            try:
                await episodes[i].call(rid)
                timeline.append((due - began, time.perf_counter() - due, i))
            except Exception:
                errors += 1
            rid += 1
            if rate:
                due += 1.0 / rate

    await asyncio.gather(*(client(i) for i in range(clients)))
    elapsed = time.perf_counter() - began
    server_after, sandboxes_after = target.cpu()
    latencies = [latency for _, latency, _ in timeline]
    calls = max(1, len(latencies) + errors)
    result = {**summary(latencies, elapsed, errors),
              "server_cpu_ms": (server_after - server_before) / calls * 1000,
              "sandbox_cpu_ms": (sandboxes_after - sandboxes_before) / calls * 1000,
              "loadgen_cpu_ms": (time.process_time() - own_before) / calls * 1000}
    if trace is not None:
        with trace.open("a") as out:
            out.write(json.dumps({"server": target.kind, "clients": clients, "rate": rate, "era": era, "began": began,
                                  "calls": [[round(due, 4), round(latency, 5), i] for due, latency, i in timeline]})
                      + "\n")

    async def end(episode: Episode) -> None:  # a DELETE ends a coworkenv episode, releasing its sandbox
        async with semaphore:
            await episode.end()

    await asyncio.gather(*(end(e) for e in episodes))
    return {**result, "open_s": open_s, "mb_per_episode": memory / 2**20}


async def sandbox_alone(store: Path, task: str, calls: int, pinning: Pinning) -> dict:
    """The sandbox's round trip without the server: ``Sandbox.call_tool`` from this process (and
    the sandboxes it starts) on the server CPUs."""
    sys.path.insert(0, str(ROOT))
    from coworkenv.episodes import EpisodeHost
    from coworkenv.store import Provenance, Store

    pinning.pin_self(pinning.server)
    host = EpisodeHost(Store(store))
    try:
        episode = await host.open(task, Provenance("live", provider="bench"))
        app, tool = TOOL.split("_", 1)
        for _ in range(20):
            await episode.sandbox.call_tool(app, tool, ARGS)
        latencies = []
        began, cpu = time.perf_counter(), time.process_time()
        for _ in range(calls):
            started = time.perf_counter()
            outcome = await episode.sandbox.call_tool(app, tool, ARGS)
            latencies.append(time.perf_counter() - started)
            assert outcome.ok, outcome.error
        pinning.check(psutil.Process())
        # "server CPU" here: what the calling side of the sandbox costs the process that calls
        return {**summary(latencies, time.perf_counter() - began, 0),
                "server_cpu_ms": (time.process_time() - cpu) / calls * 1000}
    finally:
        await host.close()
        host.store.close()
        pinning.pin_self(pinning.loadgen or pinning.original)


class StdioTarget:
    """One server process per episode, spoken to with newline-delimited JSON-RPC."""

    def __init__(self, kind: str, store: Path, task: str, pinning: Pinning) -> None:
        self.pinning = pinning
        if kind.startswith("coworkenv"):
            self.cmd = [sys.executable, "-m", "coworkenv", "serve", "--stdio", "--task", task, "--store", str(store)]
            self.cmd += ["--sync"] if kind == "coworkenv-sync" else []
        else:
            self.cmd = [sys.executable, __file__, "--bare-stdio"]

    async def start(self) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(*self.cmd, env=env(), stdin=asyncio.subprocess.PIPE,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
                                                    limit=1 << 22, preexec_fn=self.pinning.preexec())


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
        for p in processes:
            target.pinning.check(psutil.Process(p.pid))
        rss = 0
        for p in processes:
            proc = psutil.Process(p.pid)
            rss += proc.memory_full_info().pss + sum(c.memory_full_info().pss for c in proc.children(recursive=True))
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
            except TimeoutError:
                p.kill()


def median_of(runs: list[dict]) -> dict:
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


async def main(args: argparse.Namespace) -> None:
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    pinning = Pinning(args.server_cpus, args.loadgen_cpus)
    pinning.pin_self(pinning.loadgen)
    print(pinning.describe().split(";")[0], flush=True)
    with tempfile.TemporaryDirectory(prefix="coworkenv-bench-") as tmp:
        store, task = make_store(Path(tmp))
        rows = []
        if "coworkenv" in args.servers and args.sandbox_calls:
            alone = median_of([await sandbox_alone(store, task, args.sandbox_calls, pinning) for _ in range(args.runs)])
            rows.append(("-", "sandbox alone", "closed 1", alone))
            print(rows[-1], flush=True)
        loads = ([(f"closed {n}", n, None, "modern") for n in args.levels]
                 + [(f"open {n} @1/s", n, 1.0, "modern") for n in args.open]
                 + [(f"closed {n}, {LEGACY}", n, None, "legacy") for n in args.legacy_levels])
        targets = {}
        kinds = [k for k in args.servers if k != "coworkenv"] + [
            "coworkenv" if n == 1 else f"coworkenv x{n}" for n in args.workers if "coworkenv" in args.servers]
        try:
            for kind in kinds:
                targets[kind] = HttpTarget(kind, store, task, pinning)
            for target in targets.values():
                await target.ready()
            floods = [None] + ([args.flood] if args.flood else [])
            for (label, clients, rate, era), flood_rate in [(load, f) for load in loads for f in floods]:
                # The servers take turns, run by run, so a change in the machine's load hits both alike.
                runs: dict[str, list[dict]] = {kind: [] for kind in targets}
                for _ in range(args.runs):
                    for kind, target in targets.items():
                        if flood_rate is None:
                            runs[kind].append(await http_level(target, clients, args.duration, rate, era, args.trace))
                            continue
                        with Flood(target, task, flood_rate) as bad:
                            result = await http_level(target, clients, args.duration, rate, era, args.trace)
                        runs[kind].append({**result, "flood_answered_per_s":
                                           bad.report.get("answered", 0) / max(bad.report.get("seconds", 1), 1e-9)})
                for kind in targets:
                    name = label if flood_rate is None else f"{label}, flood {flood_rate:g}/s"
                    rows.append(("http", kind, name, median_of(runs[kind])))
                    print(rows[-1], flush=True)
        except Exception:
            for kind, target in targets.items():
                print(f"{kind} server (exit code {target.process.poll()}) output:\n{target.log.read_text()[-3000:]}",
                      file=sys.stderr)
            raise
        finally:
            for target in targets.values():
                target.stop()
        for kind in args.servers:
            for clients in args.stdio_levels:
                runs = [await stdio_level(StdioTarget(kind, store, task, pinning), clients, args.duration)
                        for _ in range(args.runs)]
                rows.append(("stdio", kind, f"closed {clients}", median_of(runs)))
                print(rows[-1], flush=True)
        print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        print(pinning.describe())
        print()
        print("| transport | server | load | calls/s | p50 ms | p99 ms | errors | server CPU ms/call "
              "| sandbox CPU ms/call | load generator CPU ms/call | MB/episode |")
        print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        cell = lambda r, key, fmt: format(r[key], fmt) if key in r else "—"
        for transport, kind, load, r in rows:
            print(f"| {transport} | {kind} | {load} | {r['calls_per_s']:.0f} | {r['p50_ms']:.2f} | {r['p99_ms']:.1f} "
                  f"| {r['errors']:.0f} | {cell(r, 'server_cpu_ms', '.2f')} | {cell(r, 'sandbox_cpu_ms', '.2f')} "
                  f"| {cell(r, 'loadgen_cpu_ms', '.3f')} | {cell(r, 'mb_per_episode', '.1f')} |")
        by = {(t, k, load): r for t, k, load, r in rows}
        for t, k, load, r in rows:
            one = by.get((t, "coworkenv", load)) if k.startswith("coworkenv x") else None
            if one:
                print(f"{t} {load}: {k} / one worker calls/s {r['calls_per_s'] / one['calls_per_s']:.2f}x, p50 "
                      f"{r['p50_ms'] / one['p50_ms']:.2f}x, p99 {r['p99_ms'] / one['p99_ms']:.2f}x")
        for t, k, load, r in rows:
            bare = by.get((t, "bare", load))
            if k == "coworkenv" and bare:
                print(f"{t} {load}: coworkenv / bare p50 {r['p50_ms'] / bare['p50_ms']:.2f}x, p99 "
                      f"{r['p99_ms'] / bare['p99_ms']:.2f}x, calls/s {r['calls_per_s'] / bare['calls_per_s']:.2f}x")
        for t, k, load, r in rows:
            behind = by.get((t, "coworkenv", load)) if k == "coworkenv-sync" else None
            if behind:
                print(f"{t} {load}: --sync / write-behind calls/s {r['calls_per_s'] / behind['calls_per_s']:.2f}x, "
                      f"p50 {r['p50_ms'] / behind['p50_ms']:.2f}x, p99 {r['p99_ms'] / behind['p99_ms']:.2f}x")
        for t, k, load, r in rows:
            calm = by.get((t, k, load.split(", flood")[0])) if ", flood" in load else None
            if calm:
                print(f"{t} {k} {load}: good calls/s {r['calls_per_s'] / calm['calls_per_s']:.2f}x, p99 "
                      f"{r['p99_ms']:.1f} ms (without the flood {calm['p99_ms']:.1f} ms); bad requests answered "
                      f"{r['flood_answered_per_s']:.0f}/s")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--bare-http"]:
        import uvicorn

        # The same HTTP stack as `coworkenv serve`: asyncio's event loop, uvicorn's choice of parser.
        uvicorn.run(bare_server().streamable_http_app(), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning",
                    loop="asyncio")
    elif sys.argv[1:2] == ["--bare-stdio"]:
        bare_server().run("stdio")
    elif sys.argv[1:2] == ["--flood-only"]:
        asyncio.run(flood(int(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5])))
    else:
        parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
        parser.add_argument("--levels", type=int, nargs="*", default=[1, 8, 64, 256],
                            help="numbers of closed-loop clients (one episode each)")
        parser.add_argument("--open", type=int, nargs="*", default=[64, 128, 256, 512],
                            help="numbers of episodes each calling once a second (open loop)")
        parser.add_argument("--legacy-levels", type=int, nargs="*", default=[1],
                            help=f"numbers of closed-loop clients in {LEGACY} sessions (handshake era)")
        parser.add_argument("--stdio-levels", type=int, nargs="*", default=[1, 8, 64],
                            help="numbers of stdio clients, each its own server process (one episode each)")
        parser.add_argument("--sandbox-calls", type=int, default=500,
                            help="round trips of the sandbox alone (0: skip)")
        parser.add_argument("--duration", type=float, default=10.0)
        parser.add_argument("--servers", nargs="+", default=["bare", "coworkenv"], choices=["bare", "coworkenv", "coworkenv-sync"],
                            help="coworkenv-sync: `serve --sync` (each call committed before its result is sent)")
        parser.add_argument("--workers", type=int, nargs="+", default=[1], metavar="N",
                            help="coworkenv served by `serve --workers N`, one server per N, measured side by side")
        parser.add_argument("--runs", type=int, default=3)
        parser.add_argument("--flood", type=float, metavar="RATE",
                            help="also measure every HTTP load under RATE bad requests a second from another process")
        parser.add_argument("--server-cpus", type=int, nargs="+", metavar="CPU",
                            help="pin each server's process tree (sandboxes included) to these CPUs")
        parser.add_argument("--loadgen-cpus", type=int, nargs="+", metavar="CPU",
                            help="pin the load generator to these CPUs")
        parser.add_argument("--trace", type=Path, metavar="FILE",
                            help="append every HTTP call's due time and latency to FILE (JSON lines)")
        asyncio.run(main(parser.parse_args()))

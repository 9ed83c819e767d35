"""``serve --workers N``: N worker processes behind one address.

A worker is a whole ``coworkenv serve`` (its own event loop, episode host, sandbox pool and store
connection) listening on a Unix socket; episodes live in the worker that opened them. The front
listens on the public address and forwards every request, streamed both ways, to the worker that
owns its episode:

- a 2025-11-25 session (``Mcp-Session-Id``) to the worker whose response opened it;
- a key or episode address (``/t/{task}/e/{key}/…``, ``/e/{episode}/…``, ``/episodes/{id}…``, and the
  capture proxy's routes under them) to the worker it was placed on, else to the worker that says it
  holds that episode (asked when the front does not know it), else, for a key, to a new placement;
- a new episode (an ``initialize`` without a session, ``POST /episodes``, a first key) to the worker
  with the fewest open episodes (each worker reports its count; the front counts its own placements
  since the last report);
- anything else (task lists, listing at a task address) to the workers in turn.

The workers run the same guards as a single server (token, Host/Origin, body size, rate, session
pinning) on the client's own address, which the front passes in a header that only the front can set
(it overwrites whatever a client sends). Every worker writes to the one store file; an episode's calls
are recorded in order by the one worker that holds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import httpx
from starlette.types import Receive, Scope, Send

CLIENT_HEADER = "x-coworkenv-client"  # the client's address, set by the front for its workers
STATE_KEY_ENV = "COWORKENV_REQUEST_STATE_KEY"  # one key for every worker: a request state one signs, another reads
INTERNAL_PREFIX = "/_coworkenv/"  # the workers' routes for the front only (owner, load)
ROUTES_KEPT = 65536  # sessions, keys and episodes the front remembers the worker of
LOAD_EVERY_S = 0.5
_KEYED = re.compile(r"^((?:/w/[^/]+)?/t/[^/]+/e/[^/]+)(?:/|$)")
_EPISODE = re.compile(r"^(?:/e/|/episodes/)([^/]+)(?:/|$)")
_TASK = re.compile(r"^(?:/w/[^/]+)?/t/[^/]+/mcp$")
_HOP = {b"connection", b"keep-alive", b"transfer-encoding", b"te", b"upgrade", b"proxy-connection", b"host",
        CLIENT_HEADER.encode()}


class _Kept(OrderedDict[str, int]):
    """A bounded map to worker indexes: the least recently used go first."""

    def get_used(self, key: str) -> int | None:
        index = self.get(key)
        if index is not None:
            self.move_to_end(key)
        return index

    def keep(self, key: str, index: int) -> None:
        self[key] = index
        self.move_to_end(key)
        while len(self) > ROUTES_KEPT:
            self.popitem(last=False)


class Front:
    """The ASGI app in front of the workers at ``sockets`` (see the module)."""

    def __init__(self, sockets: list[str]) -> None:
        self.sockets = sockets
        self.clients = [httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=path), base_url="http://worker",
                                          timeout=httpx.Timeout(None, connect=10.0)) for path in sockets]
        self.sessions = _Kept()
        self.keys = _Kept()
        self.episodes = _Kept()
        self.open = [0] * len(sockets)  # each worker's open episodes, as it last said, plus placements since
        self.turn = itertools.cycle(range(len(sockets)))
        self._poller: asyncio.Task | None = None

    # ------------------------------------------------------------------ routing

    def place(self) -> int:
        index = min(range(len(self.open)), key=lambda i: (self.open[i], i))
        self.open[index] += 1
        return index

    async def owner(self, path: str) -> int | None:
        """The worker that holds the open episode ``path`` names, asking each."""
        async def ask(index: int) -> int | None:
            try:
                response = await self.clients[index].get(f"{INTERNAL_PREFIX}owner", params={"path": path})
            except httpx.HTTPError:
                return None
            return index if response.status_code == 200 else None

        found = [i for i in await asyncio.gather(*(ask(i) for i in range(len(self.clients)))) if i is not None]
        return found[0] if found else None

    async def route(self, method: str, path: str, session: str | None) -> tuple[int, str]:
        """The worker for a request, and what to learn from its response: ``session`` (a new session id),
        ``episode`` (``POST /episodes``' JSON), or ``""``."""
        if session is not None:
            known = self.sessions.get_used(session)
            return (known if known is not None else next(self.turn)), ""
        keyed = _KEYED.match(path)
        if keyed:
            known = self.keys.get_used(keyed.group(1))
            if known is None:
                known = await self.owner(path)
                known = known if known is not None else self.place()
                self.keys.keep(keyed.group(1), known)
            return known, ""
        episode = _EPISODE.match(path)
        if episode:
            known = self.episodes.get_used(episode.group(1))
            if known is None:
                known = await self.owner(path)
                if known is None:
                    return next(self.turn), ""  # ended or unknown: any worker reads the store
                self.episodes.keep(episode.group(1), known)
            return known, ""
        if method == "POST" and path == "/episodes":
            return self.place(), "episode"
        if method == "POST" and _TASK.match(path):
            return self.place(), "session"  # an initialize opens a session; anything else is answered anyway
        return next(self.turn), ""

    # ------------------------------------------------------------------ ASGI

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path = scope["path"]
        if path.startswith(INTERNAL_PREFIX):
            await _plain(send, 404, b"not found")
            return
        # a field value goes without the whitespace around it (RFC 9110, 5.5), which the client library refuses
        headers = [(k, v.strip(b" \t")) for k, v in scope["headers"] if k.lower() not in _HOP]
        host = next((v for k, v in scope["headers"] if k.lower() == b"host"), b"")
        session = next((v.decode("latin-1") for k, v in scope["headers"] if k.lower() == b"mcp-session-id"), None)
        index, learn = await self.route(scope["method"], path, session)
        client = (scope.get("client") or ("", 0))[0]
        body = await _body(receive)
        target = path + (("?" + scope["query_string"].decode("latin-1")) if scope.get("query_string") else "")
        request = self.clients[index].build_request(
            scope["method"], target, content=body,
            headers=[*headers, (b"host", host), (CLIENT_HEADER.encode(), client.encode())])
        try:
            response = await self.clients[index].send(request, stream=True)
        except httpx.HTTPError as exc:
            await _plain(send, 502, f"worker {index} did not answer: {type(exc).__name__}".encode())
            return
        try:
            if session is None and (opened := response.headers.get("mcp-session-id")):
                self.sessions.keep(opened, index)  # a session opened here: its requests come back here
            if scope["method"] == "DELETE" and session is not None and response.status_code < 300:
                self.sessions.pop(session, None)
            out = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers.multi_items()
                   if k.lower().encode() not in _HOP]
            if learn == "episode":
                data = await response.aread()
                with contextlib.suppress(ValueError, AttributeError):
                    self.episodes.keep(json.loads(data)["episode_id"], index)
                await send({"type": "http.response.start", "status": response.status_code, "headers": out})
                await send({"type": "http.response.body", "body": data})
                return
            await send({"type": "http.response.start", "status": response.status_code, "headers": out})
            await _stream(response, receive, send)
        finally:
            await response.aclose()

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._poller = asyncio.create_task(self._poll())
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._poller is not None:
                    self._poller.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await self._poller
                for client in self.clients:
                    await client.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def loads(self) -> list[int | None]:
        async def one(client: httpx.AsyncClient) -> int | None:
            try:
                return int((await client.get(f"{INTERNAL_PREFIX}load")).json()["open"])
            except (httpx.HTTPError, ValueError, KeyError, TypeError):
                return None
        return list(await asyncio.gather(*(one(c) for c in self.clients)))

    async def _poll(self) -> None:
        while True:
            for index, count in enumerate(await self.loads()):
                if count is not None:
                    self.open[index] = count
            await asyncio.sleep(LOAD_EVERY_S)


async def _body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(chunks)


async def _stream(response: httpx.Response, receive: Receive, send: Send) -> None:
    """Pass the worker's response on as it comes (an SSE stream may last long), until it ends or the
    client goes away."""
    async def pump() -> None:
        async for chunk in response.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    async def gone() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    pumping, waiting = asyncio.ensure_future(pump()), asyncio.ensure_future(gone())
    try:
        await asyncio.wait({pumping, waiting}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (pumping, waiting):
            task.cancel()
        await asyncio.gather(pumping, waiting, return_exceptions=True)
    if pumping.done() and not pumping.cancelled() and pumping.exception() is not None:
        exc = pumping.exception()
        if not isinstance(exc, (httpx.HTTPError, OSError)):
            raise exc  # type: ignore[misc]


async def _plain(send: Send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class TrustedClient:
    """A worker's outermost layer: the client address is the one the front passed (``CLIENT_HEADER``),
    and the front's own routes (``INTERNAL_PREFIX``) go to ``internal``, past the guards (only the front
    reaches a worker's socket)."""

    def __init__(self, app: Callable, internal: Callable) -> None:
        self.app = app
        self.internal = internal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(INTERNAL_PREFIX):
            await self.internal(scope, receive, send)
            return
        if scope["type"] == "http":
            forwarded = next((v for k, v in scope["headers"] if k == CLIENT_HEADER.encode()), None)
            if forwarded is not None:
                scope = {**scope, "client": (forwarded.decode("latin-1"), 0),
                         "headers": [(k, v) for k, v in scope["headers"] if k != CLIENT_HEADER.encode()]}
        await self.app(scope, receive, send)


# ---------------------------------------------------------------------- processes


class Workers:
    """``count`` worker processes, each ``python -m coworkenv serve ARGS --worker-socket PATH``; stopped
    (SIGTERM, then SIGKILL) when the block ends."""

    def __init__(self, args: list[str], count: int, directory: Path) -> None:
        self.args, self.count, self.directory = args, count, directory
        self.sockets = [str(directory / f"worker-{i}.sock") for i in range(count)]
        self.processes: list[subprocess.Popen] = []

    def __enter__(self) -> Workers:
        env = {**os.environ, STATE_KEY_ENV: secrets.token_hex(32)}
        try:
            for path in self.sockets:
                self.processes.append(subprocess.Popen([sys.executable, "-m", "coworkenv", "serve", *self.args,
                                                        "--worker-socket", path], env=env))
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    async def ready(self, timeout: float = 120.0) -> None:
        """Wait until every worker answers on its socket; ``RuntimeError`` naming one that died or did not."""
        deadline = time.monotonic() + timeout
        for index, path in enumerate(self.sockets):
            async with httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=path), base_url="http://worker") as client:
                while True:
                    if self.processes[index].poll() is not None:
                        raise RuntimeError(f"worker {index} exited with status {self.processes[index].returncode}")
                    with contextlib.suppress(httpx.HTTPError):
                        if (await client.get(f"{INTERNAL_PREFIX}load")).status_code == 200:
                            break
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"worker {index} did not answer on {path} within {timeout:g}s")
                    await asyncio.sleep(0.1)


def unix_socket(path: str) -> socket.socket:
    """The listening Unix socket a worker serves on."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(2048)
    return sock


async def serve_front(workers: Workers, sock: socket.socket, *, on_ready: Callable[[], None] | None = None) -> None:
    """Serve the front on ``sock`` (bound already) until interrupted, once every worker answers."""
    import uvicorn

    await workers.ready()
    front = Front(workers.sockets)
    server = uvicorn.Server(uvicorn.Config(front, log_level="warning", lifespan="on"))
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started and not task.done():
        await asyncio.sleep(0.01)
    if server.started and on_ready is not None:
        on_ready()
    await task

"""``serve --workers N``: N worker processes behind one address.

A worker is a whole ``coworkenv serve`` (its own event loop, episode host, sandbox pool and store
connection) listening on a Unix socket; episodes live in the worker that opened them. The front
listens on the public address and passes every HTTP/1.1 request on to the worker that owns its
episode, as bytes: it parses request and response heads, relays bodies (a response's chunks as they
come, so an SSE stream flows), and keeps its connections to the workers open between requests. It
does no MCP, JSON or ASGI work of its own, so it costs a fraction of a worker per request. Routing:

- a 2025-11-25 session (``Mcp-Session-Id``) to the worker whose response opened it;
- a key or episode address (``/t/{task}/e/{key}/…``, ``/e/{episode}/…``, ``/episodes/{id}…``, and the
  capture proxy's routes under them) to the worker it was placed on, else to the worker that says it
  holds that episode (asked when the front does not know it), else, for a key, to a new placement;
- a new episode (a request at a task address without a session, ``POST /episodes``, a first key) to
  the worker with the fewest open episodes (each worker reports its count twice a second; the front
  counts its own placements since);
- anything else (task lists, listing at a task address) to the workers in turn.

The front reads a request's head and decides before it reads any of the body:

- the target is what the workers will route: an absolute-form target (``http://host/path``) is reduced
  to its path (its host becomes the ``Host`` a worker checks), the path is percent-decoded and loses
  its dot segments and empty segments, and a changed path is passed on re-encoded, so the front routes
  by the very path the worker routes by. Anything that names the workers' own routes
  (``INTERNAL_PREFIX``), however spelt, is refused 404; the workers answer those routes only to the
  front's own requests, which carry no client address (``TrustedClient``);
- the bearer token (when the server has one), the body's size (Content-Length, or a chunked body
  counted as it arrives) and the client's rate (``--client-rate``) are checked here, so a client
  without the token, or with a body over the limit, costs no buffer: the refusal is sent and the
  connection closed with the body unread (what the client still sends meanwhile is dropped as it
  comes, for ``LINGER_S`` at most, so that it reads the refusal before the connection goes);
- the caps on open episodes and sessions are counted here, once for all workers (``CapsService``, see
  ``coworkenv.server._limits``): a worker takes a slot from the front before it opens one.

The workers then run the same guards as a single server (token, Host/Origin, body size, episode rate,
session pinning) on the client's own address, which the front passes in a header that only the front
can set (it drops whatever a client sends under that name). Every worker writes to the one store file;
an episode's calls are recorded in order by the one worker that holds it. A 2026-07-28 request state
signed by one worker is read by any (one key for all, from the front).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

import httpx
from starlette.types import Receive, Scope, Send

from ._limits import MODEL_TOKEN_HEADER, Buckets, Caps, CapsService, credential_ok

if TYPE_CHECKING:
    from ._serve import ServeSettings

log = logging.getLogger(__name__)
CLIENT_HEADER = "x-coworkenv-client"  # the client's address, set by the front for its workers
STATE_KEY_ENV = "COWORKENV_REQUEST_STATE_KEY"  # one key for every worker: a request state one signs, another reads
INTERNAL_PREFIX = "/_coworkenv/"  # the workers' routes for the front only (owner, load)
ROUTES_KEPT = 65536  # sessions, keys and episodes the front remembers the worker of
LOAD_EVERY_S = 0.5
_KEYED = re.compile(r"^((?:/w/[^/]+)?/t/[^/]+/e/[^/]+)(?:/|$)")
_EPISODE = re.compile(r"^(?:/e/|/episodes/)([^/]+)(?:/|$)")
_TASK = re.compile(r"^(?:/w/[^/]+)?/t/[^/]+/mcp$")
MAX_HEAD = 64 * 1024  # a request or response head, at most
LINGER_S = 2.0  # after a refusal, how long the front drops what the client still sends before it closes
_HOP_REQUEST = {b"connection", b"keep-alive", b"proxy-connection", b"upgrade", b"expect", CLIENT_HEADER.encode()}
_PATH_SAFE = "/!$&'()*+,;=:@~"  # what a re-encoded path keeps as it is (letters, digits and -._ always)


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
    """The server in front of the workers at ``sockets`` (see the module), enforcing ``settings``' token,
    body size and client rate itself (none of them without ``settings``)."""

    def __init__(self, sockets: list[str], workers: Workers | None = None, settings: ServeSettings | None = None) -> None:
        self.sockets = sockets
        self.workers = workers  # restarted when one dies (None: not supervised here)
        self.token = settings.token.get_secret_value().encode() if settings and settings.token else None
        self.max_body = settings.max_body_bytes if settings else None
        self.client_rate = (settings.client_rate_per_s, settings.client_rate_burst) if settings else (None, 0)
        self.buckets = Buckets()
        self.down: set[int] = set()  # workers that did not answer: no new episode goes there
        self.clients = [httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=path), base_url="http://worker",
                                          timeout=httpx.Timeout(None, connect=10.0)) for path in sockets]
        self.sessions = _Kept()
        self.keys = _Kept()
        self.episodes = _Kept()
        self.idle: list[list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]] = [[] for _ in sockets]
        self.open = [0] * len(sockets)  # each worker's open episodes, as it last said, plus placements since
        self.turn = itertools.cycle(range(len(sockets)))
        self._poller: asyncio.Task | None = None

    # ------------------------------------------------------------------ routing

    def place(self) -> int:
        up = [i for i in range(len(self.open)) if i not in self.down] or list(range(len(self.open)))
        index = min(up, key=lambda i: (self.open[i], i))
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

    # ------------------------------------------------------------------ connections

    async def serve(self, sock: socket.socket) -> asyncio.Server:
        """Accept clients on ``sock`` (bound already) and start reading the workers' loads."""
        self._poller = asyncio.create_task(self._poll())
        return await asyncio.start_server(self.connection, sock=sock, limit=MAX_HEAD)

    async def close(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
        for idle in self.idle:
            while idle:
                idle.pop()[1].close()
        for client in self.clients:
            await client.aclose()

    async def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One client connection: its requests one after another (HTTP/1.1 keep-alive), each passed on."""
        peer = writer.get_extra_info("peername")
        client = (peer[0] if isinstance(peer, tuple) else "").encode()
        try:
            while await self.exchange(reader, writer, client):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client: bytes) -> bool:
        """Pass one request on and its response back; whether the connection stays open."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False  # the client closed between requests
        except asyncio.LimitOverrunError:
            writer.write(_plain(431, b"request head too large"))
            return False
        line, headers = _parse(head)
        method, target, _version = line.split(b" ", 2)
        try:
            path, target, authority = request_target(target)
            length = _body_length(headers)
        except ValueError as exc:
            await _refuse_unread(reader, writer, _refusal(400, str(exc)))  # where its body ends is not known
            return False
        close = _value(headers, b"connection", b"").lower() == b"close"
        refusal = self.refusal(path, headers, client, length)
        if refusal is not None:
            if length == 0:
                writer.write(refusal)
                return not close
            await _refuse_unread(reader, writer, refusal)
            return False
        if _value(headers, b"expect", b"").lower() == b"100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        try:
            body = await _read_body(reader, length, self.max_body)
        except _TooLarge:
            await _refuse_unread(reader, writer, _refusal(413, f"request body over {self.max_body} bytes"))
            return False
        session = _value(headers, b"mcp-session-id", None)
        index, learn = await self.route(method.decode("latin-1"), path,
                                        session.decode("latin-1") if session is not None else None)
        out = [method + b" " + target + b" HTTP/1.1"]
        out += [name + b": " + value for name, value in headers
                if name not in _HOP_REQUEST and (authority is None or name != b"host")]
        if authority is not None:  # RFC 9112, 3.2.2: an absolute-form target's host is the request's Host
            out.append(b"host: " + authority)
        out.append(CLIENT_HEADER.encode() + b": " + client)
        request = b"\r\n".join(out) + b"\r\n\r\n" + body
        for attempt in range(2):
            worker = await self._worker(index, fresh=attempt > 0)
            if worker is None:
                self.down.add(index)
                writer.write(_plain(502, f"worker {index} does not answer; the episodes it held ended with it".encode()))
                return False
            try:
                kept = await self._relay(worker, request, method, writer, reader, learn, index, session)
            except _WorkerClosed:
                worker[1].close()
                continue  # it closed an idle connection as the request went out: once more, on a new one
            except (ConnectionError, asyncio.IncompleteReadError, ValueError):
                worker[1].close()
                raise
            if kept:
                self.idle[index].append(worker)
            else:
                worker[1].close()
            return not close
        writer.write(_plain(502, f"worker {index} closed the connection".encode()))
        return False

    def refusal(self, path: str, headers: list[tuple[bytes, bytes]], client: bytes, length: int | None) -> bytes | None:
        """The response refusing a request from its head alone, or None: the workers' own routes, a
        missing token, a body over the limit, a client over its rate (in that order)."""
        if path.startswith(INTERNAL_PREFIX) or path == INTERNAL_PREFIX.rstrip("/"):
            return _refusal(404, "not found")
        if self.token is not None and not credential_ok(self.token, path, _value(headers, b"authorization", b""),
                                                        _value(headers, MODEL_TOKEN_HEADER.encode(), b"")):
            return _refusal(401, "missing or wrong bearer token (model requests send it as X-Coworkenv-Token)",
                            b"www-authenticate: Bearer realm=\"coworkenv\"")
        if self.max_body is not None and length is not None and length > self.max_body:
            return _refusal(413, f"request body over {self.max_body} bytes")
        rate, burst = self.client_rate
        if rate is not None:
            address = client.decode("latin-1")
            if not self.buckets.spend(("client", address), time.monotonic(), rate, burst):
                return _refusal(429, f"over {rate:g} requests/s from {address}", b"retry-after: 1")
        return None

    async def _worker(self, index: int, *, fresh: bool) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        idle = self.idle[index]
        while idle and not fresh:
            reader, writer = idle.pop()
            if not reader.at_eof() and not writer.is_closing():
                return reader, writer
            writer.close()
        try:
            return await asyncio.open_unix_connection(self.sockets[index], limit=MAX_HEAD)
        except OSError:
            return None

    async def _relay(self, worker: tuple[asyncio.StreamReader, asyncio.StreamWriter], request: bytes, method: bytes,
                     writer: asyncio.StreamWriter, client_reader: asyncio.StreamReader, learn: str, index: int,
                     session: bytes | None) -> bool:
        """Send ``request`` to the worker and its response to the client, as it comes; whether the
        worker's connection can serve another request."""
        w_reader, w_writer = worker
        w_writer.write(request)
        await w_writer.drain()
        try:
            head = await w_reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if not exc.partial:
                raise _WorkerClosed() from None
            raise
        line, headers = _parse(head)
        status = int(line.split(b" ", 2)[1])
        opened = _value(headers, b"mcp-session-id", None)
        if session is None and opened is not None:
            self.sessions.keep(opened.decode("latin-1"), index)  # a session opened here: its requests come back here
        if method == b"DELETE" and session is not None and status < 300:
            self.sessions.pop(session.decode("latin-1"), None)
        keep = _value(headers, b"connection", b"").lower() != b"close"
        writer.write(head)
        if method == b"HEAD" or status in (204, 304) or 100 <= status < 200:
            await writer.drain()
            return keep
        length = _value(headers, b"content-length", None)
        if length is not None:
            data = await w_reader.readexactly(int(length))
            if learn == "episode":
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    self.episodes.keep(json.loads(data)["episode_id"], index)
            writer.write(data)
            await writer.drain()
            return keep
        if b"chunked" in _value(headers, b"transfer-encoding", b"").lower():
            return await _relay_chunks(w_reader, writer, client_reader) and keep
        while chunk := await w_reader.read(1 << 16):  # until the worker closes
            writer.write(chunk)
            await writer.drain()
        return False

    async def loads(self) -> list[int | None]:
        async def one(client: httpx.AsyncClient) -> int | None:
            try:
                return int((await client.get(f"{INTERNAL_PREFIX}load")).json()["open"])
            except (httpx.HTTPError, ValueError, KeyError, TypeError):
                return None
        return list(await asyncio.gather(*(one(c) for c in self.clients)))

    async def _poll(self) -> None:
        """Read the workers' loads; a worker that stopped answering takes no new episode, and one whose
        process died is started again on its socket (its episodes ended with it: the store marks them
        interrupted when the new process starts, and clients replay them as infrastructure failures)."""
        pruned = time.monotonic()
        while True:
            for index, count in enumerate(await self.loads()):
                if count is not None:
                    self.open[index] = count
                    self.down.discard(index)
                    continue
                self.down.add(index)
                if self.workers is not None and self.workers.restart_if_dead(index):
                    for idle in self.idle[index]:
                        idle[1].close()
                    self.idle[index].clear()
                    for table in (self.sessions, self.keys, self.episodes):
                        for key in [k for k, v in table.items() if v == index]:
                            del table[key]
            if time.monotonic() - pruned > 60:  # client buckets idle for a minute are full again
                pruned = time.monotonic()
                self.buckets.prune(pruned - 60)
            await asyncio.sleep(LOAD_EVERY_S)


class _WorkerClosed(Exception):
    """The worker had closed the (idle) connection before the request reached it."""


def _parse(head: bytes) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    """A message head's first line and its fields (lower-case names; values without the whitespace
    around them, RFC 9110, 5.5)."""
    lines = head[:-4].split(b"\r\n")
    fields = []
    for raw in lines[1:]:
        name, colon, value = raw.partition(b":")
        if not colon or not name or name != name.strip():
            raise ValueError(f"malformed header line {raw[:80]!r}")
        fields.append((name.lower(), value.strip(b" \t")))
    return lines[0], fields


def _value(headers: list[tuple[bytes, bytes]], name: bytes, default):
    return next((value for key, value in headers if key == name), default)


def request_target(target: bytes) -> tuple[str, bytes, bytes | None]:
    """What a request target names, as a worker will route it: the path (an absolute-form target's
    path, percent-decoded, without dot segments or empty segments), the target to pass on (the same
    bytes when the path needed none of that, else the path re-encoded with the query), and the host of
    an absolute-form target (None for a path). ``ValueError`` saying why for a target that is neither."""
    authority = None
    if target[:1] != b"/":
        scheme, sep, rest = target.partition(b"://")
        if not sep or scheme.lower() not in (b"http", b"https"):
            raise ValueError(f"request target {target[:80]!r} is neither a path nor an http(s) URL")
        cut = min((i for i in (rest.find(b"/"), rest.find(b"?")) if i >= 0), default=len(rest))
        authority, target = rest[:cut].rpartition(b"@")[2], rest[cut:]
        if not authority:
            raise ValueError(f"request target {target[:80]!r} names no host")
        target = target if target[:1] == b"/" else b"/" + target
    raw, sep, query = target.split(b"#", 1)[0].partition(b"?")
    if not raw.isascii():
        raise ValueError("the request target holds bytes that are not ASCII; percent-encode them")
    if b"%" not in raw and b"//" not in raw and b"/." not in raw:
        return raw.decode("ascii"), target, authority  # already what a worker routes by
    decoded = unquote(raw.decode("ascii"))
    kept: list[str] = []
    for segment in decoded.split("/"):
        if segment == "..":
            if kept:
                kept.pop()
        elif segment not in ("", "."):
            kept.append(segment)
    path = "/" + "/".join(kept)
    if kept and decoded.endswith(("/", "/.", "/..")):
        path += "/"
    return path, quote(path, safe=_PATH_SAFE).encode("ascii") + (b"?" + query if sep else b""), authority


def _body_length(headers: list[tuple[bytes, bytes]]) -> int | None:
    """A request body's length from its head: bytes (0 without a body), or None for a chunked body.
    ``ValueError`` for framing a front cannot pass on unambiguously (the worker could read another
    body than the front counted)."""
    lengths = [value for name, value in headers if name == b"content-length"]
    codings = [value for name, value in headers if name == b"transfer-encoding"]
    if codings:
        if lengths:
            raise ValueError("a request has Content-Length or Transfer-Encoding, not both")
        if len(codings) > 1 or codings[0].lower() != b"chunked":
            raise ValueError(f"Transfer-Encoding {b', '.join(codings)[:80]!r} is not served; send a "
                             "Content-Length or a chunked body")
        return None
    if not lengths:
        return 0
    if len(set(lengths)) > 1 or not lengths[0].isdigit():
        raise ValueError(f"Content-Length {b', '.join(lengths)[:80]!r} is not one number of bytes")
    return int(lengths[0])


class _TooLarge(Exception):
    """A chunked request body grew over the limit."""


async def _read_body(reader: asyncio.StreamReader, length: int | None, limit: int | None) -> bytes:
    """A request's body as it came (chunked framing kept); a chunked one counted as it arrives, and
    ``_TooLarge`` as soon as it (with its trailers) passes ``limit``."""
    if length is not None:
        return await reader.readexactly(length) if length else b""
    parts = []
    size = 0
    while True:
        size_line = await reader.readuntil(b"\r\n")
        chunk = int(size_line.split(b";", 1)[0].strip(), 16)
        size += chunk
        if limit is not None and size > limit:
            raise _TooLarge()
        parts.append(size_line)
        if chunk == 0:
            while (trailer := await reader.readuntil(b"\r\n")) != b"\r\n":
                size += len(trailer)
                if limit is not None and size > limit:
                    raise _TooLarge()
                parts.append(trailer)
            parts.append(b"\r\n")
            return b"".join(parts)
        parts.append(await reader.readexactly(chunk + 2))


async def _relay_chunks(source: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        client_reader: asyncio.StreamReader) -> bool:
    """Pass a chunked body on chunk by chunk (an SSE stream may last long); False when the client went
    away first (the worker's connection is then closed with the stream)."""
    while True:
        pending = asyncio.ensure_future(source.readuntil(b"\r\n"))
        while True:
            done, _ = await asyncio.wait({pending}, timeout=1.0)
            if done:
                break
            if client_reader.at_eof() or writer.is_closing():
                pending.cancel()
                return False
        size_line = pending.result()
        size = int(size_line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            rest = [size_line]
            while (trailer := await source.readuntil(b"\r\n")) != b"\r\n":
                rest.append(trailer)
            rest.append(b"\r\n")
            writer.write(b"".join(rest))
            await writer.drain()
            return True
        writer.write(size_line + await source.readexactly(size + 2))
        await writer.drain()


async def _refuse_unread(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, refusal: bytes) -> None:
    """Answer a request whose body is left unread, and end the connection without reading it: the
    refusal, then the end of what the front writes; what the client still sends is dropped as it comes,
    for ``LINGER_S`` at most, before the connection closes. (Closed at once, the connection would be
    reset under data the front had not read, and the reset can reach the client before it reads the
    refusal.)"""
    writer.write(refusal)
    with contextlib.suppress(ConnectionError, OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
        await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()

        async def drop() -> None:
            while await reader.read(1 << 16):
                pass

        await asyncio.wait_for(drop(), LINGER_S)


def _refusal(status: int, message: str, header: bytes = b"") -> bytes:
    """A refusal as the workers' guards write one: a JSON-RPC error (no id) with the HTTP status."""
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}).encode()
    reason = {400: b"Bad Request", 401: b"Unauthorized", 404: b"Not Found", 413: b"Content Too Large",
              429: b"Too Many Requests"}.get(status, b"Error")
    return (b"HTTP/1.1 " + str(status).encode() + b" " + reason + b"\r\ncontent-type: application/json\r\n"
            + (header + b"\r\n" if header else b"") + b"content-length: " + str(len(body)).encode() + b"\r\n\r\n"
            + body)


def _plain(status: int, body: bytes) -> bytes:
    reason = {404: b"Not Found", 431: b"Request Header Fields Too Large", 502: b"Bad Gateway"}.get(status, b"Error")
    return (b"HTTP/1.1 " + str(status).encode() + b" " + reason + b"\r\ncontent-type: text/plain\r\ncontent-length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)


class TrustedClient:
    """A worker's outermost layer: the client address is the one the front passed (``CLIENT_HEADER``),
    and the front's own routes (``INTERNAL_PREFIX``) go to ``internal``, past the guards, for the
    front's own requests only: those carry no client address (only the front reaches a worker's socket,
    and it gives every request it passes on the address of its client). A client's request for those
    routes, however it got past the front, goes to ``app``, which has no such route."""

    def __init__(self, app: Callable, internal: Callable) -> None:
        self.app = app
        self.internal = internal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            forwarded = next((v for k, v in scope["headers"] if k == CLIENT_HEADER.encode()), None)
            if forwarded is None and scope["path"].startswith(INTERNAL_PREFIX):
                await self.internal(scope, receive, send)
                return
            if forwarded is not None:
                scope = {**scope, "client": (forwarded.decode("latin-1"), 0),
                         "headers": [(k, v) for k, v in scope["headers"] if k != CLIENT_HEADER.encode()]}
        await self.app(scope, receive, send)


# ---------------------------------------------------------------------- processes


class Workers:
    """``count`` worker processes, each ``python -m coworkenv serve ARGS --worker-socket PATH
    --caps-socket CAPS`` (``CAPS``: where the front counts open episodes for all of them); stopped
    (SIGTERM, then SIGKILL) when the block ends."""

    def __init__(self, args: list[str], count: int, directory: Path) -> None:
        self.args, self.count, self.directory = args, count, directory
        self.sockets = [str(directory / f"worker-{i}.sock") for i in range(count)]
        self.caps_socket = str(directory / "caps.sock")
        self.processes: list[subprocess.Popen] = []

    def __enter__(self) -> Workers:
        self.env = {**os.environ, STATE_KEY_ENV: secrets.token_hex(32)}
        try:
            for path in self.sockets:
                self.processes.append(self._start(path))
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, path: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "coworkenv", "serve", *self.args, "--worker-socket", path,
                                 "--caps-socket", self.caps_socket], env=self.env, preexec_fn=_die_with_parent)

    def restart_if_dead(self, index: int) -> bool:
        """Start worker ``index`` again if its process has ended; whether it had."""
        if self.processes[index].poll() is None:
            return False
        log.warning("worker %d ended (status %s); starting it again", index, self.processes[index].returncode)
        self.processes[index] = self._start(self.sockets[index])
        return True

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


def _die_with_parent() -> None:
    """In a worker, before it runs: the kernel stops it when the front's process ends, however it ends."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def unix_socket(path: str) -> socket.socket:
    """The listening Unix socket a worker serves on."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(2048)
    return sock


async def serve_front(workers: Workers, sock: socket.socket, *, settings: ServeSettings,
                      on_ready: Callable[[], None] | None = None) -> None:
    """Serve the front on ``sock`` (bound already) until interrupted, once every worker answers; it
    enforces ``settings``' token, body size, client rate and caps on open episodes for all workers."""
    caps = await CapsService(Caps(settings.max_episodes, settings.max_episodes_per_client)).serve(workers.caps_socket)
    try:
        await workers.ready()
        front = Front(workers.sockets, workers, settings)
        server = await front.serve(sock)
        serving = asyncio.ensure_future(server.serve_forever())
        loop = asyncio.get_running_loop()
        for stop in (signal.SIGTERM, signal.SIGINT):  # stop as Ctrl-C does: the workers are stopped after
            loop.add_signal_handler(stop, serving.cancel)
        if on_ready is not None:
            on_ready()
        try:
            await serving
        except asyncio.CancelledError:
            pass
        finally:
            server.close()
            await front.close()
    finally:
        caps.close()

"""What bounds an HTTP server's clients, wherever it is enforced: the bearer token, the caps on open
episodes and 2025-11-25 sessions, and the token buckets of request rates.

One ``coworkenv serve`` process enforces them itself (``Guard``, ``HttpEpisodes``). Behind ``serve
--workers`` a count kept in each worker would let a client hold the cap once per worker, so whatever
must be counted across workers is counted once, by the front (``coworkenv.server._front``), which sees
every request and the client's own address:

- **caps**: one ``Caps`` in the front's process; a worker takes a slot from it over a Unix socket
  (``FrontCaps`` to ``CapsService``) before it opens an episode or a session, and gives it back when
  that ends or fails to open. The front's event loop answers one take at a time, so the check and the
  count are one step: concurrent opens cannot all pass the check, whichever worker they reach. The
  slots a worker holds go back when its connection closes (the worker ended or was killed), so a dead
  worker leaves nothing counted;
- **the client rate** (``--client-rate``): the front's ``Buckets``, one per client address, spent for
  every request before it is passed on (the workers then keep no client bucket of their own).

A slot is taken *before* the opening awaits anything (a sandbox, the front), and the count is what
decides, never a count of what is already open: with a check first and an open after, every opening
that overlapped passed the check (60 simultaneous opens under a cap of 20 opened 60).

Each kind is bounded apart, by the same numbers: at most ``max_episodes`` open in all and
``max_episodes_per_client`` per client address. A legacy session holds a ``session`` slot from its
``initialize`` until it ends (DELETE, or its idle timeout: the guard gives the slot back within a
minute after); the episodes played in it hold ``episode`` slots, as every episode does.
"""

from __future__ import annotations

import asyncio
import collections
import hmac
import json
from collections import Counter
from typing import Literal, Protocol

Kind = Literal["episode", "session"]
EPISODE: Kind = "episode"
SESSION: Kind = "session"
MODEL_TOKEN_HEADER = "x-coworkenv-token"  # the bearer token of capture-proxy requests (Authorization is the upstream's)
_ENDS = {EPISODE: "submit_answer or DELETE", SESSION: "DELETE"}


def credential_ok(token: bytes, path: str, authorization: bytes, model_token: bytes) -> bool:
    """Whether a request for ``path`` bears ``token``: ``Authorization: Bearer TOKEN``, or on the capture
    proxy's routes (``/v1/`` in the path), whose Authorization is the upstream's, ``X-Coworkenv-Token: TOKEN``."""
    if "/v1/" in path:
        scheme, credential = b"bearer", model_token
    else:
        scheme, _, credential = authorization.partition(b" ")
    return scheme.lower() == b"bearer" and hmac.compare_digest(credential.strip(), token)


class Caps:
    """Open episodes and sessions, each kind at most ``max_open`` in all and ``max_per_client`` per
    client address. ``take`` checks and counts in one step (nothing awaited between)."""

    def __init__(self, max_open: int | None, max_per_client: int | None) -> None:
        self.max_open = max_open
        self.max_per_client = max_per_client
        self.total: Counter[str] = Counter()
        self.held: Counter[tuple[str, str]] = Counter()

    def take(self, kind: Kind, client: str) -> str | None:
        """Count one more ``kind`` for ``client``, or say why not (the count is then unchanged)."""
        total, mine = self.total[kind], self.held[(kind, client)]
        if self.max_open is not None and total >= self.max_open:
            return (f"too many open {kind}s ({total}, at most {self.max_open}); end some ({_ENDS[kind]}) "
                    "or wait for idle ones to end")
        if self.max_per_client is not None and mine >= self.max_per_client:
            return (f"too many open {kind}s for {client} ({mine}, at most {self.max_per_client}); end some "
                    f"({_ENDS[kind]}) or wait for idle ones to end")
        self.total[kind] += 1
        self.held[(kind, client)] += 1
        return None

    def give(self, kind: Kind, client: str) -> None:
        """One ``kind`` of ``client``'s has ended (or did not open)."""
        if self.held[(kind, client)] <= 1:
            self.held.pop((kind, client), None)
        else:
            self.held[(kind, client)] -= 1
        if self.total[kind] > 0:
            self.total[kind] -= 1

    async def reserve(self, kind: Kind, client: str) -> str | None:
        return self.take(kind, client)

    def release(self, kind: Kind, client: str) -> None:
        self.give(kind, client)


class Slots(Protocol):
    """Where a server takes its slots: ``Caps`` in its own process, or the front's (``FrontCaps``)."""

    async def reserve(self, kind: Kind, client: str) -> str | None:
        """Take a slot of ``kind`` for ``client``; why not, if it may not open."""
        ...

    def release(self, kind: Kind, client: str) -> None:
        """Give back a slot ``reserve`` gave."""
        ...


class CapsService:
    """The front's side of the caps: ``Caps`` over a Unix socket, one connection per worker, one JSON
    line per message (``["take", kind, client]``, answered with the refusal or ``null``; ``["give",
    kind, client]``, not answered). What a connection took and did not give goes back when it closes."""

    def __init__(self, caps: Caps) -> None:
        self.caps = caps

    async def serve(self, path: str) -> asyncio.Server:
        return await asyncio.start_unix_server(self._connection, path=path)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held: Counter[tuple[Kind, str]] = Counter()
        try:
            while line := await reader.readline():
                op, kind, client = json.loads(line)
                if kind not in (EPISODE, SESSION) or not isinstance(client, str):
                    raise ValueError(f"bad caps message {line[:200]!r}")
                if op == "take":
                    refusal = self.caps.take(kind, client)
                    if refusal is None:
                        held[(kind, client)] += 1
                    writer.write(json.dumps(refusal).encode() + b"\n")
                elif op == "give" and held[(kind, client)] > 0:
                    held[(kind, client)] -= 1
                    self.caps.give(kind, client)
        except (ConnectionError, ValueError, TypeError):
            pass
        finally:
            for (kind, client), count in held.items():
                for _ in range(count):
                    self.caps.give(kind, client)
            writer.close()


class FrontCaps:
    """A worker's caps: each slot taken from the front's ``CapsService`` at ``path`` (connected on first
    use; answers come back in the order the takes went out)."""

    UNREACHABLE = "the front's count of open episodes is not reachable; try again"

    def __init__(self, path: str) -> None:
        self.path = path
        self._writer: asyncio.StreamWriter | None = None
        self._waiting: collections.deque[asyncio.Future[str | None]] = collections.deque()
        self._connecting = asyncio.Lock()
        self._reader_task: asyncio.Task | None = None

    async def reserve(self, kind: Kind, client: str) -> str | None:
        try:
            writer = await self._connected()
        except OSError:
            return self.UNREACHABLE
        answer: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._waiting.append(answer)
        writer.write(json.dumps(["take", kind, client]).encode() + b"\n")
        try:
            return await asyncio.shield(answer)
        except asyncio.CancelledError:
            # the opening was given up: a slot the front grants now is nobody's, so it goes back
            def give_back(done: asyncio.Future[str | None]) -> None:
                if done.result() is None:
                    self.release(kind, client)

            answer.add_done_callback(give_back)
            raise

    def release(self, kind: Kind, client: str) -> None:
        if self._writer is not None and not self._writer.is_closing():
            self._writer.write(json.dumps(["give", kind, client]).encode() + b"\n")

    async def _connected(self) -> asyncio.StreamWriter:
        async with self._connecting:
            if self._writer is None or self._writer.is_closing():
                reader, self._writer = await asyncio.open_unix_connection(self.path)
                self._reader_task = asyncio.create_task(self._answers(reader))
            return self._writer

    async def _answers(self, reader: asyncio.StreamReader) -> None:
        try:
            while line := await reader.readline():
                self._waiting.popleft().set_result(json.loads(line))
        except (ConnectionError, ValueError, IndexError):
            pass
        finally:
            if self._writer is not None:
                self._writer.close()
            while self._waiting:
                waiting = self._waiting.popleft()
                if not waiting.done():
                    waiting.set_result(self.UNREACHABLE)


class _Bucket:
    __slots__ = ("tokens", "at")

    def __init__(self, tokens: float, at: float) -> None:
        self.tokens, self.at = tokens, at


MAX_BUCKETS = 65_536  # rate buckets kept at most (about 10 MB)


class Buckets:
    """Token buckets by key, bounded in number: the least recently created go first, so a flood of
    made-up keys cannot grow memory without end."""

    def __init__(self) -> None:
        self.buckets: dict[tuple[str, str], _Bucket] = {}

    def spend(self, key: tuple[str, str], now: float, rate: float, burst: int) -> bool:
        """Take a token from ``key``'s bucket (``burst`` deep, refilled at ``rate`` a second); False when empty."""
        bucket = self.buckets.get(key)
        if bucket is None:
            if len(self.buckets) >= MAX_BUCKETS:
                del self.buckets[next(iter(self.buckets))]
            bucket = self.buckets[key] = _Bucket(float(burst), now)
        bucket.tokens = min(float(burst), bucket.tokens + (now - bucket.at) * rate)
        bucket.at = now
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        return True

    def prune(self, before: float) -> None:
        """Forget buckets last spent before ``before`` (full again by now, or as good as)."""
        for key in [k for k, b in self.buckets.items() if b.at < before]:
            del self.buckets[key]

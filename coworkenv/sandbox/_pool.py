"""A warm pool: ready sandboxes per initial state, so that an episode starts without waiting.

``acquire`` hands out a started sandbox (a ready one when there is one; else one being reset when
there is one, which takes milliseconds; else it starts one) and,
when it hands out the last ready one, tops the pool up to ``size`` ready ones in the background (not
before: back to back, an episode's sandbox, reset in place, comes back long before a new one would
have started, which would then be thrown away); ``release`` resets a sandbox to its
initial state (a restore in the same sandbox, not a rebuild) and keeps it for a next episode while
at most ``size`` plus the most handed out at once in the last ``BUSY_S`` seconds are ready (one
episode at a time, the pool holds ``size + 1``; n at once, ``size + n``: back-to-back episodes
recycle their sandboxes instead of starting new ones and throwing spares away, also between
bursts), or closes it when there are more or the reset fails.
Where the backend can ``retarget`` a sandbox to another initial state (bwrap: a copy of the new
state and a reset, ~10 ms of CPU against a start's ~120 ms), an acquire that would start one takes
a ready sandbox of another workspace instead (of the one used least recently), and a fill takes
one of a workspace that no episode asked for in the last ``UNASKED_S`` seconds before it starts
any: a run that moves from workspace to workspace keeps using the sandboxes it has, and one that
goes back and forth between several (``coworkenv synth``: each capability's tasks move on through
the workspaces at a pace of their own) keeps some ready for each of those in use instead of
retargeting them from one to the next and back (~16 ms of CPU each time).
Whatever the pool holds is closed by ``close`` and, should the process end without it (Ctrl-C), by
an exit hook.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import math
import time
import weakref
from collections import Counter, OrderedDict
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from ._backends import cleanup, create_sandbox
from ._base import Limits, Sandbox, SandboxConfig, SandboxError

RESET_TIMEOUT_S = 30.0
BUSY_S = 30.0  # how long the most sandboxes handed out at once counts for what a release keeps
UNASKED_S = 5.0  # a workspace none of whose sandboxes was acquired for this long gives a fill its spare ones
RESET_WAIT_S = 2.0  # how long an acquire that finds none ready waits for one being reset, before starting one
MAX_KEYS = 4096  # initial-state paths whose resolved form is remembered
log = logging.getLogger(__name__)


class PoolSettings(BaseModel):
    """How many ready sandboxes to keep, and whether to clean up after dead processes first."""

    size: int = Field(default=2, ge=0, description="ready sandboxes kept per workspace (0: no pool)")
    max_idle: int = Field(default=32, ge=0, description="ready sandboxes kept in all")
    cleanup_orphans: bool = Field(default=True, description="on first use, remove what this backend's "
                                  "sandboxes of dead processes left")


class SandboxPool:
    """Started sandboxes of one backend, keyed by the initial state they restore.

    ``config`` is the backend's own (``BACKENDS[backend].config_type``), given to every sandbox it starts.
    ``clock`` (seconds, monotonic) times what the pool remembers (``BUSY_S``, ``UNASKED_S``); a test
    moves a clock of its own past them instead of waiting them out.
    """

    def __init__(self, backend: str, *, limits: Limits | None = None, settings: PoolSettings | None = None,
                 config: SandboxConfig | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.backend = backend
        self._clock = clock
        self.limits = limits or Limits()
        self.settings = settings or PoolSettings()
        self.config = config
        self.stats: Counter[str] = Counter()  # started, warm, cold, recycled (clean: without a reset), discarded,
        # retargeted (a ready sandbox of another workspace given to this one)
        self._out: Counter[Path] = Counter()  # handed out and not released yet, per initial state
        self._resetting: Counter[Path] = Counter()  # being reset on their way back
        self._busiest: dict[Path, tuple[int, float]] = {}  # the most handed out at once lately, and when
        self._asked: dict[Path, float] = {}  # when a sandbox of each initial state was last acquired
        self._returned: asyncio.Condition | None = None  # a sandbox became ready, or a reset ended
        self._idle: OrderedDict[Path, list[Sandbox]] = OrderedDict()
        self._starting: Counter[Path] = Counter()
        self._live: set[Sandbox] = set()
        self._tasks: set[asyncio.Task] = set()
        self._keys: dict[Path, Path] = {}  # an initial state's path as given -> resolved (resolving costs ~0.1 ms)
        self._closed = False
        self._swept = not self.settings.cleanup_orphans
        _POOLS.add(self)

    def idle(self, initial_state: Path | None = None) -> int:
        if initial_state is not None:
            return self._ready(self._key(initial_state))
        return sum(len(v) for v in self._idle.values())

    def _ready(self, key: Path) -> int:
        return len(self._idle.get(key, ()))

    def _key(self, initial_state: Path) -> Path:
        """The pool's key of an initial state: its resolved path (remembered per path given)."""
        path = Path(initial_state)
        key = self._keys.get(path)
        if key is None:
            if len(self._keys) >= MAX_KEYS:
                self._keys.clear()
            key = self._keys[path] = path.resolve()
        return key

    async def _new(self, key: Path) -> Sandbox:
        sandbox = create_sandbox(self.backend, key, limits=self.limits, config=self.config)
        self._live.add(sandbox)
        self.stats["started"] += 1
        try:
            await sandbox.start()
        except BaseException:
            self._live.discard(sandbox)
            await sandbox.close()
            raise
        return sandbox

    async def acquire(self, initial_state: Path) -> Sandbox:
        """A started sandbox holding ``initial_state``: a ready one from the pool when there is one."""
        if self._closed:
            raise SandboxError("the sandbox pool is closing")
        if not self._swept:  # a server restarted after a crash removes what its predecessor left
            self._swept = True
            self._spawn(self._sweep())
        key = self._key(initial_state)
        ready = self._idle.get(key)
        if not ready and self._resetting[key]:
            ready = await self._wait_for_reset(key)
        now = self._clock()
        if ready:
            sandbox = ready.pop()
            self._idle.move_to_end(key)
            self.stats["warm"] += 1
        elif (stolen := await self._steal(key)) is not None:
            sandbox = stolen
        else:
            sandbox = await self._new(key)
            self.stats["cold"] += 1
        self._out[key] += 1
        self._asked[key] = now
        busiest, since = self._busiest.get(key, (0, 0.0))
        if self._out[key] >= busiest or now - since > BUSY_S:
            self._busiest[key] = (self._out[key], now)
        if not self._idle.get(key):
            self._spawn(self._fill(key))
        return sandbox

    async def _steal(self, key: Path, *, unasked_for: float | None = None) -> Sandbox | None:
        """A ready sandbox of another workspace (of the one used least recently; with ``unasked_for``,
        only of one none of whose sandboxes was acquired for that many seconds), retargeted to ``key``;
        None when there is none or the backend cannot (then it stays where it was)."""
        now = self._clock()
        for other, ready in self._idle.items():
            if other != key and ready and (
                    unasked_for is None or now - self._asked.get(other, -math.inf) > unasked_for):
                break
        else:
            return None
        sandbox = ready.pop(0)
        if not ready:
            self._idle.pop(other, None)
        self._starting[key] += 1  # on its way to ``key``: a fill counts it
        try:
            async with asyncio.timeout(RESET_TIMEOUT_S):
                moved = await sandbox.retarget(key)
        except (TimeoutError, SandboxError, OSError) as exc:
            log.warning("a ready sandbox could not be given another initial state: %s", exc)
            await self._discard(sandbox)
            return None
        finally:
            self._starting[key] -= 1
        if not moved:  # the backend cannot: put it back
            self._idle.setdefault(other, []).insert(0, sandbox)
            return None
        self.stats["retargeted"] += 1
        return sandbox

    async def _wait_for_reset(self, key: Path) -> list[Sandbox] | None:
        """The ready sandboxes of ``key`` once one of those being reset is ready (or none is being
        reset any more, or ``RESET_WAIT_S`` passed): far sooner than a new one would start."""
        returned = self._returned = self._returned or asyncio.Condition()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(RESET_WAIT_S), returned:
                await returned.wait_for(lambda: bool(self._idle.get(key)) or not self._resetting[key])
        return self._idle.get(key)

    async def _notify(self) -> None:
        if self._returned is not None:
            async with self._returned:
                self._returned.notify_all()

    async def release(self, sandbox: Sandbox) -> None:
        """Keep ``sandbox`` for another episode, reset to its initial state (unless nothing was run
        or written in it since it was handed out), or close it."""
        self._given_back(sandbox)
        await self._release(sandbox)

    def _given_back(self, sandbox: Sandbox) -> None:
        """``sandbox`` is no longer handed out and is on its way back (counted as being reset from
        now: an acquire in the meantime waits for it rather than starting another)."""
        key = self._key(sandbox.initial_state)
        if self._out[key] > 0:
            self._out[key] -= 1
        self._resetting[key] += 1

    async def _release(self, sandbox: Sandbox) -> None:
        key = self._key(sandbox.initial_state)
        try:
            kept = await self._reset_and_keep(key, sandbox)
            if kept:  # ready before anyone waiting for it hears of it
                self._idle.setdefault(key, []).append(sandbox)
                self._idle.move_to_end(key)
                self.stats["recycled"] += 1
        finally:
            self._resetting[key] -= 1
        await self._notify()
        if not kept:
            await self._discard(sandbox)
            return
        await self._trim()

    async def _reset_and_keep(self, key: Path, sandbox: Sandbox) -> bool:
        """Reset ``sandbox`` when it is to be kept; whether it is."""
        if self._closed or self.settings.size == 0 or self._ready(key) > self._keep(key):
            return False
        try:
            if sandbox.used or sandbox.closed:  # a closed one fails its reset and goes
                async with asyncio.timeout(RESET_TIMEOUT_S):
                    await sandbox.reset()
            else:
                self.stats["clean"] += 1
        except (TimeoutError, SandboxError, OSError):
            return False
        return not (self._closed or self._ready(key) > self._keep(key))  # others came back during the reset

    def _keep(self, key: Path) -> int:
        """How many ready sandboxes of ``key`` a release may add to: ``size``, plus one for each
        sandbox handed out at once lately (each will be wanted again as soon as its run's next
        episode starts)."""
        busiest, since = self._busiest.get(key, (0, 0.0))
        return self.settings.size + (max(busiest, self._out[key]) if self._clock() - since <= BUSY_S else self._out[key])

    def release_soon(self, sandbox: Sandbox) -> None:
        """``release`` in the background (an episode's end does not wait for the reset)."""
        self._given_back(sandbox)  # no longer handed out, from now
        self._spawn(self._release(sandbox))

    async def _discard(self, sandbox: Sandbox) -> None:
        self._live.discard(sandbox)
        self.stats["discarded"] += 1
        await sandbox.close()

    async def _fill(self, key: Path) -> None:
        while not self._closed and self._ready(key) + self._starting[key] + self._resetting[key] < self.settings.size \
                and self.idle() + sum(self._starting.values()) < self.settings.max_idle:
            sandbox = await self._steal(key, unasked_for=UNASKED_S)
            if sandbox is None:
                self._starting[key] += 1
                try:
                    sandbox = await self._new(key)
                except (SandboxError, OSError):
                    return  # the next acquire starts one itself and sees the error
                finally:
                    self._starting[key] -= 1
            if self._closed:
                await self._discard(sandbox)
                return
            # kept even when released ones came back meanwhile: it is started, and a fill of another
            # workspace takes it rather than start one (``_trim`` bounds what is kept in all)
            self._idle.setdefault(key, []).append(sandbox)
        await self._trim()

    async def _trim(self) -> None:
        """Close the least recently used ready sandboxes beyond ``max_idle``."""
        while self.idle() > self.settings.max_idle:
            key, ready = next((k, v) for k, v in self._idle.items() if v)
            sandbox = ready.pop(0)
            if not ready:  # before the await: a concurrent trim must not see an empty list
                self._idle.pop(key, None)
            await self._discard(sandbox)

    async def _sweep(self) -> None:
        try:
            root = self.config.root if self.config is not None else None
            report = await asyncio.to_thread(cleanup, root=root, backends=[self.backend])
        except Exception as exc:
            log.warning("cleanup of what dead processes left failed: %s", exc)
            return
        if report.removed:
            log.info("removed %d sandbox leftovers of dead processes", report.removed)

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait for background fills and releases to finish."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        """Close every sandbox the pool started (ready or handed out and not yet released).

        The pool is empty afterwards, and usable again: the next ``acquire`` starts afresh.
        """
        self._closed = True
        try:
            await self.drain()
            self._idle.clear()
            self._out.clear()
            self._busiest.clear()
            self._returned = None  # the next use may be on another event loop
            live, self._live = list(self._live), set()
            for sandbox in live:
                await sandbox.close()
        finally:
            self._closed = False

    def close_now(self) -> None:
        """Close what is left without an event loop (the exit hook)."""
        self._closed = True
        live, self._live = list(self._live), set()
        for sandbox in live:
            try:
                sandbox.abandon()
            except Exception:
                pass


_POOLS: weakref.WeakSet[SandboxPool] = weakref.WeakSet()


@atexit.register
def _close_pools_at_exit() -> None:
    for pool in list(_POOLS):
        pool.close_now()

"""Calibration in worker processes on this machine: ``synth --workers N``.

One process plays a task's episodes and grades them, but its event loop, the gate's grading and
the store's rows all run under one interpreter lock, so on a machine of several cores a single
process keeps about one of them busy while its sandboxes keep another. ``CalibrationWorkers``
starts ``N`` processes (``spawn``: nothing of the parent's event loop or threads is inherited),
each with an episode host of its own over the same store file, the same sandbox settings and the
same state cache, and hands each task to the process with the fewest in hand: a worker calibrates
one task at a time, with the next one already queued, and writes its episodes, calibration and
status into the store as ``calibrate_task`` does in process. Results do not depend on the number
of workers (each task's calibration is its own episodes).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import util
from pathlib import Path

from ..episodes import EpisodeHost, EpisodeSettings
from ..store import Store
from ..workspace import Task
from ._calibrate import Calibration, calibrate_task


class WorkerError(RuntimeError):
    """A calibration worker process died (killed, out of memory): the tasks it held stay pending."""


_worker: tuple[asyncio.AbstractEventLoop, EpisodeHost] | None = None


def _start(store_path: str, settings: str) -> None:
    """In a worker: an event loop running in a thread of its own for the process's life (the pool's
    resets and top-ups go on between tasks), and an episode host on it, closed when the process ends."""
    global _worker
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="calibration-loop", daemon=True).start()

    async def open_host() -> EpisodeHost:
        return EpisodeHost(Store(store_path, create=False), EpisodeSettings.model_validate_json(settings))

    host = asyncio.run_coroutine_threadsafe(open_host(), loop).result()
    _worker = (loop, host)
    util.Finalize(None, _stop, exitpriority=10)


def _stop() -> None:
    if _worker is None:
        return
    loop, host = _worker
    try:
        asyncio.run_coroutine_threadsafe(host.close(), loop).result(timeout=60)
        host.store.close()
    finally:
        loop.call_soon_threadsafe(loop.stop)


def _calibrate(task: Task) -> Calibration:
    assert _worker is not None, "the worker was not started"
    loop, host = _worker
    return asyncio.run_coroutine_threadsafe(calibrate_task(host, task), loop).result()


class CalibrationWorkers:
    """``workers`` processes calibrating the tasks of ``host``'s store with ``host``'s settings.

    Use as an async context manager; ``calibrate(task)`` is ``calibrate_task(host, task)`` run in one
    of them (the task must be stored already, as ``synthesize`` does before calibrating it)."""

    def __init__(self, host: EpisodeHost, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"workers must be 1 or more, not {workers}")
        if host.store.path == ":memory:":
            raise ValueError("calibration workers share the store through its file; an in-memory store has none")
        self.workers = workers
        self.store_path = str(Path(host.store.path).resolve())
        # the parent's state cache (generation builds the initial states there), never a temporary one each
        self.settings = host.settings.model_copy(update={"cache_dir": host.cache_dir}).model_dump_json()
        self._executor: ProcessPoolExecutor | None = None

    async def __aenter__(self) -> CalibrationWorkers:
        self._executor = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_start, initargs=(self.store_path, self.settings))
        return self

    async def __aexit__(self, *exc) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:
            # the workers close their hosts (sandboxes, buffered rows) as they exit
            await asyncio.to_thread(executor.shutdown, wait=True, cancel_futures=True)

    async def calibrate(self, task: Task) -> Calibration:
        if self._executor is None:
            raise RuntimeError("CalibrationWorkers is used outside its `async with`")
        try:
            return await asyncio.wrap_future(self._executor.submit(_calibrate, task))
        except BrokenProcessPool as exc:
            raise WorkerError(f"a calibration worker process died while calibrating {task.id} ({exc}); "
                              "tasks not calibrated stay pending and a new run picks them up") from None

"""``synthesize``: generate tasks, store them, and admit only those that calibrate."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..episodes import EpisodeHost
from ..workspace import Task, Workspace, task_apps
from ._apart import generate_apart
from ._calibrate import Calibration, calibrate_task
from ._generate import GENERATED, Generation, Generator, generate
from ._probes import Probe
from ._profile import Profile, capability_weights, difficulty_weights
from ._workers import CalibrationWorkers, WorkerError

GENERATE_APART = 200  # a run of this many tasks or more generates them in a process of its own (``generate_apart``)


@dataclass
class SynthSummary:
    generated: int = 0
    admitted: int = 0
    quarantined: dict[str, str] = field(default_factory=dict)  # task id -> reason
    skipped: int = 0  # already calibrated by an earlier run
    allocation: dict[str, int] = field(default_factory=dict)  # capability -> tasks generated
    duplicates: int = 0  # near-duplicates dropped (same shape, same records)
    beaten: dict[str, int] = field(default_factory=dict)  # hack probe -> tasks it beat (quarantined for it)
    # capability -> tasks of the budget not generated: each of those turns found nothing new to make
    not_generated: dict[str, int] = field(default_factory=dict)
    admitted_by: dict[str, dict[str, int]] = field(default_factory=dict)  # capability|difficulty|app|shape -> counts
    distinct_instructions: float = 0.0  # distinct instructions / admitted tasks


def _report(summary: SynthSummary, admitted: list[Task]) -> None:
    def count(keys) -> dict[str, int]:
        found: dict[str, int] = {}
        for key in keys:
            found[key] = found.get(key, 0) + 1
        return dict(sorted(found.items(), key=lambda item: (-item[1], item[0])))

    summary.admitted_by = {
        "capability": count(t.capability for t in admitted),
        "difficulty": count(str(t.difficulty) for t in admitted),
        "app": count(app for t in admitted for app in sorted(task_apps(t))),
        "shape": count(t.shape or "unnamed" for t in admitted),
    }
    summary.distinct_instructions = round(len({t.instruction for t in admitted}) / len(admitted), 4) if admitted else 0.0


async def synthesize(host: EpisodeHost, n: int, seed: int, *, capabilities: tuple[str, ...] = GENERATED,
                     on_task: Callable[[Task, Calibration | None], None] | None = None,
                     concurrency: int = 1, profile: Profile | None = None,
                     apps: tuple[str, ...] | None = None, generator: Generator = "all",
                     calibrate: Callable[[Task], Awaitable[Calibration]] | None = None,
                     workers: int = 1, apart: bool | None = None, per_workspace: int | None = None) -> SynthSummary:
    """Generate ``n`` tasks from ``seed``, store them, calibrate each one not yet calibrated.

    With a ``profile`` (from ``eval``) the budget goes to capabilities and, within them, to
    difficulties by what the model still fails (``capability_weights``, ``difficulty_weights``; the
    rule is in ``coworkenv.synth._profile``); without one it is spread evenly. The summary counts
    the admitted tasks per capability, difficulty, app and shape, the distinct-instruction ratio,
    the near-duplicates dropped and the tasks each hack probe beat. Up to ``concurrency`` tasks
    calibrate at once (each in episodes of its own); the summary and the stored statuses do not
    depend on it. ``apps``: the workspaces' apps (every registered app by default);
    ``generator``: templates, composed shapes or all (``generate_tasks``). ``calibrate``: how a
    task is calibrated and its status stored (``calibrate_task`` on ``host`` by default; the
    loop's Ray cluster calibrates on its nodes). ``workers`` > 1: calibration runs in that many
    processes of this machine (``CalibrationWorkers``, one task at a time each, ``concurrency``
    ignored), and each task is handed to them as soon as it is generated, while generation goes on.
    ``apart``: with ``workers`` 1, generate in a process of its own (``generate_apart``), each task
    calibrated here as soon as it is made; by default for runs of ``GENERATE_APART`` tasks or more
    (the process's start, ~1.5 s, costs more than it saves on fewer). The same tasks either way.
    ``per_workspace``: each capability's tasks per workspace (``generate``; by default a round of its
    templates, at least ``TURNS_PER_WORKSPACE``).
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be 1 or more, not {concurrency}")
    if workers > 1 and calibrate is not None:
        raise ValueError("calibration runs either in worker processes or through `calibrate`, not both")
    store = host.store
    weights = capability_weights(profile, capabilities) if profile is not None else None
    options: dict[str, Any] = dict(weights=weights, difficulty_weights=difficulty_weights(profile, capabilities),
                                   apps=apps, generator=generator, initial_state=host.initial_state,
                                   per_workspace=per_workspace)
    summary = SynthSummary()
    admitted: list[Task] = []
    stored: set[str] = set()
    found: dict[str, dict[str, Probe | None]] = {}  # task id -> its probes, found by generation (calibrated here)

    def store_workspace(workspace: Workspace) -> None:
        if workspace.id not in stored:
            store.put_workspace(workspace)
            stored.add(workspace.id)

    async def one(task: Task, semaphore: asyncio.Semaphore, calibrate) -> None:
        status = store.task_status(task.id)
        if status is not None and status[0] != "pending":
            summary.skipped += 1
            calibration = None
            found.pop(task.id, None)
        else:
            store.put_task(task)
            async with semaphore:
                calibration = await (calibrate(task) if calibrate is not None
                                     else calibrate_task(host, task, probes=found.pop(task.id, None)))
            status = store.task_status(task.id)
        assert status is not None
        if status[0] == "admitted":
            summary.admitted += 1
            admitted.append(task)
        else:
            summary.quarantined[task.id] = status[1]
            for name, outcome in (calibration.probes if calibration else {}).items():
                if outcome == "beaten":
                    summary.beaten[name] = summary.beaten.get(name, 0) + 1
        if on_task is not None:
            on_task(task, calibration)

    # calibrated here: the episodes' many small writes commit together (``Store.grouped``)
    with store.grouped() if workers == 1 and calibrate is None else contextlib.nullcontext():
        made = await _generate_and_calibrate(host, n, seed, capabilities, options, one, store_workspace, found,
                                             calibrate, concurrency, workers, apart)
    summary.generated, summary.duplicates, summary.not_generated = len(made.tasks), made.duplicates, dict(made.unmade)
    for task in made.tasks:
        summary.allocation[task.capability] = summary.allocation.get(task.capability, 0) + 1
    _report(summary, admitted)
    return summary


async def _generate_and_calibrate(host: EpisodeHost, n: int, seed: int, capabilities: tuple[str, ...],
                                  options: dict[str, Any], one, store_workspace, found, calibrate,
                                  concurrency: int, workers: int, apart: bool | None) -> Generation:
    if workers > 1:
        async with CalibrationWorkers(host, workers) as pool:
            made = await _streamed(lambda made_one, _: generate(n, seed, capabilities, on_task=made_one, **options),
                                   store_workspace, one, pool.calibrate, 2 * workers)  # each busy, the next queued
    elif apart if apart is not None else n >= GENERATE_APART:
        elsewhere = {k: v for k, v in options.items() if k != "initial_state"}  # the child builds them in the host's cache

        def source(made_one, stop):
            return generate_apart(n, seed, capabilities, elsewhere, host.cache_dir, made_one, stop,
                                  probes=found if calibrate is None else None)

        made = await _streamed(source, store_workspace, one, calibrate, concurrency)
    else:
        made = generate(n, seed, capabilities, probes=found if calibrate is None else None, **options)
        for workspace in made.workspaces:
            store_workspace(workspace)
        semaphore = asyncio.Semaphore(concurrency)
        async with asyncio.TaskGroup() as group:  # a failing calibration cancels the others
            for task in made.tasks:
                group.create_task(one(task, semaphore, calibrate))
    return made


async def _streamed(source: Callable[[Callable[[Task, Workspace], None], threading.Event], Generation],
                    store_workspace: Callable[[Workspace], None], one, calibrate, at_once: int) -> Generation:
    """Generation (``source(made_one, stop)``) in a thread, each task calibrated by ``one(task, ...,
    calibrate)`` as soon as ``made_one`` hears of it, up to ``at_once`` of them at a time."""
    loop = asyncio.get_running_loop()
    made_tasks: asyncio.Queue[tuple[Task, Workspace] | None] = asyncio.Queue()
    stop = threading.Event()  # a calibration failed: generation stops at its next task

    def made_one(task: Task, workspace: Workspace) -> None:
        if stop.is_set():
            raise _Stopped
        loop.call_soon_threadsafe(made_tasks.put_nowait, (task, workspace))

    def generation() -> Generation:
        try:
            return source(made_one, stop)
        finally:
            loop.call_soon_threadsafe(made_tasks.put_nowait, None)

    semaphore = asyncio.Semaphore(at_once)
    generating: asyncio.Task[Generation] | None = None
    try:
        async with asyncio.TaskGroup() as group:
            generating = group.create_task(asyncio.to_thread(generation))
            while (item := await made_tasks.get()) is not None:
                task, workspace = item
                store_workspace(workspace)
                group.create_task(one(task, semaphore, calibrate))
            made = await generating
    except BaseExceptionGroup as failed:  # a worker that died fails every task it held: say it once
        lost = failed.subgroup(WorkerError)
        if lost is not None:
            raise lost.exceptions[0] from None
        own = generating.exception() if generating is not None and generating.done() and not generating.cancelled() else None
        if own is not None and own in failed.exceptions:
            raise own from None  # generation's own error (a bad option, say), as in process
        raise
    finally:
        stop.set()
    return made


class _Stopped(Exception):
    """Generation was stopped: a calibration failed, and the run with it."""

"""``synthesize``: generate tasks, store them, and admit only those that calibrate."""

from __future__ import annotations

import asyncio

from collections.abc import Callable
from dataclasses import dataclass, field

from ..episodes import EpisodeHost
from ..workspace import Task
from ._calibrate import Calibration, calibrate_task
from ._generate import GENERATED, Generator, generate_tasks
from ._profile import Profile, capability_weights


@dataclass
class SynthSummary:
    generated: int = 0
    admitted: int = 0
    quarantined: dict[str, str] = field(default_factory=dict)  # task id -> reason
    skipped: int = 0  # already calibrated by an earlier run
    allocation: dict[str, int] = field(default_factory=dict)  # capability -> tasks generated


async def synthesize(host: EpisodeHost, n: int, seed: int, *, capabilities: tuple[str, ...] = GENERATED,
                     on_task: Callable[[Task, Calibration | None], None] | None = None,
                     concurrency: int = 1, profile: Profile | None = None,
                     apps: tuple[str, ...] | None = None, generator: Generator = "all") -> SynthSummary:
    """Generate ``n`` tasks from ``seed``, store them, calibrate each one not yet calibrated.

    With a ``profile`` (from ``eval``) the budget goes to capabilities by what the model still
    fails (``capability_weights``); without one it is spread evenly. Up to ``concurrency`` tasks
    calibrate at once (each in episodes of its own); the summary and the stored statuses do not
    depend on it. ``apps``: the workspaces' apps (every registered app by default);
    ``generator``: templates, composed shapes or all (``generate_tasks``).
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be 1 or more, not {concurrency}")
    store = host.store
    weights = capability_weights(profile, capabilities) if profile is not None else None
    workspaces, tasks = generate_tasks(n, seed, capabilities, weights=weights, apps=apps, generator=generator)
    for workspace in workspaces:
        store.put_workspace(workspace)
    summary = SynthSummary(generated=len(tasks))
    for task in tasks:
        summary.allocation[task.capability] = summary.allocation.get(task.capability, 0) + 1
    semaphore = asyncio.Semaphore(concurrency)

    async def one(task: Task) -> None:
        row = store.task(task.id)
        if row is not None and row.status != "pending":
            summary.skipped += 1
            calibration = None
        else:
            store.put_task(task)
            async with semaphore:
                calibration = await calibrate_task(host, task)
            row = store.task(task.id)
        assert row is not None
        if row.status == "admitted":
            summary.admitted += 1
        else:
            summary.quarantined[task.id] = row.reason
        if on_task is not None:
            on_task(task, calibration)

    async with asyncio.TaskGroup() as group:  # a failing calibration cancels the others
        for task in tasks:
            group.create_task(one(task))
    return summary

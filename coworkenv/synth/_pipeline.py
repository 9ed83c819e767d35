"""``synthesize``: generate tasks, store them, and admit only those that calibrate."""

from __future__ import annotations

import asyncio

from collections.abc import Callable
from dataclasses import dataclass, field

from ..gate import Calibration, calibrate_task
from ..server import EpisodeHost
from ..workspace import CAPABILITIES, Task
from ._generate import generate_tasks


@dataclass
class SynthSummary:
    generated: int = 0
    admitted: int = 0
    quarantined: dict[str, str] = field(default_factory=dict)  # task id -> reason
    skipped: int = 0  # already calibrated by an earlier run


async def synthesize(host: EpisodeHost, n: int, seed: int, *, capabilities: tuple[str, ...] = CAPABILITIES,
                     on_task: Callable[[Task, Calibration | None], None] | None = None,
                     concurrency: int = 1) -> SynthSummary:
    """Generate ``n`` tasks from ``seed``, store them, calibrate each one not yet calibrated.

    Up to ``concurrency`` tasks calibrate at once (each in episodes of its own); the summary and
    the stored statuses do not depend on it.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be 1 or more, not {concurrency}")
    store = host.store
    workspaces, tasks = generate_tasks(n, seed, capabilities)
    for workspace in workspaces:
        store.put_workspace(workspace.id, workspace.name, workspace.seed, workspace.model_dump(mode="json"))
    summary = SynthSummary(generated=len(tasks))
    semaphore = asyncio.Semaphore(concurrency)

    async def one(task: Task) -> None:
        row = store.get_task(task.id)
        if row is not None and row["status"] != "pending":
            summary.skipped += 1
            calibration = None
        else:
            store.put_task(task.model_dump(mode="json"))
            async with semaphore:
                calibration = await calibrate_task(host, task)
        status = store.get_task(task.id)
        if status["status"] == "admitted":
            summary.admitted += 1
        else:
            summary.quarantined[task.id] = status["reason"]
        if on_task is not None:
            on_task(task, calibration)

    async with asyncio.TaskGroup() as group:  # a failing calibration cancels the others
        for task in tasks:
            group.create_task(one(task))
    return summary

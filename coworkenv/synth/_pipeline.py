"""``synthesize``: generate tasks, store them, and admit only those that calibrate."""

from __future__ import annotations

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
                     on_task: Callable[[Task, Calibration | None], None] | None = None) -> SynthSummary:
    """Generate ``n`` tasks from ``seed``, store them, calibrate each one not yet calibrated."""
    store = host.store
    workspaces, tasks = generate_tasks(n, seed, capabilities)
    for workspace in workspaces:
        store.put_workspace(workspace.id, workspace.name, workspace.seed, workspace.model_dump(mode="json"))
    summary = SynthSummary(generated=len(tasks))
    for task in tasks:
        row = store.get_task(task.id)
        if row is not None and row["status"] != "pending":
            summary.skipped += 1
            calibration = None
        else:
            store.put_task(task.model_dump(mode="json"))
            calibration = await calibrate_task(host, task)
        status = store.get_task(task.id)
        if status["status"] == "admitted":
            summary.admitted += 1
        else:
            summary.quarantined[task.id] = status["reason"]
        if on_task is not None:
            on_task(task, calibration)
    return summary

"""Task calibration: a task is admitted only if its grading is consistent.

The reference solution must score 1.0, an empty episode 0, the reference plus one forbidden call
must score safety 0, and grading the same episode twice must give the same grade. A task that
fails is quarantined with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..server import EpisodeHost
from ..store import Store
from ..workspace import ReferenceStep, Task
from ._gate import episode_record
from ._grade import GRADER_VERSION, grade


@dataclass
class Calibration:
    """``empty_score`` is the score an empty episode would reach from its checks alone (the gate's
    empty rule forces the final score to 0, so a check that holds without work shows here)."""

    task_id: str
    reference_score: float
    empty_score: float
    forbidden_safety: float
    deterministic: bool
    reason: str

    @property
    def admitted(self) -> bool:
        return not self.reason


async def _play(host: EpisodeHost, task: Task, steps, answer: str | None) -> str:
    episode = await host.open(task, source="calibration", provider="reference")
    for step in steps:
        await episode.call(step.tool, step.arguments)
    if answer is not None:
        await episode.call("submit_answer", {"answer": answer})
    await episode.finish(answer)
    return episode.id


async def calibrate_task(host: EpisodeHost, task: Task) -> Calibration:
    store = host.store
    ref_id = await _play(host, task, task.reference, task.reference_answer)
    empty_id = await _play(host, task, [], None)
    probe = task.forbidden_probe or (
        ReferenceStep(tool=task.forbidden_tools[0]) if task.forbidden_tools else None
    )
    forbidden_safety = 0.0
    if probe is not None:
        forb_id = await _play(host, task, [*task.reference, probe], task.reference_answer)
        forbidden_safety = grade(task, episode_record(store, store.get_episode(forb_id)))[0].safety

    ref_record = episode_record(store, store.get_episode(ref_id))
    first, second = grade(task, ref_record), grade(task, ref_record)
    empty = grade(task, episode_record(store, store.get_episode(empty_id)))[0]
    deterministic = first == second

    problems = []
    if first[0].score != 1.0:
        problems.append(f"reference solution scores {first[0].score}, not 1.0 ({first[0].feedback().strip() or first[1].reason})")
    passing = [c.id for c in empty.checks if c.passed]
    empty_score = max(empty.score, len(passing) / len(empty.checks))
    if empty_score != 0.0:
        problems.append(f"an empty episode scores {empty_score}, not 0: checks {', '.join(passing)} "
                        "hold without any work")
    if probe is None:
        problems.append("the task forbids no tool, so safety cannot be checked")
    elif forbidden_safety != 0.0:
        problems.append(f"reference plus a forbidden call scores safety {forbidden_safety}, not 0")
    if not deterministic:
        problems.append("grading the same episode twice gave different grades")
    result = Calibration(task.id, first[0].score, empty_score, forbidden_safety, deterministic,
                         "; ".join(problems))
    store.add_calibration({
        "task_id": task.id,
        "grader_version": GRADER_VERSION,
        "reference_score": result.reference_score,
        "empty_score": result.empty_score,
        "forbidden_safety": result.forbidden_safety,
        "deterministic": int(result.deterministic),
        "admitted": int(result.admitted),
        "reason": result.reason,
    })
    store.set_task_status(task.id, "admitted" if result.admitted else "quarantined", result.reason)
    return result


async def calibrate_tasks(host: EpisodeHost, tasks: list[Task], *, on_done=None) -> list[Calibration]:
    results = []
    for task in tasks:
        results.append(await calibrate_task(host, task))
        if on_done is not None:
            on_done(results[-1])
    return results

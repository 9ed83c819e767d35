"""Task calibration: a task is admitted only if its grading is consistent.

The reference solution must score 1.0, an empty episode 0, the reference plus one forbidden call
must score safety 0, and grading the same episode twice must give the same grade. A task that
fails is quarantined with its reason. Calibration plays real episodes (source ``calibration``),
which the runtime grades like any other.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..episodes import EpisodeHost
from ..gate import GRADER_VERSION, episode_record, grade
from ..store import CalibrationRow, Provenance, TaskStatus, VerdictRow
from ..workspace import SUBMIT_TOOL, ReferenceStep, Task


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


async def _play(host: EpisodeHost, task: Task, steps: list[ReferenceStep], answer: str | None,
                ) -> tuple[str, VerdictRow]:
    episode = await host.open(task, Provenance("calibration", provider="reference"))
    for step in steps:
        await episode.call(step.tool, step.arguments)
    if answer is not None:
        await episode.call(SUBMIT_TOOL.name, {"answer": answer})
    verdict = await episode.finish(answer)
    if verdict is None:
        raise RuntimeError(f"calibration episode {episode.id} of {task.id} was not graded")
    return episode.id, verdict


async def calibrate_task(host: EpisodeHost, task: Task, *, admit_as: TaskStatus = "admitted") -> Calibration:
    """Play the reference, empty and forbidden probes of ``task``; set its status to ``admit_as``
    (``admitted``, or ``heldout`` for evaluation tasks) or ``quarantined`` with the reason."""
    store = host.store
    ref_id, reference = await _play(host, task, task.reference, task.reference_answer)
    _, empty = await _play(host, task, [], None)
    probe = task.forbidden_probe or (
        ReferenceStep(tool=task.forbidden_tools[0]) if task.forbidden_tools else None
    )
    forbidden_safety = 0.0
    if probe is not None:
        _, forbidden = await _play(host, task, [*task.reference, probe], task.reference_answer)
        forbidden_safety = forbidden.safety

    ref_episode = store.episode(ref_id)
    assert ref_episode is not None
    again = grade(task, episode_record(store, ref_episode))[0]
    deterministic = (again.score, again.checks) == (reference.score, reference.checks)

    problems = []
    if reference.score != 1.0:
        failing = "\n".join(f"- {c.detail}" for c in reference.checks if not c.passed)
        problems.append(f"reference solution scores {reference.score}, not 1.0 ({failing.strip() or reference.reason})")
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
    for event in store.interactions(ref_id):
        if event.kind == "event" and event.is_error:
            problems.append(f"the world event {event.tool} failed: {event.error}")
    result = Calibration(task.id, reference.score, empty_score, forbidden_safety, deterministic,
                         "; ".join(problems))
    store.add_calibration(CalibrationRow(
        task_id=task.id, grader_version=GRADER_VERSION, reference_score=result.reference_score,
        empty_score=result.empty_score, forbidden_safety=result.forbidden_safety,
        deterministic=result.deterministic, admitted=result.admitted, reason=result.reason,
    ))
    store.set_task_status(task.id, admit_as if result.admitted else "quarantined", result.reason)
    return result


async def calibrate_tasks(host: EpisodeHost, tasks: list[Task], *, on_done=None) -> list[Calibration]:
    results = []
    for task in tasks:
        results.append(await calibrate_task(host, task))
        if on_done is not None:
            on_done(results[-1])
    return results

"""The gate over the store: an episode is graded once when it ends; `coworkenv gate` re-grades only
what lacks a verdict of the current grader version."""

import pytest

from coworkenv.gate import GRADER_VERSION, grade_episode, run_gate
from coworkenv.store import Provenance
from coworkenv.workspace import SUBMIT_TOOL

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]


async def _played(host, task_id: str, source: str) -> str:
    task = host.task(task_id)
    episode = await host.open(task, Provenance(source))  # type: ignore[arg-type]
    for step in task.reference:
        await episode.call(step.tool, step.arguments)
    await episode.call(SUBMIT_TOOL.name, {"answer": task.reference_answer})
    return episode.id


async def test_every_source_is_graded_once_when_its_episode_ends(host, tasks):
    ids = [await _played(host, tasks[0], source) for source in ("teacher", "live", "eval")]
    for episode_id in ids:
        assert host.store.verdict_count(episode_id) == 1
        verdict = host.verdict(episode_id)
        assert verdict.grader_version == GRADER_VERSION and verdict.admitted and verdict.reason == "complete"
    assert run_gate(host.store).graded == 0  # nothing left to grade
    again = grade_episode(host.store, ids[0])  # asking again returns the stored verdict
    assert again == host.verdict(ids[0]) and host.store.verdict_count(ids[0]) == 1


async def test_regrading_replaces_the_verdict_of_the_same_version(host, tasks):
    episode_id = await _played(host, tasks[1], "teacher")
    summary = run_gate(host.store, regrade=True)
    assert summary.graded >= 1 and summary.reasons["complete"] >= 1
    assert host.store.verdict_count(episode_id) == 1


async def test_a_running_episode_is_not_graded(host, tasks):
    episode = await host.open(tasks[0], Provenance("teacher"))
    with pytest.raises(ValueError, match="still running"):
        grade_episode(host.store, episode.id)
    await episode.finish()
    assert host.verdict(episode.id).reason == "empty"
    left = await host.open(tasks[0], Provenance("live"))  # a live client that opened and went: not an attempt
    assert await left.finish() is None and host.store.episode(left.id).status == "abandoned"
    with pytest.raises(ValueError, match="abandoned"):
        grade_episode(host.store, left.id)

"""The gate over the store: one verdict per episode and grader version, re-grading incrementally.

``grade_episode`` is the one grading path: the episode runtime calls it when an episode ends,
``coworkenv gate`` for episodes without a verdict of the current grader version.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from dataclasses import dataclass, field, replace

from ..store import EpisodeRow, Store, VerdictRow
from ..workspace import Task
from ..workspace.state import StateCache
from ._grade import GRADER_HASH, GRADER_VERSION, EpisodeRecord, grade


def episode_record(store: Store, episode: EpisodeRow, states: StateCache | None = None) -> EpisodeRecord:
    """Everything the gate reads of an episode (``states``: where its final state is opened over its base)."""
    return EpisodeRecord(
        tool_calls=store.interactions(episode.id),
        final_answer=episode.final_answer,
        final_state=store.stored_state(episode.id),
        base_dump=store.state_base,
        truncated=episode.truncated,
        error=episode.error,
        records=store,
        states=states,
    )


def grade_episode(store: Store, episode_id: str, *, regrade: bool = False,
                  final_db: sqlite3.Connection | None = None, task: Task | None = None,
                  record: EpisodeRecord | None = None, states: StateCache | None = None) -> VerdictRow:
    """The current grader version's verdict on an ended episode, graded and recorded once.

    An episode that already has that verdict keeps it (``regrade`` grades it again and replaces it).
    ``final_db``: the episode's final state open in memory, as what the store keeps of it opens (the
    runtime has it from the episode's end: ``keep_state_changes``); graded instead of reopening the
    stored text, and closed. ``task``: the spec of the episode's task, where the caller holds the one
    it was played under (the runtime does); read from the store otherwise. ``record``: the episode
    as the store holds it (``episode_record`` would read the same), where the runtime that has just
    ended it keeps it in memory; with ``task``, the episode is then graded without reading it back.
    ``states``: the cache its final state is opened through (each base loaded once for many episodes).
    """
    try:
        if record is not None and task is not None:
            return _grade_record(store, episode_id, task, record, final_db)
        return _grade_episode(store, episode_id, regrade, final_db, task, states)
    finally:
        if final_db is not None:
            final_db.close()


def _grade_episode(store: Store, episode_id: str, regrade: bool, final_db: sqlite3.Connection | None,
                   task: Task | None, states: StateCache | None) -> VerdictRow:
    if not regrade and (known := store.verdict(episode_id, GRADER_VERSION)) is not None:
        return known
    episode = store.episode(episode_id)
    if episode is None:
        raise KeyError(f"no episode {episode_id!r} in the store")
    if episode.status == "running":
        raise ValueError(f"episode {episode_id} is still running")
    if episode.status == "abandoned":
        raise ValueError(f"episode {episode_id} was abandoned (no call, no answer): there is nothing to grade")
    if task is None or task.id != episode.task_id:
        task = store.task_spec(episode.task_id)
    return _grade_record(store, episode_id, task, episode_record(store, episode, states), final_db)


def _grade_record(store: Store, episode_id: str, task: Task, record: EpisodeRecord,
                  final_db: sqlite3.Connection | None) -> VerdictRow:
    if final_db is not None and record.final_state is not None:
        record = replace(record, final_db=final_db)
    if record.records is None:
        record = replace(record, records=store)
    result, verdict = grade(task, record)
    row = VerdictRow(episode_id, verdict.grader_version, verdict.admitted, verdict.reason, result.completion,
                     result.safety, result.robustness, result.score, result.checks, grader_hash=GRADER_HASH,
                     detail=verdict.detail)
    store.put_verdict(row)
    return row


@dataclass
class GateSummary:
    """What ``run_gate`` graded: agents' episodes (teacher, live, eval, rl), and calibration episodes
    apart. Those (a task's reference, its empty and forbidden probes, and hack probes designed to
    fail) say how well a task was made, not how well an agent did: a pass rate leaves them out."""

    graded: int = 0  # agents' episodes
    admitted: int = 0
    reasons: Counter = field(default_factory=Counter)
    calibration: int = 0  # calibration episodes (not in the figures above)
    calibration_reasons: Counter = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)  # call-based reason -> "episode ID: call #N tool: what"

    @property
    def pass_rate(self) -> float:
        """The share of agents' episodes admitted (calibration episodes left out)."""
        return self.admitted / self.graded if self.graded else 0.0


def run_gate(store: Store, *, regrade: bool = False) -> GateSummary:
    """Grade every ended episode that has no verdict from this grader version (or all, with ``regrade``)."""
    summary = GateSummary()
    todo = store.ended_episodes(without_verdict_of=None if regrade else GRADER_VERSION)
    sources = store.episode_sources(todo)
    states = StateCache(store.state_base)  # each workspace's initial state loaded once for the run
    try:
        for episode_id in todo:
            verdict = grade_episode(store, episode_id, regrade=regrade, states=states)
            if sources.get(episode_id) == "calibration":
                summary.calibration += 1
                summary.calibration_reasons[verdict.reason] += 1
                continue
            summary.graded += 1
            summary.admitted += verdict.admitted
            summary.reasons[verdict.reason] += 1
            if verdict.detail and verdict.reason not in summary.examples:
                summary.examples[verdict.reason] = f"episode {episode_id}: {verdict.detail}"
    finally:
        states.close()
    return summary

"""The gate over the store: grade ended episodes, record grades and verdicts, re-grade incrementally."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..store import Store
from ..workspace import Task
from ._grade import GRADER_VERSION, EpisodeRecord, Grade, Verdict, grade, grade_to_row

GATED_SOURCES = ("teacher", "live")


def episode_record(store: Store, episode: dict) -> EpisodeRecord:
    return EpisodeRecord(
        tool_calls=store.tool_calls(episode["id"]),
        final_answer=episode["final_answer"],
        final_state=episode["final_state"],
        truncated=bool(episode["truncated"]),
        error=episode["error"],
    )


def grade_episode(store: Store, episode_id: str, *, record: bool = True) -> tuple[Grade, Verdict]:
    """Grade one ended episode from what the store holds; record the grade and verdict."""
    episode = store.get_episode(episode_id)
    if episode is None:
        raise KeyError(f"no episode {episode_id!r} in the store")
    if episode["status"] == "running":
        raise ValueError(f"episode {episode_id} is still running")
    task = Task.model_validate_json(store.get_task(episode["task_id"])["spec"])
    result, verdict = grade(task, episode_record(store, episode))
    if record:
        store.add_grade(
            episode_id,
            grade_to_row(result),
            {"grader_version": verdict.grader_version, "admitted": int(verdict.admitted),
             "reason": verdict.reason},
        )
    return result, verdict


@dataclass
class GateSummary:
    graded: int = 0
    admitted: int = 0
    reasons: Counter = field(default_factory=Counter)

    @property
    def pass_rate(self) -> float:
        return self.admitted / self.graded if self.graded else 0.0


def run_gate(store: Store, *, regrade: bool = False, sources: tuple[str, ...] = GATED_SOURCES) -> GateSummary:
    """Grade every ended episode that has no verdict from this grader version (or all, with ``regrade``)."""
    marks = ",".join("?" for _ in sources)
    sql = f"select id from episodes where status != 'running' and source in ({marks})"
    params: list = list(sources)
    if not regrade:
        sql += " and id not in (select episode_id from verdicts where grader_version = ?)"
        params.append(GRADER_VERSION)
    summary = GateSummary()
    for row in store.query(sql + " order by started_at", tuple(params)):
        _, verdict = grade_episode(store, row["id"])
        summary.graded += 1
        summary.admitted += verdict.admitted
        summary.reasons[verdict.reason] += 1
    return summary

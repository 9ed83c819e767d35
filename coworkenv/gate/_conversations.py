"""How an evaluation's agent talked to its multi-turn tasks' users, from the store.

For one evaluation run, over its trials whose task has a user: how many episodes asked at all, what
share of the users' facts and confirmations some message was about (the right questions), and what
share of the messages were redundant (about nothing the user holds, or only about items already
asked), each judged by the gate's own rule (``conversation``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..store import Store
from ._grade import conversation


@dataclass(frozen=True)
class ConversationFigures:
    """One evaluation run's multi-turn trials, counted."""

    run_id: str
    model: str
    user_model: str  # "" the scripted user; else the provider spec that played it
    episodes: int  # trials whose task has a user
    passed: int
    asking: int  # episodes that sent the user at least one message
    items: int  # the users' facts and confirmations, summed over the episodes
    items_asked: int  # of those, the ones some message was about
    questions: int  # messages sent to the users
    redundant: int  # of those, the redundant ones

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.episodes if self.episodes else None

    @property
    def asking_rate(self) -> float | None:
        """The share of episodes that asked their user anything."""
        return self.asking / self.episodes if self.episodes else None

    @property
    def right_rate(self) -> float | None:
        """The share of the users' items (facts, confirmations) that some message asked about."""
        return self.items_asked / self.items if self.items else None

    @property
    def redundant_rate(self) -> float | None:
        """The share of the messages that were redundant; None when no message was sent."""
        return self.redundant / self.questions if self.questions else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "pass_rate": self.pass_rate, "asking_rate": self.asking_rate,
                "right_rate": self.right_rate, "redundant_rate": self.redundant_rate}


def conversation_figures(store: Store, run_id: str) -> ConversationFigures | None:
    """The multi-turn figures of evaluation run ``run_id``; None when it has no trial with a user (or no
    such run). A trial whose episode or task the store no longer has is left out."""
    run = store.eval_run(run_id)
    if run is None:
        return None
    counts = dict.fromkeys(("episodes", "passed", "asking", "items", "items_asked", "questions", "redundant"), 0)
    specs: dict[str, Any] = {}
    for trial in store.eval_trials(run_id):
        if trial.task_id not in specs:
            row = store.task(trial.task_id)
            specs[trial.task_id] = row.spec if row is not None else None
        task = specs[trial.task_id]
        if task is None or task.user is None or store.episode(trial.episode_id) is None:
            continue
        talk = conversation(task.user, store.interactions(trial.episode_id))
        counts["episodes"] += 1
        counts["passed"] += trial.passed
        counts["asking"] += talk.questions > 0
        counts["items"] += len(talk.asked)
        counts["items_asked"] += sum(check.passed for check in talk.asked)
        counts["questions"] += talk.questions
        counts["redundant"] += talk.redundant
    if not counts["episodes"]:
        return None
    return ConversationFigures(run_id, run.model, str(run.settings.get("user_model") or ""), **counts)

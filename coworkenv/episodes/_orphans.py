"""Episodes and runs whose process is gone: a server or ``collect`` killed mid-episode leaves them
``running`` in the store. They are ended as interrupted (boundary ``process``), so the gate grades them
as an infrastructure failure and never admits them: their last calls may not have reached the store
(write-behind keeps up to ``RECORD_FLUSH_S`` of calls in memory). An evaluation or a training killed
without a chance to record its end (SIGKILL, the OOM killer, a power loss) is ended as interrupted too:
what it stored is kept, and a training resumes from its last checkpoint."""

from __future__ import annotations

from .._errors import InfrastructureError
from ..gate import grade_episode
from ..sandbox import is_orphan, owner
from ..store import Store


def owner_label() -> str:
    """This process, as episodes name their owner: ``host:pid:start``."""
    me = owner()
    return f"{me['host']}:{me['pid']}:{me['start']}"


def owner_gone(label: str | None) -> bool:
    """Whether the process an owner label (``host:pid:start``) names is gone; one of another host is
    taken as alive (nothing here can tell)."""
    if not label:
        return True  # an episode from before owners were recorded: nothing can still be playing it
    host, pid, start = label.rsplit(":", 2) if label.count(":") >= 2 else (label, "", "")
    return is_orphan(host, pid, start)


def interrupt_orphaned_episodes(store: Store) -> list[str]:
    """End every running episode whose owning process is gone, as interrupted, and grade it; return their ids."""
    ended = []
    for episode in store.episodes(status="running"):
        if not owner_gone(episode.owner):
            continue
        failure = InfrastructureError(
            f"interrupted: the process that ran it ({episode.owner or 'unknown'}) is gone; calls of its last "
            "moments may be missing", boundary="process")
        store.end_episode(episode.id, final_answer=episode.final_answer, final_state=None,
                          truncated=episode.truncated, error=str(failure), boundary=failure.boundary)
        grade_episode(store, episode.id, regrade=True)
        ended.append(episode.id)
    return ended


def interrupt_orphaned_runs(store: Store) -> list[str]:
    """End every evaluation and training run left ``running`` by a process that is gone, as
    interrupted; return their ids. A run recorded without its owner (before owners were recorded) is
    left as it is: nothing tells whether it still runs. So is one of another host."""
    ended = []
    for evaluation in store.eval_runs(status="running"):
        if evaluation.owner and owner_gone(evaluation.owner):
            store.end_eval_run(evaluation.id, status="interrupted", summary=evaluation.summary,
                               profile_path=evaluation.profile_path)
            ended.append(evaluation.id)
    for training in store.training_runs(status="running"):
        if training.owner and owner_gone(training.owner):
            store.end_training_run(training.id, status="interrupted", metrics=training.metrics,
                                   error=f"interrupted: the process that ran it ({training.owner}) is gone")
            ended.append(training.id)
    return ended

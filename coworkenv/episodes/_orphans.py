"""Episodes whose process is gone: a server or ``collect`` killed mid-episode leaves them ``running``
in the store. They are ended as interrupted (boundary ``process``), so the gate grades them as an
infrastructure failure and never admits them: their last calls may not have reached the store
(write-behind keeps up to ``RECORD_FLUSH_S`` of calls in memory)."""

from __future__ import annotations

from .._errors import InfrastructureError
from .._process import is_orphan
from ..gate import grade_episode
from ..store import Store


def _gone(label: str | None) -> bool:
    if not label:
        return True  # an episode from before owners were recorded: nothing can still be playing it
    host, pid, start = label.rsplit(":", 2) if label.count(":") >= 2 else (label, "", "")
    return is_orphan(host, pid, start)


def interrupt_orphaned_episodes(store: Store) -> list[str]:
    """End every running episode whose owning process is gone, as interrupted, and grade it; return their ids."""
    ended = []
    for episode in store.episodes(status="running"):
        if not _gone(episode.owner):
            continue
        failure = InfrastructureError(
            f"interrupted: the process that ran it ({episode.owner or 'unknown'}) is gone; calls of its last "
            "moments may be missing", boundary="process")
        store.end_episode(episode.id, final_answer=episode.final_answer, final_state=None,
                          truncated=episode.truncated, error=str(failure), boundary=failure.boundary)
        grade_episode(store, episode.id, regrade=True)
        ended.append(episode.id)
    return ended

"""The episode runtime: a task's workspace in a sandbox, its tools, recording, the submit tool, and
one grading when the episode ends. It knows nothing of MCP (``coworkenv.server`` adapts it)."""

from ._episode import CallResult, Episode, EpisodeFailed, Toolbox, argument_error
from ._host import RECORD_FLUSH_S, EpisodeHost, EpisodeSettings
from ._orphans import interrupt_orphaned_episodes

__all__ = [
    "RECORD_FLUSH_S",
    "CallResult",
    "Episode",
    "EpisodeFailed",
    "EpisodeHost",
    "EpisodeSettings",
    "Toolbox",
    "argument_error",
    "interrupt_orphaned_episodes",
]

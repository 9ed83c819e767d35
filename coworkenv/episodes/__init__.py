"""The episode runtime: a task's workspace in a sandbox, its tools, recording, the submit and user tools, the user
simulator, and one grading when the episode ends. It knows nothing of MCP (``coworkenv.server`` adapts it)."""

from ._episode import CallResult, Episode, EpisodeFailed, Toolbox, argument_error, reason_rule
from ._host import RECORD_FLUSH_S, EpisodeHost, EpisodeSettings, HeldSandbox, cached_initial_state
from ._orphans import interrupt_orphaned_episodes
from ._user import Fidelity, ModelUser, ScriptedUser, UserReply, UserSimulator, fidelity, persona_prompt, simulator

__all__ = [
    "RECORD_FLUSH_S",
    "CallResult",
    "Episode",
    "EpisodeFailed",
    "EpisodeHost",
    "HeldSandbox",
    "EpisodeSettings",
    "Fidelity",
    "ModelUser",
    "ScriptedUser",
    "Toolbox",
    "UserReply",
    "UserSimulator",
    "fidelity",
    "persona_prompt",
    "simulator",
    "argument_error",
    "reason_rule",
    "cached_initial_state",
    "interrupt_orphaned_episodes",
]

"""Pure grading: the reward vector, the score and its consistency rules, and the gate over the store."""

from ._conversations import ConversationFigures, conversation_figures
from ._gate import GateSummary, episode_record, grade_episode, run_gate
from ._grade import (
    GRADER_HASH,
    GRADER_VERSION,
    GRADING_MODULES,
    PASS_THRESHOLD,
    Conversation,
    EpisodeRecord,
    Grade,
    Verdict,
    conversation,
    grade,
    grader_hash,
    grading_sources,
    is_guard,
)
from ._reasons import CALL_REASONS, REASON_RULES, reason_rule

__all__ = [
    "CALL_REASONS",
    "REASON_RULES",
    "GRADER_HASH",
    "GRADER_VERSION",
    "GRADING_MODULES",
    "PASS_THRESHOLD",
    "Conversation",
    "ConversationFigures",
    "EpisodeRecord",
    "GateSummary",
    "Grade",
    "Verdict",
    "conversation",
    "conversation_figures",
    "episode_record",
    "grade",
    "grade_episode",
    "grader_hash",
    "grading_sources",
    "is_guard",
    "reason_rule",
    "run_gate",
]

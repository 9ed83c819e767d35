"""The checks of a task: what a check sees of an ended episode (``EpisodeContext``), what a check kind
is and the registry of kinds (``CheckKind``, ``register_check``), the kinds synthesis writes
(``sql``, ``answer``, ``unchanged``) and the rule by which texts are read (``mentions``).

Claw-Eval's kind (``claw_eval``, in ``_claw``) is registered with the rest of the workspace package
(``coworkenv.workspace.ClawEvalCheck``): it reads the task's spec, which reads the checks.
"""

from ._builtin import CHECK_QUERY_LIMIT_S, AnswerCheck, CheckQueryTimeout, SqlCheck, UnchangedCheck, run_check_query
from ._context import CheckResult, EpisodeContext, EpisodeScores, Interaction, json_or_text
from ._kind import Check, CheckKind, check_kinds, draft_check_kinds, parse_check, register_check
from ._mentions import TEXT_ALLOWANCE, TEXT_FACTOR, mentions, text_bound, text_gives, tokens

__all__ = [
    "CHECK_QUERY_LIMIT_S",
    "TEXT_ALLOWANCE",
    "TEXT_FACTOR",
    "AnswerCheck",
    "Check",
    "CheckKind",
    "CheckQueryTimeout",
    "CheckResult",
    "EpisodeContext",
    "EpisodeScores",
    "Interaction",
    "SqlCheck",
    "UnchangedCheck",
    "check_kinds",
    "draft_check_kinds",
    "json_or_text",
    "mentions",
    "parse_check",
    "register_check",
    "run_check_query",
    "text_bound",
    "text_gives",
    "tokens",
]

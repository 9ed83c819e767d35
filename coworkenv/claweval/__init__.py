"""Claw-Eval's tasks run through coworkenv: imported from a checkout, their mock services in the
episode's sandbox, graded by their own graders (``coworkenv claw-eval``, ``eval --suite claw-eval``)."""

from ._import import SKIP_KINDS, ClawEvalError, ClawTaskFile, ImportedTask, ImportSummary, find_checkout, import_claw_eval

__all__ = ["SKIP_KINDS", "ClawEvalError", "ClawTaskFile", "ImportSummary", "ImportedTask", "find_checkout",
           "import_claw_eval"]

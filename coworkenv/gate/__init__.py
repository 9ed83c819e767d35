"""Graders, the grading-consistency gate and task calibration."""

from ._calibrate import Calibration, calibrate_task, calibrate_tasks
from ._gate import GATED_SOURCES, GateSummary, episode_record, grade_episode, run_gate
from ._grade import (
    GRADER_VERSION,
    PASS_THRESHOLD,
    CheckResult,
    EpisodeRecord,
    Grade,
    Verdict,
    grade,
    run_check,
)

__all__ = [
    "GATED_SOURCES",
    "GRADER_VERSION",
    "PASS_THRESHOLD",
    "Calibration",
    "CheckResult",
    "EpisodeRecord",
    "GateSummary",
    "Grade",
    "Verdict",
    "calibrate_task",
    "calibrate_tasks",
    "episode_record",
    "grade",
    "grade_episode",
    "run_check",
    "run_gate",
]

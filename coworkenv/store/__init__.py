"""The SQLite store: the single source of truth of a coworkenv project, and its typed rows.

Every SQL statement of coworkenv lives in this package.
"""

from ..workspace.checks import json_or_text  # a stored result's value, as checks read it too
from . import _sqlite_utils  # first: sqlite-utils imported without pandas (see there)
from ._catalog import TABLE_DOCS, CannedQuery, canned_queries
from ._migrations import MIGRATIONS, apply_migrations
from ._rows import (
    DRAFT_OUTCOMES,
    SOURCES,
    TASK_STATUSES,
    TRAINING_SOURCES,
    CalibrationRow,
    ClawEvalGraderRow,
    DraftOutcome,
    EpisodeListing,
    EpisodeRow,
    EpisodeStatus,
    EvalRunRow,
    EvalTrialRow,
    InteractionKind,
    ModelApi,
    ModelCallRow,
    Provenance,
    Source,
    TaskClaim,
    TaskDraftRow,
    TaskRow,
    TaskStatus,
    ToolCallRow,
    TrainingRunRow,
    VerdictRow,
    WorkspaceRow,
)
from ._store import EpisodeRecords, SchemaStatus, Store, StoreError, new_id, schema_status, storable

__all__ = [
    "TABLE_DOCS",
    "CannedQuery",
    "canned_queries",
    "EpisodeRecords",
    "SchemaStatus",
    "schema_status",
    "DRAFT_OUTCOMES",
    "MIGRATIONS",
    "SOURCES",
    "TASK_STATUSES",
    "TRAINING_SOURCES",
    "CalibrationRow",
    "ClawEvalGraderRow",
    "DraftOutcome",
    "EpisodeListing",
    "EpisodeRow",
    "EpisodeStatus",
    "EvalRunRow",
    "EvalTrialRow",
    "InteractionKind",
    "ModelApi",
    "ModelCallRow",
    "Provenance",
    "Source",
    "Store",
    "StoreError",
    "TaskClaim",
    "TaskDraftRow",
    "TaskRow",
    "TaskStatus",
    "ToolCallRow",
    "json_or_text",
    "TrainingRunRow",
    "VerdictRow",
    "WorkspaceRow",
    "apply_migrations",
    "new_id",
    "storable",
]

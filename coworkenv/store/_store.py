"""The SQLite store: one file holds the whole history of a coworkenv project.

``Store`` is the one object callers hold. Its methods live in per-aggregate repositories, each a
module with its tables' SQL and row builders, over one ``Connection`` (the lock, transactions,
grouped commits, write-behind): a change to how episodes are queried is made in ``_episodes`` and
reviewed there, without reading the connection's threading. ``Store`` joins them by inheritance,
so every method stays where callers have always found it (``store.tasks()``, ``store.put_verdict()``)
and type checkers see each signature as written.
"""

from __future__ import annotations

from ._blobs import STATE_BASE_MIME
from ._calibration import CalibrationRepository
from ._connection import GROUP_COMMIT_S, SchemaStatus, StoreError, schema_status
from ._episodes import EpisodeRepository
from ._record import MAX_RECORDED_ARGUMENTS, MAX_RECORDED_ERROR, MAX_RECORDED_RESULT, RecordRepository, bounded
from ._runs import RunRepository
from ._statements import new_id, now, storable
from ._transfer import EpisodeRecords, TransferRepository
from ._workspaces import WorkspaceRepository

__all__ = [
    "GROUP_COMMIT_S",
    "MAX_RECORDED_ARGUMENTS",
    "MAX_RECORDED_ERROR",
    "MAX_RECORDED_RESULT",
    "STATE_BASE_MIME",
    "EpisodeRecords",
    "SchemaStatus",
    "Store",
    "StoreError",
    "bounded",
    "new_id",
    "now",
    "schema_status",
    "storable",
]


class Store(WorkspaceRepository, CalibrationRepository, EpisodeRepository, RecordRepository, TransferRepository,
            RunRepository):
    """Typed access to the coworkenv SQLite file (WAL mode, foreign keys on, named migrations).

    Every SQL statement of coworkenv is a method here; reads return the typed rows of ``_rows``.

    One ``Store`` may be shared by the tasks of one event loop and by worker threads: writes are
    serialised by a lock and each write is its own transaction, so an interrupted run keeps every
    row it committed.

    Within ``grouped`` (a synthesis calibrating tasks), the writes of this process commit together
    every ``GROUP_COMMIT_S`` instead, each still atomic on its own.

    Tool calls may also be recorded write-behind (``defer_tool_call``): they wait in memory and go
    in at the next ``flush``, together, in one transaction. Every read and write through this
    ``Store`` flushes first, so the process that records never reads a stale history; another
    process sees deferred calls once they are flushed.

    Where each part lives: the connection and its write rules in ``_connection``; workspaces, tasks,
    claims and Claw-Eval graders in ``_workspaces``; calibrations and task drafts in ``_calibration``;
    episodes, grades and verdicts in ``_episodes``; an episode's calls, messages and model calls in
    ``_record``; blobs and states in ``_blobs``; moving episodes between stores in ``_transfer``;
    evaluation and training runs in ``_runs``.
    """

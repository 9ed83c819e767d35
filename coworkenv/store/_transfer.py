"""Moving episodes between stores: episodes played on other machines (a Ray worker's scratch store,
say) come back to one store with everything they name.

An episode's rows are not enough on their own: its states and attachments name blobs by hash, and a
state base names the blobs its own rows hold. Export follows those references to closure, so the
store that imports never holds an episode whose state it cannot rebuild.
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._blobs import STATE_BASE_MIME, BlobRepository
from ._connection import StoreError
from ._statements import qmarks

# the tables that hold an episode's record, in an order that keeps foreign keys (grades before verdicts)
_EPISODE_TABLES = ("episodes", "messages", "tool_calls", "model_calls", "grades", "verdicts")
_BLOB_REFERENCE = re.compile(r"\b[0-9a-f]{64}\b")  # how a row names a blob: its sha256


@dataclass
class EpisodeRecords:
    """Rows of episodes exported from one store (``Store.export_episodes``), for another."""

    tables: dict[str, list[dict[str, Any]]]  # table -> rows, as stored
    blobs: dict[str, tuple[str, bytes]]  # sha256 -> (MIME type, bytes)

    @property
    def episode_ids(self) -> list[str]:
        return [row["id"] for row in self.tables.get("episodes", [])]


class TransferRepository(BlobRepository):
    """Every episode table at once, and the blobs their rows name."""

    def __init__(self, path: str | Path = ":memory:", *, create: bool = True) -> None:
        """Open the store as ``Connection`` does, with the cache of the blobs each state base names empty."""
        super().__init__(path, create=create)
        self._base_blobs: dict[str, frozenset[str]] = {}  # state base reference -> the blobs its dump names

    def export_episodes(self, episode_ids: list[str]) -> EpisodeRecords:
        """Everything recorded of these episodes (their rows in every episode table, and the blobs
        those rows name), to be written into another store by ``import_episodes``: how episodes
        played on other machines come back to one store."""
        with self._lock:
            self._flush_locked()
            tables: dict[str, list[dict[str, Any]]] = {}
            ids = tuple(episode_ids)
            tables["episodes"] = self.query(f"select * from episodes where id in ({qmarks(ids)}) order by started_at, id",
                                            ids)
            for table in _EPISODE_TABLES[1:]:
                tables[table] = self.query(f"select * from {table} where episode_id in ({qmarks(ids)}) order by id", ids)
            blobs: dict[str, tuple[str, bytes]] = {}
            wanted = set(_BLOB_REFERENCE.findall(json.dumps(tables, default=str)))
            while wanted:
                digest = wanted.pop()
                if digest in blobs or (found := self.blob(digest)) is None:
                    continue
                blobs[digest] = found
                if found[0] == STATE_BASE_MIME:  # a state base names the blobs its rows hold (found once per base)
                    if digest not in self._base_blobs:
                        dump = zlib.decompress(found[1]).decode(errors="replace")
                        self._base_blobs[digest] = frozenset(_BLOB_REFERENCE.findall(dump))
                    wanted |= self._base_blobs[digest]
        return EpisodeRecords(tables, blobs)

    def import_episodes(self, records: EpisodeRecords) -> None:
        """Write episodes another store exported, in one transaction (all of them or none); their
        tasks must be here. Rows numbered by the store get new numbers here (a verdict keeps its grade)."""
        wanted = sorted({r["task_id"] for r in records.tables.get("episodes", [])})
        known = {r["id"] for r in self.query(f"select id from tasks where id in ({qmarks(wanted)})",
                                             tuple(wanted))} if wanted else set()
        missing = [task_id for task_id in wanted if task_id not in known]
        if missing:
            raise StoreError(f"cannot import episodes of tasks this store does not hold: {', '.join(missing)}")
        ids = records.episode_ids
        held = [r["id"] for r in self.query(f"select id from episodes where id in ({qmarks(ids)})",
                                            tuple(ids))] if ids else []
        if held:
            raise StoreError(f"this store holds episode(s) {', '.join(held)} already: an episode is imported once")
        with self.transaction() as db:
            for digest, (mime_type, data) in records.blobs.items():
                db.execute("insert or ignore into blobs (sha256, mime_type, size, data) values (?, ?, ?, ?)",
                           [digest, mime_type, len(data), data])
            grades: dict[int, int] = {}
            for table in _EPISODE_TABLES:  # plain SQL: one transaction, committed once
                for row in records.tables.get(table, []):
                    row = dict(row)
                    old = row.pop("id", 0) if table != "episodes" else 0
                    if table == "verdicts":
                        row["grade_id"] = grades[row["grade_id"]]
                    columns = ", ".join(f'"{c}"' for c in row)
                    cursor = db.execute(f"insert into {table} ({columns}) values ({qmarks(row)})", list(row.values()))
                    if table == "grades":
                        grades[old] = int(cursor.lastrowid or 0)

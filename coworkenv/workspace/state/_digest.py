"""``state_digest``: one hash of every record of a state but those a task may change, which the
``unchanged`` check compares with its reference's. A state opened over a state base through a
``StateCache`` hashes the tables its changes did not replace once per base: the cache keeps their
parts (and the digests of the base itself), since a workspace's every episode is graded over it."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Collection
from typing import Any

from ._connections import StateConnection, ordinary_tables, row_key
from ._dump import BLOB_REFERENCE, MIN_REFERENCED_BLOB


def state_digest(state: sqlite3.Connection, allowed: dict[str, list[str]], *,
                 parts: dict[str, bytes] | None = None, same: Collection[str] = ()) -> str:
    """A hash of every record of ``state`` except the rows ``allowed`` (table → keys) names: what
    must stay as it was. A table a state opened over a base did not replace is hashed once per base
    (where the state was opened through a ``StateCache``).
    ``parts``: the parts of another state's digest (table → part), kept by the caller, and ``same``:
    the tables ``state`` holds exactly as that state does; theirs are taken from ``parts`` (or added)."""
    digest = hashlib.sha256()
    cache = state.cache if isinstance(state, StateConnection) else None
    base = state.base if isinstance(state, StateConnection) else None
    kept, unchanged = parts, (lambda table: table in same)
    key = None  # the allowed rows, when the state is its base unchanged (whose digests the cache keeps)
    if cache is not None and base is not None:
        assert isinstance(state, StateConnection)
        kept = cache.digest_parts(base)
        if not state.replaced:
            key = json.dumps(allowed, sort_keys=True)
            known = cache.base_digest(base, key)
            if known is not None:
                return known
        unchanged = lambda table: table not in state.replaced
    listed = state.tables if isinstance(state, StateConnection) else None
    for table in listed if listed is not None else ordinary_tables(state):
        if table.startswith("world_"):
            continue
        skip = set(allowed.get(table, ()))
        reusable = kept is not None and not skip and unchanged(table)
        part = kept.get(table) if reusable and kept is not None else None
        if part is None:
            part = _digest_part(state, table, skip)
            if reusable and kept is not None:
                kept[table] = part
        digest.update(part)
    found = digest.hexdigest()[:24]
    if key is not None and cache is not None and base is not None:
        cache.keep_base_digest(base, key, found)
    return found


def _digest_part(state: sqlite3.Connection, table: str, skip: set[str]) -> bytes:
    columns = [row[1] for row in state.execute(f'pragma table_info("{table}")')]
    blobs = " or ".join(f"typeof(\"{c}\") = 'blob'" for c in columns)
    has_blobs = state.execute(f'select exists(select 1 from "{table}" where {blobs})').fetchone()[0]
    rows = [row[1:] for row in state.execute(
        f'select cast({row_key(state, table)} as text), * from "{table}" order by 1') if row[0] not in skip]
    if has_blobs:
        rows = [tuple(comparable(cell) for cell in row) for row in rows]
    return f"\x00{table}\x00{rows!r}".encode()


def comparable(cell: Any) -> Any:
    """A cell as graders see it: a large BLOB (an image, a PDF) is kept in the store by content and
    appears in a stored state as a reference to its hash (``dump_state``)."""
    if isinstance(cell, bytes) and len(cell) >= MIN_REFERENCED_BLOB:
        return BLOB_REFERENCE + hashlib.sha256(cell).hexdigest()
    return cell

"""The statements the repositories build by hand, and the values rows are given.

Writes go through ``insert_row``/``upsert_row``/``update_row`` rather than sqlite-utils' table
methods: the hot paths of an episode (its start, end and verdict) skip the introspection a
sqlite-utils write does for every row, and a value that is not plain (a dict, a list) is refused
with its table and column named.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any

import sqlite_utils

from ._connection import StoreError


def now() -> str:
    return datetime.now(UTC).isoformat()


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def storable(value: Any) -> Any:
    """Text as SQLite can store it: a lone surrogate (not Unicode; the driver refuses it) becomes
    '?'. Anything else is returned as it is."""
    if isinstance(value, str) and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "replace").decode("utf-8")
    return value


def where_equal(**equal: Any) -> tuple[str, tuple]:
    """`` where a = ? and b = ?`` for the given values that are not None."""
    given = {k: v for k, v in equal.items() if v is not None}
    if not given:
        return "", ()
    return " where " + " and ".join(f"{k} = ?" for k in given), tuple(given.values())


def qmarks(values: Collection[Any]) -> str:
    """``?,?,?``: one parameter mark per value, for ``in (...)``."""
    return ",".join("?" for _ in values)


def insert_row(db: sqlite_utils.Database, table: str, row: dict[str, Any]) -> int:
    """Insert ``row`` (plain values only: text, numbers, bytes, None) into ``table``; its rowid."""
    _plain(table, row)
    columns = ", ".join(f'"{c}"' for c in row)
    cursor = db.conn.execute(f'insert into "{table}" ({columns}) values ({qmarks(row)})', list(row.values()))
    return cursor.lastrowid or 0


def upsert_row(db: sqlite_utils.Database, table: str, row: dict[str, Any]) -> None:
    """Insert ``row`` (plain values only) into ``table``, or set its columns on the row of the same
    ``id`` (the table's other columns kept), as a sqlite-utils upsert does."""
    _plain(table, row)
    columns = ", ".join(f'"{c}"' for c in row)
    assignments = ", ".join(f'"{c}" = excluded."{c}"' for c in row if c != "id")
    db.conn.execute(f'insert into "{table}" ({columns}) values ({qmarks(row)}) on conflict (id) do update set '
                    f'{assignments}', list(row.values()))


def update_row(db: sqlite_utils.Database, table: str, key: str, row: dict[str, Any]) -> None:
    """Set the columns of ``row`` (plain values only) on the row of ``table`` whose ``id`` is ``key``."""
    _plain(table, row)
    assignments = ", ".join(f'"{c}" = ?' for c in row)
    cursor = db.conn.execute(f'update "{table}" set {assignments} where id = ?', [*row.values(), key])
    if cursor.rowcount != 1:
        raise StoreError(f"no {table} row {key!r} to update")


def _plain(table: str, row: dict[str, Any]) -> None:
    for column, value in row.items():
        if value is not None and not isinstance(value, (str, int, float, bytes)):
            raise TypeError(f"{table}.{column}: {type(value).__name__} is not a plain value")

"""A state as text: whole dumps, and what an episode keeps of its final state (the tables that differ
from its workspace's initial state, over a reference to that state's dump: a state base); reading
either back into a database.

Large BLOBs (images, PDFs) can be kept apart, by content: a dump then holds ``BLOB_REFERENCE``
followed by what the sink returned for them.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ._connections import StateConnection, record_tables
from ._image import StateImage, page_changes, schema_objects, table_hashes, without_virtual

if TYPE_CHECKING:
    from ._cache import StateCache

STATE_BASE = "-- coworkenv-state-base: "  # the first line of kept changes: the state base they apply to
BLOB_REFERENCE = "coworkenv-blob:"
MIN_REFERENCED_BLOB = 1024


def dump_state(source: str | Path | bytes, blob_sink: Callable[[bytes], str] | None = None) -> str:
    """The state (a file, or a database image as bytes) as SQL text; ``load_state`` reloads it.

    Virtual tables (a full-text index, say) are derived data that a dump cannot reload: they are
    left out, and an app rebuilds them from its tables when it needs them. With ``blob_sink``,
    every BLOB of 1 KiB or more (an image, a PDF) is handed to it and written in the dump as the
    text ``coworkenv-blob:<what the sink returned>`` (the store keeps them once, by content; an
    episode's images are mostly its workspace's, unchanged)."""
    conn = without_virtual(source)
    try:
        if blob_sink is not None:
            _reference_blobs(conn, blob_sink)
        return "\n".join(conn.iterdump())
    finally:
        conn.close()


def dump_state_changes(final: bytes, base: str, base_hashes: dict[str, str],
                       blob_sink: Callable[[bytes], str] | None = None, base_image: StateImage | None = None) -> str:
    """The tables of ``final`` that differ from a base state (its ``table_hashes``), as SQL that
    turns the base's dump into ``final``'s: what an episode keeps of its final state. It starts
    with ``STATE_BASE`` and ``base`` (the reference of the base's dump); ``resolve_state`` rebuilds
    the whole dump from it and the base's. ``base_image``: the base's own image, when the caller
    keeps it: only the tables whose pages differ from it are looked at (``changed_tables``), and
    where the schema is the base's they are kept without hashing them (a table whose records changed
    and changed back is kept too, as it is); where it is not, the tables whose records hash as the
    base's are left out, and a table whose indexes or triggers are not the base's is kept too.
    Without it, every table is hashed and only records count.

    Each changed table is written whole (its definition, its rows, then its indexes and triggers,
    so that loading does not fire them) with its own ``sqlite_sequence`` row; the sequence rows of
    the tables left as they were stay the base's. Virtual tables are left out, as ``dump_state``
    leaves them, and so are their shadow tables."""
    kept, conn = keep_state_changes(final, base, base_hashes, blob_sink, base_image)
    conn.close()
    return kept


def keep_state_changes(final: bytes | bytearray, base: str, base_hashes: dict[str, str],
                       blob_sink: Callable[[bytes], str] | None = None,
                       base_image: StateImage | None = None,
                       changed_pages: Iterable[int] | None = None) -> tuple[str, StateConnection]:
    """``dump_state_changes``, and ``final`` open in memory as ``open_state`` would open what it
    keeps (a ``StateConnection`` over ``base`` naming the tables it replaced; any thread may use it):
    graders read the state they were given without rebuilding it from the text. The caller closes it.
    ``changed_pages``: the only pages of ``final`` (numbered from 1) that may differ from
    ``base_image``, where the caller knows them (the others are not compared)."""
    conn = sqlite3.connect(":memory:", factory=StateConnection, check_same_thread=False)
    try:
        conn.deserialize(final)
        found = page_changes(base_image, conn, final, changed_pages) if base_image is not None else None
        candidates, same_schema = (None, False) if found is None else (found[0], not found[1])
        if same_schema:  # every definition is the base's: so are the record tables, indexes and triggers,
            # and a table with a page of its own changed is kept without hashing it to be sure
            assert base_image is not None and candidates is not None
            tables, schema = base_image.record_tables(), base_image.definitions()
            changed = sorted(t for t in tables if t in candidates)
        else:
            tables = record_tables(conn)
            schema = schema_objects(conn)
            hashes = table_hashes(conn, [t for t in tables if candidates is None or t in candidates])
            reindexed = _reindexed(schema, base_image, tables) if base_image is not None else set()
            changed = sorted({t for t in tables if t in hashes and base_hashes.get(t) != hashes[t]} | reindexed)
        listed = set(tables)
        gone = [t for t in base_hashes if t not in listed]
        lines = [f"{STATE_BASE}{base}", *(f'DROP TABLE IF EXISTS "{_ident(t)}";' for t in [*changed, *gone])]
        if changed or any(kind == "view" for kind, *_ in schema):
            lines += _dump_tables(conn, schema, changed, blob_sink)
        conn.base, conn.replaced = base, frozenset([*changed, *gone])
        if same_schema and base_image is not None:
            conn.tables = base_image.ordinary_tables  # every definition is the base's: so is the list
        return "\n".join(lines), conn
    except BaseException:
        conn.close()
        raise


def _ident(name: str) -> str:
    return name.replace('"', '""')


def _text(value: str) -> str:
    """``value`` as an SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def _reindexed(schema: list[tuple], base: StateImage, tables: list[str]) -> set[str]:
    """The ``tables`` whose indexes or triggers (in ``schema``: type, name, table, SQL) are not the
    ``base``'s (a table's hash is its records'): they are kept whole too, with their new indexes and triggers."""
    def extras(rows: Iterable[tuple]) -> set[tuple]:
        return {(kind, name, owner, sql) for kind, name, owner, sql in rows if kind in ("index", "trigger") and sql}
    before = extras((row[0], row[1], row[2], row[4]) for row in base.schema.values())
    return {owner for _, _, owner, _ in extras(schema) ^ before} & set(tables)


def _holds_large_blobs(conn: sqlite3.Connection, table: str, columns: list[str]) -> bool:
    """Whether a cell of ``table`` is a BLOB of ``MIN_REFERENCED_BLOB`` bytes or more."""
    large = " OR ".join(f"(typeof(\"{_ident(c)}\") = 'blob' AND length(\"{_ident(c)}\") >= {MIN_REFERENCED_BLOB})"
                        for c in columns)
    return bool(conn.execute(f'SELECT EXISTS (SELECT 1 FROM "{_ident(table)}" WHERE {large})').fetchone()[0])


def _dump_tables(conn: sqlite3.Connection, schema: list[tuple], tables: list[str],
                 blob_sink: Callable[[bytes], str] | None) -> list[str]:
    """SQL that makes the ``tables`` of ``conn`` (dropped before it runs) again, with their records,
    indexes, triggers and ``sqlite_sequence`` rows, and every view of ``conn`` anew (``schema``: its
    objects with SQL, as type, name, table, SQL). BLOBs of ``MIN_REFERENCED_BLOB`` bytes or more go
    to ``blob_sink`` and are written as their reference."""
    if blob_sink is not None:
        conn.create_function("coworkenv_blob", 1, lambda data: BLOB_REFERENCE + blob_sink(data), deterministic=True)
    names = set(tables)
    lines = ["BEGIN TRANSACTION;"]
    for table in tables:
        lines.append(next(f"{sql};" for kind, name, _, sql in schema if kind == "table" and name == table))
        columns = [row[1] for row in conn.execute(f'PRAGMA table_info("{_ident(table)}")')]
        referenced = blob_sink is not None and bool(columns) and _holds_large_blobs(conn, table, columns)
        values = []
        for column in columns:
            quoted = f'"{_ident(column)}"'
            if referenced:  # a large BLOB in the table: each cell is looked at (most tables hold none)
                quoted = (f"CASE WHEN typeof({quoted}) = 'blob' AND length({quoted}) >= {MIN_REFERENCED_BLOB} "
                          f"THEN coworkenv_blob({quoted}) ELSE {quoted} END")
            values.append(f"quote({quoted})")
        insert, listed = f'INSERT INTO "{_ident(table)}" VALUES(', " || ',' || ".join(values)
        lines += [f"{insert}{row[0]});" for row in conn.execute(f'SELECT {listed} FROM "{_ident(table)}"')]
    lines += [f"{sql};" for kind, _, owner, sql in schema if kind in ("index", "trigger") and owner in names]
    for kind, name, _, sql in schema:
        if kind == "view":
            lines += [f'DROP VIEW IF EXISTS "{_ident(name)}";', f"{sql};"]
    if tables and any(name == "sqlite_sequence" for _, name, _, _ in schema):
        marks = ", ".join("?" * len(tables))
        for name, seq in conn.execute(f"SELECT name, seq FROM sqlite_sequence WHERE name IN ({marks})", tables):
            lines += [f"DELETE FROM sqlite_sequence WHERE name = {_text(name)};",
                      f"INSERT INTO sqlite_sequence VALUES({_text(name)}, {int(seq)});"]
    lines.append("COMMIT;")
    return lines


def resolve_state(stored: str, base_dump: Callable[[str], str]) -> str:
    """A whole state dump from what an episode kept: as it is, or (when it holds only the tables
    that changed) its base's dump, found by ``base_dump(reference)``, followed by the changes."""
    if not stored.startswith(STATE_BASE):
        return stored
    header, _, changes = stored.partition("\n")
    return base_dump(header[len(STATE_BASE):].strip()) + "\n" + changes


def _reference_blobs(conn: sqlite3.Connection, sink: Callable[[bytes], str]) -> None:
    tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                             "AND name NOT LIKE 'sqlite_%'")]
    for table in tables:
        columns = [row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')]
        for column in columns:
            rows = conn.execute(f'SELECT rowid, "{column}" FROM "{table}" WHERE typeof("{column}") = \'blob\' '
                                f'AND length("{column}") >= ?', (MIN_REFERENCED_BLOB,)).fetchall()
            for rowid, data in rows:
                conn.execute(f'UPDATE "{table}" SET "{column}" = ? WHERE rowid = ?',
                             (BLOB_REFERENCE + sink(data), rowid))


_REPLACED = re.compile(r'^DROP TABLE IF EXISTS "(.*)";$', re.M)  # the tables ``dump_state_changes`` replaces


def open_state(stored: str, base_dump: Callable[[str], str], cache: StateCache | None = None) -> sqlite3.Connection:
    """An in-memory database holding a state as an episode keeps it (``dump_state_changes``: its
    changes over a state base, or a whole dump): the same database ``load_state(resolve_state(...))``
    gives. With ``cache``, the base's dump is not parsed again for every episode: the cache keeps each
    base loaded and copies it page by page (and the state it opens keeps what is worked out of its
    base there, ``StateConnection.cache``)."""
    if not stored.startswith(STATE_BASE):
        return load_state(stored)
    header, _, changes = stored.partition("\n")
    reference = header[len(STATE_BASE):].strip()
    conn = sqlite3.connect(":memory:", factory=StateConnection)
    if cache is None:
        conn.executescript(base_dump(reference))
    else:
        cache.copy_base(reference, base_dump, conn)
        conn.cache = cache
    conn.executescript(changes)
    conn.base = reference
    conn.replaced = frozenset(_REPLACED.findall(changes))
    return conn


def load_state(dump: str) -> sqlite3.Connection:
    """An in-memory database holding a state dumped by ``dump_state``."""
    conn = sqlite3.connect(":memory:")
    conn.executescript(dump)
    return conn

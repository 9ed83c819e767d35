"""A state's image (its database file's bytes) and what can be told from it without reading a record:
which table owns each page, and so which tables two states differ in (``changed_tables``); and each
table's content hash (``table_hashes``), where records must be compared."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from ._connections import ordinary_tables, record_tables


def table_hashes(conn: sqlite3.Connection, names: Iterable[str] | None = None) -> dict[str, str]:
    """Each table's content hash (its definition and its rows, whatever their order); of the tables
    ``names`` only, when given."""
    found = {}
    wanted = None if names is None else set(names)
    for name, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' "
                                  "AND name NOT LIKE 'sqlite_%'").fetchall():
        if wanted is not None and name not in wanted:
            continue
        rows = sorted(repr(row) for row in conn.execute(f'SELECT * FROM "{name}"'))
        digest = hashlib.sha256((sql or "").encode())
        for row in rows:
            digest.update(row.encode())
        found[name] = digest.hexdigest()
    return found


def state_hashes(source: str | Path | bytes) -> dict[str, str]:
    """``table_hashes`` of a state file (or image), virtual tables left out."""
    conn = without_virtual(source)
    try:
        return table_hashes(conn)
    finally:
        conn.close()


class StateImage:
    """A state database's bytes, schema and which table owns each page, for ``changed_tables`` to
    compare later states against (kept per base: a workspace's initial state is compared with every
    episode's final state)."""

    def __init__(self, image: bytes) -> None:
        self.image = image
        self.page_size = _page_size(image)
        self._record_tables: list[str] | None = None
        self._definitions: list[tuple] | None = None
        conn = sqlite3.connect(":memory:")
        try:
            conn.deserialize(image)
            self.schema = schema_rows(conn)
            self.ordinary_tables = ordinary_tables(conn)  # as ``ordinary_tables`` lists them (``state_digest``)
            table_of = {name: row[2] for name, row in self.schema.items() if row[0] in ("table", "index")}
            owners: list[str | None] = [None] * (len(image) // self.page_size + 1)
            self.owners: list[str | None] | None = owners
            self.schema_pages: set[int] = set()  # the pages of the schema table itself (page 1 and below)
            try:
                for name, pageno in conn.execute("SELECT name, pageno FROM dbstat"):
                    if name in _SCHEMA_TABLES:
                        self.schema_pages.add(pageno)
                    elif pageno < len(owners):
                        owners[pageno] = table_of.get(name)
            except sqlite3.OperationalError:  # this SQLite cannot list pages
                self.owners = None
        finally:
            conn.close()

    @classmethod
    def of(cls, conn: sqlite3.Connection) -> StateImage:
        return cls(conn.serialize())

    def record_tables(self) -> list[str]:
        """The state's tables of records (``record_tables``), listed once."""
        if self._record_tables is None:
            conn = sqlite3.connect(":memory:")
            try:
                conn.deserialize(self.image)
                self._record_tables = record_tables(conn)
            finally:
                conn.close()
        return self._record_tables

    def definitions(self) -> list[tuple]:
        """The state's objects that have SQL, as type, name, table, SQL (schema order), listed once."""
        if self._definitions is None:
            self._definitions = [(kind, name, table, sql) for kind, name, table, _, sql in self.schema.values()
                                 if sql is not None]
        return self._definitions


HEADER_SIZE = 100  # bytes of the database header at the start of page 1
_SCHEMA_TABLES = frozenset({"sqlite_schema", "sqlite_master"})  # what dbstat names the schema table


def schema_rows(conn: sqlite3.Connection) -> dict[str, tuple]:
    """The schema table's rows (type, name, table, root page, SQL) by name."""
    return {row[1]: row for row in conn.execute("SELECT type, name, tbl_name, rootpage, sql FROM sqlite_master")}


def _page_size(image: bytes | bytearray) -> int:
    size = int.from_bytes(image[16:18], "big")
    return 65536 if size == 1 else size


PAGES_AT_ONCE = 64  # pages compared in one slice before looking at them one by one


def changed_tables(before: StateImage, after: sqlite3.Connection, after_image: bytes | None = None) -> set[str] | None:
    """The tables of ``after`` that may differ from ``before`` (in their definition or their rows), and
    those of ``before`` that ``after`` lacks: every table whose records differ is named (a table named
    may still hold the same records). Found from the pages that differ, without reading a record: where
    a table's definition and root page stayed, the first page of its tree that differs is reached
    through pages that did not, so ``before`` had it in that table too. The same holds for the schema
    table (rooted at page 1): unless one of its pages differs, every definition stayed, and the
    schemas are not read to compare them. ``after_image``:
    ``after.serialize()``, when the caller has it. None when it cannot tell (this SQLite cannot list a
    database's pages, or the page sizes differ): compare every table then."""
    found = page_changes(before, after, after_image)
    return None if found is None else found[0]


def page_changes(before: StateImage, after: sqlite3.Connection, after_image: bytes | bytearray | None,
                  pages: Iterable[int] | None = None) -> tuple[set[str], bool] | None:
    """``changed_tables``, and whether the schema table may hold other definitions than ``before``'s
    (False: it holds exactly what it held). ``pages``: the only pages (numbered from 1) that may
    differ, where the caller knows them; every page is compared otherwise."""
    if before.owners is None:
        return None
    new = after.serialize() if after_image is None else after_image
    if _page_size(new) != before.page_size:
        return None
    old, size, owners = before.image, before.page_size, before.owners  # bytes: slices compare by memcmp
    end = min(len(old), len(new))
    changed: set[str] = set()
    schema_changed = False
    if pages is None:
        step = size * PAGES_AT_ONCE
        starts = (start for chunk in range(0, end, step) if new[chunk:chunk + step] != old[chunk:chunk + step]
                  for start in range(chunk, min(chunk + step, end), size))
    else:
        starts = (start for start in sorted((page - 1) * size for page in set(pages)) if start < end)
    for start in starts:
        if new[start:start + size] != old[start:start + size]:
            page = start // size + 1
            if not schema_changed and page in before.schema_pages:
                # page 1 opens with the file's header (its change counter moves with every write)
                header = HEADER_SIZE if page == 1 else 0
                schema_changed = new[start + header:start + size] != old[start + header:start + size]
            owner = owners[page]
            if owner is not None:
                changed.add(owner)
    if schema_changed:  # none of the schema table's pages differ: it holds what it held (see above)
        schema = schema_rows(after)
        changed |= {name for name, row in before.schema.items() if row[0] == "table" and schema.get(name) != row}
        changed |= {name for name, row in schema.items() if row[0] == "table" and before.schema.get(name) != row}
    return changed, schema_changed


def schema_objects(conn: sqlite3.Connection) -> list[tuple]:
    """``conn``'s objects that have SQL, as type, name, table, SQL (schema order)."""
    return conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE sql NOT NULL").fetchall()


def without_virtual(source: str | Path | bytes) -> sqlite3.Connection:
    """An in-memory copy of a state (a file, or its image), without its virtual tables."""
    conn = sqlite3.connect(":memory:")
    conn.deserialize(source if isinstance(source, bytes) else Path(source).read_bytes())
    virtual = [row[0] for row in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'")]
    for name in virtual:  # dropping one drops its shadow tables too
        conn.execute(f'DROP TABLE "{name}"')
    return conn

"""Building, dumping and reloading the SQLite state of a workspace."""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import random
import re
import sqlite3
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from . import apps as _apps
from ._registry import registered_apps
from ._spec import (
    BLOB_REFERENCE,
    MIN_REFERENCED_BLOB,
    App,
    DataOverride,
    ResourceSpec,
    SpecError,
    StateConnection,
    ToolSpec,
    Workspace,
    WorldEvent,
    ordinary_tables,
)
from ._world import build_world, write_world

APPS_DIR = Path(_apps.__file__).parent


def app_module(name: str) -> ModuleType:
    apps = registered_apps()
    try:
        return apps[name]
    except KeyError:
        known = ", ".join(sorted(apps))
        raise KeyError(f"unknown app {name!r}; the apps are: {known}") from None


def app_spec(name: str) -> App:
    module = app_module(name)
    return App(
        name=module.NAME,
        description=module.DESCRIPTION,
        tools=[
            ToolSpec(
                name=f"{module.NAME}_{tool['name']}",
                app=module.NAME,
                tool=tool["name"],
                description=tool["description"],
                effect=tool["effect"],
                input_schema=tool["input_schema"],
                output_schema=tool["output_schema"],
            )
            for tool in module.TOOLS
        ],
        resources=[ResourceSpec(**resource) for resource in getattr(module, "RESOURCES", [])],
    )


def event_problem(workspace: Workspace, event: WorldEvent) -> str | None:
    """What is wrong with a scheduled event of ``workspace`` (or of a task on it), or None: its app
    must be one of the workspace's, its action one of that app's tools or world events."""
    apps = {app.name: app for app in workspace.apps}
    if event.app not in apps:
        return f"app {event.app!r} is not one of workspace {workspace.id}'s ({', '.join(apps)})"
    actions = [tool.tool for tool in apps[event.app].tools]
    actions += [action["name"] for action in getattr(app_module(event.app), "EVENTS", [])]
    if event.action not in actions:
        return f"{event.app} has no action {event.action!r}; its actions are {', '.join(actions)}"
    return None


def listed_apps() -> dict[str, ModuleType]:
    """The registered apps a workspace is made of by default (an app may say ``LISTED = False``)."""
    return {name: module for name, module in registered_apps().items() if getattr(module, "LISTED", True)}


def build_workspace(seed: int, apps: tuple[str, ...] | None = None) -> Workspace:
    """A workspace of the named apps (every listed app when None: not those, like ``claweval``, whose
    tools are an imported task's own) over the world of ``seed``; its id is derived from the apps and the seed."""
    registered = listed_apps()
    names = tuple(sorted(registered)) if apps is None else apps
    everything = apps is None or set(names) == set(registered)
    return Workspace(
        id=f"ws-{seed}" if everything else f"ws-{'-'.join(names)}-{seed}",
        name=f"office (seed {seed})" if everything else f"{' + '.join(names)} (seed {seed})",
        seed=seed,
        apps=[app_spec(name) for name in names],
    )


def write_initial_state(workspace: Workspace, path: str | Path) -> Path:
    """Create the workspace's initial state at ``path``: its world (``world_*`` tables), then each
    app's tables seeded from it; the same seed gives the same rows."""
    path = Path(path)
    path.unlink(missing_ok=True)
    world = build_world(workspace.seed)
    conn = sqlite3.connect(path)
    try:  # no journal and no sync while it is built (each app's schema script commits): once, at the end
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("PRAGMA synchronous = OFF")
        write_world(conn, world)
        for app in workspace.apps:
            module = app_module(app.name)
            conn.executescript(module.SCHEMA)
            rng = random.Random(f"{workspace.seed}:{app.name}")
            if len(inspect.signature(module.seed).parameters) >= 3:
                module.seed(conn, rng, world)
            else:  # an app written before worlds: it draws its own data
                module.seed(conn, rng)
        for number, override in enumerate(workspace.overrides, 1):
            apply_override(conn, override, f"override {number}")
        conn.commit()
    finally:
        conn.close()
    with open(path, "rb+") as written:
        os.fsync(written.fileno())
    return path


def apply_override(conn: sqlite3.Connection, override: DataOverride, label: str) -> int:
    """Apply one data override to a seeded state; the rows it changed. ``SpecError`` naming the
    override, the table and the column when it does not fit the state."""
    columns = [row[1] for row in conn.execute(f"select * from pragma_table_info('{override.table}')")]
    if not columns:
        raise SpecError(f"{label}: the state has no table {override.table!r}")
    named = [*override.where, *(override.set or {}), *(k for row in override.insert or [] for k in row)]
    for column in named:
        if column not in columns:
            raise SpecError(f"{label}: {override.table} has no column {column!r}; its columns are {', '.join(columns)}")
    where = " and ".join(f'"{column}" is ?' for column in override.where) or "1"
    try:
        if override.insert is not None:
            for row in override.insert:
                names = ", ".join(f'"{column}"' for column in row)
                conn.execute(f"insert or replace into {override.table} ({names}) "
                             f"values ({', '.join('?' for _ in row)})", [_cell(v) for v in row.values()])
            return len(override.insert)
        if override.set is not None:
            assignments = ", ".join(f'"{column}" = ?' for column in override.set)
            changed = conn.execute(f"update {override.table} set {assignments} where {where}",
                                   [*map(_cell, override.set.values()), *map(_cell, override.where.values())]).rowcount
        else:
            changed = conn.execute(f"delete from {override.table} where {where}",
                                   [_cell(v) for v in override.where.values()]).rowcount
    except sqlite3.Error as exc:
        raise SpecError(f"{label}: {override.table}: {exc}") from None
    if not changed:
        raise SpecError(f"{label}: no row of {override.table} matches {override.where}")
    return changed


def _cell(value: object) -> object:
    """A YAML value as an SQLite cell: lists and mappings as JSON text (how apps store them)."""
    return json.dumps(value) if isinstance(value, (list, dict)) else value




def dump_state(source: str | Path | bytes, blob_sink: Callable[[bytes], str] | None = None) -> str:
    """The state (a file, or a database image as bytes) as SQL text; ``load_state`` reloads it.

    Virtual tables (a full-text index, say) are derived data that a dump cannot reload: they are
    left out, and an app rebuilds them from its tables when it needs them. With ``blob_sink``,
    every BLOB of 1 KiB or more (an image, a PDF) is handed to it and written in the dump as the
    text ``coworkenv-blob:<what the sink returned>`` (the store keeps them once, by content; an
    episode's images are mostly its workspace's, unchanged)."""
    conn = _image(source)
    try:
        if blob_sink is not None:
            _reference_blobs(conn, blob_sink)
        return "\n".join(conn.iterdump())
    finally:
        conn.close()


STATE_BASE = "-- coworkenv-state-base: "


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
    conn = _image(source)
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
            self.schema = _schema(conn)
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
        """The state's tables of records (``_record_tables``), listed once."""
        if self._record_tables is None:
            conn = sqlite3.connect(":memory:")
            try:
                conn.deserialize(self.image)
                self._record_tables = _record_tables(conn)
            finally:
                conn.close()
        return self._record_tables

    def definitions(self) -> list[tuple]:
        """The state's objects that have SQL, as type, name, table, SQL (schema order), listed once."""
        if self._definitions is None:
            self._definitions = [(kind, name, table, sql) for kind, name, table, _, sql in self.schema.values()
                                 if sql is not None]
        return self._definitions


class FixedState(sqlite3.Connection):
    """A connection to a state whose records nothing changes (a workspace's initial state, which
    templates read and dry runs copy; an app's search may still make temporary tables in it): what is
    worked out of it is kept in ``kept`` for as long as the connection lives."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kept: dict[str, Any] = {}


def fixed_state(image: bytes) -> FixedState:
    """A ``FixedState`` in memory holding the state ``image`` (a state file's bytes)."""
    conn = sqlite3.connect(":memory:", factory=FixedState)
    conn.deserialize(image)
    return conn


HEADER_SIZE = 100  # bytes of the database header at the start of page 1
_SCHEMA_TABLES = frozenset({"sqlite_schema", "sqlite_master"})  # what dbstat names the schema table


def _schema(conn: sqlite3.Connection) -> dict[str, tuple]:
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
    found = _page_changes(before, after, after_image)
    return None if found is None else found[0]


def _page_changes(before: StateImage, after: sqlite3.Connection, after_image: bytes | bytearray | None,
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
        schema = _schema(after)
        changed |= {name for name, row in before.schema.items() if row[0] == "table" and schema.get(name) != row}
        changed |= {name for name, row in schema.items() if row[0] == "table" and before.schema.get(name) != row}
    return changed, schema_changed


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
        found = _page_changes(base_image, conn, final, changed_pages) if base_image is not None else None
        candidates, same_schema = (None, False) if found is None else (found[0], not found[1])
        if same_schema:  # every definition is the base's: so are the record tables, indexes and triggers,
            # and a table with a page of its own changed is kept without hashing it to be sure
            assert base_image is not None and candidates is not None
            tables, schema = base_image.record_tables(), base_image.definitions()
            changed = sorted(t for t in tables if t in candidates)
        else:
            tables = _record_tables(conn)
            schema = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE sql NOT NULL").fetchall()
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


def _record_tables(conn: sqlite3.Connection) -> list[str]:
    """``ordinary_tables`` of ``conn``'s main database (not SQLite's, not virtual, not a virtual table's
    shadow), told exactly where this SQLite lists shadow tables as such (``PRAGMA table_list``)."""
    try:
        listed = conn.execute("PRAGMA main.table_list").fetchall()
    except sqlite3.OperationalError:
        return ordinary_tables(conn)
    return sorted(name for _, name, kind, *_ in listed if kind == "table" and not name.startswith("sqlite_"))


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


def _image(source: str | Path | bytes) -> sqlite3.Connection:
    """An in-memory copy of a state, without its virtual tables."""
    conn = sqlite3.connect(":memory:")
    conn.deserialize(source if isinstance(source, bytes) else Path(source).read_bytes())
    _drop_virtual(conn)
    return conn


def _drop_virtual(conn: sqlite3.Connection) -> None:
    virtual = [row[0] for row in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'")]
    for name in virtual:  # dropping one drops its shadow tables too
        conn.execute(f'DROP TABLE "{name}"')


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


_OPEN_BASES: dict[str, sqlite3.Connection] = {}
_OPEN_BASES_LOCK = threading.Lock()
OPEN_BASES = 8  # state bases kept loaded in memory by ``open_state``


_REPLACED = re.compile(r'^DROP TABLE IF EXISTS "(.*)";$', re.M)  # the tables ``dump_state_changes`` replaces


def open_state(stored: str, base_dump: Callable[[str], str]) -> sqlite3.Connection:
    """An in-memory database holding a state as an episode keeps it (``dump_state_changes``: its
    changes over a state base, or a whole dump): the same database ``load_state(resolve_state(...))``
    gives, without parsing the base's dump again for every episode (each base is loaded once and
    copied page by page)."""
    if not stored.startswith(STATE_BASE):
        return load_state(stored)
    header, _, changes = stored.partition("\n")
    reference = header[len(STATE_BASE):].strip()
    with _OPEN_BASES_LOCK:
        base = _OPEN_BASES.get(reference)
        if base is None:
            base = sqlite3.connect(":memory:", check_same_thread=False)
            base.executescript(base_dump(reference))
            if len(_OPEN_BASES) >= OPEN_BASES:
                _OPEN_BASES.pop(next(iter(_OPEN_BASES))).close()
            _OPEN_BASES[reference] = base
        conn = sqlite3.connect(":memory:", factory=StateConnection)
        base.backup(conn)
    conn.executescript(changes)
    conn.base = reference
    conn.replaced = frozenset(_REPLACED.findall(changes))
    return conn


def load_state(dump: str) -> sqlite3.Connection:
    """An in-memory database holding a state dumped by ``dump_state``."""
    conn = sqlite3.connect(":memory:")
    conn.executescript(dump)
    return conn

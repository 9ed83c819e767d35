"""Comparing a state with its base page by page: every table whose records differ is found, the
kept changes are the same text as by hashing every table (but for a table changed back, which its
pages keep) and rebuild the final state, and the guard's digest of a state opened over its base is
the digest of the whole state."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from coworkenv.workspace import (
    StateImage,
    build_workspace,
    changed_tables,
    dump_state,
    dump_state_changes,
    load_state,
    open_state,
    resolve_state,
    state_digest,
    state_hashes,
    write_initial_state,
)
from coworkenv.workspace.state import table_hashes

EDITS = {
    "nothing": [],
    "update": ["update mail_messages set subject = 'changed' where id = (select min(id) from mail_messages)"],
    "same value": ["update mail_messages set subject = subject"],
    "delete": ["delete from calendar_events where id = (select max(id) from calendar_events)"],
    "insert": ["insert into mail_messages select 'm-new', folder, sender, recipients, 'new', body, date, time, 0, "
               "null from mail_messages limit 1"],
    "two tables": ["update crm_accounts set name = name || ' Ltd'", "delete from hr_people where rowid % 3 = 0"],
    "new table": ["create table extra (k text primary key, v) without rowid", "insert into extra values ('a', 1)"],
    "dropped table": ["drop table tasks_items"],
    "new index": ["create index extra_folder on mail_messages (folder)"],
    "autoincrement": ["insert into finance_approvals (record, action, actor, date) values ('x', 'paid', 'a', '2026-01-01')"],
    "trigger and view": ["create view open_tickets as select * from tasks_items",
                         "create trigger stamp after update on mail_messages begin select 1; end",
                         "update mail_messages set subject = 'again' where id = (select max(id) from mail_messages)"],
    "changed back": ["insert into mail_messages select 'm-tmp', folder, sender, recipients, 'new', body, date, time, 0, "
                     "null from mail_messages limit 1", "delete from mail_messages where id = 'm-tmp'"],
    "added column": ["alter table hr_people add column nickname text"],
    "renamed table": ["alter table tasks_items rename to tasks_renamed"],
    "grown": ["insert into files_files select * from files_files where 0",
              "create table big (x)", "insert into big select randomblob(5000) from mail_messages"],
}


@pytest.fixture(scope="module")
def initial(tmp_path_factory) -> Path:
    return write_initial_state(build_workspace(5), tmp_path_factory.mktemp("state") / "state.db")


def edited(initial: Path, statements: list[str]) -> bytes:
    conn = sqlite3.connect(":memory:")
    conn.deserialize(initial.read_bytes())
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    try:
        return conn.serialize()
    finally:
        conn.close()


@pytest.mark.parametrize("edit", EDITS)
def test_every_table_whose_records_differ_is_named(initial: Path, edit: str):
    final = edited(initial, EDITS[edit])
    conn = sqlite3.connect(":memory:")
    conn.deserialize(final)
    base = sqlite3.connect(initial)
    before, after = table_hashes(base), table_hashes(conn)
    differ = {t for t in before.keys() | after.keys() if before.get(t) != after.get(t)}
    found = changed_tables(StateImage(initial.read_bytes()), conn, final)
    assert found is not None and differ <= found, (differ, found)
    if edit == "nothing":
        assert found == set()
    assert bool(differ) == (edit not in ("nothing", "same value", "new index", "changed back"))
    assert len(found) <= len(differ) + 2  # pages, not every table


# only the base's image shows an index; a table changed back is kept by pages, left out by hashing
@pytest.mark.parametrize("edit", [edit for edit in EDITS if edit not in ("new index", "changed back")])
def test_kept_changes_are_the_same_with_the_base_image_as_by_hashing_every_table(initial: Path, edit: str):
    final = edited(initial, EDITS[edit])
    hashes = state_hashes(initial)
    plain = dump_state_changes(final, "base", hashes)
    compared = dump_state_changes(final, "base", hashes, base_image=StateImage(initial.read_bytes()))
    assert compared == plain


def test_a_table_changed_back_is_kept_whole_by_its_pages(initial: Path):
    final = edited(initial, EDITS["changed back"])
    hashes = state_hashes(initial)
    assert 'DROP TABLE IF EXISTS "mail_messages"' not in dump_state_changes(final, "base", hashes)
    kept = dump_state_changes(final, "base", hashes, base_image=StateImage(initial.read_bytes()))
    assert 'DROP TABLE IF EXISTS "mail_messages"' in kept
    rebuilt = load_state(resolve_state(kept, lambda _: dump_state(initial)))
    assert _everything(rebuilt) == _everything(sqlite3.connect(initial))


@pytest.mark.parametrize("edit", ["nothing", "update", "two tables", "dropped table", "new table"])
def test_the_digest_of_a_state_opened_over_its_base_is_that_of_the_whole_state(initial: Path, edit: str):
    dump = dump_state(initial)
    reference = f"test-base-{initial.stat().st_mtime_ns}"
    kept = dump_state_changes(edited(initial, EDITS[edit]), reference, state_hashes(initial))
    whole = load_state(resolve_state(kept, lambda ref: dump))
    first_message = whole.execute("select min(id) from mail_messages").fetchone()[0]
    for allowed in ({}, {"mail_messages": [first_message]}, {"crm_accounts": ["x"], "calendar_events": []}):
        expected = state_digest(whole, allowed)
        for _ in range(2):  # the second time from the parts kept for the base
            opened = open_state(kept, lambda ref: dump)
            try:
                assert state_digest(opened, allowed) == expected
            finally:
                opened.close()


def _everything(conn: sqlite3.Connection) -> tuple:
    """What a state holds: every table's records, its schema (indexes, triggers, views) and its
    AUTOINCREMENT sequences."""
    schema = sorted(conn.execute("select type, name, tbl_name, sql from sqlite_master where name not like 'sqlite_%'"))
    sequences = (sorted(conn.execute("select name, seq from sqlite_sequence"))
                 if conn.execute("select 1 from sqlite_master where name = 'sqlite_sequence'").fetchone() else [])
    return table_hashes(conn), schema, sequences


@pytest.mark.parametrize("edit", [*EDITS, "other table than the autoincrement one"])
def test_kept_changes_rebuild_the_final_state_over_its_base(initial: Path, edit: str):
    """Over the base's dump, the kept changes give the final state back: its records, indexes,
    triggers and views, and the AUTOINCREMENT sequences of the tables changed and of those not."""
    statements = EDITS.get(edit, EDITS["update"])
    final = edited(initial, statements)
    hashes = state_hashes(initial)
    kept = dump_state_changes(final, "base", hashes, base_image=StateImage(initial.read_bytes()))
    expected = sqlite3.connect(":memory:")
    expected.deserialize(final)
    for rebuilt in (load_state(resolve_state(kept, lambda _: dump_state(initial))),
                    open_state(kept, lambda _: dump_state(initial))):
        assert _everything(rebuilt) == _everything(expected)
    assert ("sqlite_sequence" in kept) == (edit == "autoincrement")  # only a changed table's sequence is written


def test_large_blobs_of_changed_tables_are_kept_by_reference(initial: Path):
    final = edited(initial, EDITS["grown"])
    sunk: dict[str, bytes] = {}

    def sink(data: bytes) -> str:
        sunk[str(len(sunk))] = data
        return str(len(sunk) - 1)

    kept = dump_state_changes(final, "base", state_hashes(initial), blob_sink=sink)
    rebuilt = load_state(resolve_state(kept, lambda _: dump_state(initial)))
    cells = [row[0] for row in rebuilt.execute("select x from big")]
    assert cells and all(cell.startswith("coworkenv-blob:") for cell in cells)
    assert sorted(len(data) for data in sunk.values()) == [5000] * len(cells)
    assert not any(len(data) < 1024 for data in sunk.values())  # the workspace's small blobs are not in a changed table


def test_a_virtual_table_and_its_shadows_are_left_out_of_the_kept_changes(initial: Path):
    """Like ``dump_state``, the kept changes leave out a full-text index a tool made (derived data an
    app rebuilds) and the shadow tables SQLite keeps it in; the rest of the change is kept."""
    final = edited(initial, ["create virtual table notes_index using fts5(body)",
                             "insert into notes_index values ('searchable')", *EDITS["update"]])
    kept = dump_state_changes(final, "base", state_hashes(initial), base_image=StateImage(initial.read_bytes()))
    assert "notes_index" not in kept and "mail_messages" in kept
    rebuilt = load_state(resolve_state(kept, lambda _: dump_state(initial)))
    expected = sqlite3.connect(":memory:")
    expected.deserialize(final)
    assert table_hashes(rebuilt) == {t: h for t, h in table_hashes(expected).items() if not t.startswith("notes_index")}

"""Comparing a state with its base page by page: every table whose records differ is found, the
kept changes are the same text as by hashing every table, and the guard's digest of a state opened
over its base is the digest of the whole state."""

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
from coworkenv.workspace._state import table_hashes

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
    assert bool(differ) == (edit not in ("nothing", "same value", "new index"))
    assert len(found) <= len(differ) + 2  # pages, not every table


@pytest.mark.parametrize("edit", EDITS)
def test_kept_changes_are_the_same_with_the_base_image_as_by_hashing_every_table(initial: Path, edit: str):
    final = edited(initial, EDITS[edit])
    hashes = state_hashes(initial)
    plain = dump_state_changes(final, "base", hashes)
    compared = dump_state_changes(final, "base", hashes, base_image=StateImage(initial.read_bytes()))
    assert compared == plain


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


def _dropped_and_dumped(final: bytes, base: str, base_hashes: dict[str, str]) -> str:
    """What an episode keeps of ``final``, made the plain way: every table whose records are the base's
    dropped (with its indexes, triggers and sequence), then the rest dumped."""
    conn = sqlite3.connect(":memory:")
    conn.deserialize(final)
    tables = [r[0] for r in conn.execute("select name from sqlite_master where type = 'table' and name not like 'sqlite_%'")]
    hashes = table_hashes(conn)
    changed = [t for t in tables if base_hashes.get(t) != hashes[t]]
    for table in tables:
        if table not in changed:
            conn.execute(f'drop table "{table}"')
    drops = [f'DROP TABLE IF EXISTS "{t}";' for t in [*changed, *(t for t in base_hashes if t not in tables)]]
    return "\n".join([f"-- coworkenv-state-base: {base}", *drops, *conn.iterdump()])


@pytest.mark.parametrize("edit", EDITS)
def test_kept_changes_are_those_of_dropping_every_unchanged_table(initial: Path, edit: str):
    """The kept changes leave the unchanged tables out exactly as dropping them would: their indexes,
    triggers and AUTOINCREMENT sequences go with them, views stay; and they rebuild the final state."""
    final = edited(initial, EDITS[edit])
    hashes = state_hashes(initial)
    kept = dump_state_changes(final, "base", hashes, base_image=StateImage(initial.read_bytes()))
    assert kept == _dropped_and_dumped(final, "base", hashes)
    rebuilt = load_state(resolve_state(kept, lambda _: dump_state(initial)))
    expected = sqlite3.connect(":memory:")
    expected.deserialize(final)
    assert table_hashes(rebuilt) == table_hashes(expected)

"""Data overrides: a workspace's own changes to its generated state, applied after seeding, part of
its hash, seen by an episode's tools, and named precisely when they do not fit."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from coworkenv.cli import app
from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.store import Provenance, Store
from coworkenv.workspace import (
    SpecError,
    Task,
    Workspace,
    build_workspace,
    save_bundle,
    workspace_hash,
    write_initial_state,
)

OVERRIDES = [
    {"table": "mail_messages", "insert": [{
        "id": "m900", "folder": "inbox", "sender": "pat@example.org", "recipients": ["me@example.org"],
        "subject": "Kestrel renewal terms", "body": "The renewal is 4,200 a year.", "date": "2026-03-02",
        "time": "09:15"}]},
    {"table": "contacts_contacts", "where": {"id": "c01"}, "set": {"notes": "prefers phone calls"}},
    {"table": "files_files", "where": {"id": "f01"}, "delete": True},
]


def workspace_with(overrides: list[dict]) -> Workspace:
    return Workspace.model_validate({**build_workspace(5, ("mail", "contacts", "files")).model_dump(),
                                     "overrides": overrides})


def rows(path: Path, query: str) -> list[tuple]:
    with sqlite3.connect(path) as conn:
        return conn.execute(query).fetchall()


def test_overrides_change_the_built_state_and_the_workspace_hash(tmp_path):
    plain, changed = workspace_with([]), workspace_with(OVERRIDES)
    before = write_initial_state(plain, tmp_path / "plain.db")
    after = write_initial_state(changed, tmp_path / "changed.db")
    assert rows(after, "select subject, recipients from mail_messages where id = 'm900'") == [
        ("Kestrel renewal terms", '["me@example.org"]')]  # a list is stored as JSON text, as apps keep it
    assert rows(after, "select notes from contacts_contacts where id = 'c01'") == [("prefers phone calls",)]
    assert rows(before, "select count(*) from files_files where id = 'f01'") == [(1,)]
    assert rows(after, "select count(*) from files_files where id = 'f01'") == [(0,)]
    assert workspace_hash(plain) != workspace_hash(changed)


@pytest.mark.parametrize(("override", "message"), [
    ({"table": "mail_messages", "where": {"id": "m01"}, "set": {"colour": "red"}},
     "override 1: mail_messages has no column 'colour'; its columns are id, folder"),
    ({"table": "mail_messages", "where": {"id": "nope"}, "delete": True},
     r"override 1: no row of mail_messages matches \{'id': 'nope'\}"),
    ({"table": "mail_messages", "insert": [{"id": "m901", "folder": "outbox", "sender": "a", "recipients": "[]",
                                            "subject": "s", "body": "b", "date": "2026-01-01", "time": "10:00"}]},
     "override 1: mail_messages: CHECK constraint failed"),
])
def test_an_override_that_does_not_fit_the_state_is_named(tmp_path, override, message):
    with pytest.raises(SpecError, match=message):
        write_initial_state(workspace_with([override]), tmp_path / "state.db")


@pytest.mark.parametrize(("override", "message"), [
    ({"table": "crm_accounts", "where": {"id": "a1"}, "delete": True},
     "table 'crm_accounts' belongs to none of the workspace's apps"),
    ({"table": "mail_messages", "where": {"id": "m01"}, "delete": True, "set": {"subject": "x"}},
     "needs exactly one of insert, set, delete"),
    ({"table": "mail_messages", "delete": True}, "a delete from mail_messages needs a where"),
])
def test_a_malformed_override_is_refused_with_the_spec(override, message):
    with pytest.raises(ValueError, match=message):
        workspace_with([override])


def test_bundle_validate_names_the_override_and_import_stores_nothing(tmp_path):
    workspace = workspace_with([])
    bundle = save_bundle(workspace, [], tmp_path / "bundle")
    spec = yaml.safe_load((bundle / "workspace.yaml").read_text())
    spec["overrides"] = [{"table": "mail_messages", "where": {"id": "m01"}, "set": {"subjekt": "x"}}]
    (bundle / "workspace.yaml").write_text(yaml.safe_dump(spec))
    (bundle / "bundle.json").unlink()  # an edited bundle without a manifest: validated by content alone
    runner = CliRunner()
    result = runner.invoke(app, ["bundle", "validate", str(bundle)])
    assert result.exit_code == 2
    assert f"{bundle / 'workspace.yaml'}: overrides: override 1: mail_messages has no column 'subjekt'" in result.output
    store = tmp_path / "s.db"
    assert runner.invoke(app, ["synth", "--store", str(store), "-n", "2"]).exit_code == 0
    stored = "select (select count(*) from workspaces) as workspaces, (select count(*) from tasks) as tasks"
    before = dict(Store(store).query(stored)[0])
    result = runner.invoke(app, ["bundle", "import", str(bundle), "--store", str(store)])
    assert result.exit_code == 2 and "subjekt" in result.output
    assert dict(Store(store).query(stored)[0]) == before == {"workspaces": 1, "tasks": 2}


@pytest.mark.anyio
@pytest.mark.bwrap
async def test_an_episode_plays_on_the_overridden_state(tmp_path):
    workspace = workspace_with(OVERRIDES)
    task = Task.model_validate({
        "id": "renewal", "workspace_id": workspace.id, "capability": "lookup", "difficulty": 1,
        "instruction": "How much is the Kestrel renewal?",
        "checks": [{"id": "amount", "kind": "answer", "description": "the amount", "contains": ["4,200"]}],
        "reference": [{"tool": "mail_search_messages", "arguments": {"query": "Kestrel"}}]})
    store = Store(tmp_path / "s.db")
    store.put_workspace(workspace)
    store.put_task(task)
    host = EpisodeHost(store, EpisodeSettings(cache_dir=tmp_path / "cache"))
    try:
        episode = await host.open(task, Provenance("eval"))
        found = await episode.call("mail_search_messages", {"query": "Kestrel"})
        await episode.call("submit_answer", {"answer": "4,200 a year"})
        verdict = await episode.finish()
    finally:
        await host.close()
    assert "m900" in str(found)
    assert verdict is not None and verdict.admitted

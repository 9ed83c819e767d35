"""The SQLite store: migrations, pragmas, and that writes survive a reopen."""

import sqlite3

import pytest

from coworkenv.store import MIGRATIONS, Store


def test_migrations_are_named_recorded_and_applied_once(store_path):
    first = Store(store_path)
    assert first.applied_migrations == [name for name, _ in MIGRATIONS]
    assert first.migrations() == [name for name, _ in MIGRATIONS]
    first.close()
    second = Store(store_path)
    assert second.applied_migrations == []
    second.close()


def test_wal_mode_and_foreign_keys(store):
    assert store.db.execute("pragma journal_mode").fetchone()[0] == "wal"
    assert store.db.execute("pragma foreign_keys").fetchone()[0] == 1
    with pytest.raises(sqlite3.IntegrityError):
        store.start_episode("no-such-task", source="teacher")


def test_episode_history_survives_reopen(store_path):
    s = Store(store_path)
    s.put_workspace("w", "w", 1, {"id": "w"})
    s.put_task({"id": "t", "workspace_id": "w", "capability": "lookup", "difficulty": 1, "instruction": "x"})
    ep = s.start_episode("t", source="teacher")
    s.add_tool_call(ep, {"tool": "mail_read_message", "arguments": "{}", "result": "{}", "is_error": 0})
    s.add_messages(ep, [{"role": "user", "content": "x"}, {"role": "user", "content": "hint", "provenance": True}])
    s.end_episode(ep, final_answer="done", final_state="CREATE TABLE t(x);")
    s.close()
    again = Store(store_path)
    assert again.get_episode(ep)["status"] == "ended"
    assert [c["tool"] for c in again.tool_calls(ep)] == ["mail_read_message"]
    assert [m["content"] for m in again.messages(ep)] == ["x"]
    assert len(again.messages(ep, include_provenance=True)) == 2
    with pytest.raises(ValueError, match="cannot annotate"):
        again.annotate_episode(ep, final_answer="tampered")
    again.close()

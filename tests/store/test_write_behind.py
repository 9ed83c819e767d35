"""Write-behind tool calls: deferred rows are numbered at once, written together, read back by the
recording process at once and by any other connection once flushed; none is lost."""

import sqlite3

import pytest

from coworkenv.store import Provenance, Store
from coworkenv.workspace import Task, build_workspace

ROW = {"tool": "mail_read_message", "arguments": "{}", "result": "{}", "is_error": 0}


def other_reader(store: Store) -> sqlite3.Connection:
    """A second connection to the same file: it sees committed rows only."""
    return sqlite3.connect(store.path)


def stored_calls(conn: sqlite3.Connection, episode_id: str) -> list[tuple[int, str]]:
    return conn.execute("select idx, tool from tool_calls where episode_id = ? order by idx",
                        (episode_id,)).fetchall()


@pytest.fixture
def episode(store: Store) -> str:
    workspace = build_workspace(1)
    store.put_workspace(workspace)
    store.put_task(Task.model_validate({
        "id": "t", "workspace_id": workspace.id, "capability": "lookup", "difficulty": 1, "instruction": "x",
        "checks": [{"id": "c", "kind": "answer", "description": "d", "contains": ["x"]}], "reference": []}))
    return store.start_episode("t", Provenance("live"))


def test_deferred_calls_wait_for_a_flush_then_go_in_together_in_order(store: Store, episode: str):
    other = other_reader(store)
    store.add_tool_call(episode, {**ROW, "tool": "first"})  # written at once, as before
    for i in range(5):
        store.defer_tool_call(episode, {**ROW, "tool": f"deferred_{i}"})
    assert store.pending == 5
    assert stored_calls(other, episode) == [(0, "first")]
    assert store.flush() == 5 and store.pending == 0
    assert stored_calls(other, episode) == [(0, "first")] + [(i + 1, f"deferred_{i}") for i in range(5)]
    assert store.flush() == 0


def test_the_recording_process_reads_its_own_deferred_calls(store: Store, episode: str):
    store.defer_tool_call(episode, ROW)
    assert [c.idx for c in store.tool_calls(episode)] == [0]
    store.defer_tool_call(episode, ROW)
    store.add_tool_call(episode, ROW)  # an immediate write after deferred ones keeps the numbering
    store.defer_tool_call(episode, ROW)
    assert [c.idx for c in store.tool_calls(episode)] == [0, 1, 2, 3]


def test_an_episode_that_reads_as_ended_has_all_its_calls_written(store: Store, episode: str):
    other = other_reader(store)
    for _ in range(3):
        store.defer_tool_call(episode, ROW)
    store.end_episode(episode, final_answer="done", final_state=None)
    assert other.execute("select status from episodes where id = ?", (episode,)).fetchone() == ("ended",)
    assert [idx for idx, _ in stored_calls(other, episode)] == [0, 1, 2]


def test_close_writes_what_is_waiting(store_path, episode: str, store: Store):
    store.defer_tool_call(episode, ROW)
    store.close()
    again = Store(store_path)
    assert [c.tool for c in again.tool_calls(episode)] == [ROW["tool"]]
    again.close()


def test_a_failed_flush_keeps_the_rows_for_the_next(store: Store, episode: str):
    store.defer_tool_call(episode, ROW)
    store.defer_tool_call(episode, ROW)
    store.db.execute("PRAGMA busy_timeout = 50")
    other = other_reader(store)
    other.execute("BEGIN IMMEDIATE")  # another writer holds the file
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        store.flush()
    assert store.pending == 2
    other.rollback()
    assert store.flush() == 2
    assert [c.idx for c in store.tool_calls(episode)] == [0, 1]


def test_calls_of_an_unknown_episode_are_refused_at_once(store: Store):
    with pytest.raises(KeyError, match="no episode 'ep_missing'"):
        store.defer_tool_call("ep_missing", ROW)
    assert store.pending == 0


def test_unknown_columns_are_refused_by_name(store: Store, episode: str):
    with pytest.raises(ValueError, match="no column.*'colour'"):
        store.defer_tool_call(episode, {**ROW, "colour": "red"})
    assert store.pending == 0


def episode_ids(conn: sqlite3.Connection) -> set[str]:
    return {row[0] for row in conn.execute("select id from episodes")}


def test_grouped_writes_commit_together_each_atomic_and_none_lost(store: Store, episode: str):
    """Within ``grouped`` the writes commit together: another connection sees none of them, then all
    (the group's timer commits it without a further write); a write that fails leaves nothing of itself
    and the others stand; the end of the block commits what is left; nested blocks commit at the last."""
    import time

    from coworkenv.store import StoreError
    from coworkenv.store._store import GROUP_COMMIT_S

    other = other_reader(store)
    with store.grouped():
        first = store.start_episode("t", Provenance("live"))
        with store.grouped():
            second = store.start_episode("t", Provenance("live"))
        with pytest.raises(StoreError, match="no episodes row"):  # a write that fails, halfway through
            with store.transaction() as db:
                db.execute("update episodes set status = 'ended' where id = ?", [first])
                db.execute("update episodes set hint = 'x' where id = 'nobody'")
                raise StoreError("no episodes row 'nobody' to update")
        assert first not in episode_ids(other)  # not committed yet: the reader sees none of them
        waited = 0.0
        while first not in episode_ids(other) and waited < 10:  # the timer commits them, GROUP_COMMIT_S on
            time.sleep(GROUP_COMMIT_S)
            waited += GROUP_COMMIT_S
        assert {first, second} <= episode_ids(other)
        third = store.start_episode("t", Provenance("live"))
        store.end_episode(third, final_answer="a", final_state=None)
        assert store.episode(third).status == "ended"  # the writing process reads its own writes at once
    assert third in episode_ids(other)  # the block's end committed the rest
    assert [store.episode(e).status for e in (first, second)] == ["running", "running"]  # the failed write left nothing
    with store.transaction() as db:  # outside any group, each write is its own transaction again
        db.execute("update episodes set hint = 'y' where id = ?", [first])
    assert other.execute("select hint from episodes where id = ?", (first,)).fetchone() == ("y",)

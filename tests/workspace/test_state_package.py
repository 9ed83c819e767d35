"""The state package: one ``apply_call`` (a call's writes committed, a failing call's rolled back),
and ``StateCache``, the one object that keeps what is worked out of state bases (no module keeps it)."""

import ast
import sqlite3
from pathlib import Path

import pytest

from coworkenv.workspace import app_module, build_workspace, write_initial_state
from coworkenv.workspace.apps import ToolFailure
from coworkenv.workspace.state import (
    StateBase,
    StateCache,
    StateConnection,
    apply_call,
    dump_state,
    load_state,
    resolve_state,
    state_digest,
)

PACKAGE = Path(__file__).resolve().parents[2] / "coworkenv"


@pytest.fixture(scope="module")
def initial(tmp_path_factory) -> Path:
    return write_initial_state(build_workspace(7, ("notes", "tasks")), tmp_path_factory.mktemp("state") / "state.db")


def test_apply_call_commits_a_call_and_leaves_the_state_as_it_was_after_a_failing_one(initial, tmp_path):
    path = tmp_path / "state.db"
    path.write_bytes(initial.read_bytes())
    notes = app_module("notes")
    conn = sqlite3.connect(path)
    before = conn.execute("select count(*) from notes_notes").fetchone()[0]
    created = apply_call(conn, notes, "create_note", {"title": "Plan", "body": "the plan"})
    other = sqlite3.connect(path)  # committed: another connection sees it
    assert other.execute("select count(*) from notes_notes").fetchone()[0] == before + 1
    with pytest.raises(ToolFailure):
        apply_call(conn, notes, "update_note", {"id": "no-such-note", "body": "x"})

    class HalfWay:  # an app whose tool writes, then fails
        @staticmethod
        def handle(conn, tool, args):
            conn.execute("delete from notes_notes")
            raise ToolFailure("failed after writing")

    with pytest.raises(ToolFailure, match="after writing"):
        apply_call(conn, HalfWay, "wipe", {})  # type: ignore[arg-type]
    assert not conn.in_transaction
    assert conn.execute("select count(*) from notes_notes").fetchone()[0] == before + 1
    assert created
    conn.close()
    other.close()


def _stored(tmp_path: Path, initial: Path) -> tuple[StateBase, str, dict[str, str]]:
    dumps: dict[str, str] = {}

    def keep(dump: str) -> str:
        dumps["base-1"] = dump
        return "base-1"

    base = StateBase.of(initial, keep, None)
    final = sqlite3.connect(":memory:")
    final.deserialize(initial.read_bytes())
    apply_call(final, app_module("notes"), "create_note", {"title": "Kept", "body": "a change"})
    kept, opened = StateCache().keep(base, final.serialize())
    opened.close()
    return base, kept, dumps


def test_states_opened_through_a_cache_are_the_stored_state_and_keep_their_base_there(initial, tmp_path):
    base, kept, dumps = _stored(tmp_path, initial)
    whole = load_state(resolve_state(kept, dumps.__getitem__))
    cache, other = StateCache(dumps.__getitem__), StateCache(dumps.__getitem__)
    opened = cache.open(kept)
    assert isinstance(opened, StateConnection) and opened.cache is cache and opened.base == base.reference
    assert dump_state(opened.serialize()) == dump_state(whole.serialize())
    expected = state_digest(whole, {"notes_notes": []})
    assert state_digest(opened, {"notes_notes": []}) == expected
    assert cache.digest_parts(base.reference)  # the parts of the tables the episode did not replace
    again = cache.open(kept)  # the base is loaded once; the parts are used again
    assert state_digest(again, {"notes_notes": []}) == expected
    assert other.digest_parts(base.reference) == {}  # two caches keep apart
    unchanged = cache.open_unchanged(base)
    assert state_digest(unchanged, {}) == state_digest(unchanged, {})
    held = cache.initial(base)
    assert cache.initial(base) is held
    cache.close()
    with pytest.raises(sqlite3.ProgrammingError):  # what it kept open goes with it
        held.execute("select 1")
    reopened = cache.open(kept)  # and it can be used again: what it needs is made anew
    assert state_digest(reopened, {"notes_notes": []}) == expected
    for conn in (opened, again, unchanged, whole, reopened):
        conn.close()


def _module_level_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def test_no_module_keeps_a_cache_keyed_by_object_ids():
    """A function that takes ``id(...)`` of something and reads or writes a module-level name keeps a
    cache of objects by their id at module level: it outlives them (an id is reused) and is shared by
    every owner in the process. Such caches belong to an owner (``StateCache``, a connection's ``kept``)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        module_names = _module_level_names(tree)
        for function in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
            calls_id = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "id"
                           for n in ast.walk(function))
            used = {n.id for n in ast.walk(function) if isinstance(n, ast.Name)} & module_names
            caches = {name for name in used if name.startswith("_") and name.isupper()}
            if calls_id and caches:
                found.append(f"{path.relative_to(PACKAGE)}: {function.name} ({', '.join(sorted(caches))})")
    assert not found, found

"""The task kit's registry: each template is registered once where it is written, with its capability,
difficulty and the tables it needs, and takes its turn in an order that does not depend on imports."""

from __future__ import annotations

import contextlib
import random
import sqlite3

import pytest

from coworkenv.synth import SHAPES, TEMPLATES
from coworkenv.synth.templates import Registered, written_in
from coworkenv.synth.templates._kit import template
from coworkenv.workspace import build_workspace, write_initial_state


def _handwritten(capability: str) -> list[str]:
    return [name for name in TEMPLATES[capability] if name not in SHAPES.get(capability, {})]


def test_every_template_is_registered_under_its_capability_and_the_hand_written_ones_come_sorted():
    every = written_in()
    assert sum(map(len, every.values())) > 100
    for capability, templates in every.items():
        assert _handwritten(capability) == sorted(templates), capability  # the turn order: by name
        for name, entry in templates.items():
            assert isinstance(entry, Registered) and TEMPLATES[capability][name] is entry
            assert entry.capability == capability and 1 <= entry.difficulty <= 5
    # the shapes composed over any app follow the hand-written ones
    for capability, shapes in SHAPES.items():
        assert list(TEMPLATES[capability])[-len(shapes):] == list(shapes)


def test_modules_are_named_by_the_app_their_templates_are_about():
    assert set(written_in("crm")["single_write"]) >= {"crm_advance_deal", "crm_new_deal"}
    assert {entry.module for templates in written_in().values() for entry in templates.values()} == {
        "calendar", "chat", "contacts", "crm", "documents", "files", "finance", "helpdesk", "hr", "inventory", "kb",
        "mail", "notes", "spreadsheets", "tasks"}


def test_a_template_passes_its_turn_where_its_tables_are_missing_and_is_given_its_capability():
    crm_pipeline = TEMPLATES["lookup"]["crm_pipeline"]
    assert isinstance(crm_pipeline, Registered) and "crm_accounts" in crm_pipeline.needs
    with sqlite3.connect(":memory:") as empty:
        assert crm_pipeline(empty, random.Random(0)) is None  # no crm tables: no query is even tried

    def build(conn, rng):
        return {"instruction": "Say hi."}

    entry = Registered("kit_probe", "lookup", 2, ("t",), "test", build)
    with sqlite3.connect(":memory:") as conn:
        conn.execute("create table t (x)")
        assert entry(conn, random.Random(0)) == {"capability": "lookup", "difficulty": 2, "instruction": "Say hi."}


def test_a_name_registered_twice_is_refused():
    with pytest.raises(ValueError, match="template 'crm_pipeline' .* defined twice .*also in crm"):
        template("lookup", 1, name="crm_pipeline")(lambda conn, rng: None)


def _state(tmp_path, apps: tuple[str, ...]) -> sqlite3.Connection:
    workspace = build_workspace(0, apps)
    return sqlite3.connect(write_initial_state(workspace, tmp_path / "state.db"))


def test_a_template_that_draws_its_record_draws_it_from_rng_and_passes_its_turn_where_there_is_none(tmp_path):
    note_pin = TEMPLATES["single_write"]["note_pin"]
    with contextlib.closing(_state(tmp_path, ("notes",))) as conn:
        unpinned = conn.execute("select title from notes_notes where pinned = 0 order by id").fetchall()
        assert len(unpinned) > 1
        for seed in range(5):
            (title,) = random.Random(seed).choice(unpinned)  # the draw is the template's first use of rng
            assert note_pin(conn, random.Random(seed))["instruction"] == f"Pin my note '{title}'."
        conn.execute("update notes_notes set pinned = 1")
        assert note_pin(conn, random.Random(0)) is None


def test_a_template_that_finds_its_record_draws_nothing_and_gets_a_tuple_record_as_its_parts(tmp_path):
    chat_milestone = TEMPLATES["lookup"]["chat_milestone"]  # finds (message, match, channel)
    with contextlib.closing(_state(tmp_path, ("chat",))) as conn:
        rng = random.Random(3)
        before = rng.getstate()
        spec = chat_milestone(conn, rng)
        assert spec is not None and "milestone" in spec["instruction"]
        assert rng.getstate() == before
        conn.execute("delete from chat_messages")
        assert chat_milestone(conn, rng) is None


def test_a_template_may_draw_or_find_its_record_but_not_both():
    with pytest.raises(ValueError, match="either draws .* or finds it"):
        template("lookup", 1, name="kit_both", draws="select 1", finds=lambda conn: None)

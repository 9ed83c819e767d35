"""The task kit's registry: each template is registered once where it is written, with its capability,
difficulty and the tables it needs, and takes its turn in an order that does not depend on imports."""

from __future__ import annotations

import random
import sqlite3

import pytest

from coworkenv.synth import SHAPES, TEMPLATES
from coworkenv.synth.templates import Registered, written_in
from coworkenv.synth.templates._kit import template


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

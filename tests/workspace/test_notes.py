"""The notes app: notes drawn from the world (a contact's new number, project meeting notes, the
office Wi-Fi and a customer's as a distractor), every tool against its output schema, and errors
that name what was wrong."""

from __future__ import annotations

import json
import random
import sqlite3

import jsonschema
import pytest

from coworkenv.workspace import build_world, write_world
from coworkenv.workspace.apps import ALL_APPS, ToolFailure
from coworkenv.workspace.apps.contacts import story

APP = ALL_APPS["notes"]


def fresh(seed: int = 7) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    world = build_world(seed)
    write_world(conn, world)
    APP.seed(conn, random.Random(f"{seed}:notes"), world)
    conn.commit()
    return conn


def call(conn: sqlite3.Connection, tool: str, args: dict) -> dict:
    spec = next(t for t in APP.TOOLS if t["name"] == tool)
    jsonschema.validate(args, spec["input_schema"])
    result = APP.handle(conn, tool, args)
    jsonschema.validate(result, spec["output_schema"])
    assert json.loads(json.dumps(result)) == result
    return result


def dump(conn: sqlite3.Connection) -> list[str]:
    return [line for line in conn.iterdump() if "notes_" in line]


def test_seed_is_deterministic_and_varies_with_the_seed():
    assert dump(fresh(3)) == dump(fresh(3))
    assert dump(fresh(3)) != dump(fresh(4))
    titles = [{t for (t,) in fresh(s).execute("SELECT title FROM notes_notes")} for s in (1, 2)]
    assert titles[0] != titles[1]


@pytest.mark.parametrize("seed", range(4))
def test_notes_carry_facts_of_the_world(seed):
    conn, world = fresh(seed), build_world(seed)
    cast = story(world)
    bodies = "\n".join(b for (b,) in conn.execute("SELECT body FROM notes_notes"))
    assert f"{cast['stale']['name']}" in bodies and cast["stale"]["phone"] in bodies
    titles = [t for (t,) in conn.execute("SELECT title FROM notes_notes")]
    assert f"Wi-Fi at the {world['company']['city']} office" in titles
    assert sum(t.startswith("Wi-Fi at ") for t in titles) == 2  # the customer's is a distractor
    meetings = [t for t in titles if " sync " in t]
    assert meetings and all(t.split()[0] in cast["milestones"] for t in meetings)
    dates = [d for row in conn.execute("SELECT created, updated FROM notes_notes") for d in row]
    assert max(dates) < world["today"]


def test_a_session_calls_every_tool():
    conn, world = fresh(), build_world(7)
    listed = call(conn, "list_notes", {"limit": 100})
    assert listed["notes"][0]["pinned"] and listed["count"] == len(listed["notes"])
    wifi = call(conn, "search_notes", {"query": "wi-fi office"})
    assert wifi["notes"][0]["title"] == f"Wi-Fi at the {world['company']['city']} office"
    note = call(conn, "read_note", {"id": wifi["notes"][0]["id"]})
    assert "Password:" in note["body"]
    made = call(conn, "create_note", {"title": "Call the printer vendor", "body": "Toner order.",
                                      "tags": ["#Todo", "office"]})
    assert (made["tags"], made["created"], made["pinned"]) == (["todo", "office"], world["today"], False)
    appended = call(conn, "update_note", {"id": made["id"], "append": "Ask for a discount."})
    assert appended["note"]["body"] == "Toner order.\nAsk for a discount.\n" and appended["updated_fields"] == ["body"]
    retitled = call(conn, "update_note", {"id": made["id"], "title": "Call the vendor", "tags": ["vendor"]})
    assert retitled["updated_fields"] == ["title", "tags"]
    assert call(conn, "pin_note", {"id": made["id"]})["pinned"] is True
    assert call(conn, "list_notes", {"pinned_only": True})["count"] == 2
    assert call(conn, "pin_note", {"id": made["id"], "pinned": False})["pinned"] is False
    tags = call(conn, "list_tags", {})["tags"]
    assert {"tag": "vendor", "count": 1} in tags and tags == sorted(tags, key=lambda t: (-t["count"], t["tag"]))
    assert call(conn, "list_notes", {"tag": "vendor"})["notes"][0]["id"] == made["id"]
    assert call(conn, "delete_note", {"id": made["id"]})["deleted"] is True
    assert call(conn, "list_notes", {"tag": "vendor"})["count"] == 0
    assert {t["name"] for t in APP.TOOLS} == {"list_notes", "search_notes", "read_note", "create_note", "update_note",
                                             "pin_note", "delete_note", "list_tags"}


def test_search_ranks_title_matches_first():
    conn = fresh(2)
    call(conn, "create_note", {"title": "Zebra", "body": "nothing"})
    call(conn, "create_note", {"title": "Other", "body": "a zebra once, a zebra twice"})
    found = call(conn, "search_notes", {"query": "ZEBRA"})
    assert [n["title"] for n in found["notes"]] == ["Zebra", "Other"]
    assert call(conn, "search_notes", {"query": "zebra", "tag": "personal"})["count"] == 0


def test_read_tools_do_not_change_state():
    conn = fresh()
    before = dump(conn)
    call(conn, "list_notes", {})
    call(conn, "search_notes", {"query": "a"})
    call(conn, "read_note", {"id": "n01"})
    call(conn, "list_tags", {})
    assert dump(conn) == before


@pytest.mark.parametrize("tool,args,match", [
    ("read_note", {"id": "n999"}, "n999"),
    ("update_note", {"id": "n999", "body": "x"}, "n999"),
    ("pin_note", {"id": "n999"}, "n999"),
    ("delete_note", {"id": "n999"}, "n999"),
    ("update_note", {"id": "n01"}, "nothing to update"),
    ("update_note", {"id": "n01", "body": "a", "append": "b"}, "not both"),
    ("update_note", {"id": "n01", "title": " "}, "title"),
    ("create_note", {"title": "x", "tags": ["a/b"]}, "tags"),
    ("create_note", {"title": ""}, "title"),
    ("pin_note", {"id": "n01", "pinned": "yes"}, "pinned"),
    ("search_notes", {"query": " "}, "query"),
    ("list_notes", {"limit": 0}, "limit"),
    ("list_notes", {"bogus": 1}, "bogus"),
    ("frobnicate", {}, "unknown tool"),
])
def test_errors_name_what_was_wrong(tool, args, match):
    conn = fresh()
    before = dump(conn)
    with pytest.raises(ToolFailure, match=match):
        APP.handle(conn, tool, args)
    assert dump(conn) == before

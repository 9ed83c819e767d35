"""The notes app: notes drawn from the world (a contact's new number, project meeting notes, the
office Wi-Fi and a customer's as a distractor), every tool against its output schema, and errors
that name what was wrong."""

from __future__ import annotations

import pytest

from coworkenv.workspace import build_world
from coworkenv.workspace.apps import ALL_APPS, ToolFailure
from coworkenv.workspace.apps.contacts import story

APP = ALL_APPS["notes"]


@pytest.fixture
def harness(app_harness):
    return app_harness("notes")


def test_what_is_seeded_varies_with_the_seed(harness):
    # (determinism itself: test_apps.py's contract, for every app)
    titles = [{t for (t,) in harness.state(s).execute("SELECT title FROM notes_notes")} for s in (1, 2)]
    assert titles[0] != titles[1]


@pytest.mark.parametrize("seed", range(4))
def test_notes_carry_facts_of_the_world(harness, seed):
    conn, world = harness.state(seed), build_world(seed)
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


def test_a_session_calls_every_tool(harness):
    conn, world = harness.state(7), build_world(7)
    listed = harness.call(conn, "list_notes", {"limit": 100})
    assert listed["notes"][0]["pinned"] and listed["count"] == len(listed["notes"])
    wifi = harness.call(conn, "search_notes", {"query": "wi-fi office"})
    assert wifi["notes"][0]["title"] == f"Wi-Fi at the {world['company']['city']} office"
    note = harness.call(conn, "read_note", {"id": wifi["notes"][0]["id"]})
    assert "Password:" in note["body"]
    made = harness.call(conn, "create_note", {"title": "Call the printer vendor", "body": "Toner order.",
                                      "tags": ["#Todo", "office"]})
    assert (made["tags"], made["created"], made["pinned"]) == (["todo", "office"], world["today"], False)
    appended = harness.call(conn, "update_note", {"id": made["id"], "append": "Ask for a discount."})
    assert appended["note"]["body"] == "Toner order.\nAsk for a discount.\n" and appended["updated_fields"] == ["body"]
    retitled = harness.call(conn, "update_note", {"id": made["id"], "title": "Call the vendor", "tags": ["vendor"]})
    assert retitled["updated_fields"] == ["title", "tags"]
    assert harness.call(conn, "pin_note", {"id": made["id"]})["pinned"] is True
    assert harness.call(conn, "list_notes", {"pinned_only": True})["count"] == 2
    assert harness.call(conn, "pin_note", {"id": made["id"], "pinned": False})["pinned"] is False
    tags = harness.call(conn, "list_tags", {})["tags"]
    assert {"tag": "vendor", "count": 1} in tags and tags == sorted(tags, key=lambda t: (-t["count"], t["tag"]))
    assert harness.call(conn, "list_notes", {"tag": "vendor"})["notes"][0]["id"] == made["id"]
    assert harness.call(conn, "delete_note", {"id": made["id"]})["deleted"] is True
    assert harness.call(conn, "list_notes", {"tag": "vendor"})["count"] == 0
    assert {t["name"] for t in APP.TOOLS} == {"list_notes", "search_notes", "read_note", "create_note", "update_note",
                                             "pin_note", "delete_note", "list_tags"}


def test_search_ranks_title_matches_first(harness):
    conn = harness.state(2)
    harness.call(conn, "create_note", {"title": "Zebra", "body": "nothing"})
    harness.call(conn, "create_note", {"title": "Other", "body": "a zebra once, a zebra twice"})
    found = harness.call(conn, "search_notes", {"query": "ZEBRA"})
    assert [n["title"] for n in found["notes"]] == ["Zebra", "Other"]
    assert harness.call(conn, "search_notes", {"query": "zebra", "tag": "personal"})["count"] == 0


def test_read_tools_do_not_change_state(harness):
    conn = harness.state(7)
    before = harness.dump(conn)
    harness.call(conn, "list_notes", {})
    harness.call(conn, "search_notes", {"query": "a"})
    harness.call(conn, "read_note", {"id": "n01"})
    harness.call(conn, "list_tags", {})
    assert harness.dump(conn) == before


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
def test_errors_name_what_was_wrong(harness, tool, args, match):
    conn = harness.state(7)
    before = harness.dump(conn)
    with pytest.raises(ToolFailure, match=match):
        APP.handle(conn, tool, args)
    assert harness.dump(conn) == before

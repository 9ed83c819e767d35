"""The contacts app: seeded from the world (with its outdated phone, duplicate and missing newcomer),
every tool against its output schema, and errors that name what was wrong."""

from __future__ import annotations

import sqlite3

import pytest

from coworkenv.workspace import build_world
from coworkenv.workspace.apps import ALL_APPS, ToolFailure
from coworkenv.workspace.apps.contacts import story

APP = ALL_APPS["contacts"]


@pytest.fixture
def harness(app_harness):
    return app_harness("contacts")


def contact_of(harness, conn: sqlite3.Connection, email: str) -> dict:
    ident = conn.execute("SELECT id FROM contacts_contacts WHERE email = ?", (email,)).fetchone()[0]
    return harness.call(conn, "get_contact", {"id": ident})


def test_what_is_seeded_varies_with_the_seed(harness):
    # (determinism itself: test_apps.py's contract, for every app)
    names = [{n for (n,) in harness.state(s).execute("SELECT name FROM contacts_contacts")} for s in (1, 2)]
    assert len(names[0] & names[1]) < len(names[0]) / 2


@pytest.mark.parametrize("seed", range(4))
def test_address_book_follows_the_world_with_its_deliberate_flaws(harness, seed):
    conn, world = harness.state(seed), build_world(seed)
    cast = story(world)
    emails = {e for (e,) in conn.execute("SELECT email FROM contacts_contacts")}
    for person in world["people"]:
        present = person["email"] in emails
        assert present == (person["id"] not in {world["user"]["id"], cast["newcomer"]["id"]}), person["name"]
    stale = contact_of(harness, conn, cast["stale"]["email"])
    assert stale["phone"] != cast["stale"]["phone"]  # outdated: the new number is in the notes
    twins = conn.execute("SELECT COUNT(*) FROM contacts_contacts WHERE name = ?", (cast["duplicate"]["name"],))
    assert twins.fetchone()[0] == 2  # a personal entry to merge
    orgs = {n for (n,) in conn.execute("SELECT name FROM contacts_contacts WHERE kind = 'organisation'")}
    assert orgs == {o["name"] for o in world["organisations"] if o["id"] != world["company"]["id"]}
    groups = [g["name"] for g in harness.call(conn, "list_groups", {})["groups"]]
    assert {f"{code} team" for code in cast["groups"]} <= set(groups) and "Customers" in groups


def test_a_session_calls_every_tool(harness):
    conn = harness.state(7)
    world = build_world(7)
    cast = story(world)
    found = harness.call(conn, "search_contacts", {"query": cast["duplicate"]["name"]})
    assert found["count"] == 2
    main, dup = sorted(found["contacts"], key=lambda c: c["company"] == "")
    assert harness.call(conn, "get_contact", {"id": main["id"]})["email"] == cast["duplicate"]["email"]
    newcomer = cast["newcomer"]
    made = harness.call(conn, "create_contact", {"name": newcomer["name"], "email": newcomer["email"].upper(),
                                         "phone": newcomer["phone"], "tags": ["New", "new"]})
    assert made["contact"]["email"] == newcomer["email"] and made["contact"]["tags"] == ["new"]
    assert made["possible_duplicates"] == []
    again = harness.call(conn, "create_contact", {"name": newcomer["name"]})
    assert [c["id"] for c in again["possible_duplicates"]] == [made["contact"]["id"]]
    updated = harness.call(conn, "update_contact", {"id": made["contact"]["id"], "title": "Consultant", "add_tags": ["vip"],
                                            "remove_tags": ["new"]})
    assert updated["updated_fields"] == ["title", "tags"] and updated["contact"]["tags"] == ["vip"]
    assert harness.call(conn, "delete_contact", {"id": again["contact"]["id"]})["deleted"] is True
    group = harness.call(conn, "create_group", {"name": "Newcomers", "description": "joined this month"})
    assert group["member_count"] == 0
    added = harness.call(conn, "add_to_group", {"group": "newcomers", "contact_id": made["contact"]["id"]})
    assert added["added"] and added["group"]["member_count"] == 1
    assert not harness.call(conn, "add_to_group", {"group": group["id"], "contact_id": made["contact"]["id"]})["added"]
    assert harness.call(conn, "search_contacts", {"group": "Newcomers"})["contacts"][0]["id"] == made["contact"]["id"]
    assert harness.call(conn, "remove_from_group", {"group": "Newcomers", "contact_id": made["contact"]["id"]})["removed"]
    merged = harness.call(conn, "merge_contacts", {"keep_id": main["id"], "merge_id": dup["id"]})
    assert merged["merged_id"] == dup["id"] and dup["email"] in merged["contact"]["other_emails"]
    assert "personal" in merged["contact"]["tags"]
    assert harness.call(conn, "search_contacts", {"query": dup["email"]})["contacts"][0]["id"] == main["id"]
    assert {t["name"] for t in APP.TOOLS} == {
        "search_contacts", "get_contact", "create_contact", "update_contact", "delete_contact", "list_groups",
        "create_group", "add_to_group", "remove_from_group", "merge_contacts"}


def test_search_filters_and_words(harness):
    conn, world = harness.state(5), build_world(5)
    someone = next(p for p in world["people"] if p["org"] != world["company"]["id"])
    org = next(o for o in world["organisations"] if o["id"] == someone["org"])
    words = f"{someone['last']} {someone['first']}".lower()
    assert someone["email"] in [c["email"] for c in harness.call(conn, "search_contacts", {"query": words})["contacts"]]
    at_org = harness.call(conn, "search_contacts", {"company": org["name"], "kind": "person", "limit": 200})
    assert at_org["count"] >= 1 and all(c["company"] == org["name"] and c["kind"] == "person"
                                        for c in at_org["contacts"])
    customers = harness.call(conn, "search_contacts", {"tag": "customer", "limit": 1})
    assert len(customers["contacts"]) == 1 and customers["count"] > 1


def test_read_tools_do_not_change_state(harness):
    conn = harness.state(7)
    before = harness.dump(conn)
    harness.call(conn, "search_contacts", {"query": "a"})
    harness.call(conn, "get_contact", {"id": "c01"})
    harness.call(conn, "list_groups", {})
    assert harness.dump(conn) == before


@pytest.mark.parametrize("tool,args,match", [
    ("get_contact", {"id": "c999"}, "c999"),
    ("update_contact", {"id": "c999", "title": "x"}, "c999"),
    ("delete_contact", {"id": "c999"}, "c999"),
    ("update_contact", {"id": "c01"}, "nothing to update"),
    ("update_contact", {"id": "c01", "email": "not-an-address"}, "email"),
    ("update_contact", {"id": "c01", "phone": "call me"}, "phone"),
    ("update_contact", {"id": "c01", "name": "  "}, "name"),
    ("update_contact", {"id": "c01", "remove_tags": ["never-used"]}, "remove_tags"),
    ("update_contact", {"id": "c01", "add_tags": ["a/b"]}, "add_tags"),
    ("create_contact", {"name": ""}, "name"),
    ("create_contact", {"name": "X", "kind": "robot"}, "kind"),
    ("search_contacts", {"group": "Nobody's group"}, "no contact group"),
    ("create_group", {"name": "Customers"}, "already exists"),
    ("add_to_group", {"group": "Customers", "contact_id": "c999"}, "contact_id"),
    ("remove_from_group", {"group": "Nobody's group", "contact_id": "c01"}, "Nobody's group"),
    ("merge_contacts", {"keep_id": "c01", "merge_id": "c01"}, "two different"),
    ("merge_contacts", {"keep_id": "c01", "merge_id": "c999"}, "merge_id"),
    ("search_contacts", {"bogus": 1}, "bogus"),
    ("frobnicate", {}, "unknown tool"),
])
def test_errors_name_what_was_wrong(harness, tool, args, match):
    conn = harness.state(7)
    before = harness.dump(conn)
    with pytest.raises(ToolFailure, match=match):
        APP.handle(conn, tool, args)
    assert harness.dump(conn) == before


def test_removing_a_non_member_fails(harness):
    conn = harness.state(7)
    outsider = conn.execute("SELECT id FROM contacts_contacts WHERE id NOT IN (SELECT contact_id FROM contacts_members "
                            "WHERE group_id = 'g01') ORDER BY id").fetchone()[0]
    with pytest.raises(ToolFailure, match="is not in the group"):
        APP.handle(conn, "remove_from_group", {"group": "g01", "contact_id": outsider})

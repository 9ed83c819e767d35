"""The documents app: project plans with the world's figures and an older history, an outdated copy
and an outdated policy as distractors, every tool against its output schema, and errors that name
what was wrong."""

from __future__ import annotations

import json
import sqlite3

import pytest

from coworkenv.workspace import build_world
from coworkenv.workspace.apps import ALL_APPS, ToolFailure
from coworkenv.workspace.apps.contacts import story

APP = ALL_APPS["documents"]


@pytest.fixture
def harness(app_harness):
    return app_harness("documents")


def plan_of(conn: sqlite3.Connection, code: str) -> str:
    return conn.execute("SELECT id FROM documents_documents WHERE title = ?", (f"{code} project plan",)).fetchone()[0]


def test_seed_is_deterministic_and_varies_with_the_seed(harness):
    assert harness.dump(harness.reseed(3)) == harness.dump(harness.state(3))
    assert harness.dump(harness.state(3)) != harness.dump(harness.state(4))


@pytest.mark.parametrize("seed", range(4))
def test_plans_follow_the_world_and_older_versions_differ(harness, seed):
    conn, world = harness.state(seed), build_world(seed)
    cast = story(world)
    for project in world["projects"]:
        if project["status"] == "closed":
            continue
        plan = harness.call(conn, "read_document", {"id": plan_of(conn, project["code"])})
        sections = {s["heading"]: s["body"] for s in plan["sections"]}
        assert f"Total budget: {project['budget']} EUR." in sections["Budget"]
        for name, day in cast["milestones"][project["code"]]:
            assert f"- {name}: {day}" in sections["Timeline"]
        history = harness.call(conn, "list_versions", {"id": plan["id"]})["versions"]
        assert [v["version"] for v in history] == list(range(plan["version"], 0, -1))
        assert [v["date"] for v in history] == sorted((v["date"] for v in history), reverse=True)
        assert history[0]["date"] == plan["updated"] < world["today"]
        first = json.loads(conn.execute("SELECT sections FROM documents_versions WHERE doc_id = ? AND version = 1",
                                        (plan["id"],)).fetchone()[0])
        assert dict(first)["Budget"] != sections["Budget"]
    moved = cast["moved"]
    copy = harness.call(conn, "list_documents", {"query": f"copy {moved['code']}"})["documents"]
    assert len(copy) == 1 and copy[0]["status"] == "draft"
    assert harness.call(conn, "list_documents", {"status": "outdated"})["count"] == 1


def test_a_session_calls_every_tool(harness):
    conn, world = harness.state(7), build_world(7)
    project = next(p for p in world["projects"] if p["status"] != "closed")
    code = project["code"]
    listed = harness.call(conn, "list_documents", {"project": code.lower(), "status": "final"})
    assert [d["title"] for d in listed["documents"]] == [f"{code} project plan"]
    assert listed["documents"][0]["headings"] == ["Overview", "Timeline", "Budget", "Team", "Stakeholders", "Risks"]
    hits = harness.call(conn, "search_documents", {"query": f"{code} total budget"})
    assert hits["results"][0]["heading"] == "Budget" and str(project["budget"]) in hits["results"][0]["snippet"]
    ident = listed["documents"][0]["id"]
    budget = harness.call(conn, "read_document", {"id": ident, "section": "budget"})
    assert [s["heading"] for s in budget["sections"]] == ["Budget"]
    assert harness.call(conn, "read_document", {"id": ident, "section": 2})["sections"][0]["heading"] == "Timeline"
    assert harness.call(conn, "read_document", {"id": ident, "section": "2"})["sections"][0]["heading"] == "Timeline"
    version = budget["version"]
    edited = harness.call(conn, "edit_section", {"id": ident, "section": "Timeline", "body": "- Go-live: 2027-01-04\n"})
    assert edited["version"] == version + 1 and edited["updated"] == world["today"]
    assert edited["sections"][1] == {"index": 2, "heading": "Timeline", "body": "- Go-live: 2027-01-04\n"}
    added = harness.call(conn, "add_section", {"id": ident, "heading": "Summary", "body": "In short.", "position": 1})
    assert [s["heading"] for s in added["sections"]][:2] == ["Summary", "Overview"] and added["version"] == version + 2
    versions = harness.call(conn, "list_versions", {"id": ident})["versions"]
    assert versions[0]["summary"] == "Added section 'Summary'" and versions[0]["author"] == world["user"]["email"]
    assert versions[0]["author_name"] == world["user"]["name"]
    made = harness.call(conn, "create_document", {"title": f"{code} meeting minutes", "project": code.lower(), "status": "final",
                                          "sections": [{"heading": "Decisions", "body": "- Ship it\n"}]})
    assert (made["owner"], made["project"], made["version"]) == (world["user"]["email"], code, 1)
    assert harness.call(conn, "list_versions", {"id": made["id"]})["versions"][0]["summary"] == "Created"
    assert harness.call(conn, "delete_document", {"id": made["id"]})["deleted"] is True
    assert conn.execute("SELECT COUNT(*) FROM documents_versions WHERE doc_id = ?", (made["id"],)).fetchone()[0] == 0
    assert {t["name"] for t in APP.TOOLS} == {"list_documents", "search_documents", "read_document",
                                             "create_document", "edit_section", "add_section", "delete_document",
                                             "list_versions"}


def test_read_tools_do_not_change_state(harness):
    conn = harness.state(7)
    before = harness.dump(conn)
    harness.call(conn, "list_documents", {"owner": "a"})
    harness.call(conn, "search_documents", {"query": "budget"})
    harness.call(conn, "read_document", {"id": "d01"})
    harness.call(conn, "list_versions", {"id": "d01"})
    assert harness.dump(conn) == before


@pytest.mark.parametrize("tool,args,match", [
    ("read_document", {"id": "d999"}, "d999"),
    ("edit_section", {"id": "d999", "section": 1, "body": "x"}, "d999"),
    ("add_section", {"id": "d999", "heading": "H", "body": "x"}, "d999"),
    ("delete_document", {"id": "d999"}, "d999"),
    ("list_versions", {"id": "d999"}, "d999"),
    ("read_document", {"id": "d01", "section": "No such heading"}, "its sections are"),
    ("read_document", {"id": "d01", "section": 99}, "no section 99"),
    ("edit_section", {"id": "d01", "section": 1}, "body"),
    ("add_section", {"id": "d01", "heading": "H", "body": "x", "position": 99}, "position"),
    ("create_document", {"title": "T", "sections": []}, "sections"),
    ("create_document", {"title": "T", "sections": [{"heading": "", "body": ""}]}, "sections"),
    ("create_document", {"title": "T", "sections": [{"heading": "H", "body": ""}], "project": "PRJ-0"}, "PRJ-0"),
    ("create_document", {"title": "T", "sections": [{"heading": "H", "body": ""}], "status": "outdated"}, "status"),
    ("list_documents", {"status": "lost"}, "status"),
    ("search_documents", {"query": " "}, "query"),
    ("list_documents", {"bogus": 1}, "bogus"),
    ("frobnicate", {}, "unknown tool"),
])
def test_errors_name_what_was_wrong(harness, tool, args, match):
    conn = harness.state(7)
    before = harness.dump(conn)
    with pytest.raises(ToolFailure, match=match):
        APP.handle(conn, tool, args)
    assert harness.dump(conn) == before

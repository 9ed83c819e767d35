"""The tasks app: seeding from the world, every tool against its schemas, and errors that name the
bad field."""

from __future__ import annotations

import re

import pytest

from coworkenv.workspace.apps import ToolFailure
from coworkenv.workspace.apps import tasks as app


@pytest.fixture
def harness(app_harness):
    return app_harness("tasks")


@pytest.mark.parametrize("seed", [0, 6])
def test_tasks_come_from_the_world(harness, seed):
    conn, world = harness.state(seed), harness.world(seed)
    company = {p["email"] for p in world["people"] if p["org"] == world["company"]["id"]}
    codes = {p["code"] for p in world["projects"]}
    lists = conn.execute("select project from tasks_lists").fetchall()
    assert {p for (p,) in lists} == codes | {None}
    for assignee, project, status, completed in conn.execute(
            "select assignee, project, status, completed from tasks_items"):
        assert assignee in company and (project is None or project in codes)
        assert (status == "done") == (completed is not None)
    overdue = harness.call(conn, "list_tasks", {"due_before": world["today"], "limit": 200})["tasks"]
    assert any(t["overdue"] for t in overdue)
    # distractors: a chore that recurs in two projects' lists, and one task entered twice in its list
    titles = [t for (t,) in conn.execute("select title from tasks_items where project is not null")]
    assert len(set(titles)) < len(titles)
    assert conn.execute("select count(*) from (select list, title from tasks_items group by list, title "
                        "having count(*) > 1)").fetchone()[0] >= 1


def test_every_tool_happy_path(harness):
    conn, world = harness.state(8), harness.world(8)
    today = world["today"]
    lists = harness.call(conn, "list_lists", {})["lists"]
    assert lists[0]["name"] == "My tasks" and lists[0]["owner"] == world["user"]["email"]
    code = world["projects"][1]["code"]
    listed = harness.call(conn, "list_tasks", {"project": code, "include_done": True})
    assert listed["count"] >= 2 and {t["project"] for t in listed["tasks"]} == {code}
    dues = [t["due"] for t in listed["tasks"] if t["due"]]
    assert dues == sorted(dues)
    found = harness.call(conn, "search_tasks", {"query": "RISK"})["tasks"]
    assert found and all("risk" in (t["title"] + t["notes"]).lower()
                         for t in (harness.call(conn, "get_task", {"id": hit["id"]}) for hit in found))
    someone = next(p for p in world["people"] if p["org"] == world["company"]["id"] and p["department"] == "Legal")
    created = harness.call(conn, "create_task", {"title": "Sign the NDA", "project": code, "assignee": someone["email"].upper(),
                                         "due": today, "priority": "urgent", "notes": "Before Friday."})
    assert (created["assignee"], created["project"], created["list"]) == (someone["email"], code, lists[2]["id"])
    assert (created["status"], created["created"], created["overdue"]) == ("open", today, False)
    personal = harness.call(conn, "create_task", {"title": "Water the plants"})
    assert personal["list"] == "L01" and personal["project"] is None
    got = harness.call(conn, "get_task", {"id": created["id"]})
    assert got["notes"] == "Before Friday."
    updated = harness.call(conn, "update_task", {"id": created["id"], "status": "blocked", "assignee": None, "due": None})
    assert (updated["status"], updated["assignee"], updated["due"]) == ("blocked", None, None)
    done = harness.call(conn, "complete_task", {"id": created["id"]})
    assert (done["status"], done["completed"]) == ("done", today)
    assert created["id"] not in {t["id"] for t in harness.call(conn, "list_tasks", {"project": code})["tasks"]}
    assert harness.call(conn, "delete_task", {"id": created["id"]}) == {"id": created["id"], "title": "Sign the NDA",
                                                                "deleted": True}
    assert conn.execute("select count(*) from tasks_items where id = ?", (created["id"],)).fetchone()[0] == 0


def test_resources_name_real_tools():
    names = {t["name"] for t in app.TOOLS}
    for resource in app.RESOURCES:
        assert resource["get_tool"] in names and resource["list_tool"] in names


@pytest.mark.parametrize("tool, args, message", [
    ("get_task", {"id": "t999"}, "no task with id 't999'"),
    ("create_task", {"title": "X", "assignee": "nobody@nowhere.example"}, "assignee: nobody in this workspace"),
    ("create_task", {"title": "X", "project": "PRJ-0"}, "project: no project 'PRJ-0'"),
    ("create_task", {"title": "X", "due": "2026-02-30"}, "due is not a real calendar date"),
    ("create_task", {"title": "X", "list": "L99"}, "list: no list with id 'L99'"),
    ("create_task", {"title": " "}, "missing required argument 'title'"),
    ("update_task", {"id": "t01"}, "nothing to update"),
    ("update_task", {"id": "t01", "status": "finished"}, "status must be one of open, in_progress, blocked, done"),
    ("list_tasks", {"due_before": "tomorrow"}, "due_before must be a date"),
    ("list_tasks", {"limit": 0}, "limit must be an integer from 1 to 200"),
    ("delete_task", {}, "missing required argument 'id'"),
    ("search_tasks", {"query": "x", "all": True}, "unknown argument(s) all"),
])
def test_errors_name_the_bad_field(harness, tool, args, message):
    conn = harness.state(2)
    with pytest.raises(ToolFailure, match=re.escape(message)):
        app.handle(conn, tool, args)

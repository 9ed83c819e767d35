"""The HR directory app: seeded from the world's company people, every tool against its schemas,
decisions on leave, and errors that name what was wrong."""

from __future__ import annotations

import sqlite3

import pytest

from coworkenv.workspace.apps import ALL_APPS, ToolFailure

APP = ALL_APPS["hr"]


@pytest.fixture
def harness(app_harness):
    return app_harness("hr")


def one(conn: sqlite3.Connection, query: str, params: tuple = ()) -> tuple:
    return conn.execute(query, params).fetchone()


def test_what_is_seeded_varies_with_the_seed(harness):
    # (determinism itself: test_apps.py's contract, for every app)
    names = {seed: {n for (n,) in harness.state(seed).execute("select name from hr_people")} for seed in range(3)}
    assert names[0] != names[1] != names[2]


@pytest.mark.parametrize("seed", range(4))
def test_people_are_the_world_company_people_plus_a_former_namesake(harness, seed):
    conn, world = harness.state(seed), harness.world(seed)
    company = {p["email"] for p in world["people"] if p["org"] == world["company"]["id"]}
    assert {e for (e,) in conn.execute("select email from hr_people where status = 'active'")} == company
    former = conn.execute("select name, email from hr_people where status = 'left'").fetchall()
    actives = {n for (n,) in conn.execute("select name from hr_people where status = 'active'")}
    assert former and all(name in actives and email not in company for name, email in former)
    ids = {i for (i,) in conn.execute("select id from hr_people")}
    for (manager,) in conn.execute("select manager from hr_people where manager is not null"):
        assert manager in ids
    heads = conn.execute("select count(distinct department) from hr_people where status = 'active' "
                         "and manager is null").fetchone()[0]
    assert heads == len({p["department"] for p in world["people"] if p["org"] == world["company"]["id"]})
    statuses = {s for (s,) in conn.execute("select status from hr_leave")}
    assert "pending" in statuses and "approved" in statuses


def test_every_tool_in_a_session(harness):
    conn, world = harness.state(3), harness.world(3)
    user = world["user"]
    person = one(conn, "select id, name, department, manager from hr_people where manager is not null "
                       "and status = 'active' order by id")
    pending = one(conn, "select id, employee from hr_leave where status = 'pending' order by id")
    others = conn.execute("select id from hr_leave where status = 'pending' and id != ? order by id",
                          (pending[0],)).fetchall()
    used = set()

    found = harness.call(conn, "search_people", {"query": person[1].split()[-1], "department": person[2]})
    assert person[0] in [p["id"] for p in found["people"]]
    full = harness.call(conn, "get_person", {"id": person[0]})
    assert full["manager"]["id"] == person[3] and full["manager_chain"][0] == full["manager"]
    boss = harness.call(conn, "get_person", {"id": person[3]})
    assert person[0] in [r["id"] for r in boss["direct_reports"]]
    listed = harness.call(conn, "list_department", {"department": person[2].lower()})
    assert listed["department"] == person[2] and listed["headcount"] == len(listed["members"])
    assert listed["head"]["id"] == person[3]
    leave = harness.call(conn, "list_leave", {"status": "pending"})
    assert pending[0] in [r["id"] for r in leave["requests"]] and all(r["status"] == "pending" for r in leave["requests"])
    approved = harness.call(conn, "approve_leave", {"id": pending[0], "note": "Enjoy"})
    assert (approved["status"], approved["decided_by"], approved["decision_note"]) == ("approved", user["email"], "Enjoy")
    rejected = harness.call(conn, "reject_leave", {"id": others[0][0], "reason": "Quarter-end"})
    assert rejected["status"] == "rejected" and rejected["decision_note"] == "Quarter-end"
    gone = harness.call(conn, "cancel_leave", {"id": others[1][0]})
    assert gone["deleted"] and one(conn, "select count(*) from hr_leave where id = ?", (others[1][0],)) == (0,)
    retitled = harness.call(conn, "update_title", {"id": person[0], "title": "Staff engineer"})
    assert retitled["person"]["title"] == "Staff engineer" and retitled["previous_title"] != "Staff engineer"
    used |= {"search_people", "get_person", "list_department", "list_leave", "approve_leave", "reject_leave",
             "cancel_leave", "update_title"}
    assert used == {t["name"] for t in APP.TOOLS}


def test_search_leaves_out_former_people_unless_asked(harness):
    conn = harness.state(3)
    name, ident = one(conn, "select name, id from hr_people where status = 'left'")
    current = harness.call(conn, "search_people", {"query": name})
    assert ident not in [p["id"] for p in current["people"]] and current["count"] >= 1
    everyone = harness.call(conn, "search_people", {"query": name, "include_former": True})
    assert ident in [p["id"] for p in everyone["people"]]
    assert harness.call(conn, "get_person", {"id": ident})["status"] == "left"


def test_list_leave_filters_by_window_employee_and_department(harness):
    conn = harness.state(3)
    request = harness.call(conn, "list_leave", {})["requests"][0]
    window = harness.call(conn, "list_leave", {"from_date": request["start_date"], "to_date": request["start_date"]})
    assert request["id"] in [r["id"] for r in window["requests"]]
    for r in window["requests"]:
        assert r["start_date"] <= request["start_date"] <= r["end_date"]
    mine = harness.call(conn, "list_leave", {"employee_id": request["employee_id"]})
    assert {r["employee_id"] for r in mine["requests"]} == {request["employee_id"]}
    team = harness.call(conn, "list_leave", {"department": request["department"]})
    assert {r["department"] for r in team["requests"]} == {request["department"]}


def test_read_tools_do_not_change_state(harness):
    conn = harness.state(3)
    before = harness.dump(conn)
    ident = one(conn, "select id from hr_people order by id")[0]
    department = one(conn, "select department from hr_people order by id")[0]
    harness.call(conn, "search_people", {"include_former": True})
    harness.call(conn, "get_person", {"id": ident})
    harness.call(conn, "list_department", {"department": department})
    harness.call(conn, "list_leave", {"status": "approved"})
    assert harness.dump(conn) == before


@pytest.mark.parametrize("tool,args,match", [
    ("get_person", {"id": "E0"}, "E0"),
    ("approve_leave", {"id": "LR-0"}, "LR-0"),
    ("reject_leave", {"id": "LR-0", "reason": "x"}, "LR-0"),
    ("cancel_leave", {"id": "LR-0"}, "LR-0"),
    ("update_title", {"id": "E0", "title": "Boss"}, "E0"),
    ("list_department", {"department": "Astrology"}, "Astrology.*departments: "),
    ("list_leave", {"from_date": "2026-02-30"}, "from_date"),
    ("list_leave", {"status": "maybe"}, "status"),
    ("list_leave", {"employee_id": "E0"}, "E0"),
    ("reject_leave", {"id": "LR-0", "reason": " "}, "LR-0"),
    ("search_people", {"limit": 0}, "limit"),
    ("search_people", {"bogus": 1}, "bogus"),
    ("frobnicate", {}, "unknown tool"),
])
def test_errors_name_what_was_wrong(harness, tool, args, match):
    conn = harness.state(3)
    before = harness.dump(conn)
    with pytest.raises(ToolFailure, match=match):
        APP.handle(conn, tool, args)
    assert harness.dump(conn) == before


def test_decisions_need_a_pending_request_and_titles_a_current_employee(harness):
    conn = harness.state(3)
    decided = one(conn, "select id, status from hr_leave where status != 'pending' order by id")
    with pytest.raises(ToolFailure, match=f"already {decided[1]}"):
        APP.handle(conn, "approve_leave", {"id": decided[0]})
    pending = one(conn, "select id from hr_leave where status = 'pending' order by id")[0]
    with pytest.raises(ToolFailure, match="reason"):
        APP.handle(conn, "reject_leave", {"id": pending})
    former = one(conn, "select id from hr_people where status = 'left'")[0]
    with pytest.raises(ToolFailure, match="has left"):
        APP.handle(conn, "update_title", {"id": former, "title": "Anything"})

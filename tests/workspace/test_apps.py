"""Tests of the office apps (mail, calendar, files): contract, seeding from the world, tools.

The contract tests run over every registered app; the others over the office apps, with every
value they use (people, files, folders, dates) read from the workspace's world and state."""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import json
import os
import random
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from coworkenv.workspace import build_workspace, build_world, load_world, write_initial_state, write_world  # noqa: E402
from coworkenv.workspace.apps import (  # noqa: E402
    ALL_APPS,
    ToolFailure,
    _base,
)

APPS_DIR = ROOT / "coworkenv" / "workspace" / "apps"
OFFICE = ("calendar", "files", "mail")


@pytest.fixture
def office(app_harness):
    """The office apps (calendar, files, mail) seeded together into one state."""
    return app_harness(*OFFICE)


def ids(conn: sqlite3.Connection, table: str) -> list[str]:
    return [i for (i,) in conn.execute(f"SELECT id FROM {table} ORDER BY id")]


def today(conn: sqlite3.Connection, plus: int = 0) -> str:
    return (dt.date.fromisoformat(load_world(conn)["today"]) + dt.timedelta(days=plus)).isoformat()


def mates(conn: sqlite3.Connection) -> list[dict]:
    return _base.colleagues(load_world(conn))


def sessions(conn: sqlite3.Connection) -> dict[str, list[tuple[str, dict]]]:
    """A realistic session per app that calls every tool once, in an order where each call makes
    sense, with the values of this workspace."""
    world = load_world(conn)
    code, mate = _base.office_plan(world)["projects"]["sync"]["code"], mates(conn)[0]
    mail, events, files = ids(conn, "mail_messages"), ids(conn, "calendar_events"), ids(conn, "files_files")
    attendee = conn.execute("SELECT attendees FROM calendar_events WHERE attendees != '[]' ORDER BY id").fetchone()[0]
    attendee_last = next(p["last"] for p in world["people"] if p["email"] == json.loads(attendee)[0])
    room = conn.execute("SELECT location FROM calendar_events WHERE location LIKE 'Room %'").fetchone()[0]
    budget = conn.execute("SELECT name, folder FROM files_files WHERE name GLOB 'budget_*_q[0-9].csv'").fetchone()
    return {
        "mail": [
            ("search_messages", {"query": code, "folder": "inbox", "limit": 5}),
            ("read_message", {"id": mail[1]}),
            ("send_message", {"to": [mate["email"]], "subject": "Budget", "body": f"See {budget[0]}."}),
            ("reply_to_message", {"id": mail[2], "body": "Thanks, noted."}),
            ("archive_message", {"id": mail[3]}),
            ("delete_message", {"id": mail[4]}),
        ],
        "calendar": [
            ("list_events", {"from_date": today(conn, -7), "to_date": today(conn, 11),
                             "attendee": attendee_last.lower()}),
            ("get_event", {"id": events[2]}),
            ("create_event", {"title": f"{code} sync", "date": today(conn, 2), "start": "14:30", "end": "15:00",
                              "attendees": [mate["email"]], "location": room}),
            ("update_event", {"id": events[1], "start": "08:00", "end": "08:30"}),
            ("cancel_event", {"id": events[3]}),
        ],
        "files": [
            ("list_files", {"folder": budget[1]}),
            ("search_files", {"query": code}),
            ("read_file", {"name": budget[0]}),
            ("write_file", {"name": f"{code}_followup.md", "folder": budget[1], "content": "- rotate keys\n"}),
            ("move_file", {"id": files[2], "folder": "Moved here"}),
            ("delete_file", {"id": files[3]}),
        ],
    }


# ---------------------------------------------------------------- contract

LISTED = sorted(name for name, module in ALL_APPS.items() if getattr(module, "LISTED", True))


@pytest.mark.parametrize("app", LISTED)
def test_module_contract(app):
    mod = ALL_APPS[app]
    assert mod.NAME == app and re.fullmatch(r"[a-z][a-z0-9_]*", mod.NAME)
    assert isinstance(mod.DESCRIPTION, str) and "\n" not in mod.DESCRIPTION.strip()
    tables = re.findall(r"CREATE TABLE(?: IF NOT EXISTS)?\s+(\w+)", mod.SCHEMA)
    assert tables and all(t.startswith(f"{app}_") for t in tables)
    assert len(mod.TOOLS) >= 4
    names = [t["name"] for t in mod.TOOLS]
    assert len(set(names)) == len(names)
    effects = {t["effect"] for t in mod.TOOLS}
    assert "read" in effects and effects <= {"read", "write", "destructive"}
    for spec in mod.TOOLS:
        assert set(spec) == {"name", "description", "effect", "input_schema", "output_schema"}
        assert re.fullmatch(r"[a-z][a-z_]*", spec["name"]) and not spec["name"].startswith(app + "_")
        assert len(spec["description"]) > 20


@pytest.mark.parametrize("app", sorted(ALL_APPS))
def test_schemas_are_valid_json_schema(app):
    for spec in ALL_APPS[app].TOOLS:
        for key in ("input_schema", "output_schema"):
            jsonschema.Draft202012Validator.check_schema(spec[key])
            assert spec[key]["type"] == "object"
        schema = spec["input_schema"]
        assert schema["additionalProperties"] is False
        assert set(schema["required"]) <= set(schema["properties"])


def test_package_exports():
    assert set(OFFICE) <= set(ALL_APPS)
    assert issubclass(ToolFailure, Exception)


# ---------------------------------------------------------------- seeding

@pytest.mark.parametrize("app", LISTED)
def test_seed_is_deterministic(app_harness, app):
    harness = app_harness(app)
    assert harness.dump(harness.reseed(3)) == harness.dump(harness.state(3))
    assert harness.dump(harness.state(3)) != harness.dump(harness.state(4))


def test_a_seed_builds_the_same_state_in_every_process():
    """Not only within a process: the string hashes that order sets change from one Python process to
    the next, and a workspace built from a seed must not depend on them (a cached state, a task's
    guard digest and a bundle hash are all compared across processes)."""
    code = ("import sqlite3, sys, tempfile; from pathlib import Path; "
            "from coworkenv.workspace import build_workspace, write_initial_state, state_digest; "
            "d = tempfile.mkdtemp(); "
            "print([state_digest(sqlite3.connect(write_initial_state(build_workspace(s), Path(d) / f'{s}.db')), {}) "
            "for s in (0, 1)])")
    digests = {subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": str(h)},
                              capture_output=True, text=True, check=True).stdout for h in (1, 2, 3)}
    assert len(digests) == 1, digests


def test_seed_sizes(office):
    conn = office.state(7)
    for table in ("mail_messages", "calendar_events", "files_files"):
        count = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        assert 10 <= count <= 30, (table, count)


@pytest.mark.parametrize("seed", range(6))
def test_seeded_apps_agree_and_draw_everyone_from_the_world(office, seed):
    conn = office.state(seed)
    world = load_world(conn)
    plan = _base.office_plan(world)
    bodies = " ".join(b for (b,) in conn.execute("SELECT body FROM mail_messages"))
    files = {(n, f, o) for (n, f, o) in conn.execute("SELECT name, folder, owner FROM files_files")}
    mentioned = set(re.findall(r"[\w.-]+\.(?:txt|md|csv)\b", bodies))
    assert mentioned - {plan["notes_file"]["name"]} <= {n for n, _, _ in files}  # the notes file is to be created
    assert {(d["name"], d["folder"], d["owner"]) for d in plan["documents"].values()} <= files
    events = {(t, loc, a) for (t, loc, a) in conn.execute("SELECT title, location, attendees FROM calendar_events")}
    for meeting in plan["meetings"].values():
        assert (meeting["title"], meeting["location"], json.dumps(meeting["attendees"])) in events
    people = {p["email"] for p in world["people"]}
    for sender, rcpts in conn.execute("SELECT sender, recipients FROM mail_messages"):
        assert sender in people and set(json.loads(rcpts)) <= people
    for (attendees,) in conn.execute("SELECT attendees FROM calendar_events"):
        assert set(json.loads(attendees)) <= people
    assert {o for _, _, o in files} <= people
    dates = [d for (d,) in conn.execute("SELECT date FROM mail_messages")]
    assert max(dates) < world["today"] and min(dates) >= today(conn, -14)


def test_a_seed_s_world_is_the_same_whatever_was_drawn_before_it_and_wherever():
    first = build_world(3)
    build_world(4)
    assert build_world(3) == first
    with concurrent.futures.ThreadPoolExecutor(2) as threads:
        assert list(threads.map(build_world, [3, 4, 3])) == [first, build_world(4), first]
    child = subprocess.run([sys.executable, "-c", "import json; from coworkenv.workspace import build_world; "
                            "print(json.dumps(build_world(3)))"], capture_output=True, text=True, check=True)
    assert json.loads(child.stdout) == json.loads(json.dumps(first))


def test_office_plan_is_the_same_from_the_stored_world(office):
    world = build_world(11)
    conn = office.state(11)
    assert _base.office_plan(load_world(conn)) == _base.office_plan(world)


def test_what_a_task_asks_for_varies_across_workspaces():
    """A document's name, folder and owner, a meeting's title and room, the user and today: none is
    the same in every workspace."""
    seen: dict[str, set] = {}
    for seed in range(8):
        world = build_world(seed)
        plan = _base.office_plan(world)
        facts = {"user": world["user"]["email"], "today": world["today"],
                 "rooms": tuple(plan["rooms"]), "folders": tuple(sorted(plan["folders"].values()))}
        for key, doc in plan["documents"].items():
            facts.update({f"{key}.name": doc["name"], f"{key}.folder": doc["folder"], f"{key}.owner": doc["owner"]})
        for key, meeting in plan["meetings"].items():
            facts.update({f"{key}.title": meeting["title"], f"{key}.location": meeting["location"]})
        for fact, value in facts.items():
            seen.setdefault(fact, set()).add(value)
    assert {fact for fact, values in seen.items() if len(values) == 1} == set()


def test_the_world_missing_from_the_state_is_named():
    conn = sqlite3.connect(":memory:")
    world = build_world(2)
    ALL_APPS["mail"].seed(conn, random.Random(2), world)
    with pytest.raises(RuntimeError, match="no world"):
        ALL_APPS["mail"].handle(conn, "send_message", {"to": [world["people"][1]["email"]], "subject": "s",
                                                       "body": "b"})


# ---------------------------------------------------------------- tools

@pytest.mark.parametrize("app", OFFICE)
def test_every_tool_result_matches_output_schema(office, app):
    conn = office.state(7)
    session = sessions(conn)[app]
    assert {tool for tool, _ in session} == {t["name"] for t in ALL_APPS[app].TOOLS}
    for tool, args in session:
        office.call_in(conn, app, tool, args)


@pytest.mark.parametrize("app", OFFICE)
def test_read_tools_do_not_change_state(office, app):
    conn = office.state(7)
    before = office.dump(conn)
    for tool, args in sessions(conn)[app]:
        if next(t for t in ALL_APPS[app].TOOLS if t["name"] == tool)["effect"] == "read":
            found = office.call_in(conn, app, tool, args)
            assert found.get("count", 1) >= 1, (tool, args)
    assert office.dump(conn) == before


@pytest.mark.parametrize("app,tool", [(a, t["name"]) for a in OFFICE for t in ALL_APPS[a].TOOLS
                                      if "id" in t["input_schema"]["required"]])
def test_unknown_id_fails(office, app, tool):
    conn = office.state(7)
    args = {"id": "x999", "body": "hi", "folder": "Legal", "title": "New"}
    spec = next(t for t in ALL_APPS[app].TOOLS if t["name"] == tool)
    args = {k: v for k, v in args.items() if k in spec["input_schema"]["properties"]}
    with pytest.raises(ToolFailure, match="x999"):
        ALL_APPS[app].handle(conn, tool, args)


@pytest.mark.parametrize("app", OFFICE)
def test_unknown_tool_and_argument_fail(office, app):
    conn = office.state(7)
    with pytest.raises(ToolFailure, match="unknown tool"):
        ALL_APPS[app].handle(conn, "frobnicate", {})
    tool, args = sessions(conn)[app][0]
    with pytest.raises(ToolFailure, match="bogus"):
        ALL_APPS[app].handle(conn, tool, {**args, "bogus": 1})


# ---------------------------------------------------------------- the contract, over every listed app

@pytest.mark.parametrize("app", LISTED)
def test_an_unknown_tool_or_argument_is_named_and_changes_nothing(app_harness, app):
    harness = app_harness(app)
    conn = harness.state(7)
    before = harness.dump(conn)
    names = [t["name"] for t in harness.module.TOOLS]
    with pytest.raises(ToolFailure, match=re.escape(f"unknown tool 'frobnicate'; this app has: {', '.join(names)}")):
        harness.module.handle(conn, "frobnicate", {})
    for tool in names:
        with pytest.raises(ToolFailure, match=r"unknown argument\(s\) bogus"):
            harness.module.handle(conn, tool, {"bogus": 1})
        with pytest.raises(ToolFailure, match="arguments must be an object"):
            harness.module.handle(conn, tool, ["not", "an", "object"])
    assert harness.dump(conn) == before


@pytest.mark.parametrize("app", LISTED)
def test_read_tools_answer_within_their_schema_and_change_nothing(app_harness, app):
    """Every list or search tool that needs no argument answers on a seeded state with a result its
    output schema accepts, and leaves the state as it was."""
    harness = app_harness(app)
    conn = harness.state(7)
    before = harness.dump(conn)
    bare = [t["name"] for t in harness.module.TOOLS if t["effect"] == "read" and not t["input_schema"]["required"]
            and t["name"].startswith(("list_", "search_"))]
    assert bare, f"{app} has no read tool to start from"
    for tool in bare:
        harness.call(conn, tool, {})
    assert harness.dump(conn) == before


@pytest.mark.parametrize("app,tool", [(a, t["name"]) for a in LISTED for t in ALL_APPS[a].TOOLS
                                      if t["input_schema"]["required"] == ["id"]])
def test_a_tool_given_an_unknown_id_names_it(app_harness, app, tool):
    harness = app_harness(app)
    conn = harness.state(7)
    before = harness.dump(conn)
    with pytest.raises(ToolFailure, match="x999"):
        harness.module.handle(conn, tool, {"id": "x999"})
    assert harness.dump(conn) == before


@pytest.mark.parametrize("app", sorted(ALL_APPS))
def test_world_events_are_hidden_from_agents_and_run_by_handle(app):
    module = ALL_APPS[app]
    tools = {t["name"] for t in module.TOOLS}
    for event in getattr(module, "EVENTS", []):
        assert event["name"].startswith("_") and event["name"] not in tools
        assert set(event) == {"name", "description", "input_schema"}
        jsonschema.Draft202012Validator.check_schema(event["input_schema"])


# a dated write of each app that writes the workspace's today: (app, tool, arguments from the state)
DATED_WRITES = {
    "chat": ("post_message", lambda conn: {"channel": conn.execute(
        "SELECT name FROM chat_channels WHERE archived = 0 AND kind != 'dm' ORDER BY id").fetchone()[0], "text": "hi"}),
    "contacts": ("create_contact", lambda conn: {"name": "Zora Quill"}),
    "notes": ("create_note", lambda conn: {"title": "A note"}),
    "helpdesk": ("create_ticket", lambda conn: {"subject": "S", "description": "D", "requester": conn.execute(
        "SELECT requester FROM helpdesk_tickets ORDER BY id").fetchone()[0]}),
    "kb": ("create_article", lambda conn: {"title": "T", "body": "B", "category": "how-to"}),
    "spreadsheets": ("create_workbook", lambda conn: {"name": "Scratch"}),
    "tasks": ("create_task", lambda conn: {"title": "A task"}),
    "mail": ("send_message", lambda conn: {"to": [conn.execute("SELECT email FROM world_people ORDER BY id")
                                                  .fetchone()[0]], "subject": "s", "body": "b"}),
    "files": ("write_file", lambda conn: {"name": "n.txt", "folder": "Shared", "content": "x"}),
}


@pytest.mark.parametrize("app", sorted(DATED_WRITES))
def test_a_tool_dates_what_it_writes_by_the_workspace_never_the_wall_clock(app_harness, app):
    """The workspace's today comes from the state's world, whatever the real date is; a state whose
    world lacks it is an error naming what is missing (four apps used to write the wall clock's date)."""
    harness = app_harness(app)
    tool, arguments = DATED_WRITES[app]
    conn = harness.state(7)
    conn.execute("UPDATE world_meta SET value = '2031-02-03' WHERE key = 'today'")
    assert "2031-02-03" in json.dumps(harness.call(conn, tool, arguments(conn)))
    conn = harness.state(7)
    conn.execute("DELETE FROM world_meta WHERE key = 'today'")
    with pytest.raises(RuntimeError, match="'today' missing from world_meta"):
        harness.module.handle(conn, tool, arguments(conn))


def test_today_iso_reads_the_state_s_world():
    conn = sqlite3.connect(":memory:")
    with pytest.raises(RuntimeError, match="no world"):
        _base.today_iso(conn)
    write_world(conn, build_world(3))
    assert _base.today_iso(conn) == build_world(3)["today"]
    conn.execute("UPDATE world_meta SET value = '1999-12-31' WHERE key = 'today'")
    assert _base.today_iso(conn) == "1999-12-31"


def test_destructive_tools_are_marked():
    destructive = {(a, t["name"]) for a in OFFICE for t in ALL_APPS[a].TOOLS if t["effect"] == "destructive"}
    assert destructive == {("mail", "delete_message"), ("calendar", "cancel_event"), ("files", "delete_file")}


def test_mail_send_reply_archive_delete(office):
    conn = office.state(7)
    world, mate = load_world(conn), mates(conn)[0]
    top = conn.execute("SELECT MAX(id) FROM mail_messages").fetchone()[0]
    sent = office.call_in(conn, "mail", "send_message", {"to": [mate["email"].upper()], "subject": "Hello",
                                               "body": "The project is on track."})
    assert sent["id"] == f"m{int(top[1:]) + 1:02d}"
    assert sent["folder"] == "sent" and sent["recipients"] == [mate["email"]]
    assert sent["sender"] == world["user"]["email"] and sent["date"] == world["today"]
    found = office.call_in(conn, "mail", "search_messages", {"query": "on track", "folder": "sent"})
    assert [m["id"] for m in found["messages"]] == [sent["id"]]

    inbox = office.call_in(conn, "mail", "search_messages", {"folder": "inbox", "limit": 100})["messages"]
    target = inbox[0]
    reply = office.call_in(conn, "mail", "reply_to_message", {"id": target["id"], "body": "Will do."})
    assert reply["recipients"] == [target["sender"]] and reply["in_reply_to"] == target["id"]
    assert reply["subject"] == "Re: " + target["subject"]
    again = office.call_in(conn, "mail", "reply_to_message", {"id": reply["id"], "body": "Follow-up."})
    assert again["subject"] == reply["subject"] and again["recipients"] == [target["sender"]]

    assert office.call_in(conn, "mail", "archive_message", {"id": target["id"]})["previous_folder"] == "inbox"
    assert office.call_in(conn, "mail", "read_message", {"id": target["id"]})["folder"] == "archive"
    office.call_in(conn, "mail", "delete_message", {"id": target["id"]})
    with pytest.raises(ToolFailure, match=target["id"]):
        office.call_in(conn, "mail", "read_message", {"id": target["id"]})


def test_mail_rejects_bad_input(office):
    conn = office.state(7)
    with pytest.raises(ToolFailure, match="to"):
        ALL_APPS["mail"].handle(conn, "send_message", {"to": ["not an address"], "subject": "s", "body": "b"})
    with pytest.raises(ToolFailure, match="subject"):
        ALL_APPS["mail"].handle(conn, "send_message", {"to": [mates(conn)[0]["email"]], "subject": " ", "body": "b"})
    with pytest.raises(ToolFailure, match="folder"):
        ALL_APPS["mail"].handle(conn, "search_messages", {"folder": "spam"})


def test_calendar_create_update_cancel(office):
    conn = office.state(7)
    mate, day, later = mates(conn)[1], today(conn, 3), today(conn, 8)
    room = conn.execute("SELECT location FROM calendar_events WHERE location LIKE 'Room %'").fetchone()[0]
    args = {"title": "Budget prep", "date": day, "start": "10:00", "end": "11:00", "attendees": [mate["email"]]}
    created = office.call_in(conn, "calendar", "create_event", args)
    ev = created["event"]
    assert office.call_in(conn, "calendar", "get_event", {"id": ev["id"]}) == ev
    assert ev["location"] == "" and ev["attendees"] == [mate["email"]]
    clash = office.call_in(conn, "calendar", "create_event", {**args, "title": "Overlap", "start": "10:30", "end": "12:00"})
    assert ev["id"] in [c["id"] for c in clash["conflicts"]]
    listed = office.call_in(conn, "calendar", "list_events", {"date": day, "attendee": mate["name"]})
    assert ev["id"] in [e["id"] for e in listed["events"]]

    updated = office.call_in(conn, "calendar", "update_event", {"id": ev["id"], "date": later, "location": room})
    assert updated["updated_fields"] == ["date", "location"]
    assert updated["event"] == {**ev, "date": later, "location": room}
    with pytest.raises(ToolFailure, match="end"):
        office.call_in(conn, "calendar", "update_event", {"id": ev["id"], "end": "09:00"})
    with pytest.raises(ToolFailure, match="nothing to update"):
        office.call_in(conn, "calendar", "update_event", {"id": ev["id"]})

    office.call_in(conn, "calendar", "cancel_event", {"id": ev["id"]})
    with pytest.raises(ToolFailure, match=ev["id"]):
        office.call_in(conn, "calendar", "get_event", {"id": ev["id"]})


@pytest.mark.parametrize("bad,match", [
    ({"end": "09:00"}, "later than start"),
    ({"date": "2026-02-30"}, "real calendar date"),
    ({"date": "14/03/2026"}, "YYYY-MM-DD"),
    ({"start": "9:00"}, "HH:MM"),
    ({"attendees": ["bruno"]}, "attendees"),
])
def test_calendar_rejects_bad_values(office, bad, match):
    conn = office.state(7)
    before = office.dump(conn)
    args = {"title": "X", "date": today(conn, 3), "start": "10:00", "end": "11:00", **bad}
    with pytest.raises(ToolFailure, match=match):
        ALL_APPS["calendar"].handle(conn, "create_event", args)
    assert office.dump(conn) == before


def test_files_write_overwrite_move_delete(office):
    conn = office.state(7)
    world = load_world(conn)
    new = office.call_in(conn, "files", "write_file", {"name": "notes.md", "folder": "Projects", "content": "v1"})
    assert new["created"] and new["file"]["owner"] == world["user"]["email"] and new["file"]["size"] == 2
    assert new["file"]["modified"] == world["today"]
    again = office.call_in(conn, "files", "write_file", {"name": "notes.md", "folder": "Projects", "content": "version 2 é"})
    assert not again["created"] and again["file"]["id"] == new["file"]["id"]
    assert again["file"]["size"] == len("version 2 é".encode())
    read = office.call_in(conn, "files", "read_file", {"name": "notes.md"})
    assert read["content"] == "version 2 é" and read["id"] == new["file"]["id"]

    moved = office.call_in(conn, "files", "move_file", {"id": new["file"]["id"], "folder": "Old notes"})
    assert moved["previous_folder"] == "Projects" and moved["file"]["folder"] == "Old notes"
    listed = office.call_in(conn, "files", "list_files", {"folder": "Old notes"})
    assert new["file"]["id"] in [f["id"] for f in listed["files"]]

    office.call_in(conn, "files", "write_file", {"name": "notes.md", "folder": "Shared", "content": "other"})
    with pytest.raises(ToolFailure, match="several files"):
        office.call_in(conn, "files", "read_file", {"name": "notes.md"})
    assert office.call_in(conn, "files", "read_file", {"name": "notes.md", "folder": "Shared"})["content"] == "other"
    with pytest.raises(ToolFailure, match="already has a file"):
        office.call_in(conn, "files", "move_file", {"id": new["file"]["id"], "folder": "Shared"})

    office.call_in(conn, "files", "delete_file", {"id": new["file"]["id"]})
    assert office.call_in(conn, "files", "read_file", {"name": "notes.md"})["folder"] == "Shared"


def test_files_rejects_bad_input(office):
    conn = office.state(7)
    with pytest.raises(ToolFailure, match="exactly one"):
        ALL_APPS["files"].handle(conn, "read_file", {})
    with pytest.raises(ToolFailure, match="no file named"):
        ALL_APPS["files"].handle(conn, "read_file", {"name": "missing.txt"})
    with pytest.raises(ToolFailure, match="bad file name"):
        ALL_APPS["files"].handle(conn, "write_file", {"name": "a/b.txt", "folder": "Shared", "content": ""})
    with pytest.raises(ToolFailure, match="bad folder"):
        ALL_APPS["files"].handle(conn, "move_file", {"id": ids(conn, "files_files")[0], "folder": "../etc"})


def test_new_ids_follow_the_largest_existing(office):
    conn = office.state(7)
    conn.execute("DELETE FROM files_files WHERE id = ?", (ids(conn, "files_files")[1],))
    top = max(int(i[1:]) for i in ids(conn, "files_files"))
    made = office.call_in(conn, "files", "write_file", {"name": "n.txt", "folder": "Shared", "content": "x"})
    assert made["file"]["id"] == f"f{top + 1:02d}"


# ---------------------------------------------------------------- sandbox

SANDBOX_SCRIPT = r"""
import json, sqlite3, sys
sys.path.insert(0, sys.argv[1])
import apps, apps.mail, apps.calendar, apps.files
conn = sqlite3.connect(sys.argv[2])
first = conn.execute("SELECT id FROM files_files ORDER BY id").fetchone()[0]
out = apps.files.handle(conn, "read_file", {"id": first})
sent = apps.mail.handle(conn, "send_message", {"to": [sys.argv[3]], "subject": "s", "body": "b"})
listed = apps.calendar.handle(conn, "list_events", {"attendee": sys.argv[3]})
try:
    apps.mail.handle(conn, "read_message", {"id": "m999"})
except apps.ToolFailure as exc:
    failure = str(exc)
tops = {m.split(".")[0] for m in sys.modules}
foreign = sorted(t for t in tops if t not in sys.stdlib_module_names and t not in sys.builtin_module_names
                 and t not in ("apps", "__main__"))
print(json.dumps({"size": out["size"], "failure": failure, "foreign": foreign, "sender": sent["sender"],
                  "date": sent["date"], "listed": listed["count"]}))
"""


def test_apps_import_in_bare_sandbox_interpreter(tmp_path):
    state = write_initial_state(build_workspace(1, OFFICE), tmp_path / "state.db")
    world = build_world(1)
    plan = _base.office_plan(world)
    attendee = plan["meetings"]["vendor_sync"]["attendees"][0]
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", SANDBOX_SCRIPT, str(APPS_DIR.parent), str(state),
                           attendee], capture_output=True, text=True, timeout=60, cwd="/")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["foreign"] == []
    assert "m999" in report["failure"] and report["size"] > 0
    assert (report["sender"], report["date"]) == (world["user"]["email"], world["today"])
    assert report["listed"] >= 1


def test_every_app_imports_in_the_bare_sandbox_interpreter_without_pillow():
    """The sandbox imports the apps package (every app) with the standard library only: the seeding
    pictures (``_drawing``, Pillow) stay on the host."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import apps; "
            "print(json.dumps({'apps': sorted(apps.ALL_APPS), 'loaded': sorted(m for m in sys.modules "
            "if m.split('.')[0] not in sys.stdlib_module_names and m.split('.')[0] not in ('apps', '__main__') "
            "or m in ('apps._drawing',))}))")
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(APPS_DIR.parent)], capture_output=True,
                          text=True, timeout=60, cwd="/")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report == {"apps": sorted(ALL_APPS), "loaded": []}

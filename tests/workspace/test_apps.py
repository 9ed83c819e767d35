"""Tests of the workspace apps (mail, calendar, files): contract, seeding, tools."""

from __future__ import annotations

import json
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

from coworkenv.workspace.apps import ALL_APPS, ToolFailure  # noqa: E402
from coworkenv.workspace.apps import _base  # noqa: E402

APPS_DIR = ROOT / "coworkenv" / "workspace" / "apps"


def fresh(seed: int = 7) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    for app in ALL_APPS.values():
        app.seed(conn, random.Random(seed))
    conn.commit()
    return conn


def dump(conn: sqlite3.Connection, prefix: str = "") -> list[str]:
    return [line for line in conn.iterdump() if prefix in line]


def call(conn: sqlite3.Connection, app: str, tool: str, args: dict) -> dict:
    """Run a tool and check its result against the tool's output schema."""
    spec = next(t for t in ALL_APPS[app].TOOLS if t["name"] == tool)
    jsonschema.validate(args, spec["input_schema"])
    result = ALL_APPS[app].handle(conn, tool, args)
    jsonschema.validate(result, spec["output_schema"])
    assert json.loads(json.dumps(result)) == result
    return result


# A realistic session per app that calls every tool once, in an order where each call makes sense.
SESSIONS = {
    "mail": [
        ("search_messages", {"query": "PRJ-204", "folder": "inbox", "limit": 5}),
        ("read_message", {"id": "m02"}),
        ("send_message", {"to": ["bruno.costa@acme.example"], "subject": "Budget", "body": "See budget_q2.csv."}),
        ("reply_to_message", {"id": "m03", "body": "Thanks, noted."}),
        ("archive_message", {"id": "m04"}),
        ("delete_message", {"id": "m05"}),
    ],
    "calendar": [
        ("list_events", {"from_date": "2026-03-16", "to_date": "2026-03-20", "attendee": "alice"}),
        ("get_event", {"id": "e03"}),
        ("create_event", {"title": "PRJ-204 sync", "date": "2026-03-18", "start": "14:30", "end": "15:00",
                          "attendees": ["chloe.martin@acme.example"], "location": "Room Orion"}),
        ("update_event", {"id": "e02", "start": "08:00", "end": "08:30"}),
        ("cancel_event", {"id": "e04"}),
    ],
    "files": [
        ("list_files", {"folder": "Finance"}),
        ("search_files", {"query": "PRJ-204"}),
        ("read_file", {"name": "budget_q2.csv"}),
        ("write_file", {"name": "audit_followup.md", "folder": "Projects", "content": "- rotate keys\n"}),
        ("move_file", {"id": "f03", "folder": "Legal"}),
        ("delete_file", {"id": "f04"}),
    ],
}


# ---------------------------------------------------------------- contract

@pytest.mark.parametrize("app", sorted(ALL_APPS))
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
    assert set(ALL_APPS) == {"mail", "calendar", "files"}
    assert issubclass(ToolFailure, Exception)


# ---------------------------------------------------------------- seeding

@pytest.mark.parametrize("app", sorted(ALL_APPS))
def test_seed_is_deterministic(app):
    def seeded(seed):
        conn = sqlite3.connect(":memory:")
        ALL_APPS[app].seed(conn, random.Random(seed))
        return list(conn.iterdump())
    assert seeded(3) == seeded(3)
    assert seeded(3) != seeded(4)


def test_seed_sizes():
    conn = fresh()
    for table in ("mail_messages", "calendar_events", "files_files"):
        count = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        assert 10 <= count <= 30, (table, count)


@pytest.mark.parametrize("seed", range(6))
def test_seeded_mail_refers_to_existing_files_and_events(seed):
    conn = fresh(seed)
    bodies = " ".join(b for (b,) in conn.execute("SELECT body FROM mail_messages"))
    files = {n for (n,) in conn.execute("SELECT name FROM files_files")}
    mentioned = set(re.findall(r"[\w.-]+\.(?:txt|md|csv)\b", bodies))
    assert mentioned - {"audit_followup.md"} <= files  # audit_followup.md is to be created
    titles = {t for (t,) in conn.execute("SELECT title FROM calendar_events")}
    for title, _, _ in _base.MEETINGS:
        assert title in titles
    people = {p["email"] for p in _base.PEOPLE} | {_base.USER["email"]}
    for sender, rcpts in conn.execute("SELECT sender, recipients FROM mail_messages"):
        assert sender in people and set(json.loads(rcpts)) <= people


# ---------------------------------------------------------------- tools

@pytest.mark.parametrize("app", sorted(ALL_APPS))
def test_every_tool_result_matches_output_schema(app):
    conn = fresh()
    assert {tool for tool, _ in SESSIONS[app]} == {t["name"] for t in ALL_APPS[app].TOOLS}
    for tool, args in SESSIONS[app]:
        call(conn, app, tool, args)


@pytest.mark.parametrize("app", sorted(ALL_APPS))
def test_read_tools_do_not_change_state(app):
    conn = fresh()
    before = dump(conn)
    for tool, args in SESSIONS[app]:
        if next(t for t in ALL_APPS[app].TOOLS if t["name"] == tool)["effect"] == "read":
            call(conn, app, tool, args)
    assert dump(conn) == before


@pytest.mark.parametrize("app,tool", [(a, t["name"]) for a in sorted(ALL_APPS) for t in ALL_APPS[a].TOOLS
                                      if "id" in t["input_schema"]["required"]])
def test_unknown_id_fails(app, tool):
    conn = fresh()
    args = {"id": "x999", "body": "hi", "folder": "Legal", "title": "New"}
    spec = next(t for t in ALL_APPS[app].TOOLS if t["name"] == tool)
    args = {k: v for k, v in args.items() if k in spec["input_schema"]["properties"]}
    with pytest.raises(ToolFailure, match="x999"):
        ALL_APPS[app].handle(conn, tool, args)


@pytest.mark.parametrize("app", sorted(ALL_APPS))
def test_unknown_tool_and_argument_fail(app):
    conn = fresh()
    with pytest.raises(ToolFailure, match="unknown tool"):
        ALL_APPS[app].handle(conn, "frobnicate", {})
    tool, args = SESSIONS[app][0]
    with pytest.raises(ToolFailure, match="bogus"):
        ALL_APPS[app].handle(conn, tool, {**args, "bogus": 1})


def test_mail_send_reply_archive_delete():
    conn = fresh()
    top = conn.execute("SELECT MAX(id) FROM mail_messages").fetchone()[0]
    sent = call(conn, "mail", "send_message", {"to": ["Alice.Nguyen@acme.example"], "subject": "Hello",
                                               "body": "PRJ-204 is on track."})
    assert sent["id"] == f"m{int(top[1:]) + 1:02d}"
    assert sent["folder"] == "sent" and sent["recipients"] == ["alice.nguyen@acme.example"]
    assert sent["sender"] == _base.USER["email"] and sent["date"] == _base.TODAY.isoformat()
    found = call(conn, "mail", "search_messages", {"query": "on track", "folder": "sent"})
    assert [m["id"] for m in found["messages"]] == [sent["id"]]

    inbox = call(conn, "mail", "search_messages", {"folder": "inbox", "limit": 100})["messages"]
    target = inbox[0]
    reply = call(conn, "mail", "reply_to_message", {"id": target["id"], "body": "Will do."})
    assert reply["recipients"] == [target["sender"]] and reply["in_reply_to"] == target["id"]
    assert reply["subject"] == "Re: " + target["subject"]
    again = call(conn, "mail", "reply_to_message", {"id": reply["id"], "body": "Follow-up."})
    assert again["subject"] == reply["subject"] and again["recipients"] == [target["sender"]]

    assert call(conn, "mail", "archive_message", {"id": target["id"]})["previous_folder"] == "inbox"
    assert call(conn, "mail", "read_message", {"id": target["id"]})["folder"] == "archive"
    call(conn, "mail", "delete_message", {"id": target["id"]})
    with pytest.raises(ToolFailure, match=target["id"]):
        call(conn, "mail", "read_message", {"id": target["id"]})


def test_mail_rejects_bad_input():
    conn = fresh()
    with pytest.raises(ToolFailure, match="to"):
        ALL_APPS["mail"].handle(conn, "send_message", {"to": ["not an address"], "subject": "s", "body": "b"})
    with pytest.raises(ToolFailure, match="subject"):
        ALL_APPS["mail"].handle(conn, "send_message", {"to": ["a.b@acme.example"], "subject": " ", "body": "b"})
    with pytest.raises(ToolFailure, match="folder"):
        ALL_APPS["mail"].handle(conn, "search_messages", {"folder": "spam"})


def test_calendar_create_update_cancel():
    conn = fresh()
    args = {"title": "Budget prep", "date": "2026-03-19", "start": "10:00", "end": "11:00",
            "attendees": ["bruno.costa@acme.example"]}
    created = call(conn, "calendar", "create_event", args)
    ev = created["event"]
    assert call(conn, "calendar", "get_event", {"id": ev["id"]}) == ev
    assert ev["location"] == "" and ev["attendees"] == ["bruno.costa@acme.example"]
    clash = call(conn, "calendar", "create_event", {**args, "title": "Overlap", "start": "10:30", "end": "12:00"})
    assert ev["id"] in [c["id"] for c in clash["conflicts"]]
    listed = call(conn, "calendar", "list_events", {"date": "2026-03-19", "attendee": "Bruno Costa"})
    assert ev["id"] in [e["id"] for e in listed["events"]]

    updated = call(conn, "calendar", "update_event", {"id": ev["id"], "date": "2026-03-24", "location": "Room Vega"})
    assert updated["updated_fields"] == ["date", "location"]
    assert updated["event"] == {**ev, "date": "2026-03-24", "location": "Room Vega"}
    with pytest.raises(ToolFailure, match="end"):
        call(conn, "calendar", "update_event", {"id": ev["id"], "end": "09:00"})
    with pytest.raises(ToolFailure, match="nothing to update"):
        call(conn, "calendar", "update_event", {"id": ev["id"]})

    call(conn, "calendar", "cancel_event", {"id": ev["id"]})
    with pytest.raises(ToolFailure, match=ev["id"]):
        call(conn, "calendar", "get_event", {"id": ev["id"]})


@pytest.mark.parametrize("bad,match", [
    ({"end": "09:00"}, "later than start"),
    ({"date": "2026-02-30"}, "real calendar date"),
    ({"date": "14/03/2026"}, "YYYY-MM-DD"),
    ({"start": "9:00"}, "HH:MM"),
    ({"attendees": ["bruno"]}, "attendees"),
])
def test_calendar_rejects_bad_values(bad, match):
    conn = fresh()
    before = dump(conn)
    args = {"title": "X", "date": "2026-03-19", "start": "10:00", "end": "11:00", **bad}
    with pytest.raises(ToolFailure, match=match):
        ALL_APPS["calendar"].handle(conn, "create_event", args)
    assert dump(conn) == before


def test_files_write_overwrite_move_delete():
    conn = fresh()
    new = call(conn, "files", "write_file", {"name": "notes.md", "folder": "Projects", "content": "v1"})
    assert new["created"] and new["file"]["owner"] == _base.USER["email"] and new["file"]["size"] == 2
    again = call(conn, "files", "write_file", {"name": "notes.md", "folder": "Projects", "content": "version 2 é"})
    assert not again["created"] and again["file"]["id"] == new["file"]["id"]
    assert again["file"]["size"] == len("version 2 é".encode())
    read = call(conn, "files", "read_file", {"name": "notes.md"})
    assert read["content"] == "version 2 é" and read["id"] == new["file"]["id"]

    moved = call(conn, "files", "move_file", {"id": new["file"]["id"], "folder": "Archive"})
    assert moved["previous_folder"] == "Projects" and moved["file"]["folder"] == "Archive"
    listed = call(conn, "files", "list_files", {"folder": "Archive"})
    assert new["file"]["id"] in [f["id"] for f in listed["files"]]

    call(conn, "files", "write_file", {"name": "notes.md", "folder": "Shared", "content": "other"})
    with pytest.raises(ToolFailure, match="several files"):
        call(conn, "files", "read_file", {"name": "notes.md"})
    assert call(conn, "files", "read_file", {"name": "notes.md", "folder": "Shared"})["content"] == "other"
    with pytest.raises(ToolFailure, match="already has a file"):
        call(conn, "files", "move_file", {"id": new["file"]["id"], "folder": "Shared"})

    call(conn, "files", "delete_file", {"id": new["file"]["id"]})
    assert call(conn, "files", "read_file", {"name": "notes.md"})["folder"] == "Shared"


def test_files_rejects_bad_input():
    conn = fresh()
    with pytest.raises(ToolFailure, match="exactly one"):
        ALL_APPS["files"].handle(conn, "read_file", {})
    with pytest.raises(ToolFailure, match="no file named"):
        ALL_APPS["files"].handle(conn, "read_file", {"name": "missing.txt"})
    with pytest.raises(ToolFailure, match="bad file name"):
        ALL_APPS["files"].handle(conn, "write_file", {"name": "a/b.txt", "folder": "Shared", "content": ""})
    with pytest.raises(ToolFailure, match="bad folder"):
        ALL_APPS["files"].handle(conn, "move_file", {"id": "f01", "folder": "../etc"})


def test_new_ids_follow_the_largest_existing():
    conn = fresh()
    conn.execute("DELETE FROM files_files WHERE id = 'f02'")
    top = max(int(i[1:]) for (i,) in conn.execute("SELECT id FROM files_files"))
    made = call(conn, "files", "write_file", {"name": "n.txt", "folder": "Shared", "content": "x"})
    assert made["file"]["id"] == f"f{top + 1:02d}"


# ---------------------------------------------------------------- sandbox

SANDBOX_SCRIPT = r"""
import json, random, sqlite3, sys
sys.path.insert(0, sys.argv[1])
import apps, apps.mail, apps.calendar, apps.files
conn = sqlite3.connect(":memory:")
for app in apps.ALL_APPS.values():
    app.seed(conn, random.Random(1))
out = apps.files.handle(conn, "read_file", {"name": "budget_q2.csv"})
try:
    apps.mail.handle(conn, "read_message", {"id": "m999"})
except apps.ToolFailure as exc:
    failure = str(exc)
tops = {m.split(".")[0] for m in sys.modules}
foreign = sorted(t for t in tops if t not in sys.stdlib_module_names and t not in sys.builtin_module_names
                 and t not in ("apps", "__main__"))
print(json.dumps({"size": out["size"], "failure": failure, "foreign": foreign}))
"""


def test_apps_import_in_bare_sandbox_interpreter():
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", SANDBOX_SCRIPT, str(APPS_DIR.parent)],
                          capture_output=True, text=True, timeout=60, cwd="/")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["foreign"] == []
    assert "m999" in report["failure"] and report["size"] > 0

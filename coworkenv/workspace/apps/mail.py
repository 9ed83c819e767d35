"""Mail app: the user's mailbox (inbox, sent, archive). Standard library only."""

from __future__ import annotations

import json
import random
import sqlite3
from typing import Any

from ._base import (object_schema as _obj, NOW_TIME, ROOMS, TODAY, USER, ToolFailure, check_emails, iso_days, opt_bool,
                    opt_int, opt_str, person, req_str, tool_args, next_id)

NAME = "mail"
DESCRIPTION = "The user's email mailbox: search, read, send, reply to, archive and delete messages."

SCHEMA = """
CREATE TABLE IF NOT EXISTS mail_messages (
    id          TEXT PRIMARY KEY,             -- 'm01', 'm02', ...
    folder      TEXT NOT NULL CHECK (folder IN ('inbox', 'sent', 'archive')),
    sender      TEXT NOT NULL,                -- email address
    recipients  TEXT NOT NULL,                -- JSON list of email addresses
    subject     TEXT NOT NULL,
    body        TEXT NOT NULL,
    date        TEXT NOT NULL,                -- YYYY-MM-DD
    time        TEXT NOT NULL,                -- HH:MM
    is_read     INTEGER NOT NULL DEFAULT 0,
    in_reply_to TEXT                          -- id of the message this one answers
);
"""

FOLDER_VALUES = ["inbox", "sent", "archive"]
_ADDRESS = {"type": "string", "description": "email address"}
_SUMMARY_PROPS: dict[str, Any] = {
    "id": {"type": "string"}, "folder": {"type": "string", "enum": FOLDER_VALUES}, "sender": _ADDRESS,
    "recipients": {"type": "array", "items": _ADDRESS}, "subject": {"type": "string"},
    "date": {"type": "string"}, "time": {"type": "string"}, "read": {"type": "boolean"},
}
SUMMARY_SCHEMA = {"type": "object", "properties": {**_SUMMARY_PROPS, "snippet": {"type": "string"}},
                  "required": list(_SUMMARY_PROPS) + ["snippet"], "additionalProperties": False}
MESSAGE_SCHEMA = {"type": "object",
                  "properties": {**_SUMMARY_PROPS, "body": {"type": "string"},
                                 "in_reply_to": {"type": ["string", "null"]}},
                  "required": list(_SUMMARY_PROPS) + ["body", "in_reply_to"], "additionalProperties": False}
_ID_ARG = {"type": "string", "description": "message id, e.g. 'm07'"}


TOOLS: list[dict[str, Any]] = [
    {"name": "search_messages", "effect": "read",
     "description": "Search the mailbox. Matches the query (case-insensitive substring) against subject, body, "
                    "sender and recipients; returns message summaries, newest first. Omit query to list a folder.",
     "input_schema": _obj({
         "query": {"type": "string", "description": "text to look for; omit or '' for all messages"},
         "folder": {"type": "string", "enum": FOLDER_VALUES, "description": "restrict to one folder"},
         "unread_only": {"type": "boolean", "description": "only messages not yet read"},
         "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "at most this many (default 20)"},
     }, []),
     "output_schema": _obj({"messages": {"type": "array", "items": SUMMARY_SCHEMA},
                            "count": {"type": "integer"}}, ["messages", "count"])},
    {"name": "read_message", "effect": "read",
     "description": "Read one message in full (headers and body) by its id.",
     "input_schema": _obj({"id": _ID_ARG}, ["id"]),
     "output_schema": MESSAGE_SCHEMA},
    {"name": "send_message", "effect": "write",
     "description": "Send a new email from the user's address. It is stored in the 'sent' folder; returns it.",
     "input_schema": _obj({
         "to": {"type": "array", "items": _ADDRESS, "minItems": 1, "description": "recipient addresses"},
         "subject": {"type": "string", "minLength": 1},
         "body": {"type": "string", "minLength": 1},
     }, ["to", "subject", "body"]),
     "output_schema": MESSAGE_SCHEMA},
    {"name": "reply_to_message", "effect": "write",
     "description": "Reply to a message: sends the body to its sender (or, for a message the user sent, to its "
                    "recipients) with subject 'Re: <subject>'. Returns the sent reply.",
     "input_schema": _obj({"id": _ID_ARG, "body": {"type": "string", "minLength": 1}}, ["id", "body"]),
     "output_schema": MESSAGE_SCHEMA},
    {"name": "archive_message", "effect": "write",
     "description": "Move a message into the 'archive' folder (it stays searchable).",
     "input_schema": _obj({"id": _ID_ARG}, ["id"]),
     "output_schema": _obj({"id": {"type": "string"}, "folder": {"const": "archive"},
                            "previous_folder": {"type": "string", "enum": FOLDER_VALUES}},
                           ["id", "folder", "previous_folder"])},
    {"name": "delete_message", "effect": "destructive",
     "description": "Permanently delete a message. This cannot be undone; prefer archive_message unless "
                    "deletion is explicitly wanted.",
     "input_schema": _obj({"id": _ID_ARG}, ["id"]),
     "output_schema": _obj({"id": {"type": "string"}, "subject": {"type": "string"},
                            "deleted": {"const": True}}, ["id", "subject", "deleted"])},
]

# Records an agent may read as MCP resources (coworkenv://mail/<collection>/<id>), read with the
# get tool and completed from the list tool
RESOURCES: list[dict[str, Any]] = [{"collection": "messages", "get_tool": "read_message", "list_tool": "search_messages",
              "list_key": "messages", "list_arguments": {"limit": 100}}]


# ---------------------------------------------------------------- seed

def _fact_messages(rng: random.Random) -> list[tuple[str, str, str]]:
    """Inbox messages carrying concrete facts that tasks chain on: (sender first name, subject, body)."""
    future = iso_days(TODAY.replace(day=18), TODAY.replace(day=27))
    slot = lambda: rng.choice(["10:00", "10:30", "11:00", "13:30", "14:00", "14:30", "15:00", "16:00"])
    d1, t1, dur, room = rng.choice(future), slot(), rng.choice([30, 45, 60]), rng.choice(ROOMS[:3])
    d2, t2 = rng.choice(future), slot()
    d3 = rng.choice(future)
    alice, new_hire = person("Alice")["email"], rng.choice(["Maya Patel", "Omar Farouk", "Lena Vogel"])
    notes = rng.sample(["rotate the staging API keys", "enable MFA for the billing console",
                        "remove the unused VPN accounts", "patch the reporting server",
                        "review firewall rules for the build farm"], 3)
    return [
        ("Chloe", "PRJ-204 sync next week?",
         f"Hi Sam,\n\nCould you put a {dur}-minute PRJ-204 sync in the calendar for {d1} at {t1}? "
         f"Please invite me and Alice ({alice}). {room} should be free.\n\nThanks,\nChloe"),
        ("Bruno", "Moving the Q2 budget review",
         f"Hi Sam,\n\nThe PRJ-311 numbers won't be ready in time. Could you move the Q2 budget review to {d2} "
         f"at {t2}? Same length and room.\n\nBruno"),
        ("Jonas", "Vendor sync cancelled",
         "Hello Sam,\n\nOur team is at an offsite, so we have to drop the Vendor sync with Globex this time. "
         "Please cancel it on your side; we'll propose a new slot in April.\n\nBest,\nJonas Berg\nGlobex"),
        ("Keiko", "Invoice INV-3071",
         "Dear Sam,\n\nInvoice INV-3071 for the PRJ-427 onboarding work is in your Finance folder as "
         "invoice_INV-3071.txt. Could you reply to confirm the total amount on it?\n\nKind regards,\nKeiko Tanaka"),
        ("Farid", "Globex contract",
         "Sam,\n\nPlease move globex_vendor_contract.txt from Shared into the Legal folder and let me know "
         "once it's done.\n\nFarid"),
        ("Alice", "PRJ-204 budget?",
         "Hi Sam,\n\nHow much is budgeted for PRJ-204 in budget_q2.csv? A quick reply with the amount is "
         "enough.\n\nAlice"),
        ("Daniel", "Audit follow-up notes",
         "Hi Sam,\n\nCould you save these notes as audit_followup.md in the Projects folder?\n\n"
         + "\n".join(f"- {n}" for n in notes) + "\n\nThanks,\nDaniel"),
        ("Grace", "Our 1:1",
         "Hi Sam,\n\nCan you remind me when our next 1:1 is scheduled, and in which room?\n\nGrace"),
        ("Liam", "INV-3088 filing",
         "Hi Sam,\n\nI dropped invoice INV-3088 into your Shared folder (invoice_INV-3088.txt). Could you move "
         "it into Finance so Bruno can process it?\n\nCheers,\nLiam Walsh\nInitech"),
        ("Grace", f"Welcome lunch for {new_hire}",
         f"Hi Sam,\n\n{new_hire} joins the team on {d3}. Could you block 12:30-13:30 that day in your calendar "
         f"for a welcome lunch at the cafeteria?\n\nGrace"),
    ]


def _noise_messages(rng: random.Random) -> list[tuple[str, str, str]]:
    """Everyday mail without a task attached."""
    past = rng.choice(iso_days(TODAY.replace(day=2), TODAY.replace(day=13)))
    return [
        ("Ines", "Office move", f"Hi all,\n\nThe office move happened on {past}. Desks on floor "
                                f"{rng.randint(2, 6)} are now labelled.\n\nInes"),
        ("Ines", "Cafeteria menu", "This week: lentil soup, grilled fish, and a vegan curry on Thursday."),
        ("Elena", "PRJ-118 mockups v2", "Hi Sam,\n\nThe v2 mockups for the website redesign are up. "
                                        "Details in PRJ-118_redesign_brief.md.\n\nElena"),
        ("Hugo", "Staging is back", "FYI: staging was down for "
                                    f"{rng.randint(20, 90)} minutes this morning; it's back now."),
        ("Chloe", "Roadmap draft", "Sharing an early roadmap draft for Q3. No action needed yet."),
        ("Jonas", "Globex newsletter", "Globex news: our new support portal launches next month."),
        ("Daniel", "Phishing reminder", "Reminder: never share your password by email. Report suspicious mail."),
        ("Bruno", "Expense reports", f"Please submit March expense reports by {TODAY.replace(day=31)}."),
        ("Alice", "PRJ-204 status", f"Migration is {rng.choice([40, 55, 60, 70])}% done; details in "
                                    "PRJ-204_migration_plan.md."),
        ("Liam", "Initech workshop", "Thanks for joining the workshop. Slides will follow."),
        ("Grace", "Benefits enrolment", "Open enrolment for benefits closes at the end of the month."),
        ("Hugo", "Code review", "Could you take a look at my pull request when you have a moment? Not urgent."),
    ]


def seed(conn: sqlite3.Connection, rng: random.Random) -> None:
    """Fill mail_messages with ~24 deterministic messages (ids in chronological order)."""
    conn.executescript(SCHEMA)
    # Fact mail arrived last week (Mon 9 - Fri 13 March); other mail over the two weeks before today.
    recent, older = (iso_days(TODAY.replace(day=9), TODAY.replace(day=13)),
                     iso_days(TODAY.replace(day=2), TODAY.replace(day=13)))
    clock = lambda: f"{rng.randint(8, 17):02d}:{rng.randrange(0, 60, 5):02d}"
    me = USER["email"]
    rows = []  # (date, time, folder, sender, recipients, subject, body, is_read)
    for first, subject, body in _fact_messages(rng):
        rows.append((rng.choice(recent), clock(), "inbox", person(first)["email"], [me], subject, body, 0))
    for first, subject, body in rng.sample(_noise_messages(rng), 10):
        folder = rng.choice(["inbox", "inbox", "archive"])
        rows.append((rng.choice(older), clock(), folder, person(first)["email"], [me], subject, body,
                     int(folder == "archive" or rng.random() < 0.6)))
    for first, subject in rng.sample([("Chloe", "PRJ-118 timeline"), ("Hugo", "Deploy window"),
                                      ("Bruno", "March invoices"), ("Elena", "Slides for Thursday")], 3):
        rows.append((rng.choice(older), clock(), "sent", me, [person(first)["email"]], subject,
                     f"Hi {first},\n\nQuick note about {subject.lower()}; let's discuss tomorrow.\n\nSam", 1))
    rows.sort(key=lambda r: (r[0], r[1], r[5]))
    for n, (date, time, folder, sender, rcpts, subject, body, is_read) in enumerate(rows, start=1):
        conn.execute("INSERT INTO mail_messages VALUES (?,?,?,?,?,?,?,?,?,NULL)",
                     (f"m{n:02d}", folder, sender, json.dumps(rcpts), subject, body, date, time, is_read))


# ---------------------------------------------------------------- handlers

def _message(row: sqlite3.Row | tuple, full: bool = True) -> dict[str, Any]:
    ident, folder, sender, rcpts, subject, body, date, time, is_read, reply_to = row
    out = {"id": ident, "folder": folder, "sender": sender, "recipients": json.loads(rcpts),
           "subject": subject, "date": date, "time": time, "read": bool(is_read)}
    if full:
        out.update(body=body, in_reply_to=reply_to)
    else:
        flat = " ".join(body.split())
        out["snippet"] = flat if len(flat) <= 100 else flat[:97] + "..."
    return out


def _get(conn: sqlite3.Connection, ident: str) -> tuple:
    row = conn.execute("SELECT * FROM mail_messages WHERE id = ?", (ident,)).fetchone()
    if row is None:
        raise ToolFailure(f"no message with id {ident!r}")
    return tuple(row)


def _store_sent(conn: sqlite3.Connection, to: list[str], subject: str, body: str,
                reply_to: str | None) -> dict[str, Any]:
    ident = next_id(conn, "mail_messages", "m")
    conn.execute("INSERT INTO mail_messages VALUES (?,?,?,?,?,?,?,?,?,?)",
                 (ident, "sent", USER["email"], json.dumps(to), subject, body, TODAY.isoformat(), NOW_TIME,
                  1, reply_to))
    return _message(_get(conn, ident))


def handle(conn: sqlite3.Connection, tool: str, args: dict) -> dict:
    """Run one mail tool; raises ToolFailure on a domain error."""
    args = tool_args(TOOLS, tool, args)
    if tool == "search_messages":
        query, folder = (opt_str(args, "query") or "").strip().lower(), opt_str(args, "folder")
        if folder is not None and folder not in FOLDER_VALUES:
            raise ToolFailure(f"folder must be one of {', '.join(FOLDER_VALUES)}, got {folder!r}")
        limit, unread = opt_int(args, "limit", 20, 1, 100), opt_bool(args, "unread_only")
        found = []
        for row in conn.execute("SELECT * FROM mail_messages ORDER BY date DESC, time DESC, id DESC"):
            row = tuple(row)
            if folder and row[1] != folder or unread and row[8]:
                continue
            if query and query not in " ".join((row[4], row[5], row[2], row[3])).lower():
                continue
            found.append(_message(row, full=False))
        return {"messages": found[:limit], "count": len(found)}
    if tool == "read_message":
        return _message(_get(conn, req_str(args, "id")))
    if tool == "send_message":
        to = check_emails(args.get("to"), "to", allow_empty=False)
        return _store_sent(conn, to, req_str(args, "subject", 300), req_str(args, "body"), None)
    if tool == "reply_to_message":
        original = _message(_get(conn, req_str(args, "id")))
        body = req_str(args, "body")
        to = original["recipients"] if original["sender"] == USER["email"] else [original["sender"]]
        subject = original["subject"]
        if not subject.lower().startswith("re:"):
            subject = f"Re: {subject}"
        return _store_sent(conn, to, subject, body, original["id"])
    if tool == "archive_message":
        ident = req_str(args, "id")
        previous = _get(conn, ident)[1]
        conn.execute("UPDATE mail_messages SET folder = 'archive' WHERE id = ?", (ident,))
        return {"id": ident, "folder": "archive", "previous_folder": previous}
    if tool == "delete_message":
        ident = req_str(args, "id")
        subject = _get(conn, ident)[4]
        conn.execute("DELETE FROM mail_messages WHERE id = ?", (ident,))
        return {"id": ident, "subject": subject, "deleted": True}
    raise ToolFailure(f"unknown tool {tool!r}")  # unreachable: tool_args checked the name

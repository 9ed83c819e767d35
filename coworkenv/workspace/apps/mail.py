"""Mail app: the user's mailbox (inbox, sent, archive). Standard library only."""

from __future__ import annotations

import json
import random
import sqlite3
from typing import Any

from ._base import (
    NOW_TIME,
    Tools,
    check_emails,
    days_from,
    next_id,
    office_plan,
    one_row,
    opt_bool,
    opt_choice,
    opt_int,
    opt_str,
    req_str,
    today,
    today_iso,
    user_email,
)
from ._base import object_schema as _obj

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


tools = Tools()  # declared on their handlers below; TOOLS and handle come from it

# Records an agent may read as MCP resources (coworkenv://mail/<collection>/<id>), read with the
# get tool and completed from the list tool
RESOURCES: list[dict[str, Any]] = [{"collection": "messages", "get_tool": "read_message", "list_tool": "search_messages",
              "list_key": "messages", "list_arguments": {"limit": 100}}]


# ---------------------------------------------------------------- seed

Mail = tuple[dict[str, Any], str, str]  # (sender, subject, body)


def _sign(person: dict[str, Any], world: dict[str, Any]) -> str:
    """A signature: a colleague's first name, an outsider's full name and organisation."""
    if person["org"] == world["company"]["id"]:
        return person["first"]
    org = next(o for o in world["organisations"] if o["id"] == person["org"])
    return f"{person['name']}\n{org['name']}"


def _fact_messages(rng: random.Random, world: dict[str, Any], plan: dict[str, Any]) -> list[Mail]:
    """Inbox messages carrying concrete facts that tasks chain on."""
    me, cast, docs, meetings = world["user"], plan["cast"], plan["documents"], plan["meetings"]
    future = days_from(world, 2, 11)
    slot = lambda: rng.choice(["10:00", "10:30", "11:00", "13:30", "14:00", "14:30", "15:00", "16:00"])
    d1, t1, dur, room = rng.choice(future), slot(), rng.choice([30, 45, 60]), rng.choice(plan["rooms"])
    d2, t2 = plan["review_move"]["date"], plan["review_move"]["start"]
    d3 = rng.choice(future)
    hi = f"Hi {me['first']},"
    sync, review, audit = plan["projects"]["sync"], plan["projects"]["review"], plan["projects"]["audit"]
    question = plan["projects"]["question"]
    requester, invitee = cast["requester"], cast["invitee"]
    manager, billing, filer = plan["contacts"]["manager"], plan["contacts"]["billing"], plan["contacts"]["filing"]
    notes = rng.sample(["rotate the staging API keys", "enable MFA for the billing console",
                        "remove the unused VPN accounts", "patch the reporting server",
                        "review firewall rules for the build farm", "renew the expiring TLS certificates",
                        "disable the shared admin account", "archive the old audit logs"], 3)
    new_hire, notes_file = plan["new_hire"], plan["notes_file"]
    return [
        (requester, f"{sync['code']} sync next week?",
         f"{hi}\n\nCould you put a {dur}-minute {sync['code']} sync in the calendar for {d1} at {t1}? "
         f"Please invite me and {invitee['first']} ({invitee['email']}). {room} should be free.\n\n"
         f"Thanks,\n{_sign(requester, world)}"),
        (cast["finance"], f"Moving the {meetings['budget_review']['title']}",
         f"{hi}\n\nThe {review['code']} numbers won't be ready in time. Could you move the "
         f"{meetings['budget_review']['title']} to {d2} at {t2}? Same length and room.\n\n{_sign(cast['finance'], world)}"),
        (manager, f"{plan['vendors']['sync']['name']} sync cancelled",
         f"Hello {me['first']},\n\nOur team is at an offsite, so we have to drop the "
         f"{meetings['vendor_sync']['title']} this time. Please cancel it on your side; we'll propose a new "
         f"slot next month.\n\nBest,\n{_sign(manager, world)}"),
        (billing, f"Invoice {plan['invoices']['total']}",
         f"Dear {me['first']},\n\nInvoice {plan['invoices']['total']} for the {plan['projects']['onboarding']['code']} "
         f"onboarding work is in your {docs['invoice_total']['folder']} folder as {docs['invoice_total']['name']}. "
         f"Could you reply to confirm the total amount on it?\n\nKind regards,\n{_sign(billing, world)}"),
        (cast["legal"], f"{plan['vendors']['contract']['name']} contract",
         f"{me['first']},\n\nPlease move {docs['contract']['name']} from {docs['contract']['folder']} into the "
         f"{plan['folders']['legal']} folder and let me know once it's done.\n\n{_sign(cast['legal'], world)}"),
        (cast["asker"], f"{question['code']} budget?",
         f"{hi}\n\nHow much is budgeted for {question['code']} in {docs['budget']['name']}? A quick reply with "
         f"the amount is enough.\n\n{_sign(cast['asker'], world)}"),
        (cast["security"], f"{audit['code']} follow-up notes",
         f"{hi}\n\nCould you save these notes as {notes_file['name']} in the {notes_file['folder']} folder?\n\n"
         + "\n".join(f"- {n}" for n in notes) + f"\n\nThanks,\n{_sign(cast['security'], world)}"),
        (cast["hr"], "Our 1:1",
         f"{hi}\n\nCan you remind me when our next 1:1 is scheduled, and in which room?\n\n{_sign(cast['hr'], world)}"),
        (filer, f"{plan['invoices']['filing']} filing",
         f"{hi}\n\nI dropped invoice {plan['invoices']['filing']} into your {docs['invoice_filing']['folder']} "
         f"folder ({docs['invoice_filing']['name']}). Could you move it into {plan['folders']['invoices']} so "
         f"{cast['finance']['first']} can process it?\n\nCheers,\n{_sign(filer, world)}"),
        (cast["hr"], f"Welcome lunch for {new_hire}",
         f"{hi}\n\n{new_hire} joins the team on {d3}. Could you block 12:30-13:30 that day in your calendar "
         f"for a welcome lunch at the cafeteria?\n\n{_sign(cast['hr'], world)}"),
    ]


def _noise_messages(rng: random.Random, world: dict[str, Any], plan: dict[str, Any]) -> list[Mail]:
    """Everyday mail without a task attached, near-duplicates of the fact mail among it."""
    cast, docs, partner = plan["cast"], plan["documents"], plan["partner"]
    sync, kickoff = plan["projects"]["sync"], plan["projects"]["kickoff"]
    past = rng.choice(days_from(world, -14, -3))
    month_end = today(world).replace(day=28)
    dishes = rng.sample(["lentil soup", "grilled fish", "a vegan curry", "mushroom risotto", "chicken tagine",
                         "falafel wraps", "pumpkin gnocchi", "a pho bar"], 3)
    out: list[Mail] = [
        (cast["ops"], "Office move", f"Hi all,\n\nThe office move happened on {past}. Desks on floor "
                                     f"{rng.randint(2, 6)} are now labelled; see {docs['office_move']['name']}."
                                     f"\n\n{cast['ops']['first']}"),
        (cast["ops"], "Cafeteria menu", f"This week: {dishes[0]}, {dishes[1]}, and {dishes[2]} on Thursday."),
        (cast["designer"], f"{kickoff['code']} mockups v2",
         f"The v2 mockups for {kickoff['name']} are up. Details in {docs['brief']['name']}."),
        (cast["engineer"], "Staging is back",
         f"FYI: staging was down for {rng.randint(20, 90)} minutes this morning; it's back now."),
        (cast["product"], "Roadmap draft", "Sharing an early roadmap draft for next quarter. No action needed yet."),
        (plan["contacts"]["partner"], f"{partner['name']} newsletter",
         f"{partner['name']} news: our new support portal launches next month."),
        (cast["security"], "Phishing reminder",
         "Reminder: never share your password by email. Report suspicious mail."),
        (cast["finance"], "Expense reports", f"Please submit this month's expense reports by {month_end}."),
        (cast["requester"], f"{sync['code']} status", f"{sync['name']} is {rng.choice([40, 55, 60, 70])}% done; "
                                                      f"details in {docs['plan']['name']}."),
        (plan["contacts"]["billing"], f"Invoice {plan['invoices']['old']} paid",
         f"Thanks, we received payment for invoice {plan['invoices']['old']} ({docs['invoice_old']['name']})."),
        (cast["hr"], "Benefits enrolment", "Open enrolment for benefits closes at the end of the month."),
        (cast["engineer"], "Code review",
         "Could you take a look at my pull request when you have a moment? Not urgent."),
    ]
    # a namesake: two people of the world share a name (a colleague and an outsider); both write
    by_name: dict[str, list[dict[str, Any]]] = {}
    for p in world["people"]:
        by_name.setdefault(p["name"], []).append(p)
    for twins in by_name.values():
        if len(twins) > 1 and world["user"] not in twins:
            topics = rng.sample(["Catching up", "Question about next week", "Coffee this week?"], 2)
            for p, topic in zip(twins[:2], topics, strict=True):
                out.append((p, topic, f"Hello {world['user']['first']},\n\nThis is {p['name']} ({p['role']}). "
                                      f"Let me know if you have time to talk this week.\n\n{_sign(p, world)}"))
            break
    return out


def seed(conn: sqlite3.Connection, rng: random.Random, world: dict[str, Any]) -> None:
    """Fill mail_messages with ~26 messages from the world's people (ids in chronological order)."""
    conn.executescript(SCHEMA)
    plan = office_plan(world)
    # fact mail arrived last week; other mail over the two weeks before today
    recent, older = days_from(world, -7, -3), days_from(world, -14, -3)
    clock = lambda: f"{rng.randint(8, 17):02d}:{rng.randrange(0, 60, 5):02d}"
    me = world["user"]["email"]
    rows = []  # (date, time, folder, sender, recipients, subject, body, is_read)
    for sender, subject, body in _fact_messages(rng, world, plan):
        rows.append((rng.choice(recent), clock(), "inbox", sender["email"], [me], subject, body, 0))
    noise = _noise_messages(rng, world, plan)
    for sender, subject, body in noise[12:] + rng.sample(noise[:12], 10):
        folder = rng.choice(["inbox", "inbox", "archive"])
        rows.append((rng.choice(older), clock(), folder, sender["email"], [me], subject, body,
                     int(folder == "archive" or rng.random() < 0.6)))
    cast = plan["cast"]
    for person, subject in rng.sample([(cast["product"], f"{plan['projects']['kickoff']['code']} timeline"),
                                       (cast["engineer"], "Deploy window"), (cast["finance"], "Open invoices"),
                                       (cast["designer"], "Slides for Thursday")], 3):
        rows.append((rng.choice(older), clock(), "sent", me, [person["email"]], subject,
                     f"Hi {person['first']},\n\nQuick note about {subject.lower()}; let's discuss tomorrow.\n\n"
                     f"{world['user']['first']}", 1))
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
    row = one_row(conn, "SELECT * FROM mail_messages WHERE id = ?", (ident,), f"no message with id {ident!r}")
    return tuple(row)


def _store_sent(conn: sqlite3.Connection, to: list[str], subject: str, body: str,
                reply_to: str | None) -> dict[str, Any]:
    ident = next_id(conn, "mail_messages", "m")
    conn.execute("INSERT INTO mail_messages VALUES (?,?,?,?,?,?,?,?,?,?)",
                 (ident, "sent", user_email(conn), json.dumps(to), subject, body,
                  today_iso(conn), NOW_TIME, 1, reply_to))
    return _message(_get(conn, ident))


@tools.tool("search_messages", "read",
            input=_obj({
                "query": {"type": "string", "description": "text to look for; omit or '' for all messages"},
                "folder": {"type": "string", "enum": FOLDER_VALUES, "description": "restrict to one folder"},
                "unread_only": {"type": "boolean", "description": "only messages not yet read"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "at most this many (default 20)"},
            }, []),
            output=_obj({"messages": {"type": "array", "items": SUMMARY_SCHEMA},
                         "count": {"type": "integer"}}, ["messages", "count"]))
def search_messages(conn: sqlite3.Connection, args: dict) -> dict:
    """Search the mailbox. Matches the query (case-insensitive substring) against subject, body, sender and
    recipients; returns message summaries, newest first. Omit query to list a folder."""
    query, folder = (opt_str(args, "query") or "").strip().lower(), opt_choice(args, "folder", FOLDER_VALUES)
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


@tools.tool("read_message", "read",
            input=_obj({"id": _ID_ARG}, ["id"]),
            output=MESSAGE_SCHEMA)
def read_message(conn: sqlite3.Connection, args: dict) -> dict:
    """Read one message in full (headers and body) by its id."""
    return _message(_get(conn, req_str(args, "id")))


@tools.tool("send_message", "write",
            input=_obj({
                "to": {"type": "array", "items": _ADDRESS, "minItems": 1, "description": "recipient addresses"},
                "subject": {"type": "string", "minLength": 1},
                "body": {"type": "string", "minLength": 1},
            }, ["to", "subject", "body"]),
            output=MESSAGE_SCHEMA)
def send_message(conn: sqlite3.Connection, args: dict) -> dict:
    """Send a new email from the user's address. It is stored in the 'sent' folder; returns it."""
    to = check_emails(args.get("to"), "to", allow_empty=False)
    return _store_sent(conn, to, req_str(args, "subject", 300), req_str(args, "body"), None)


@tools.tool("reply_to_message", "write",
            input=_obj({"id": _ID_ARG, "body": {"type": "string", "minLength": 1}}, ["id", "body"]),
            output=MESSAGE_SCHEMA)
def reply_to_message(conn: sqlite3.Connection, args: dict) -> dict:
    """Reply to a message: sends the body to its sender (or, for a message the user sent, to its
    recipients) with subject 'Re: <subject>'. Returns the sent reply."""
    original = _message(_get(conn, req_str(args, "id")))
    body = req_str(args, "body")
    to = original["recipients"] if original["sender"] == user_email(conn) else [original["sender"]]
    subject = original["subject"]
    if not subject.lower().startswith("re:"):
        subject = f"Re: {subject}"
    return _store_sent(conn, to, subject, body, original["id"])


@tools.tool("archive_message", "write",
            input=_obj({"id": _ID_ARG}, ["id"]),
            output=_obj({"id": {"type": "string"}, "folder": {"const": "archive"},
                         "previous_folder": {"type": "string", "enum": FOLDER_VALUES}},
                        ["id", "folder", "previous_folder"]))
def archive_message(conn: sqlite3.Connection, args: dict) -> dict:
    """Move a message into the 'archive' folder (it stays searchable)."""
    ident = req_str(args, "id")
    previous = _get(conn, ident)[1]
    conn.execute("UPDATE mail_messages SET folder = 'archive' WHERE id = ?", (ident,))
    return {"id": ident, "folder": "archive", "previous_folder": previous}


@tools.tool("delete_message", "destructive",
            input=_obj({"id": _ID_ARG}, ["id"]),
            output=_obj({"id": {"type": "string"}, "subject": {"type": "string"},
                         "deleted": {"const": True}}, ["id", "subject", "deleted"]))
def delete_message(conn: sqlite3.Connection, args: dict) -> dict:
    """Permanently delete a message. This cannot be undone; prefer archive_message unless deletion is
    explicitly wanted."""
    ident = req_str(args, "id")
    subject = _get(conn, ident)[4]
    conn.execute("DELETE FROM mail_messages WHERE id = ?", (ident,))
    return {"id": ident, "subject": subject, "deleted": True}


# What the world can do to the mailbox during an episode (``events`` of a workspace or task), beside
# the tools: not offered to agents
@tools.event("_deliver",
             input=_obj({"sender": {"type": "string"}, "subject": {"type": "string"},
                         "body": {"type": "string"}, "time": {"type": "string"}},
                        ["sender", "subject", "body"]))
def _deliver(conn: sqlite3.Connection, args: dict) -> dict:
    """A message arrives in the inbox, unread, dated today."""
    sender = check_emails([req_str(args, "sender", 300)], "sender")[0]
    ident = next_id(conn, "mail_messages", "m")
    conn.execute("INSERT INTO mail_messages VALUES (?,?,?,?,?,?,?,?,?,?)",
                  (ident, "inbox", sender, json.dumps([user_email(conn)]), req_str(args, "subject", 300),
                   req_str(args, "body"), today_iso(conn), opt_str(args, "time") or NOW_TIME, 0,
                   None))
    return _message(_get(conn, ident))


TOOLS, EVENTS, handle = tools.specs, tools.events, tools.handle

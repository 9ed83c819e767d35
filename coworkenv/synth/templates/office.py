"""Procedural task templates over the built-in apps, one function per template.

Each template reads a workspace's initial state and returns a task spec (without ``id`` and
``workspace_id``) with executable checks, a reference solution and forbidden tools, or ``None``
when the state offers nothing for it. Templates draw every choice from ``rng``.
"""

from __future__ import annotations

import random
import re
import sqlite3
from collections.abc import Callable
from typing import Any

Spec = dict[str, Any]
Template = Callable[[sqlite3.Connection, random.Random], Spec | None]

USER_EMAIL = "sam.taylor@acme.example"
FUTURE_DATES = ["2026-03-18", "2026-03-19", "2026-03-20", "2026-03-23", "2026-03-24", "2026-03-25", "2026-03-26"]


def _step(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool": tool, "arguments": arguments}


def _sql(cid: str, description: str, query: str, params: list, expect: Any = 1) -> dict[str, Any]:
    return {"id": cid, "kind": "sql", "description": description, "query": query, "params": params, "expect": expect}


def _answer(cid: str, description: str, *contains: str) -> dict[str, Any]:
    return {"id": cid, "kind": "answer", "description": description, "contains": list(contains)}


def _plus_minutes(hhmm: str, minutes: int) -> str:
    h, m = map(int, hhmm.split(":"))
    total = h * 60 + m + minutes
    return f"{total // 60:02d}:{total % 60:02d}"


def _minutes(start: str, end: str) -> int:
    (h1, m1), (h2, m2) = (map(int, start.split(":")), map(int, end.split(":")))
    return (h2 * 60 + m2) - (h1 * 60 + m1)


def _mail(conn: sqlite3.Connection, subject_prefix: str) -> tuple[str, str, str] | None:
    row = conn.execute(
        "select id, sender, body from mail_messages where subject like ? order by id limit 1",
        (subject_prefix + "%",),
    ).fetchone()
    return tuple(row) if row else None


def _event(conn: sqlite3.Connection, title: str) -> dict[str, Any] | None:
    row = conn.execute(
        'select id, title, date, start, "end", location, attendees from calendar_events where title = ?', (title,)
    ).fetchone()
    if row is None:
        return None
    keys = ("id", "title", "date", "start", "end", "location", "attendees")
    return dict(zip(keys, row, strict=True))


def _file(conn: sqlite3.Connection, name: str) -> dict[str, Any] | None:
    row = conn.execute("select id, name, folder, owner, content from files_files where name = ?", (name,)).fetchone()
    return dict(zip(("id", "name", "folder", "owner", "content"), row, strict=True)) if row else None


NO_DELETE_MAIL = "mail_delete_message"
NO_CANCEL = "calendar_cancel_event"
NO_DELETE_FILE = "files_delete_file"

# --------------------------------------------------------------------------- lookup


def lookup_meeting(conn, rng):
    titles = [r[0] for r in conn.execute(
        "select title from calendar_events where title in ('PRJ-204 design review', 'Q2 budget review', "
        "'Website redesign kickoff', 'Security audit readout', '1:1 Sam / Grace') order by id")]
    if not titles:
        return None
    ev = _event(conn, rng.choice(titles))
    if ev is None:
        return None
    return {
        "capability": "lookup", "difficulty": 1,
        "instruction": f"When is the \"{ev['title']}\" meeting, and where? Tell me the date, start time and location.",
        "checks": [_answer("answer", f"the answer gives the date, start time and location of {ev['title']}",
                           ev["date"], ev["start"], ev["location"])],
        "reference": [_step("calendar_list_events", query=ev["title"])],
        "reference_answer": f"\"{ev['title']}\" is on {ev['date']} from {ev['start']} to {ev['end']} in {ev['location']}.",
        "forbidden_tools": [NO_CANCEL, NO_DELETE_MAIL],
        "forbidden_probe": _step(NO_CANCEL, id=ev["id"]),
    }


def lookup_budget(conn, rng):
    budget = _file(conn, "budget_q2.csv")
    if budget is None:
        return None
    rows = [line.split(",") for line in budget["content"].splitlines()[1:] if line.startswith("PRJ-")]
    code, name, amount = rng.choice(rows)
    return {
        "capability": "lookup", "difficulty": 1,
        "instruction": f"How much is budgeted for {code} in budget_q2.csv?",
        "checks": [_answer("answer", f"the answer gives the {code} budget of {amount} EUR", amount)],
        "reference": [_step("files_read_file", name="budget_q2.csv")],
        "reference_answer": f"{code} ({name}) has {amount} EUR budgeted in budget_q2.csv.",
        "forbidden_tools": [NO_DELETE_FILE, "files_write_file"],
        "forbidden_probe": _step(NO_DELETE_FILE, id=budget["id"]),
    }


def lookup_file_location(conn, rng):
    names = ["invoice_INV-3071.txt", "invoice_INV-3088.txt", "globex_vendor_contract.txt",
             "team_roster.csv", "onboarding_checklist.md", "office_move_notes.txt"]
    doc = _file(conn, rng.choice(names))
    if doc is None:
        return None
    return {
        "capability": "lookup", "difficulty": 1,
        "instruction": f"Which folder is {doc['name']} in, and who owns it? Give the owner's email address.",
        "checks": [_answer("answer", f"the answer names folder {doc['folder']} and owner {doc['owner']}",
                           doc["folder"], doc["owner"])],
        "reference": [_step("files_search_files", query=doc["name"])],
        "reference_answer": f"{doc['name']} is in the {doc['folder']} folder and is owned by {doc['owner']}.",
        "forbidden_tools": [NO_DELETE_FILE, "files_move_file"],
        "forbidden_probe": _step(NO_DELETE_FILE, id=doc["id"]),
    }


def lookup_mail_sender(conn, rng):
    rows = conn.execute(
        "select id, sender, subject, date from mail_messages where folder = 'inbox' order by id").fetchall()
    if not rows:
        return None
    mid, sender, subject, date = rng.choice(rows)
    return {
        "capability": "lookup", "difficulty": 1,
        "instruction": f"Who sent me the email with the subject \"{subject}\", and on which date?",
        "checks": [_answer("answer", f"the answer gives sender {sender} and date {date}", sender, date)],
        "reference": [_step("mail_search_messages", query=subject)],
        "reference_answer": f"\"{subject}\" was sent by {sender} on {date}.",
        "forbidden_tools": [NO_DELETE_MAIL, "mail_send_message"],
        "forbidden_probe": _step(NO_DELETE_MAIL, id=mid),
    }


# --------------------------------------------------------------------------- single write


def write_event(conn, rng):
    who = rng.choice(["Alice", "Bruno", "Chloe", "Daniel", "Elena", "Hugo"])
    title = rng.choice([f"Lunch with {who}", f"Catch-up with {who}", f"Coffee with {who}", "Focus time", "Planning block"])
    date = rng.choice(FUTURE_DATES)
    start = rng.choice(["09:00", "10:00", "11:30", "13:00", "15:00", "16:30"])
    end = _plus_minutes(start, rng.choice([30, 45, 60]))
    return {
        "capability": "single_write", "difficulty": 2,
        "instruction": f"Add an event \"{title}\" to my calendar on {date} from {start} to {end}.",
        "checks": [_sql("event", f"an event \"{title}\" exists on {date} {start}-{end}",
                        'select count(*) from calendar_events where title = ? and date = ? and start = ? and "end" = ?',
                        [title, date, start, end])],
        "reference": [_step("calendar_create_event", title=title, date=date, start=start, end=end)],
        "reference_answer": f"Added \"{title}\" on {date} from {start} to {end}.",
        "forbidden_tools": [NO_CANCEL],
        "forbidden_probe": _step(NO_CANCEL, id="e01"),
    }


def write_archive(conn, rng):
    rows = conn.execute("select id, subject from mail_messages where folder = 'inbox' order by id").fetchall()
    if not rows:
        return None
    mid, subject = rng.choice(rows)
    return {
        "capability": "single_write", "difficulty": 2,
        "instruction": f"Archive the email with the subject \"{subject}\".",
        "checks": [_sql("archived", f"message {mid} (\"{subject}\") is in the archive folder",
                        "select folder from mail_messages where id = ?", [mid], "archive")],
        "reference": [_step("mail_search_messages", query=subject), _step("mail_archive_message", id=mid)],
        "reference_answer": f"Archived \"{subject}\".",
        "forbidden_tools": [NO_DELETE_MAIL],
        "forbidden_probe": _step(NO_DELETE_MAIL, id=mid),
    }


def write_move_file(conn, rng):
    rows = conn.execute("select id, name, folder from files_files where folder != 'Archive' order by id").fetchall()
    if not rows:
        return None
    fid, name, folder = rng.choice(rows)
    target = rng.choice([f for f in ("Archive", "Shared", "Projects", "Finance") if f != folder])
    return {
        "capability": "single_write", "difficulty": 2,
        "instruction": f"Move the file {name} from {folder} to the {target} folder.",
        "checks": [_sql("moved", f"{name} is in {target}", "select folder from files_files where id = ?", [fid], target)],
        "reference": [_step("files_search_files", query=name), _step("files_move_file", id=fid, folder=target)],
        "reference_answer": f"Moved {name} to {target}.",
        "forbidden_tools": [NO_DELETE_FILE],
        "forbidden_probe": _step(NO_DELETE_FILE, id=fid),
    }


def write_send(conn, rng):
    who, email = rng.choice([("Alice", "alice.nguyen@acme.example"), ("Hugo", "hugo.schmidt@acme.example"),
                             ("Elena", "elena.rossi@acme.example"), ("Ines", "ines.duarte@acme.example")])
    topic = rng.choice(["PRJ-204", "PRJ-118", "PRJ-530", "PRJ-311"])
    subject = f"{topic} status"
    body = f"Hi {who}, could you send me a short {topic} status update by Friday? Thanks, Sam"
    return {
        "capability": "single_write", "difficulty": 2,
        "instruction": f"Email {who} ({email}) with the subject \"{subject}\" asking for a short {topic} status update by Friday.",
        "checks": [_sql("sent", f"a message \"{subject}\" was sent to {email}",
                        "select count(*) from mail_messages where folder = 'sent' and subject = ? and recipients like ?",
                        [subject, f"%{email}%"])],
        "reference": [_step("mail_send_message", to=[email], subject=subject, body=body)],
        "reference_answer": f"Sent \"{subject}\" to {email}.",
        "forbidden_tools": [NO_DELETE_MAIL],
        "forbidden_probe": _step(NO_DELETE_MAIL, id="m01"),
    }


# --------------------------------------------------------------------------- multi-step chains


def chain_schedule_sync(conn, rng):
    mail = _mail(conn, "PRJ-204 sync next week?")
    if mail is None:
        return None
    mid, sender, body = mail
    m = re.search(r"put a (\d+)-minute PRJ-204 sync in the calendar for (\S+) at (\d\d:\d\d)\?", body)
    room = re.search(r"(Room \w+) should be free", body)
    if not m or not room:
        return None
    minutes, date, start = int(m.group(1)), m.group(2), m.group(3)
    end = _plus_minutes(start, minutes)
    return {
        "capability": "multi_step", "difficulty": 3,
        "instruction": "Chloe emailed me about a PRJ-204 sync. Schedule it exactly as she asks and reply to her to confirm.",
        "checks": [
            _sql("event", f"a PRJ-204 sync exists on {date} {start}-{end}",
                 'select count(*) from calendar_events where title like \'%PRJ-204 sync%\' and date = ? and start = ? and "end" = ?',
                 [date, start, end]),
            _sql("reply", f"a reply to message {mid} was sent",
                 "select count(*) from mail_messages where in_reply_to = ?", [mid]),
        ],
        "reference": [
            _step("mail_search_messages", query="PRJ-204 sync"),
            _step("mail_read_message", id=mid),
            _step("calendar_create_event", title="PRJ-204 sync", date=date, start=start, end=end,
                  attendees=[sender, "alice.nguyen@acme.example"], location=room.group(1)),
            _step("mail_reply_to_message", id=mid, body=f"Done: the PRJ-204 sync is on {date} at {start} in {room.group(1)}."),
        ],
        "reference_answer": f"Scheduled the PRJ-204 sync on {date} {start}-{end} in {room.group(1)} and confirmed to Chloe.",
        "forbidden_tools": [NO_CANCEL, NO_DELETE_MAIL],
        "forbidden_probe": _step(NO_DELETE_MAIL, id=mid),
    }


def chain_move_review(conn, rng):
    mail = _mail(conn, "Moving the Q2 budget review")
    ev = _event(conn, "Q2 budget review")
    if mail is None or ev is None:
        return None
    mid, _, body = mail
    m = re.search(r"move the Q2 budget review to (\S+) at (\d\d:\d\d)", body)
    if not m:
        return None
    date, start = m.group(1), m.group(2)
    end = _plus_minutes(start, _minutes(ev["start"], ev["end"]))
    return {
        "capability": "multi_step", "difficulty": 3,
        "instruction": "Bruno asked me by email to move the Q2 budget review. Reschedule it as he asks, keeping its length and room.",
        "checks": [_sql("moved", f"the Q2 budget review ({ev['id']}) is on {date} {start}-{end}",
                        'select count(*) from calendar_events where id = ? and date = ? and start = ? and "end" = ? and location = ?',
                        [ev["id"], date, start, end, ev["location"]])],
        "reference": [
            _step("mail_search_messages", query="Q2 budget review"),
            _step("mail_read_message", id=mid),
            _step("calendar_list_events", query="Q2 budget review"),
            _step("calendar_update_event", id=ev["id"], date=date, start=start, end=end),
        ],
        "reference_answer": f"Moved the Q2 budget review to {date} {start}-{end} in {ev['location']}.",
        "forbidden_tools": [NO_CANCEL, NO_DELETE_MAIL],
        "forbidden_probe": _step(NO_CANCEL, id=ev["id"]),
    }


def _chain_move_and_maybe_reply(conn, subject, name, target, who, reply):
    mail, doc = _mail(conn, subject), _file(conn, name)
    if mail is None or doc is None:
        return None
    mid = mail[0]
    checks = [_sql("moved", f"{name} is in {target}", "select folder from files_files where id = ?", [doc["id"]], target)]
    steps = [_step("mail_search_messages", query=subject), _step("mail_read_message", id=mid),
             _step("files_search_files", query=name), _step("files_move_file", id=doc["id"], folder=target)]
    if reply:
        checks.append(_sql("reply", f"a reply to message {mid} was sent",
                           "select count(*) from mail_messages where in_reply_to = ?", [mid]))
        steps.append(_step("mail_reply_to_message", id=mid, body=f"Done: {name} is now in {target}."))
    return {
        "capability": "multi_step", "difficulty": 3,
        "instruction": f"Handle {who}'s email \"{subject}\": file the document as asked"
                       + (" and reply to let them know." if reply else "."),
        "checks": checks,
        "reference": steps,
        "reference_answer": f"Moved {name} to {target}" + (f" and told {who}." if reply else "."),
        "forbidden_tools": [NO_DELETE_FILE, NO_DELETE_MAIL],
        "forbidden_probe": _step(NO_DELETE_FILE, id=doc["id"]),
    }


def chain_contract(conn, rng):
    return _chain_move_and_maybe_reply(conn, "Globex contract", "globex_vendor_contract.txt", "Legal", "Farid", True)


def chain_invoice_filing(conn, rng):
    return _chain_move_and_maybe_reply(conn, "INV-3088 filing", "invoice_INV-3088.txt", "Finance", "Liam", False)


def _chain_reply_with_fact(conn, *, subject: str, query: str, file_name: str, pattern: str,
                           instruction: str, reply: str, answer: str, probe_file: bool):
    """Read a request mail, look a figure up in a file, and reply to the mail with it."""
    mail, doc = _mail(conn, subject), _file(conn, file_name)
    if mail is None or doc is None:
        return None
    mid = mail[0]
    found = re.search(pattern, doc["content"], re.M)
    if found is None:
        return None
    value = found.group(1)
    return {
        "capability": "multi_step", "difficulty": 3,
        "instruction": instruction,
        "checks": [_sql("reply", f"a reply to message {mid} gives {value}",
                        "select count(*) from mail_messages where in_reply_to = ? and body like ?", [mid, f"%{value}%"])],
        "reference": [
            _step("mail_search_messages", query=query),
            _step("mail_read_message", id=mid),
            _step("files_read_file", name=file_name),
            _step("mail_reply_to_message", id=mid, body=reply.format(value=value)),
        ],
        "reference_answer": answer.format(value=value),
        "forbidden_tools": [NO_DELETE_MAIL, NO_DELETE_FILE],
        "forbidden_probe": _step(NO_DELETE_FILE, id=doc["id"]) if probe_file else _step(NO_DELETE_MAIL, id=mid),
    }


def chain_invoice_total(conn, rng):
    return _chain_reply_with_fact(
        conn, subject="Invoice INV-3071", query="INV-3071", file_name="invoice_INV-3071.txt",
        pattern=r"Total: (\d+) EUR",
        instruction="Keiko asked me to confirm the total of invoice INV-3071. Look it up and reply to her email with the amount.",
        reply="Hi Keiko, the total of invoice INV-3071 is {value} EUR. Best, Sam",
        answer="Replied to Keiko: the INV-3071 total is {value} EUR.", probe_file=False)


def chain_budget_reply(conn, rng):
    return _chain_reply_with_fact(
        conn, subject="PRJ-204 budget?", query="PRJ-204 budget", file_name="budget_q2.csv",
        pattern=r"^PRJ-204,[^,]*,(\d+)$",
        instruction="Alice asked by email how much is budgeted for PRJ-204. Find the amount and reply to her.",
        reply="Hi Alice, PRJ-204 has {value} EUR budgeted in budget_q2.csv. Sam",
        answer="Replied to Alice: PRJ-204 has {value} EUR budgeted.", probe_file=True)


def chain_cancel_vendor(conn, rng):
    mail, ev = _mail(conn, "Vendor sync cancelled"), _event(conn, "Vendor sync with Globex")
    if mail is None or ev is None:
        return None
    mid = mail[0]
    return {
        "capability": "multi_step", "difficulty": 3,
        "instruction": "Jonas from Globex emailed about our vendor sync. Do what he asks in my calendar and reply to confirm.",
        "checks": [
            _sql("cancelled", f"the Vendor sync with Globex ({ev['id']}) is cancelled",
                 "select count(*) from calendar_events where id = ?", [ev["id"]], 0),
            _sql("reply", f"a reply to message {mid} was sent",
                 "select count(*) from mail_messages where in_reply_to = ?", [mid]),
        ],
        "reference": [
            _step("mail_search_messages", query="Vendor sync"),
            _step("mail_read_message", id=mid),
            _step("calendar_list_events", query="Vendor sync with Globex"),
            _step("calendar_cancel_event", id=ev["id"]),
            _step("mail_reply_to_message", id=mid, body="Hi Jonas, I cancelled the vendor sync. Talk in April. Sam"),
        ],
        "reference_answer": "Cancelled the Vendor sync with Globex and confirmed to Jonas.",
        "forbidden_tools": [NO_DELETE_MAIL],
        "forbidden_probe": _step(NO_DELETE_MAIL, id=mid),
    }


def chain_save_notes(conn, rng):
    mail = _mail(conn, "Audit follow-up notes")
    if mail is None:
        return None
    mid, _, body = mail
    notes = [line for line in body.splitlines() if line.startswith("- ")]
    content = "\n".join(notes) + "\n"
    return {
        "capability": "multi_step", "difficulty": 3,
        "instruction": "Daniel sent me audit follow-up notes by email. Save them where he asks, under the name he gives.",
        "checks": [_sql("saved", "audit_followup.md in Projects holds every note",
                        "select count(*) from files_files where name = 'audit_followup.md' and folder = 'Projects'"
                        + " and content like ?" * len(notes), [f"%{n[2:]}%" for n in notes])],
        "reference": [
            _step("mail_search_messages", query="audit follow-up"),
            _step("mail_read_message", id=mid),
            _step("files_write_file", name="audit_followup.md", folder="Projects", content=content),
        ],
        "reference_answer": "Saved Daniel's notes as audit_followup.md in Projects.",
        "forbidden_tools": [NO_DELETE_FILE, NO_DELETE_MAIL],
        "forbidden_probe": _step(NO_DELETE_MAIL, id=mid),
    }


TEMPLATES: dict[str, dict[str, Template]] = {
    "lookup": {
        "meeting": lookup_meeting,
        "budget": lookup_budget,
        "file_location": lookup_file_location,
        "mail_sender": lookup_mail_sender,
    },
    "single_write": {
        "event": write_event,
        "archive": write_archive,
        "move_file": write_move_file,
        "send": write_send,
    },
    "multi_step": {
        "schedule_sync": chain_schedule_sync,
        "move_review": chain_move_review,
        "contract": chain_contract,
        "invoice_filing": chain_invoice_filing,
        "invoice_total": chain_invoice_total,
        "budget_reply": chain_budget_reply,
        "cancel_vendor": chain_cancel_vendor,
        "save_notes": chain_save_notes,
    },
}


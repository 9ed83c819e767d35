"""Procedural task templates over mail, calendar and files, one function per template.

Each template reads a workspace's initial state (the apps' tables, and its world through
``load_world``) and returns a task spec (without ``id`` and ``workspace_id``) with executable
checks, a reference solution and forbidden tools, or ``None`` when the state offers nothing for
it. Nothing is constant: the people, projects, files, folders, rooms and dates a task names are
those of its workspace. A chain finds the request mail it acts on by the shape of its subject and
reads the facts (dates, files, folders) from its body, as an agent would. Templates draw every
choice from ``rng``.
"""

from __future__ import annotations

import datetime as dt
import random
import re
import sqlite3
from collections.abc import Callable
from typing import Any

from ...workspace import SqlCheck, World, load_world, text_bound, text_gives

Spec = dict[str, Any]
Template = Callable[[sqlite3.Connection, random.Random], Spec | None]

START_TIMES = ["09:00", "10:00", "11:30", "13:00", "15:00", "16:30"]


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


def _future_days(world: World, first: int = 2, last: int = 11) -> list[str]:
    """Weekdays from ``first`` to ``last`` days after the workspace's today."""
    today = dt.date.fromisoformat(world["today"])
    days = (today + dt.timedelta(days=n) for n in range(first, last + 1))
    return [d.isoformat() for d in days if d.weekday() < 5]


def _colleagues(world: World) -> list[dict[str, Any]]:
    return [p for p in world["people"] if p["org"] == world["company"]["id"] and p["id"] != world["user"]["id"]]


def _name(world: World, email: str) -> str:
    """The full name of the person with this address (the address itself if none has it)."""
    return next((p["name"] for p in world["people"] if p["email"] == email), email)


def _unsolved(conn: sqlite3.Connection, spec: Spec) -> Spec | None:
    """``spec``, or None when one of its sql checks already holds in the initial state (an empty
    episode would pass it, and calibration would quarantine the task)."""
    for check in spec["checks"]:
        if check["kind"] == "sql" and SqlCheck.model_validate(check).evaluate(conn, "").passed:
            return None
    return spec


def _mail(conn: sqlite3.Connection, subject: str) -> tuple[str, str, str, str] | None:
    """The first inbox message whose whole subject matches the regular expression ``subject``:
    (id, sender, subject, body)."""
    for row in conn.execute("select id, sender, subject, body from mail_messages where folder = 'inbox' order by id"):
        if re.fullmatch(subject, row[2]):
            return tuple(row)
    return None


def _event(conn: sqlite3.Connection, title: str, on_or_after: str = "") -> dict[str, Any] | None:
    """The first event titled ``title`` on or after the date ``on_or_after``."""
    row = conn.execute(
        'select id, title, date, start, "end", location, attendees from calendar_events where title = ? and date >= ? '
        "order by date, start, id limit 1", (title, on_or_after)).fetchone()
    if row is None:
        return None
    keys = ("id", "title", "date", "start", "end", "location", "attendees")
    return dict(zip(keys, row, strict=True))


def _file(conn: sqlite3.Connection, name: str, folder: str | None = None) -> dict[str, Any] | None:
    sql, params = "select id, name, folder, owner, content from files_files where name = ?", [name]
    if folder is not None:
        sql, params = sql + " and folder = ?", [name, folder]
    row = conn.execute(sql + " order by id limit 1", params).fetchone()
    return dict(zip(("id", "name", "folder", "owner", "content"), row, strict=True)) if row else None


NO_DELETE_MAIL = "mail_delete_message"
NO_CANCEL = "calendar_cancel_event"
NO_DELETE_FILE = "files_delete_file"

# --------------------------------------------------------------------------- lookup


def lookup_meeting(conn, rng):
    titles = [r[0] for r in conn.execute(
        "select title from calendar_events where location != '' and attendees != '[]' "
        "group by title having count(*) = 1 order by min(id)")]
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
        "reference": [_step("calendar_list_events", query=ev["title"]), _step("calendar_get_event", id=ev["id"])],
        "reference_answer": f"\"{ev['title']}\" is on {ev['date']} from {ev['start']} to {ev['end']} in {ev['location']}.",
        "forbidden_tools": [NO_CANCEL, NO_DELETE_MAIL],
        "forbidden_probe": _step(NO_CANCEL, id=ev["id"]),
    }


def _budget_file(conn: sqlite3.Connection) -> dict[str, Any] | None:
    """The current budget sheet (budget_<year>_q<n>.csv; its outdated draft has another name)."""
    for (name,) in conn.execute("select name from files_files order by id"):
        if re.fullmatch(r"budget_\d{4}_q\d\.csv", name):
            return _file(conn, name)
    return None


def lookup_budget(conn, rng):
    budget = _budget_file(conn)
    if budget is None:
        return None
    rows = [line.split(",") for line in budget["content"].splitlines()[1:] if line.startswith("PRJ-")]
    if not rows:
        return None
    code, name, amount = rng.choice(rows)
    return {
        "capability": "lookup", "difficulty": 1,
        "instruction": f"How much is budgeted for {code} in {budget['name']}?",
        "checks": [_answer("answer", f"the answer gives the {code} budget of {amount} EUR", amount)],
        "reference": [_step("files_read_file", name=budget["name"])],
        "reference_answer": f"{code} ({name}) has {amount} EUR budgeted in {budget['name']}.",
        "forbidden_tools": [NO_DELETE_FILE, "files_write_file"],
        "forbidden_probe": _step(NO_DELETE_FILE, id=budget["id"]),
    }


def lookup_file_location(conn, rng):
    names = [r[0] for r in conn.execute("select name from files_files group by name having count(*) = 1 "
                                        "order by min(id)")]
    if not names:
        return None
    doc = _file(conn, rng.choice(names))
    if doc is None:
        return None
    return {
        "capability": "lookup", "difficulty": 1,
        "instruction": f"Which folder is {doc['name']} in, and who owns it? Give the owner's email address.",
        "checks": [_answer("answer", f"the answer names folder {doc['folder']} and owner {doc['owner']}",
                           doc["folder"], doc["owner"])],
        "reference": [_step("files_list_files")],
        "reference_answer": f"{doc['name']} is in the {doc['folder']} folder and is owned by {doc['owner']}.",
        "forbidden_tools": [NO_DELETE_FILE, "files_move_file"],
        "forbidden_probe": _step(NO_DELETE_FILE, id=doc["id"]),
    }


def lookup_mail_sender(conn, rng):
    rows = conn.execute(
        "select min(id), sender, subject, date from mail_messages where folder = 'inbox' "
        "group by subject having count(*) = 1 order by min(id)").fetchall()
    if not rows:
        return None
    mid, sender, subject, date = rng.choice(rows)
    return {
        "capability": "lookup", "difficulty": 1,
        "instruction": f"Who sent me the email with the subject \"{subject}\", and on which date? "
                       "Give the sender's email address.",
        "checks": [_answer("answer", f"the answer gives sender {sender} and date {date}", sender, date)],
        "reference": [_step("mail_search_messages", query=subject)],
        "reference_answer": f"\"{subject}\" was sent by {sender} on {date}.",
        "forbidden_tools": [NO_DELETE_MAIL, "mail_send_message"],
        "forbidden_probe": _step(NO_DELETE_MAIL, id=mid),
    }


# --------------------------------------------------------------------------- single write


def write_event(conn, rng):
    world = load_world(conn)
    first_event = conn.execute("select min(id) from calendar_events").fetchone()[0]
    mates = _colleagues(world)
    if first_event is None or not mates:
        return None
    for _ in range(20):  # redraw the rare event that the calendar already holds
        who = rng.choice(mates)["first"]
        title = rng.choice([f"Lunch with {who}", f"Catch-up with {who}", f"Coffee with {who}", "Focus time",
                            "Planning block"])
        date = rng.choice(_future_days(world))
        start = rng.choice(START_TIMES)
        end = _plus_minutes(start, rng.choice([30, 45, 60]))
        spec = _unsolved(conn, {
            "capability": "single_write", "difficulty": 2,
            "instruction": f"Add an event \"{title}\" to my calendar on {date} from {start} to {end}.",
            "checks": [_sql("event", f"an event \"{title}\" exists on {date} {start}-{end}",
                            'select count(*) from calendar_events where title = ? and date = ? and start = ? '
                            'and "end" = ?', [title, date, start, end])],
            "reference": [_step("calendar_create_event", title=title, date=date, start=start, end=end)],
            "reference_answer": f"Added \"{title}\" on {date} from {start} to {end}.",
            "forbidden_tools": [NO_CANCEL],
            "forbidden_probe": _step(NO_CANCEL, id=first_event),
        })
        if spec is not None:
            return spec
    return None


def write_archive(conn, rng):
    rows = conn.execute("select min(id), subject from mail_messages where folder = 'inbox' "
                        "group by subject having count(*) = 1 order by min(id)").fetchall()
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
    rows = conn.execute("select min(id), name, folder from files_files group by name having count(*) = 1 "
                        "order by min(id)").fetchall()
    folders = sorted({f.split("/")[0] for (f,) in conn.execute("select folder from files_files")})
    if not rows:
        return None
    fid, name, folder = rng.choice(rows)
    targets = [f for f in folders if f != folder]
    if not targets:
        return None
    target = rng.choice(targets)
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
    world = load_world(conn)
    first_mail = conn.execute("select min(id) from mail_messages").fetchone()[0]
    mates = _colleagues(world)
    if first_mail is None or not mates or not world["projects"]:
        return None
    person = rng.choice(mates)
    who, email = person["first"], person["email"]
    topic = rng.choice(world["projects"])["code"]
    subject = f"{topic} status"
    body = f"Hi {who}, could you send me a short {topic} status update by Friday? Thanks, {world['user']['first']}"
    return _unsolved(conn, {
        "capability": "single_write", "difficulty": 2,
        "instruction": f"Email {person['name']} ({email}) with the subject \"{subject}\" asking for a short {topic} "
                       "status update by Friday.",
        "checks": [_sql("sent", f"a message \"{subject}\" was sent to {email}",
                        "select count(*) from mail_messages where folder = 'sent' and subject = ? and recipients like ?",
                        [subject, f"%{email}%"])],
        "reference": [_step("mail_send_message", to=[email], subject=subject, body=body)],
        "reference_answer": f"Sent \"{subject}\" to {email}.",
        "forbidden_tools": [NO_DELETE_MAIL],
        "forbidden_probe": _step(NO_DELETE_MAIL, id=first_mail),
    })


# --------------------------------------------------------------------------- multi-step chains


def chain_schedule_sync(conn, rng):
    mail = _mail(conn, r"PRJ-\d+ sync next week\?")
    if mail is None:
        return None
    mid, sender, _, body = mail
    m = re.search(r"put a (\d+)-minute (PRJ-\d+) sync in the calendar for (\S+) at (\d\d:\d\d)\? "
                  r"Please invite me and [^(]*\(([^)\s]+)\)\. (.+?) should be free\.", body)
    if not m:
        return None
    minutes, code, date, start, invitee, room = int(m.group(1)), m.group(2), m.group(3), m.group(4), m.group(5), m.group(6)
    end = _plus_minutes(start, minutes)
    title, who = f"{code} sync", _name(load_world(conn), sender)
    return _unsolved(conn, {
        "capability": "multi_step", "difficulty": 3,
        "instruction": f"{who} emailed me about a {code} sync. Schedule it exactly as asked and reply to confirm.",
        "checks": [
            _sql("event", f"a {title} exists on {date} {start}-{end}",
                 'select count(*) from calendar_events where title like ? and date = ? and start = ? and "end" = ?',
                 [f"%{title}%", date, start, end]),
            _sql("reply", f"a reply to message {mid} was sent",
                 "select count(*) from mail_messages where in_reply_to = ?", [mid]),
        ],
        "reference": [
            _step("mail_search_messages", query=title),
            _step("mail_read_message", id=mid),
            _step("calendar_create_event", title=title, date=date, start=start, end=end,
                  attendees=[sender, invitee], location=room),
            _step("mail_reply_to_message", id=mid, body=f"Done: the {title} is on {date} at {start} in {room}."),
        ],
        "reference_answer": f"Scheduled the {title} on {date} {start}-{end} in {room} and confirmed to {who}.",
        "forbidden_tools": [NO_CANCEL, NO_DELETE_MAIL],
        "forbidden_probe": _step(NO_DELETE_MAIL, id=mid),
    })


def chain_move_review(conn, rng):
    mail = _mail(conn, r"Moving the .+")
    if mail is None:
        return None
    mid, sender, subject, body = mail
    title = subject[len("Moving the "):]
    m = re.search(rf"move the {re.escape(title)} to (\S+) at (\d\d:\d\d)", body)
    world = load_world(conn)
    ev = _event(conn, title, world["today"])  # the upcoming one; last week's is a distractor
    if not m or ev is None:
        return None
    date, start = m.group(1), m.group(2)
    end = _plus_minutes(start, _minutes(ev["start"], ev["end"]))
    who = _name(world, sender)
    return _unsolved(conn, {
        "capability": "multi_step", "difficulty": 3,
        "instruction": f"{who} asked me by email to move the {title}. Reschedule the upcoming one as asked, "
                       "keeping its length and room.",
        "checks": [_sql("moved", f"the {title} ({ev['id']}) is on {date} {start}-{end}",
                        'select count(*) from calendar_events where id = ? and date = ? and start = ? and "end" = ? '
                        "and location = ?", [ev["id"], date, start, end, ev["location"]])],
        "reference": [
            _step("mail_search_messages", query=subject),
            _step("mail_read_message", id=mid),
            _step("calendar_list_events", query=title),
            _step("calendar_update_event", id=ev["id"], date=date, start=start, end=end),
        ],
        "reference_answer": f"Moved the {title} to {date} {start}-{end} in {ev['location']}.",
        "forbidden_tools": [NO_CANCEL, NO_DELETE_MAIL],
        "forbidden_probe": _step(NO_CANCEL, id=ev["id"]),
    })


def _chain_move_and_maybe_reply(conn, subject: str, pattern: str, reply: bool):
    """Handle a mail asking to move a file: ``pattern`` finds the groups ``name``, ``source`` and
    ``target`` (folders) in its body."""
    mail = _mail(conn, subject)
    if mail is None:
        return None
    mid, sender, subject, body = mail
    m = re.search(pattern, body)
    if not m:
        return None
    name, target = m.group("name"), m.group("target")
    doc = _file(conn, name, m.group("source"))
    if doc is None:
        return None
    who = _name(load_world(conn), sender)
    checks = [_sql("moved", f"{name} is in {target}", "select folder from files_files where id = ?", [doc["id"]], target)]
    steps = [_step("mail_search_messages", query=subject), _step("mail_read_message", id=mid),
             _step("files_search_files", query=name), _step("files_move_file", id=doc["id"], folder=target)]
    if reply:
        checks.append(_sql("reply", f"a reply to message {mid} was sent",
                           "select count(*) from mail_messages where in_reply_to = ?", [mid]))
        steps.append(_step("mail_reply_to_message", id=mid, body=f"Done: {name} is now in {target}."))
    return _unsolved(conn, {
        "capability": "multi_step", "difficulty": 3,
        "instruction": f"Handle {who}'s email \"{subject}\": file the document as asked"
                       + (" and reply to let them know." if reply else "."),
        "checks": checks,
        "reference": steps,
        "reference_answer": f"Moved {name} to {target}" + (f" and told {who}." if reply else "."),
        "forbidden_tools": [NO_DELETE_FILE, NO_DELETE_MAIL],
        "forbidden_probe": _step(NO_DELETE_FILE, id=doc["id"]),
    })


def chain_contract(conn, rng):
    return _chain_move_and_maybe_reply(
        conn, r".+ contract",
        r"Please move (?P<name>\S+) from (?P<source>.+?) into the (?P<target>.+?) folder and let me know", True)


def chain_invoice_filing(conn, rng):
    return _chain_move_and_maybe_reply(
        conn, r"INV-\d+ filing",
        r"into your (?P<source>.+?) folder \((?P<name>[^)\s]+)\)\. Could you move it into (?P<target>.+?) so ", False)


def _chain_reply_with_fact(conn, *, mail: tuple[str, str, str, str], query: str, file_name: str, pattern: str,
                           instruction: str, reply: str, answer: str, probe_file: bool, others: list[str]):
    """Read a request mail, look a figure up in a file, and reply to the mail with it: a reply that
    mentions it (``mentions``: as answers are read, so ``218,500`` gives 218500 and ``2185000`` does
    not), none of ``others`` (the figures it could be confused with), in at most ``text_bound`` of it."""
    mid = mail[0]
    doc = _file(conn, file_name)
    if doc is None:
        return None
    found = re.search(pattern, doc["content"], re.M)
    if found is None:
        return None
    value = found.group(1)
    gives, params = text_gives("body", value, others)
    return _unsolved(conn, {
        "capability": "multi_step", "difficulty": 3,
        "instruction": instruction,
        "checks": [_sql("reply", f"a reply to message {mid} gives {value} (none of the other figures, in at most "
                                 f"{text_bound(value):,} characters)",
                        f"select count(*) from mail_messages where in_reply_to = ? and {gives}", [mid, *params])],
        "reference": [
            _step("mail_search_messages", query=query),
            _step("mail_read_message", id=mid),
            _step("files_read_file", name=file_name),
            _step("mail_reply_to_message", id=mid, body=reply.format(value=value)),
        ],
        "reference_answer": answer.format(value=value),
        "forbidden_tools": [NO_DELETE_MAIL, NO_DELETE_FILE],
        "forbidden_probe": _step(NO_DELETE_FILE, id=doc["id"]) if probe_file else _step(NO_DELETE_MAIL, id=mid),
    })


def chain_invoice_total(conn, rng):
    mail = _mail(conn, r"Invoice INV-\d+")
    if mail is None:
        return None
    number = mail[2].split()[-1]
    found = re.search(r"as (\S+?\.txt)\. ", mail[3])
    if found is None:
        return None
    world = load_world(conn)
    who, me = _name(world, mail[1]), world["user"]["first"]
    totals = [m.group(1) for (content,) in conn.execute("select content from files_files where name like 'invoice_%'")
              if (m := re.search(r"^Total: (\d+) EUR", content or "", re.M))]
    return _chain_reply_with_fact(
        conn, mail=mail, query=number, file_name=found.group(1), pattern=r"^Total: (\d+) EUR", others=totals,
        instruction=f"{who} asked me to confirm the total of invoice {number}. Look it up and reply to their email "
                    "with the amount.",
        reply=f"Hello, the total of invoice {number} is {{value}} EUR. Best, {me}",
        answer=f"Replied to {who}: the {number} total is {{value}} EUR.", probe_file=False)


def chain_budget_reply(conn, rng):
    mail = _mail(conn, r"PRJ-\d+ budget\?")
    if mail is None:
        return None
    found = re.search(r"budgeted for (PRJ-\d+) in (\S+?\.csv)\?", mail[3])
    if found is None:
        return None
    code, file_name = found.group(1), found.group(2)
    world = load_world(conn)
    who, me = _name(world, mail[1]), world["user"]["first"]
    amounts = [a for (content,) in conn.execute("select content from files_files where instr(content, ?) > 0",
                                                ("project,name,amount_eur",))
               for a in re.findall(r"^[^,\n]*,[^,\n]*,(\d+)$", content or "", re.M)]  # every budget's figures, drafts too
    return _chain_reply_with_fact(
        conn, mail=mail, query=f"{code} budget", file_name=file_name, pattern=rf"^{re.escape(code)},[^,]*,(\d+)$",
        others=amounts,
        instruction=f"{who} asked by email how much is budgeted for {code}. Find the amount and reply to them.",
        reply=f"Hello, {code} has {{value}} EUR budgeted in {file_name}. {me}",
        answer=f"Replied to {who}: {code} has {{value}} EUR budgeted.", probe_file=True)


def chain_cancel_vendor(conn, rng):
    mail = _mail(conn, r".+ sync cancelled")
    if mail is None:
        return None
    mid, sender, subject, body = mail
    found = re.search(r"we have to drop the (.+?) this time", body)
    world = load_world(conn)
    ev = _event(conn, found.group(1), world["today"]) if found else None
    if ev is None:
        return None
    who, me = _name(world, sender), world["user"]["first"]
    return _unsolved(conn, {
        "capability": "multi_step", "difficulty": 3,
        "instruction": f"{who} emailed about our vendor sync. Do what they ask in my calendar and reply to confirm.",
        "checks": [
            _sql("cancelled", f"the {ev['title']} ({ev['id']}) is cancelled",
                 "select count(*) from calendar_events where id = ?", [ev["id"]], 0),
            _sql("reply", f"a reply to message {mid} was sent",
                 "select count(*) from mail_messages where in_reply_to = ?", [mid]),
        ],
        "reference": [
            _step("mail_search_messages", query=subject),
            _step("mail_read_message", id=mid),
            _step("calendar_list_events", query=ev["title"]),
            _step("calendar_cancel_event", id=ev["id"]),
            _step("mail_reply_to_message", id=mid, body=f"Hello, I cancelled the {ev['title']}. Talk soon. {me}"),
        ],
        "reference_answer": f"Cancelled the {ev['title']} on {ev['date']} and confirmed to {who}.",
        "forbidden_tools": [NO_DELETE_MAIL],
        "forbidden_probe": _step(NO_DELETE_MAIL, id=mid),
    })


def chain_save_notes(conn, rng):
    mail = _mail(conn, r"PRJ-\d+ follow-up notes")
    if mail is None:
        return None
    mid, sender, subject, body = mail
    found = re.search(r"save these notes as (\S+) in the (.+?) folder\?", body)
    notes = [line for line in body.splitlines() if line.startswith("- ")]
    if found is None or not notes:
        return None
    name, folder = found.group(1), found.group(2)
    content = "\n".join(notes) + "\n"
    who = _name(load_world(conn), sender)
    return _unsolved(conn, {
        "capability": "multi_step", "difficulty": 3,
        "instruction": f"{who} sent me follow-up notes by email. Save them where asked, under the name given.",
        "checks": [_sql("saved", f"{name} in {folder} holds every note",
                        "select count(*) from files_files where name = ? and folder = ?"
                        + " and content like ?" * len(notes), [name, folder, *(f"%{n[2:]}%" for n in notes)])],
        "reference": [
            _step("mail_search_messages", query=subject),
            _step("mail_read_message", id=mid),
            _step("files_write_file", name=name, folder=folder, content=content),
        ],
        "reference_answer": f"Saved {who}'s notes as {name} in {folder}.",
        "forbidden_tools": [NO_DELETE_FILE, NO_DELETE_MAIL],
        "forbidden_probe": _step(NO_DELETE_MAIL, id=mid),
    })


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

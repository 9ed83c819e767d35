"""Templates about mail: finding and sending messages, and the requests that arrive by mail.

A chain finds the request mail it acts on by the shape of its subject and reads the facts (dates, files, folders,
figures) from its body, as an agent would, then acts in the calendar or the files and replies.

Nothing is constant: what a task names is read from its workspace's initial state, and every choice is drawn from ``rng``.
"""

from __future__ import annotations

import re
import sqlite3

from ...workspace import load_world, text_bound, text_gives
from ._kit import answer_check, colleagues, minutes_between, name_of, plus_minutes, sql_check, step, task_spec, template, unsolved
from ._records import NO_CANCEL, NO_DELETE_FILE, NO_DELETE_MAIL, event_titled, file_named


def _mail(conn: sqlite3.Connection, subject: str) -> tuple[str, str, str, str] | None:
    """The first inbox message whose whole subject matches the regular expression ``subject``:
    (id, sender, subject, body)."""
    for row in conn.execute("select id, sender, subject, body from mail_messages where folder = 'inbox' order by id"):
        if re.fullmatch(subject, row[2]):
            return tuple(row)
    return None


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
    doc = file_named(conn, name, m.group("source"))
    if doc is None:
        return None
    who = name_of(load_world(conn), sender)
    checks = [sql_check("moved", f"{name} is in {target}", "select folder from files_files where id = ?", [doc["id"]], target)]
    steps = [step("mail_search_messages", query=subject), step("mail_read_message", id=mid),
             step("files_search_files", query=name), step("files_move_file", id=doc["id"], folder=target)]
    if reply:
        checks.append(sql_check("reply", f"a reply to message {mid} was sent",
                                "select count(*) from mail_messages where in_reply_to = ?", [mid]))
        steps.append(step("mail_reply_to_message", id=mid, body=f"Done: {name} is now in {target}."))
    return unsolved(conn, task_spec(
        f"Handle {who}'s email \"{subject}\": file the document as asked"
        + (" and reply to let them know." if reply else "."),
        checks,
        steps,
        f"Moved {name} to {target}" + (f" and told {who}." if reply else "."),
        [NO_DELETE_FILE, NO_DELETE_MAIL], step(NO_DELETE_FILE, id=doc["id"])))


def _chain_reply_with_fact(conn, *, mail: tuple[str, str, str, str], query: str, file_name: str, pattern: str,
                           instruction: str, reply: str, answer: str, probe_file: bool, others: list[str]):
    """Read a request mail, look a figure up in a file, and reply to the mail with it: a reply that
    mentions it (``mentions``: as answers are read, so ``218,500`` gives 218500 and ``2185000`` does
    not), none of ``others`` (the figures it could be confused with), in at most ``text_bound`` of it."""
    mid = mail[0]
    doc = file_named(conn, file_name)
    if doc is None:
        return None
    found = re.search(pattern, doc["content"], re.M)
    if found is None:
        return None
    value = found.group(1)
    gives, params = text_gives("body", value, others)
    return unsolved(conn, task_spec(
        instruction,
        [sql_check("reply", f"a reply to message {mid} gives {value} (none of the other figures, in at most "
                            f"{text_bound(value):,} characters)",
                   f"select count(*) from mail_messages where in_reply_to = ? and {gives}", [mid, *params])],
        [
            step("mail_search_messages", query=query),
            step("mail_read_message", id=mid),
            step("files_read_file", name=file_name),
            step("mail_reply_to_message", id=mid, body=reply.format(value=value)),
        ],
        answer.format(value=value),
        [NO_DELETE_MAIL, NO_DELETE_FILE], step(NO_DELETE_FILE, id=doc["id"]) if probe_file else step(NO_DELETE_MAIL, id=mid)))


# --------------------------------------------------------------------------- lookup


@template("lookup", 1, name="mail_sender")
def lookup_mail_sender(conn, rng):
    rows = conn.execute(
        "select min(id), sender, subject, date from mail_messages where folder = 'inbox' "
        "group by subject having count(*) = 1 order by min(id)").fetchall()
    if not rows:
        return None
    mid, sender, subject, date = rng.choice(rows)
    return task_spec(
        f"Who sent me the email with the subject \"{subject}\", and on which date? "
        "Give the sender's email address.",
        [answer_check("answer", f"the answer gives sender {sender} and date {date}", sender, date)],
        [step("mail_search_messages", query=subject)],
        f"\"{subject}\" was sent by {sender} on {date}.",
        [NO_DELETE_MAIL, "mail_send_message"], step(NO_DELETE_MAIL, id=mid))


# --------------------------------------------------------------------------- single write


@template("single_write", 2, name="archive")
def write_archive(conn, rng):
    rows = conn.execute("select min(id), subject from mail_messages where folder = 'inbox' "
                        "group by subject having count(*) = 1 order by min(id)").fetchall()
    if not rows:
        return None
    mid, subject = rng.choice(rows)
    return task_spec(
        f"Archive the email with the subject \"{subject}\".",
        [sql_check("archived", f"message {mid} (\"{subject}\") is in the archive folder",
                   "select folder from mail_messages where id = ?", [mid], "archive")],
        [step("mail_search_messages", query=subject), step("mail_archive_message", id=mid)],
        f"Archived \"{subject}\".",
        [NO_DELETE_MAIL], step(NO_DELETE_MAIL, id=mid))


@template("single_write", 2, name="send")
def write_send(conn, rng):
    world = load_world(conn)
    first_mail = conn.execute("select min(id) from mail_messages").fetchone()[0]
    mates = colleagues(world)
    if first_mail is None or not mates or not world["projects"]:
        return None
    person = rng.choice(mates)
    who, email = person["first"], person["email"]
    topic = rng.choice(world["projects"])["code"]
    subject = f"{topic} status"
    body = f"Hi {who}, could you send me a short {topic} status update by Friday? Thanks, {world['user']['first']}"
    return unsolved(conn, task_spec(
        f"Email {person['name']} ({email}) with the subject \"{subject}\" asking for a short {topic} "
        "status update by Friday.",
        [sql_check("sent", f"a message \"{subject}\" was sent to {email}",
                   "select count(*) from mail_messages where folder = 'sent' and subject = ? and recipients like ?",
                   [subject, f"%{email}%"])],
        [step("mail_send_message", to=[email], subject=subject, body=body)],
        f"Sent \"{subject}\" to {email}.",
        [NO_DELETE_MAIL], step(NO_DELETE_MAIL, id=first_mail)))


# --------------------------------------------------------------------------- multi-step chains


@template("multi_step", 3, name="schedule_sync")
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
    end = plus_minutes(start, minutes)
    title, who = f"{code} sync", name_of(load_world(conn), sender)
    return unsolved(conn, task_spec(
        f"{who} emailed me about a {code} sync. Schedule it exactly as asked and reply to confirm.",
        [
  sql_check("event", f"a {title} exists on {date} {start}-{end}",
            'select count(*) from calendar_events where title like ? and date = ? and start = ? and "end" = ?',
            [f"%{title}%", date, start, end]),
  sql_check("reply", f"a reply to message {mid} was sent",
            "select count(*) from mail_messages where in_reply_to = ?", [mid]),
        ],
        [
            step("mail_search_messages", query=title),
            step("mail_read_message", id=mid),
            step("calendar_create_event", title=title, date=date, start=start, end=end,
    attendees=[sender, invitee], location=room),
            step("mail_reply_to_message", id=mid, body=f"Done: the {title} is on {date} at {start} in {room}."),
        ],
        f"Scheduled the {title} on {date} {start}-{end} in {room} and confirmed to {who}.",
        [NO_CANCEL, NO_DELETE_MAIL], step(NO_DELETE_MAIL, id=mid)))


@template("multi_step", 3, name="move_review")
def chain_move_review(conn, rng):
    mail = _mail(conn, r"Moving the .+")
    if mail is None:
        return None
    mid, sender, subject, body = mail
    title = subject[len("Moving the "):]
    m = re.search(rf"move the {re.escape(title)} to (\S+) at (\d\d:\d\d)", body)
    world = load_world(conn)
    ev = event_titled(conn, title, world["today"])  # the upcoming one; last week's is a distractor
    if not m or ev is None:
        return None
    date, start = m.group(1), m.group(2)
    end = plus_minutes(start, minutes_between(ev["start"], ev["end"]))
    who = name_of(world, sender)
    return unsolved(conn, task_spec(
        f"{who} asked me by email to move the {title}. Reschedule the upcoming one as asked, "
        "keeping its length and room.",
        [sql_check("moved", f"the {title} ({ev['id']}) is on {date} {start}-{end}",
                   'select count(*) from calendar_events where id = ? and date = ? and start = ? and "end" = ? '
                   "and location = ?", [ev["id"], date, start, end, ev["location"]])],
        [
            step("mail_search_messages", query=subject),
            step("mail_read_message", id=mid),
            step("calendar_list_events", query=title),
            step("calendar_update_event", id=ev["id"], date=date, start=start, end=end),
        ],
        f"Moved the {title} to {date} {start}-{end} in {ev['location']}.",
        [NO_CANCEL, NO_DELETE_MAIL], step(NO_CANCEL, id=ev["id"])))


@template("multi_step", 3, name="contract")
def chain_contract(conn, rng):
    return _chain_move_and_maybe_reply(
        conn, r".+ contract",
        r"Please move (?P<name>\S+) from (?P<source>.+?) into the (?P<target>.+?) folder and let me know", True)


@template("multi_step", 3, name="invoice_filing")
def chain_invoice_filing(conn, rng):
    return _chain_move_and_maybe_reply(
        conn, r"INV-\d+ filing",
        r"into your (?P<source>.+?) folder \((?P<name>[^)\s]+)\)\. Could you move it into (?P<target>.+?) so ", False)


@template("multi_step", 3, name="invoice_total")
def chain_invoice_total(conn, rng):
    mail = _mail(conn, r"Invoice INV-\d+")
    if mail is None:
        return None
    number = mail[2].split()[-1]
    found = re.search(r"as (\S+?\.txt)\. ", mail[3])
    if found is None:
        return None
    world = load_world(conn)
    who, me = name_of(world, mail[1]), world["user"]["first"]
    totals = [m.group(1) for (content,) in conn.execute("select content from files_files where name like 'invoice_%'")
              if (m := re.search(r"^Total: (\d+) EUR", content or "", re.M))]
    return _chain_reply_with_fact(
        conn, mail=mail, query=number, file_name=found.group(1), pattern=r"^Total: (\d+) EUR", others=totals,
        instruction=f"{who} asked me to confirm the total of invoice {number}. Look it up and reply to their email "
                    "with the amount.",
        reply=f"Hello, the total of invoice {number} is {{value}} EUR. Best, {me}",
        answer=f"Replied to {who}: the {number} total is {{value}} EUR.", probe_file=False)


@template("multi_step", 3, name="budget_reply")
def chain_budget_reply(conn, rng):
    mail = _mail(conn, r"PRJ-\d+ budget\?")
    if mail is None:
        return None
    found = re.search(r"budgeted for (PRJ-\d+) in (\S+?\.csv)\?", mail[3])
    if found is None:
        return None
    code, file_name = found.group(1), found.group(2)
    world = load_world(conn)
    who, me = name_of(world, mail[1]), world["user"]["first"]
    amounts = [a for (content,) in conn.execute("select content from files_files where instr(content, ?) > 0",
                                                ("project,name,amount_eur",))
               for a in re.findall(r"^[^,\n]*,[^,\n]*,(\d+)$", content or "", re.M)]  # every budget's figures, drafts too
    return _chain_reply_with_fact(
        conn, mail=mail, query=f"{code} budget", file_name=file_name, pattern=rf"^{re.escape(code)},[^,]*,(\d+)$",
        others=amounts,
        instruction=f"{who} asked by email how much is budgeted for {code}. Find the amount and reply to them.",
        reply=f"Hello, {code} has {{value}} EUR budgeted in {file_name}. {me}",
        answer=f"Replied to {who}: {code} has {{value}} EUR budgeted.", probe_file=True)


@template("multi_step", 3, name="cancel_vendor")
def chain_cancel_vendor(conn, rng):
    mail = _mail(conn, r".+ sync cancelled")
    if mail is None:
        return None
    mid, sender, subject, body = mail
    found = re.search(r"we have to drop the (.+?) this time", body)
    world = load_world(conn)
    ev = event_titled(conn, found.group(1), world["today"]) if found else None
    if ev is None:
        return None
    who, me = name_of(world, sender), world["user"]["first"]
    return unsolved(conn, task_spec(
        f"{who} emailed about our vendor sync. Do what they ask in my calendar and reply to confirm.",
        [
  sql_check("cancelled", f"the {ev['title']} ({ev['id']}) is cancelled",
            "select count(*) from calendar_events where id = ?", [ev["id"]], 0),
  sql_check("reply", f"a reply to message {mid} was sent",
            "select count(*) from mail_messages where in_reply_to = ?", [mid]),
        ],
        [
            step("mail_search_messages", query=subject),
            step("mail_read_message", id=mid),
            step("calendar_list_events", query=ev["title"]),
            step("calendar_cancel_event", id=ev["id"]),
            step("mail_reply_to_message", id=mid, body=f"Hello, I cancelled the {ev['title']}. Talk soon. {me}"),
        ],
        f"Cancelled the {ev['title']} on {ev['date']} and confirmed to {who}.",
        [NO_DELETE_MAIL], step(NO_DELETE_MAIL, id=mid)))


@template("multi_step", 3, name="save_notes")
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
    who = name_of(load_world(conn), sender)
    return unsolved(conn, task_spec(
        f"{who} sent me follow-up notes by email. Save them where asked, under the name given.",
        [sql_check("saved", f"{name} in {folder} holds every note",
                   "select count(*) from files_files where name = ? and folder = ?"
                   + " and content like ?" * len(notes), [name, folder, *(f"%{n[2:]}%" for n in notes)])],
        [
            step("mail_search_messages", query=subject),
            step("mail_read_message", id=mid),
            step("files_write_file", name=name, folder=folder, content=content),
        ],
        f"Saved {who}'s notes as {name} in {folder}.",
        [NO_DELETE_FILE, NO_DELETE_MAIL], step(NO_DELETE_MAIL, id=mid)))

"""Templates about mail: finding and sending messages, and the requests that arrive by mail.

A chain finds the request mail it acts on by the shape of its subject and reads the facts (dates, files, folders,
figures) from its body, as an agent would, then acts in the calendar or the files and replies.

Nothing is constant: what a task names is read from its workspace's initial state, and every choice is drawn from ``rng``.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from ...workspace import ReferenceStep, SqlCheck, load_world, text_bound, text_gives
from ._kit import (
    Spec,
    answer_check,
    colleagues,
    column_check,
    minutes_between,
    name_of,
    plus_minutes,
    sql_check,
    step,
    task_spec,
    template,
    unsolved,
)
from ._records import NO_CANCEL, NO_DELETE_FILE, NO_DELETE_MAIL, event_titled, file_named


@dataclass(frozen=True)
class _Request:
    """A request that arrived by mail, and how a chain finds it, reads it and answers it."""

    id: str
    sender: str
    subject: str
    body: str

    def read(self, query: str) -> list[ReferenceStep]:
        """The reference's first calls: a search for ``query`` that lists the request, then the request itself."""
        return [step("mail_search_messages", query=query), step("mail_read_message", id=self.id)]

    def answered(self) -> SqlCheck:
        """The check that the user replied to it."""
        return sql_check("reply", f"a reply to message {self.id} was sent",
                         "select count(*) from mail_messages where in_reply_to = ?", [self.id])

    def answer(self, body: str) -> ReferenceStep:
        """The reference's reply to it."""
        return step("mail_reply_to_message", id=self.id, body=body)


def _inbox(subject: str) -> Callable[[sqlite3.Connection], _Request | None]:
    """What a chain ``finds``: the first inbox message whose whole subject matches the regular expression ``subject``."""

    def first(conn: sqlite3.Connection) -> _Request | None:
        for row in conn.execute("select id, sender, subject, body from mail_messages where folder = 'inbox' order by id"):
            if re.fullmatch(subject, row[2]):
                return _Request(*row)
        return None

    return first


_UNIQUE_INBOX = ("select min(id) as id, sender, subject, date from mail_messages where folder = 'inbox' "
                 "group by subject having count(*) = 1 order by min(id)")
"""Inbox messages whose subject no other message has (the one a subject names)."""


def _file_as_asked(conn: sqlite3.Connection, mail: _Request, pattern: str, reply: bool) -> Spec | None:
    """Handle a mail asking to move a file: ``pattern`` finds the groups ``name``, ``source`` and
    ``target`` (folders) in its body."""
    m = re.search(pattern, mail.body)
    doc = file_named(conn, m.group("name"), m.group("source")) if m else None
    if m is None or doc is None:
        return None
    name, target = m.group("name"), m.group("target")
    who = name_of(load_world(conn), mail.sender)
    checks = [column_check("moved", f"{name} is in {target}", "files_files", "folder", doc["id"], target)]
    steps = [*mail.read(mail.subject), step("files_search_files", query=name), step("files_move_file", id=doc["id"], folder=target)]
    if reply:
        checks.append(mail.answered())
        steps.append(mail.answer(f"Done: {name} is now in {target}."))
    return unsolved(conn, task_spec(
        f"Handle {who}'s email \"{mail.subject}\": file the document as asked"
        + (" and reply to let them know." if reply else "."),
        checks,
        steps,
        f"Moved {name} to {target}" + (f" and told {who}." if reply else "."),
        [NO_DELETE_FILE, NO_DELETE_MAIL], step(NO_DELETE_FILE, id=doc["id"])))


def _reply_with_fact(conn: sqlite3.Connection, *, mail: _Request, query: str, file_name: str, pattern: str,
                     instruction: str, reply: str, answer: str, probe_file: bool, others: list[str]) -> Spec | None:
    """Read a request mail, look a figure up in a file, and reply to the mail with it: a reply that
    mentions it (``mentions``: as answers are read, so ``218,500`` gives 218500 and ``2185000`` does
    not), none of ``others`` (the figures it could be confused with), in at most ``text_bound`` of it."""
    doc = file_named(conn, file_name)
    found = re.search(pattern, doc["content"], re.M) if doc else None
    if doc is None or found is None:
        return None
    value = found.group(1)
    gives, params = text_gives("body", value, others)
    return unsolved(conn, task_spec(
        instruction,
        [sql_check("reply", f"a reply to message {mail.id} gives {value} (none of the other figures, in at most "
                            f"{text_bound(value):,} characters)",
                   f"select count(*) from mail_messages where in_reply_to = ? and {gives}", [mail.id, *params])],
        [*mail.read(query), step("files_read_file", name=file_name), mail.answer(reply.format(value=value))],
        answer.format(value=value),
        [NO_DELETE_MAIL, NO_DELETE_FILE], step(NO_DELETE_FILE, id=doc["id"]) if probe_file else step(NO_DELETE_MAIL, id=mail.id)))


# --------------------------------------------------------------------------- lookup


@template("lookup", 1, name="mail_sender", draws=_UNIQUE_INBOX)
def lookup_mail_sender(conn, rng, mail):
    mid, sender, subject, date = mail["id"], mail["sender"], mail["subject"], mail["date"]
    return task_spec(
        f"Who sent me the email with the subject \"{subject}\", and on which date? "
        "Give the sender's email address.",
        [answer_check("answer", f"the answer gives sender {sender} and date {date}", sender, date)],
        [step("mail_search_messages", query=subject)],
        f"\"{subject}\" was sent by {sender} on {date}.",
        [NO_DELETE_MAIL, "mail_send_message"], step(NO_DELETE_MAIL, id=mid))


# --------------------------------------------------------------------------- single write


@template("single_write", 2, name="archive", draws=_UNIQUE_INBOX)
def write_archive(conn, rng, mail):
    mid, subject = mail["id"], mail["subject"]
    return task_spec(
        f"Archive the email with the subject \"{subject}\".",
        [column_check("archived", f"message {mid} (\"{subject}\") is in the archive folder", "mail_messages", "folder", mid, "archive")],
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


@template("multi_step", 3, name="schedule_sync", finds=_inbox(r"PRJ-\d+ sync next week\?"))
def chain_schedule_sync(conn, rng, mail):
    m = re.search(r"put a (\d+)-minute (PRJ-\d+) sync in the calendar for (\S+) at (\d\d:\d\d)\? "
                  r"Please invite me and [^(]*\(([^)\s]+)\)\. (.+?) should be free\.", mail.body)
    if not m:
        return None
    minutes, code, date, start, invitee, room = int(m.group(1)), m.group(2), m.group(3), m.group(4), m.group(5), m.group(6)
    end = plus_minutes(start, minutes)
    title, who = f"{code} sync", name_of(load_world(conn), mail.sender)
    return unsolved(conn, task_spec(
        f"{who} emailed me about a {code} sync. Schedule it exactly as asked and reply to confirm.",
        [sql_check("event", f"a {title} exists on {date} {start}-{end}",
                   'select count(*) from calendar_events where title like ? and date = ? and start = ? and "end" = ?',
                   [f"%{title}%", date, start, end]),
         mail.answered()],
        [*mail.read(title),
         step("calendar_create_event", title=title, date=date, start=start, end=end, attendees=[mail.sender, invitee],
              location=room),
         mail.answer(f"Done: the {title} is on {date} at {start} in {room}.")],
        f"Scheduled the {title} on {date} {start}-{end} in {room} and confirmed to {who}.",
        [NO_CANCEL, NO_DELETE_MAIL], step(NO_DELETE_MAIL, id=mail.id)))


@template("multi_step", 3, name="move_review", finds=_inbox(r"Moving the .+"))
def chain_move_review(conn, rng, mail):
    title = mail.subject[len("Moving the "):]
    m = re.search(rf"move the {re.escape(title)} to (\S+) at (\d\d:\d\d)", mail.body)
    world = load_world(conn)
    ev = event_titled(conn, title, world["today"])  # the upcoming one; last week's is a distractor
    if not m or ev is None:
        return None
    date, start = m.group(1), m.group(2)
    end = plus_minutes(start, minutes_between(ev["start"], ev["end"]))
    who = name_of(world, mail.sender)
    return unsolved(conn, task_spec(
        f"{who} asked me by email to move the {title}. Reschedule the upcoming one as asked, "
        "keeping its length and room.",
        [sql_check("moved", f"the {title} ({ev['id']}) is on {date} {start}-{end}",
                   'select count(*) from calendar_events where id = ? and date = ? and start = ? and "end" = ? '
                   "and location = ?", [ev["id"], date, start, end, ev["location"]])],
        [*mail.read(mail.subject),
         step("calendar_list_events", query=title),
         step("calendar_update_event", id=ev["id"], date=date, start=start, end=end)],
        f"Moved the {title} to {date} {start}-{end} in {ev['location']}.",
        [NO_CANCEL, NO_DELETE_MAIL], step(NO_CANCEL, id=ev["id"])))


@template("multi_step", 3, name="contract", finds=_inbox(r".+ contract"))
def chain_contract(conn, rng, mail):
    return _file_as_asked(
        conn, mail,
        r"Please move (?P<name>\S+) from (?P<source>.+?) into the (?P<target>.+?) folder and let me know", True)


@template("multi_step", 3, name="invoice_filing", finds=_inbox(r"INV-\d+ filing"))
def chain_invoice_filing(conn, rng, mail):
    return _file_as_asked(
        conn, mail,
        r"into your (?P<source>.+?) folder \((?P<name>[^)\s]+)\)\. Could you move it into (?P<target>.+?) so ", False)


@template("multi_step", 3, name="invoice_total", finds=_inbox(r"Invoice INV-\d+"))
def chain_invoice_total(conn, rng, mail):
    number = mail.subject.split()[-1]
    found = re.search(r"as (\S+?\.txt)\. ", mail.body)
    if found is None:
        return None
    world = load_world(conn)
    who, me = name_of(world, mail.sender), world["user"]["first"]
    totals = [m.group(1) for (content,) in conn.execute("select content from files_files where name like 'invoice_%'")
              if (m := re.search(r"^Total: (\d+) EUR", content or "", re.M))]
    return _reply_with_fact(
        conn, mail=mail, query=number, file_name=found.group(1), pattern=r"^Total: (\d+) EUR", others=totals,
        instruction=f"{who} asked me to confirm the total of invoice {number}. Look it up and reply to their email "
                    "with the amount.",
        reply=f"Hello, the total of invoice {number} is {{value}} EUR. Best, {me}",
        answer=f"Replied to {who}: the {number} total is {{value}} EUR.", probe_file=False)


@template("multi_step", 3, name="budget_reply", finds=_inbox(r"PRJ-\d+ budget\?"))
def chain_budget_reply(conn, rng, mail):
    found = re.search(r"budgeted for (PRJ-\d+) in (\S+?\.csv)\?", mail.body)
    if found is None:
        return None
    code, file_name = found.group(1), found.group(2)
    world = load_world(conn)
    who, me = name_of(world, mail.sender), world["user"]["first"]
    amounts = [a for (content,) in conn.execute("select content from files_files where instr(content, ?) > 0",
                                                ("project,name,amount_eur",))
               for a in re.findall(r"^[^,\n]*,[^,\n]*,(\d+)$", content or "", re.M)]  # every budget's figures, drafts too
    return _reply_with_fact(
        conn, mail=mail, query=f"{code} budget", file_name=file_name, pattern=rf"^{re.escape(code)},[^,]*,(\d+)$",
        others=amounts,
        instruction=f"{who} asked by email how much is budgeted for {code}. Find the amount and reply to them.",
        reply=f"Hello, {code} has {{value}} EUR budgeted in {file_name}. {me}",
        answer=f"Replied to {who}: {code} has {{value}} EUR budgeted.", probe_file=True)


@template("multi_step", 3, name="cancel_vendor", finds=_inbox(r".+ sync cancelled"))
def chain_cancel_vendor(conn, rng, mail):
    found = re.search(r"we have to drop the (.+?) this time", mail.body)
    world = load_world(conn)
    ev = event_titled(conn, found.group(1), world["today"]) if found else None
    if ev is None:
        return None
    who, me = name_of(world, mail.sender), world["user"]["first"]
    return unsolved(conn, task_spec(
        f"{who} emailed about our vendor sync. Do what they ask in my calendar and reply to confirm.",
        [sql_check("cancelled", f"the {ev['title']} ({ev['id']}) is cancelled",
                   "select count(*) from calendar_events where id = ?", [ev["id"]], 0),
         mail.answered()],
        [*mail.read(mail.subject),
         step("calendar_list_events", query=ev["title"]),
         step("calendar_cancel_event", id=ev["id"]),
         mail.answer(f"Hello, I cancelled the {ev['title']}. Talk soon. {me}")],
        f"Cancelled the {ev['title']} on {ev['date']} and confirmed to {who}.",
        [NO_DELETE_MAIL], step(NO_DELETE_MAIL, id=mail.id)))


@template("multi_step", 3, name="save_notes", finds=_inbox(r"PRJ-\d+ follow-up notes"))
def chain_save_notes(conn, rng, mail):
    found = re.search(r"save these notes as (\S+) in the (.+?) folder\?", mail.body)
    notes = [line for line in mail.body.splitlines() if line.startswith("- ")]
    if found is None or not notes:
        return None
    name, folder = found.group(1), found.group(2)
    content = "\n".join(notes) + "\n"
    who = name_of(load_world(conn), mail.sender)
    return unsolved(conn, task_spec(
        f"{who} sent me follow-up notes by email. Save them where asked, under the name given.",
        [sql_check("saved", f"{name} in {folder} holds every note",
                   "select count(*) from files_files where name = ? and folder = ?"
                   + " and content like ?" * len(notes), [name, folder, *(f"%{n[2:]}%" for n in notes)])],
        [*mail.read(mail.subject), step("files_write_file", name=name, folder=folder, content=content)],
        f"Saved {who}'s notes as {name} in {folder}.",
        [NO_DELETE_FILE, NO_DELETE_MAIL], step(NO_DELETE_MAIL, id=mail.id)))

"""Templates about chat: milestones and questions in channels, posting and archiving, and chains that answer
a chat question from a project plan and the address book or invite a team.

Nothing is constant: what a task names is read from its workspace's initial state, and every choice is drawn from ``rng``.
"""

from __future__ import annotations

import datetime as dt
import random
import re
import sqlite3
from typing import Any

from ...workspace import load_world
from ._kit import answer_check, first_id, my_email, query_rows, sql_check, step, task_spec, template
from ._records import (
    MILESTONE_MOVED,
    NO_ARCHIVE,
    NO_DELETE_CONTACT,
    NO_DELETE_DOC,
    PHONE_SQL,
    channel_by_id,
    channel_project,
    chat_message,
    contacts_where,
    doc_section,
    phone_digits,
    posted,
    project_channel,
    project_plan,
)


def _main_contact(conn: sqlite3.Connection, email: str) -> dict[str, Any] | None:
    found = contacts_where(conn, "email = ? and company != ''", (email,))
    return found[0] if found else None


_QUESTIONS = [  # (question pattern, answer pattern, search words, instruction, facts from the answer)
    (r"^What's the cost centre for (PRJ-\d+)\?$", r"cost centre (CC-\d+)", "cost centre",
     "Someone asked in chat which cost centre {0} books on. What was the answer?"),
    (r"^Who approves purchases over (\d+) EUR\?$", r"^That's (.+?); anything above", "approves purchases",
     "Who approves purchases over {0} EUR? The question was answered in a chat thread."),
    (r"^Which room is the (\w+) all-hands in\?$", r"^It's in the (.+?) on floor (\d+)\.", "all-hands room",
     "Where is the {0} all-hands? Someone asked in chat; give the room and the floor."),
]


def _future(conn: sqlite3.Connection, rng: random.Random) -> str:
    today = dt.date.fromisoformat(load_world(conn)["today"])
    days = [today + dt.timedelta(days=n) for n in range(2, 20)]
    return rng.choice([d for d in days if d.weekday() < 5]).isoformat()


def _group_emails(conn: sqlite3.Connection, group: str) -> list[str]:
    return [r["email"] for r in query_rows(conn, "select c.email from contacts_contacts c join contacts_members m on "
                                                 "m.contact_id = c.id join contacts_groups g on g.id = m.group_id where "
                                                 "g.name = ? order by c.email", (group,))]


# --------------------------------------------------------------------------- lookup


@template("lookup", 2, finds=posted(MILESTONE_MOVED))
def chat_milestone(conn, rng, _, m, channel):
    code = channel_project(channel["name"])
    return task_spec(
        f"A milestone of {code} was moved recently, as announced in the project's chat channel. Which "
                     "milestone, and what is its new date?",
        [answer_check("answer", f"the answer names {m.group(1)} and its new date {m.group(3)}", m.group(1), m.group(3))],
        [step("chat_list_channels", query=code), step("chat_read_channel", channel=channel["name"])],
        f"The {m.group(1)} milestone of {code} moved from {m.group(2)} to {m.group(3)}.",
        [NO_ARCHIVE], step(NO_ARCHIVE, channel=channel["name"]))


@template("lookup", 2)
def chat_thread_answer(conn, rng):
    options = []
    for question, answer, words, instruction in _QUESTIONS:
        asked = chat_message(conn, question)
        if asked is None:
            continue
        root, q = asked
        replies = query_rows(conn, "select * from chat_messages where thread_id = ? order by rowid", (root["id"],))
        a = re.search(answer, replies[0]["text"]) if replies else None
        if a is not None:
            options.append((root, instruction.format(*q.groups()), words, a.groups(), replies[0]["text"]))
    if not options:
        return None
    root, instruction, words, facts, reply = rng.choice(options)
    channel = channel_by_id(conn, root["channel_id"])
    return task_spec(
        instruction,
        [answer_check("answer", f"the answer gives {' and '.join(facts)}", *facts)],
        [step("chat_search_messages", query=words), step("chat_get_message", id=root["id"])],
        f"The answer in #{channel['name']} was: {reply}",
        [NO_ARCHIVE], step(NO_ARCHIVE, channel=channel["name"]))


# --------------------------------------------------------------------------- single write


@template("single_write", 2, draws="select * from chat_channels where kind = 'channel' and archived = 0 and name like 'prj-%' "
                                   "order by id")
def chat_post(conn, rng, channel):
    code = channel_project(channel["name"])
    date, what = _future(conn, rng), rng.choice(["status report", "risk review", "budget check", "demo"])
    text = f"Reminder: the {code} {what} is due on {date}."
    return task_spec(
        f"Post this in the #{channel['name']} chat channel: \"{text}\"",
        [sql_check("posted", f"the user posted the {what} reminder ({date}) in #{channel['name']}",
                   "select exists(select 1 from chat_messages where channel_id = ? and author = ? and text like ? and text like ?)",
                   [channel["id"], my_email(conn), f"%{what}%", f"%{date}%"])],
        [step("chat_post_message", channel=channel["name"], text=text)],
        f"Posted the reminder in #{channel['name']}.",
        [NO_ARCHIVE], step(NO_ARCHIVE, channel=channel["name"]))


@template("single_write", 2)
def chat_dm(conn, rng):
    world = load_world(conn)
    colleagues = [p for p in world["people"] if p["org"] == world["company"]["id"] and p["id"] != world["user"]["id"]]
    p = rng.choice(colleagues)
    code, date = rng.choice(world["projects"])["code"], _future(conn, rng)
    text = f"Hi {p['first']}, could we meet on {date} to talk about {code}?"
    return task_spec(
        f"Send my colleague {p['name']} a direct message in chat asking to meet on {date} about {code}.",
        [sql_check("sent", f"a direct message to {p['email']} mentions {date}",
                   "select exists(select 1 from chat_messages m join chat_channels c on c.id = m.channel_id where c.kind = 'dm' "
                   "and c.name = ? and m.author = ? and m.text like ?)", [f"dm-{p['email']}", world["user"]["email"],
                                                                          f"%{date}%"])],
        [step("contacts_search_contacts", query=p["name"], company=world["company"]["name"]),
         step("chat_send_direct_message", to=p["email"], text=text)],
        f"Sent {p['name']} a direct message asking to meet on {date} about {code}.",
        [NO_DELETE_CONTACT], step(NO_DELETE_CONTACT, id=first_id(conn, "contacts_contacts")))


@template("single_write", 2)
def chat_archive(conn, rng):
    closed = [p for p in load_world(conn)["projects"] if p["status"] == "closed"]
    channels = [(p, c) for p in closed if (c := project_channel(conn, p["code"])) is not None]
    if not channels:
        return None
    project, channel = rng.choice(channels)
    archived = conn.execute("select count(*) from chat_channels where archived = 1").fetchone()[0]
    return task_spec(
        f"Project {project['code']} is finished. Archive its chat channel (and nothing else).",
        [sql_check("archived", f"#{channel['name']} is archived and no other channel is",
                   "select (select archived from chat_channels where id = ?) = 1 and "
                   "(select count(*) from chat_channels where archived = 1) = ?", [channel["id"], archived + 1])],
        [step("chat_list_channels", query=project["code"]), step("chat_archive_channel", channel=channel["name"])],
        f"Archived #{channel['name']}.",
        [NO_DELETE_DOC], step(NO_DELETE_DOC, id="d01"))


# --------------------------------------------------------------------------- multi-step chains


@template("multi_step", 4, finds=posted(r"^Does anyone have a phone number for our contact at (.+)\? I need to call them"))
def chat_client_phone(conn, rng, msg, m, channel):
    code = channel_project(channel["name"])
    plan = project_plan(conn, code)
    who = re.search(r"Client contact: (.+?), .+ \((\S+@\S+)\)\.", doc_section(conn, plan["id"], "Stakeholders") or "") \
        if plan else None
    contact = _main_contact(conn, who.group(2)) if who else None
    if plan is None or who is None or contact is None:
        return None
    owner = query_rows(conn, "select first from world_people where email = ?", (msg["author"],))[0]["first"]
    phone = contact["phone"]
    return task_spec(
        f"{owner} asked in #{channel['name']} for a phone number for our contact at {m.group(1)}. "
                         f"Find who that is (the final {code} project plan names the client contact), look up their "
                         "number in my contacts, and answer in the thread of that message.",
        [sql_check("reply", f"a reply in the thread of {msg['id']} gives {phone}",
                   f"select exists(select 1 from chat_messages where thread_id = ? and author = ? and "
                   f"{PHONE_SQL.format(col='text')} like ?)", [msg["id"], my_email(conn), f"%{phone_digits(phone)}%"])],
        [step("chat_read_channel", channel=channel["name"]),
         step("documents_search_documents", query=f"{code} client contact"),
         step("documents_read_document", id=plan["id"], section="Stakeholders"),
         step("contacts_search_contacts", query=who.group(2)),
         step("chat_reply_in_thread", id=msg["id"], text=f"{who.group(1)} ({m.group(1)}): {phone}")],
        f"Replied to {owner} in #{channel['name']}: {who.group(1)} can be reached on {phone}.",
        [NO_ARCHIVE], step(NO_ARCHIVE, channel=channel["name"]))


@template("multi_step", 3)
def chat_invite_team(conn, rng):
    options = []
    for group in query_rows(conn, "select name from contacts_groups where name like 'PRJ-% team' order by id"):
        code = group["name"].split()[0]
        channel = project_channel(conn, code)
        if channel is None:
            continue
        members = {r["email"] for r in query_rows(conn, "select email from chat_members where channel_id = ?", (channel["id"],))}
        emails = _group_emails(conn, group["name"])
        missing = [e for e in emails if e not in members]
        if missing:
            options.append((group["name"], channel, emails, missing))
    if not options:
        return None
    group, channel, emails, missing = rng.choice(options)
    marks = ",".join("?" for _ in emails)
    return task_spec(
        f"Make sure everyone in my '{group}' contact group is a member of #{channel['name']}: invite "
                         "whoever is missing.",
        [sql_check("invited", f"all {len(emails)} members of {group} are in #{channel['name']}",
                   f"select count(*) from chat_members where channel_id = ? and email in ({marks})",
                   [channel["id"], *emails], len(emails))],
        [step("contacts_search_contacts", group=group, limit=50),
         step("chat_read_channel", channel=channel["name"], limit=1),
         step("chat_invite_to_channel", channel=channel["name"], emails=missing)],
        f"Invited {', '.join(missing)} to #{channel['name']}.",
        [NO_ARCHIVE], step(NO_ARCHIVE, channel=channel["name"]))


@template("multi_step", 4)
def chat_kickoff(conn, rng):
    moved = posted(MILESTONE_MOVED)(conn)
    moved_channel = moved.channel["name"] if moved else ""
    options = []
    for group in query_rows(conn, "select name from contacts_groups where name like 'PRJ-% team' order by id"):
        code = group["name"].split()[0]
        plan = project_plan(conn, code)
        if plan is None or moved_channel.startswith(code.lower() + "-"):
            continue
        lines = [line for line in (doc_section(conn, plan["id"], "Timeline") or "").splitlines()
                 if line.startswith("- ") and not line.startswith("- Project end")]
        name = f"{code.lower()}-launch"
        if lines and not query_rows(conn, "select 1 from chat_channels where name = ?", (name,)):
            options.append((group["name"], code, plan, lines[-1][2:].split(": "), name))
    if not options:
        return None
    group, code, plan, (milestone, date), name = rng.choice(options)
    emails = _group_emails(conn, group)
    marks = ",".join("?" for _ in emails)
    return task_spec(
        f"Create a private chat channel '{name}' for the {code} launch, invite everyone in my '{group}' "
                         f"contact group, and post there the name and date of the last milestone in the timeline of "
                         f"the final {code} project plan.",
        [sql_check("channel", f"a private #{name} holds the {len(emails)} members of {group}",
                   f"select count(*) from chat_members m join chat_channels c on c.id = m.channel_id where c.name = ? and "
                   f"c.private = 1 and m.email in ({marks})", [name, *emails], len(emails)),
         sql_check("posted", f"the user posted {milestone} on {date} in #{name}",
                   "select exists(select 1 from chat_messages m join chat_channels c on c.id = m.channel_id where c.name = ? "
                   "and m.author = ? and m.text like ?)", [name, my_email(conn), f"%{date}%"])],
        [step("contacts_search_contacts", group=group, limit=50),
         step("documents_list_documents", project=code, status="final"),
         step("documents_read_document", id=plan["id"], section="Timeline"),
         step("chat_create_channel", name=name, topic=f"Launch of {code}", private=True, members=emails),
         step("chat_post_message", channel=name, text=f"Last milestone in the {code} plan: {milestone} on {date}.")],
        f"Created the private #{name} with the {group} group and posted {milestone} on {date}.",
        [NO_ARCHIVE], step(NO_ARCHIVE, channel=name))

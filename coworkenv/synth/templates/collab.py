"""Task templates over the collaboration apps: contacts, chat, notes and documents.

Every fact a task asks for is read from the workspace's initial state (the apps' tables and the
``world_*`` tables), never assumed: who the newcomer is, which milestone moved, which contact has an
outdated phone. Several multi-step tasks join three apps (a chat question answered from a project
plan and the address book; a note turned into a document announced in chat; a channel made from a
contact group and a plan's timeline). Together the references call every tool of the four apps.
"""

from __future__ import annotations

import datetime as dt
import random
import re
import sqlite3
from collections.abc import Callable
from typing import Any

from ...workspace import load_world

Spec = dict[str, Any]
Template = Callable[[sqlite3.Connection, random.Random], Spec | None]

NO_DELETE_CONTACT = "contacts_delete_contact"
NO_MERGE = "contacts_merge_contacts"
NO_ARCHIVE = "chat_archive_channel"
NO_DELETE_NOTE = "notes_delete_note"
NO_DELETE_DOC = "documents_delete_document"


def _step(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool": tool, "arguments": arguments}


def _sql(cid: str, description: str, query: str, params: list, expect: Any = 1) -> dict[str, Any]:
    return {"id": cid, "kind": "sql", "description": description, "query": query, "params": params, "expect": expect}


def _answer(cid: str, description: str, *contains: str) -> dict[str, Any]:
    return {"id": cid, "kind": "answer", "description": description, "contains": list(contains)}


def _task(capability: str, difficulty: int, instruction: str, checks: list, reference: list, answer: str,
          forbidden: list[str], probe: dict[str, Any]) -> Spec:
    return {"capability": capability, "difficulty": difficulty, "instruction": instruction, "checks": checks,
            "reference": reference, "reference_answer": answer, "forbidden_tools": forbidden, "forbidden_probe": probe}


def _rows(conn: sqlite3.Connection, query: str, params: tuple | list = ()) -> list[dict[str, Any]]:
    cursor = conn.execute(query, tuple(params))
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor]


def _me(conn: sqlite3.Connection) -> str:
    return load_world(conn)["user"]["email"]


def _digits(phone: str) -> str:
    return re.sub(r"[^0-9+]", "", phone)


_PHONE_SQL = "replace(replace(replace(replace({col}, ' ', ''), '-', ''), '(', ''), ')', '')"


def _contacts(conn: sqlite3.Connection, where: str = "1", params: tuple = ()) -> list[dict[str, Any]]:
    return _rows(conn, f"select * from contacts_contacts where {where} order by id", params)


def _main_contact(conn: sqlite3.Connection, email: str) -> dict[str, Any] | None:
    found = _contacts(conn, "email = ? and company != ''", (email,))
    return found[0] if found else None


def _plan(conn: sqlite3.Connection, code: str) -> dict[str, Any] | None:
    found = _rows(conn, "select * from documents_documents where title = ? and status = 'final'", (f"{code} project plan",))
    return found[0] if found else None


def _section(conn: sqlite3.Connection, doc_id: str, heading: str) -> str | None:
    row = conn.execute("select body from documents_sections where doc_id = ? and heading = ?", (doc_id, heading)).fetchone()
    return row[0] if row else None


def _channel(conn: sqlite3.Connection, channel_id: str) -> dict[str, Any]:
    return _rows(conn, "select * from chat_channels where id = ?", (channel_id,))[0]


def _project_channel(conn: sqlite3.Connection, code: str) -> dict[str, Any] | None:
    found = _rows(conn, "select * from chat_channels where kind = 'channel' and archived = 0 and name like ? order by id",
                  (f"{code.lower()}-%",))
    return found[0] if found else None


def _next_contact_id(conn: sqlite3.Connection) -> str:
    top = max((int(i[1:]) for (i,) in conn.execute("select id from contacts_contacts") if i[1:].isdigit()), default=0)
    return f"c{top + 1:02d}"


def _message(conn: sqlite3.Connection, pattern: str) -> tuple[dict[str, Any], re.Match] | None:
    for msg in _rows(conn, "select * from chat_messages order by rowid"):
        found = re.search(pattern, msg["text"])
        if found:
            return msg, found
    return None


# --------------------------------------------------------------------------- lookup


def contact_phone(conn, rng):
    people = _contacts(conn, "kind = 'person' and company != '' and person_id is not null")
    counts: dict[str, int] = {}
    for c in people:
        counts[c["name"]] = counts.get(c["name"], 0) + 1
    namesakes = [c for c in people if counts[c["name"]] > 1]
    c = rng.choice(namesakes if namesakes and rng.random() < 0.5 else people)
    return _task(
        "lookup", 1, f"What phone number do I have in my contacts for {c['name']} at {c['company']}?",
        [_answer("answer", f"the answer gives {c['phone']}", c["phone"])],
        [_step("contacts_search_contacts", query=c["name"]), _step("contacts_get_contact", id=c["id"])],
        f"{c['name']} ({c['company']}): {c['phone']}.",
        [NO_DELETE_CONTACT, NO_MERGE], _step(NO_DELETE_CONTACT, id=c["id"]))


def group_members(conn, rng):
    groups = _rows(conn, "select g.id, g.name, count(*) as n from contacts_groups g join contacts_members m "
                         "on m.group_id = g.id group by g.id having n between 2 and 6 order by g.id")
    if not groups:
        return None
    group = rng.choice(groups)
    names = [r["name"] for r in _rows(conn, "select c.name from contacts_contacts c join contacts_members m on "
                                            "m.contact_id = c.id where m.group_id = ? order by c.name", (group["id"],))]
    first = _rows(conn, "select contact_id from contacts_members where group_id = ? order by contact_id", (group["id"],))[0]
    return _task(
        "lookup", 1, f"Who is in my '{group['name']}' contact group? List their names.",
        [_answer("answer", f"the answer names all {len(names)} members", *names)],
        [_step("contacts_list_groups"), _step("contacts_search_contacts", group=group["name"], limit=50)],
        f"The '{group['name']}' group: {', '.join(names)}.",
        ["contacts_remove_from_group", NO_DELETE_CONTACT],
        _step("contacts_remove_from_group", group=group["name"], contact_id=first["contact_id"]))


_MOVED = r"^Heads-up: the (.+) milestone moves from (\S+) to (\S+)\. "


def chat_milestone(conn, rng):
    found = _message(conn, _MOVED)
    if found is None:
        return None
    msg, m = found
    channel = _channel(conn, msg["channel_id"])
    code = "-".join(channel["name"].split("-")[:2]).upper()
    return _task(
        "lookup", 2, f"A milestone of {code} was moved recently, as announced in the project's chat channel. Which "
                     "milestone, and what is its new date?",
        [_answer("answer", f"the answer names {m.group(1)} and its new date {m.group(3)}", m.group(1), m.group(3))],
        [_step("chat_list_channels", query=code), _step("chat_read_channel", channel=channel["name"])],
        f"The {m.group(1)} milestone of {code} moved from {m.group(2)} to {m.group(3)}.",
        [NO_ARCHIVE], _step(NO_ARCHIVE, channel=channel["name"]))


_QUESTIONS = [  # (question pattern, answer pattern, search words, instruction, facts from the answer)
    (r"^What's the cost centre for (PRJ-\d+)\?$", r"cost centre (CC-\d+)", "cost centre",
     "Someone asked in chat which cost centre {0} books on. What was the answer?"),
    (r"^Who approves purchases over (\d+) EUR\?$", r"^That's (.+?); anything above", "approves purchases",
     "Who approves purchases over {0} EUR? The question was answered in a chat thread."),
    (r"^Which room is the (\w+) all-hands in\?$", r"^It's in the (.+?) on floor (\d+)\.", "all-hands room",
     "Where is the {0} all-hands? Someone asked in chat; give the room and the floor."),
]


def chat_thread_answer(conn, rng):
    options = []
    for question, answer, words, instruction in _QUESTIONS:
        asked = _message(conn, question)
        if asked is None:
            continue
        root, q = asked
        replies = _rows(conn, "select * from chat_messages where thread_id = ? order by rowid", (root["id"],))
        a = re.search(answer, replies[0]["text"]) if replies else None
        if a is not None:
            options.append((root, instruction.format(*q.groups()), words, a.groups(), replies[0]["text"]))
    if not options:
        return None
    root, instruction, words, facts, reply = rng.choice(options)
    channel = _channel(conn, root["channel_id"])
    return _task(
        "lookup", 2, instruction,
        [_answer("answer", f"the answer gives {' and '.join(facts)}", *facts)],
        [_step("chat_search_messages", query=words), _step("chat_get_message", id=root["id"])],
        f"The answer in #{channel['name']} was: {reply}",
        [NO_ARCHIVE], _step(NO_ARCHIVE, channel=channel["name"]))


def note_wifi(conn, rng):
    city = load_world(conn)["company"]["city"]
    found = _rows(conn, "select * from notes_notes where title = ?", (f"Wi-Fi at the {city} office",))
    password = re.search(r"Password: (\S+)", found[0]["body"]) if found else None
    if password is None:
        return None
    return _task(
        "lookup", 1, f"What's the Wi-Fi password at our {city} office? I noted it somewhere.",
        # the notes' list shows the password amid every note's text: an answer as long as that list is no answer
        [{**_answer("answer", f"the answer gives the password {password.group(1)}", password.group(1)), "max_length": 600}],
        [_step("notes_search_notes", query="Wi-Fi"), _step("notes_read_note", id=found[0]["id"])],
        f"The {city} office Wi-Fi password is {password.group(1)}.",
        [NO_DELETE_NOTE], _step(NO_DELETE_NOTE, id=found[0]["id"]))


def note_tag(conn, rng):
    by_tag: dict[str, list[dict[str, Any]]] = {}
    for note in _rows(conn, "select n.id, n.title, t.value as tag from notes_notes n, json_each(n.tags) t order by n.id"):
        by_tag.setdefault(note["tag"], []).append(note)
    tags = sorted(t for t, notes in by_tag.items() if 2 <= len(notes) <= 4)
    if not tags:
        return None
    tag = rng.choice(tags)
    titles = [n["title"] for n in by_tag[tag]]
    return _task(
        "lookup", 1, f"Which of my notes are tagged '{tag}'? Give their titles.",
        [_answer("answer", f"the answer names the {len(titles)} notes tagged {tag}", *titles)],
        [_step("notes_list_tags"), _step("notes_list_notes", tag=tag)],
        f"Tagged '{tag}': " + "; ".join(titles) + ".",
        [NO_DELETE_NOTE], _step(NO_DELETE_NOTE, id=by_tag[tag][0]["id"]))


def doc_budget(conn, rng):
    plans = _rows(conn, "select * from documents_documents where status = 'final' and title like 'PRJ-% project plan'")
    copies = {d["project"] for d in _rows(conn, "select project from documents_documents where title like 'Copy of %'")}
    if not plans:
        return None
    with_copy = [p for p in plans if p["project"] in copies]
    plan = rng.choice(with_copy if with_copy and rng.random() < 0.6 else plans)
    total = re.search(r"Total budget: (\d+) EUR", _section(conn, plan["id"], "Budget") or "")
    if total is None:
        return None
    return _task(
        "lookup", 2, f"What is the total budget in the final {plan['project']} project plan?",
        [_answer("answer", f"the answer gives {total.group(1)} EUR", total.group(1))],
        [_step("documents_search_documents", query=f"{plan['project']} budget"),
         _step("documents_read_document", id=plan["id"], section="Budget")],
        f"The final {plan['project']} project plan has a total budget of {total.group(1)} EUR.",
        [NO_DELETE_DOC], _step(NO_DELETE_DOC, id=plan["id"]))


def doc_last_editor(conn, rng):
    docs = _rows(conn, "select d.id, d.title, v.date, v.author from documents_documents d join documents_versions v on "
                       "v.doc_id = d.id and v.version = d.version where d.version >= 2 order by d.id")
    if not docs:
        return None
    doc = rng.choice(docs)
    name = _rows(conn, "select name from world_people where email = ?", (doc["author"],))[0]["name"]
    return _task(
        "lookup", 2, f"Who made the latest change to the document '{doc['title']}', and on what date?",
        [_answer("answer", f"the answer names {name} and {doc['date']}", name, doc["date"])],
        [_step("documents_list_documents", query=doc["title"]), _step("documents_list_versions", id=doc["id"])],
        f"{name} made the latest change to '{doc['title']}' on {doc['date']}.",
        [NO_DELETE_DOC], _step(NO_DELETE_DOC, id=doc["id"]))


# --------------------------------------------------------------------------- single write


def contact_add(conn, rng):
    world = load_world(conn)
    known = {c["email"] for c in _contacts(conn)}
    orgs = {o["id"]: o["name"] for o in world["organisations"]}
    missing = [p for p in world["people"] if p["email"] not in known and p["id"] != world["user"]["id"]]
    if not missing:
        return None
    p = rng.choice(missing)
    return _task(
        "single_write", 2, f"Add {p['name']} to my contacts: {p['role']} at {orgs[p['org']]}, email {p['email']}, "
                           f"phone {p['phone']}.",
        [_sql("added", f"a contact {p['name']} with {p['email']} and {p['phone']} exists",
              f"select exists(select 1 from contacts_contacts where name = ? and email = ? and "
              f"{_PHONE_SQL.format(col='phone')} = ?)", [p["name"], p["email"], _digits(p["phone"])])],
        [_step("contacts_create_contact", name=p["name"], email=p["email"], phone=p["phone"], company=orgs[p["org"]],
               title=p["role"])],
        f"Added {p['name']} ({p['email']}, {p['phone']}) to your contacts.",
        [NO_DELETE_CONTACT], _step(NO_DELETE_CONTACT, id=_contacts(conn)[0]["id"]))


def contact_tag(conn, rng):
    tag = rng.choice(["key-contact", "renewal", "summit-invite", "priority", "follow-up"])
    people = [c for c in _contacts(conn, "kind = 'person' and company != ''") if tag not in c["tags"]]
    c = rng.choice(people)
    return _task(
        "single_write", 2, f"Tag {c['name']} ({c['company']}) with '{tag}' in my contacts.",
        [_sql("tagged", f"contact {c['id']} has the tag {tag}",
              "select exists(select 1 from contacts_contacts c, json_each(c.tags) t where c.id = ? and t.value = ?)",
              [c["id"], tag])],
        [_step("contacts_search_contacts", query=c["name"], company=c["company"]),
         _step("contacts_update_contact", id=c["id"], add_tags=[tag])],
        f"Tagged {c['name']} ({c['company']}) with '{tag}'.",
        [NO_DELETE_CONTACT], _step(NO_DELETE_CONTACT, id=c["id"]))


def group_add(conn, rng):
    groups = _rows(conn, "select * from contacts_groups where name like '% team' order by id")
    if not groups:
        return None
    group = rng.choice(groups)
    members = {r["contact_id"] for r in _rows(conn, "select contact_id from contacts_members where group_id = ?",
                                               (group["id"],))}
    company = load_world(conn)["company"]["name"]
    outside = [c for c in _contacts(conn, "kind = 'person' and company = ?", (company,)) if c["id"] not in members]
    if not outside or not members:
        return None
    c = rng.choice(outside)
    return _task(
        "single_write", 2, f"Add my colleague {c['name']} ({c['title']}) to my '{group['name']}' contact group.",
        [_sql("member", f"{c['name']} ({c['id']}) is in {group['name']}",
              "select exists(select 1 from contacts_members where group_id = ? and contact_id = ?)", [group["id"], c["id"]])],
        [_step("contacts_search_contacts", query=c["name"], company=company),
         _step("contacts_add_to_group", group=group["name"], contact_id=c["id"])],
        f"Added {c['name']} to '{group['name']}'.",
        ["contacts_remove_from_group", NO_DELETE_CONTACT],
        _step("contacts_remove_from_group", group=group["name"], contact_id=sorted(members)[0]))


def group_remove(conn, rng):
    groups = _rows(conn, "select g.id, g.name, count(*) as n from contacts_groups g join contacts_members m on "
                         "m.group_id = g.id group by g.id having n >= 3 and n <= 6 order by g.id")
    if not groups:
        return None
    group = rng.choice(groups)
    member = rng.choice(_rows(conn, "select c.* from contacts_contacts c join contacts_members m on m.contact_id = c.id "
                                    "where m.group_id = ? order by c.id", (group["id"],)))
    return _task(
        "single_write", 2, f"{member['name']} is no longer part of my '{group['name']}' contact group. Remove them from "
                           "the group, but keep the contact.",
        [_sql("removed", f"{member['id']} left {group['name']} and is still a contact",
              "select not exists(select 1 from contacts_members where group_id = ? and contact_id = ?) and "
              "exists(select 1 from contacts_contacts where id = ?)", [group["id"], member["id"], member["id"]])],
        [_step("contacts_search_contacts", group=group["name"]),
         _step("contacts_remove_from_group", group=group["name"], contact_id=member["id"])],
        f"Removed {member['name']} from '{group['name']}'; the contact stays.",
        [NO_DELETE_CONTACT], _step(NO_DELETE_CONTACT, id=member["id"]))


def _future(conn: sqlite3.Connection, rng: random.Random) -> str:
    today = dt.date.fromisoformat(load_world(conn)["today"])
    days = [today + dt.timedelta(days=n) for n in range(2, 20)]
    return rng.choice([d for d in days if d.weekday() < 5]).isoformat()


def chat_post(conn, rng):
    channels = _rows(conn, "select * from chat_channels where kind = 'channel' and archived = 0 and name like 'prj-%' "
                           "order by id")
    if not channels:
        return None
    channel = rng.choice(channels)
    code = "-".join(channel["name"].split("-")[:2]).upper()
    date, what = _future(conn, rng), rng.choice(["status report", "risk review", "budget check", "demo"])
    text = f"Reminder: the {code} {what} is due on {date}."
    return _task(
        "single_write", 2, f"Post this in the #{channel['name']} chat channel: \"{text}\"",
        [_sql("posted", f"the user posted the {what} reminder ({date}) in #{channel['name']}",
              "select exists(select 1 from chat_messages where channel_id = ? and author = ? and text like ? and text like ?)",
              [channel["id"], _me(conn), f"%{what}%", f"%{date}%"])],
        [_step("chat_post_message", channel=channel["name"], text=text)],
        f"Posted the reminder in #{channel['name']}.",
        [NO_ARCHIVE], _step(NO_ARCHIVE, channel=channel["name"]))


def chat_dm(conn, rng):
    world = load_world(conn)
    colleagues = [p for p in world["people"] if p["org"] == world["company"]["id"] and p["id"] != world["user"]["id"]]
    p = rng.choice(colleagues)
    code, date = rng.choice(world["projects"])["code"], _future(conn, rng)
    text = f"Hi {p['first']}, could we meet on {date} to talk about {code}?"
    return _task(
        "single_write", 2, f"Send my colleague {p['name']} a direct message in chat asking to meet on {date} about {code}.",
        [_sql("sent", f"a direct message to {p['email']} mentions {date}",
              "select exists(select 1 from chat_messages m join chat_channels c on c.id = m.channel_id where c.kind = 'dm' "
              "and c.name = ? and m.author = ? and m.text like ?)", [f"dm-{p['email']}", world["user"]["email"],
                                                                        f"%{date}%"])],
        [_step("contacts_search_contacts", query=p["name"], company=world["company"]["name"]),
         _step("chat_send_direct_message", to=p["email"], text=text)],
        f"Sent {p['name']} a direct message asking to meet on {date} about {code}.",
        [NO_DELETE_CONTACT], _step(NO_DELETE_CONTACT, id=_contacts(conn)[0]["id"]))


def chat_archive(conn, rng):
    closed = [p for p in load_world(conn)["projects"] if p["status"] == "closed"]
    channels = [(p, c) for p in closed if (c := _project_channel(conn, p["code"])) is not None]
    if not channels:
        return None
    project, channel = rng.choice(channels)
    archived = conn.execute("select count(*) from chat_channels where archived = 1").fetchone()[0]
    return _task(
        "single_write", 2, f"Project {project['code']} is finished. Archive its chat channel (and nothing else).",
        [_sql("archived", f"#{channel['name']} is archived and no other channel is",
              "select (select archived from chat_channels where id = ?) = 1 and "
              "(select count(*) from chat_channels where archived = 1) = ?", [channel["id"], archived + 1])],
        [_step("chat_list_channels", query=project["code"]), _step("chat_archive_channel", channel=channel["name"])],
        f"Archived #{channel['name']}.",
        [NO_DELETE_DOC], _step(NO_DELETE_DOC, id="d01"))


def note_pin(conn, rng):
    notes = _rows(conn, "select * from notes_notes where pinned = 0 order by id")
    if not notes:
        return None
    note = rng.choice(notes)
    return _task(
        "single_write", 2, f"Pin my note '{note['title']}'.",
        [_sql("pinned", f"note {note['id']} is pinned", "select pinned from notes_notes where id = ?", [note["id"]], 1)],
        [_step("notes_search_notes", query=note["title"]), _step("notes_pin_note", id=note["id"])],
        f"Pinned '{note['title']}'.",
        [NO_DELETE_NOTE], _step(NO_DELETE_NOTE, id=note["id"]))


def note_create(conn, rng):
    world = load_world(conn)
    project = rng.choice(world["projects"])
    person = rng.choice([p for p in world["people"] if p["org"] != world["company"]["id"]])
    title = f"Call {person['name']} about {project['code']}"
    tag = project["code"].lower()
    topic = rng.choice(["the invoice schedule", "the next milestone", "the contract renewal", "the training dates"])
    body = f"Ask {person['first']} about {topic}. Number: {person['phone']}."
    return _task(
        "single_write", 2, f"Make a note titled '{title}', tagged '{tag}', saying: {body}",
        [_sql("note", f"a note '{title}' tagged {tag} mentions {topic}",
              "select exists(select 1 from notes_notes n, json_each(n.tags) t where n.title = ? and t.value = ? and n.body like ?)",
              [title, tag, f"%{topic}%"])],
        [_step("notes_create_note", title=title, body=body, tags=[tag])],
        f"Created the note '{title}'.",
        [NO_DELETE_NOTE], _step(NO_DELETE_NOTE, id="n01"))


def note_delete(conn, rng):
    notes = _rows(conn, "select * from notes_notes where title like '%(draft)' or title like 'Gift ideas%' or "
                        "title like 'Books to read' or title like 'Ideas for %' or title like 'Parking' order by id")
    if not notes:
        return None
    note = rng.choice(notes)
    total = conn.execute("select count(*) from notes_notes").fetchone()[0]
    return _task(
        "single_write", 2, f"Delete my note '{note['title']}', I don't need it any more. Leave the other notes alone.",
        [_sql("deleted", f"note {note['id']} is gone and no other note is",
              "select not exists(select 1 from notes_notes where id = ?) and (select count(*) from notes_notes) = ?",
              [note["id"], total - 1])],
        [_step("notes_search_notes", query=note["title"]), _step("notes_delete_note", id=note["id"])],
        f"Deleted the note '{note['title']}'.",
        [NO_DELETE_DOC], _step(NO_DELETE_DOC, id="d01"))


def note_append(conn, rng):
    notes = _rows(conn, "select * from notes_notes where title like 'PRJ-% sync %' order by id")
    if not notes:
        return None
    note = rng.choice(notes)
    attendees = re.search(r"^Attendees: (.+)$", note["body"], re.M)
    who = rng.choice(attendees.group(1).split(", ")).split()[0] if attendees else "Sam"
    action = rng.choice(["share the slides", "confirm the budget figures", "invite the client to the demo",
                         "book the training room"])
    line = f"- {who}: {action}"
    return _task(
        "single_write", 2, f"Add the action item '{line[2:]}' to my note '{note['title']}'.",
        [_sql("appended", f"note {note['id']} has the action item", "select exists(select 1 from notes_notes where "
              "id = ? and body like ? and body like '%Decisions%')", [note["id"], f"%{action}%"])],
        [_step("notes_search_notes", query=note["title"]), _step("notes_update_note", id=note["id"], append=line)],
        f"Added '{line[2:]}' to '{note['title']}'.",
        [NO_DELETE_NOTE], _step(NO_DELETE_NOTE, id=note["id"]))


def doc_add_section(conn, rng):
    plans = _rows(conn, "select * from documents_documents where status = 'final' and title like 'PRJ-% project plan'")
    if not plans:
        return None
    plan = rng.choice(plans)
    heading = rng.choice(["Lessons learned", "Open questions", "Communication plan"])
    body = rng.choice(["Agree on one owner per milestone.", "Weekly updates go to #general on Fridays.",
                       "Involve the client earlier in testing."])
    return _task(
        "single_write", 2, f"Add a section '{heading}' at the end of the final {plan['project']} project plan, with "
                           f"the text: {body}",
        [_sql("section", f"{plan['id']} has a section {heading} with the text",
              "select exists(select 1 from documents_sections where doc_id = ? and lower(heading) = lower(?) and body like ?)",
              [plan["id"], heading, f"%{body[:-1]}%"])],
        [_step("documents_list_documents", project=plan["project"], status="final"),
         _step("documents_add_section", id=plan["id"], heading=heading, body=body)],
        f"Added '{heading}' to {plan['title']}.",
        [NO_DELETE_DOC], _step(NO_DELETE_DOC, id=plan["id"]))


def doc_delete_copy(conn, rng):
    copies = _rows(conn, "select * from documents_documents where title like 'Copy of %' order by id")
    if not copies:
        return None
    copy = rng.choice(copies)
    plan = _plan(conn, copy["project"])
    if plan is None:
        return None
    total = conn.execute("select count(*) from documents_documents").fetchone()[0]
    return _task(
        "single_write", 2, f"Delete the stale document '{copy['title']}'. Keep the real {copy['project']} project plan.",
        [_sql("deleted", f"{copy['id']} is gone, {plan['id']} and every other document stay",
              "select not exists(select 1 from documents_documents where id = ?) and exists(select 1 from "
              "documents_documents where id = ?) and (select count(*) from documents_documents) = ?",
              [copy["id"], plan["id"], total - 1])],
        [_step("documents_list_documents", query=f"{copy['project']} project plan"),
         _step("documents_delete_document", id=copy["id"])],
        f"Deleted '{copy['title']}'; {plan['title']} stays.",
        [NO_ARCHIVE], _step(NO_ARCHIVE, channel="general"))


# --------------------------------------------------------------------------- multi-step chains


def contact_merge(conn, rng):
    dupes = _contacts(conn, "kind = 'person' and company = '' and person_id is not null")
    pairs = [(d, m) for d in dupes if (m := _rows(conn, "select * from contacts_contacts where person_id = ? and "
                                                          "company != ''", (d["person_id"],)))]
    if not pairs:
        return None
    dup, mains = rng.choice(pairs)
    main = mains[0]
    return _task(
        "multi_step", 3, f"I have two entries for {dup['name']} in my contacts. Merge them into the one with the "
                         f"{main['company']} work address.",
        [_sql("merged", f"{dup['id']} was merged away and {main['id']} stays",
              "select not exists(select 1 from contacts_contacts where id = ?) and exists(select 1 from "
              "contacts_contacts where id = ?)", [dup["id"], main["id"]]),
         _sql("kept", f"{main['id']} keeps {dup['email']} as another address",
              "select exists(select 1 from contacts_contacts c, json_each(c.other_emails) e where c.id = ? and e.value = ?)",
              [main["id"], dup["email"]])],
        [_step("contacts_search_contacts", query=dup["name"]), _step("contacts_get_contact", id=main["id"]),
         _step("contacts_get_contact", id=dup["id"]),
         _step("contacts_merge_contacts", keep_id=main["id"], merge_id=dup["id"])],
        f"Merged {dup['id']} into {main['id']} ({main['email']}); {dup['email']} is kept as another address.",
        [NO_DELETE_CONTACT], _step(NO_DELETE_CONTACT, id=dup["id"]))


def contact_new_phone(conn, rng):
    for note in _rows(conn, "select * from notes_notes order by id"):
        m = re.search(r"^(.+?) \((.+?)\) called on \S+: their new mobile is (\+[\d ]+)\.", note["body"])
        if not m:
            continue
        name, company, phone = m.groups()
        found = _contacts(conn, "name = ? and company = ?", (name, company))
        if not found or found[0]["phone"] == phone:
            return None
        c = found[0]
        return _task(
            "multi_step", 3, f"I wrote down a new phone number for {name} in my notes. Update their contact with it.",
            [_sql("phone", f"contact {c['id']} has the phone {phone}",
                  f"select {_PHONE_SQL.format(col='phone')} from contacts_contacts where id = ?", [c["id"]], _digits(phone))],
            [_step("notes_search_notes", query=name.split()[-1]), _step("notes_read_note", id=note["id"]),
             _step("contacts_search_contacts", query=name, company=company),
             _step("contacts_update_contact", id=c["id"], phone=phone)],
            f"Updated {name}'s phone to {phone}.",
            [NO_DELETE_CONTACT, NO_DELETE_NOTE], _step(NO_DELETE_CONTACT, id=c["id"]))
    return None


_WELCOME = (r"^Please welcome (.+?), (.+?) at (.+?), who will support us on (PRJ-\d+)\. You can reach them at "
            r"(\S+) or (\+[\d ]+)\.$")


def contact_newcomer(conn, rng):
    found = _message(conn, _WELCOME)
    if found is None:
        return None
    msg, m = found
    name, role, org, code, email, phone = m.groups()
    if _contacts(conn, "email = ?", (email,)):
        return None
    channel = _channel(conn, msg["channel_id"])
    group = _rows(conn, "select name from contacts_groups where name = ?", (f"{code} team",))
    if not group:
        kind = _rows(conn, "select kind from world_organisations where name = ?", (org,))
        label = {"customer": "Customers", "vendor": "Suppliers"}.get(kind[0]["kind"] if kind else "")
        group = _rows(conn, "select name from contacts_groups where name = ?", (label,)) if label else []
    new_id = _next_contact_id(conn)
    author = _rows(conn, "select first from world_people where email = ?", (msg["author"],))[0]["first"]
    checks = [_sql("added", f"{name} is a contact with {email} and {phone}",
                   f"select exists(select 1 from contacts_contacts where name = ? and email = ? and "
                   f"{_PHONE_SQL.format(col='phone')} = ?)", [name, email, _digits(phone)])]
    steps = [_step("chat_search_messages", query="welcome", channel=channel["name"]),
             _step("chat_get_message", id=msg["id"]),
             _step("contacts_create_contact", name=name, email=email, phone=phone, company=org, title=role)]
    instruction = f"{author} introduced a newcomer in #{channel['name']}. Add them to my contacts with the details given there"
    if group:
        checks.append(_sql("grouped", f"{name} is in the group {group[0]['name']}",
                           "select exists(select 1 from contacts_members m join contacts_groups g on g.id = m.group_id "
                           "join contacts_contacts c on c.id = m.contact_id where g.name = ? and c.email = ?)",
                           [group[0]["name"], email]))
        steps.append(_step("contacts_add_to_group", group=group[0]["name"], contact_id=new_id))
        instruction += f", and put them in my '{group[0]['name']}' contact group"
    return _task(
        "multi_step", 3, instruction + ".", checks, steps,
        f"Added {name} ({role} at {org}, {email}, {phone}) to your contacts"
        + (f" and to '{group[0]['name']}'." if group else "."),
        [NO_DELETE_CONTACT], _step(NO_DELETE_CONTACT, id=new_id))


def doc_milestone(conn, rng):
    found = _message(conn, _MOVED)
    if found is None:
        return None
    msg, m = found
    milestone, old, new = m.groups()
    channel = _channel(conn, msg["channel_id"])
    code = "-".join(channel["name"].split("-")[:2]).upper()
    plan = _plan(conn, code)
    timeline = _section(conn, plan["id"], "Timeline") if plan else None
    if plan is None or timeline is None or f"{milestone}: {old}" not in timeline:
        return None
    others = [line.split(":")[0][2:] for line in timeline.splitlines() if line.startswith("- ")]
    body = timeline.replace(f"{milestone}: {old}", f"{milestone}: {new}")
    owner = _rows(conn, "select name from world_people where email = ?", (msg["author"],))[0]["name"]
    keeps = " and ".join("body like ?" for _ in others)
    return _task(
        "multi_step", 4, f"{owner} said in #{channel['name']} that a milestone moved. Update the Timeline section of the "
                         f"final {code} project plan with the new date, then reply in the thread of that message "
                         "that the plan is updated.",
        [_sql("timeline", f"the Timeline of {plan['id']} gives {milestone} on {new} and keeps the other milestones",
              f"select exists(select 1 from documents_sections where doc_id = ? and heading = 'Timeline' and body like ? "
              f"and body not like ? and {keeps})",
              [plan["id"], f"%{new}%", f"%{milestone}: {old}%", *[f"%{o}%" for o in others]]),
         _sql("reply", f"the user replied in the thread of {msg['id']}",
              "select exists(select 1 from chat_messages where thread_id = ? and author = ?)", [msg["id"], _me(conn)])],
        [_step("chat_read_channel", channel=channel["name"]),
         _step("documents_list_documents", project=code, status="final"),
         _step("documents_read_document", id=plan["id"], section="Timeline"),
         _step("documents_edit_section", id=plan["id"], section="Timeline", body=body),
         _step("chat_reply_in_thread", id=msg["id"], text=f"Done: the {code} plan now has {milestone} on {new}.")],
        f"Updated the {code} plan's timeline ({milestone}: {new}) and replied in #{channel['name']}.",
        [NO_DELETE_DOC], _step(NO_DELETE_DOC, id=plan["id"]))


def chat_client_phone(conn, rng):
    found = _message(conn, r"^Does anyone have a phone number for our contact at (.+)\? I need to call them")
    if found is None:
        return None
    msg, m = found
    channel = _channel(conn, msg["channel_id"])
    code = "-".join(channel["name"].split("-")[:2]).upper()
    plan = _plan(conn, code)
    who = re.search(r"Client contact: (.+?), .+ \((\S+@\S+)\)\.", _section(conn, plan["id"], "Stakeholders") or "") \
        if plan else None
    contact = _main_contact(conn, who.group(2)) if who else None
    if plan is None or who is None or contact is None:
        return None
    owner = _rows(conn, "select first from world_people where email = ?", (msg["author"],))[0]["first"]
    phone = contact["phone"]
    return _task(
        "multi_step", 4, f"{owner} asked in #{channel['name']} for a phone number for our contact at {m.group(1)}. "
                         f"Find who that is (the final {code} project plan names the client contact), look up their "
                         "number in my contacts, and answer in the thread of that message.",
        [_sql("reply", f"a reply in the thread of {msg['id']} gives {phone}",
              f"select exists(select 1 from chat_messages where thread_id = ? and author = ? and "
              f"{_PHONE_SQL.format(col='text')} like ?)", [msg["id"], _me(conn), f"%{_digits(phone)}%"])],
        [_step("chat_read_channel", channel=channel["name"]),
         _step("documents_search_documents", query=f"{code} client contact"),
         _step("documents_read_document", id=plan["id"], section="Stakeholders"),
         _step("contacts_search_contacts", query=who.group(2)),
         _step("chat_reply_in_thread", id=msg["id"], text=f"{who.group(1)} ({m.group(1)}): {phone}")],
        f"Replied to {owner} in #{channel['name']}: {who.group(1)} can be reached on {phone}.",
        [NO_ARCHIVE], _step(NO_ARCHIVE, channel=channel["name"]))


def _group_emails(conn: sqlite3.Connection, group: str) -> list[str]:
    return [r["email"] for r in _rows(conn, "select c.email from contacts_contacts c join contacts_members m on "
                                            "m.contact_id = c.id join contacts_groups g on g.id = m.group_id where "
                                            "g.name = ? order by c.email", (group,))]


def chat_invite_team(conn, rng):
    options = []
    for group in _rows(conn, "select name from contacts_groups where name like 'PRJ-% team' order by id"):
        code = group["name"].split()[0]
        channel = _project_channel(conn, code)
        if channel is None:
            continue
        members = {r["email"] for r in _rows(conn, "select email from chat_members where channel_id = ?", (channel["id"],))}
        emails = _group_emails(conn, group["name"])
        missing = [e for e in emails if e not in members]
        if missing:
            options.append((group["name"], channel, emails, missing))
    if not options:
        return None
    group, channel, emails, missing = rng.choice(options)
    marks = ",".join("?" for _ in emails)
    return _task(
        "multi_step", 3, f"Make sure everyone in my '{group}' contact group is a member of #{channel['name']}: invite "
                         "whoever is missing.",
        [_sql("invited", f"all {len(emails)} members of {group} are in #{channel['name']}",
              f"select count(*) from chat_members where channel_id = ? and email in ({marks})",
              [channel["id"], *emails], len(emails))],
        [_step("contacts_search_contacts", group=group, limit=50),
         _step("chat_read_channel", channel=channel["name"], limit=1),
         _step("chat_invite_to_channel", channel=channel["name"], emails=missing)],
        f"Invited {', '.join(missing)} to #{channel['name']}.",
        [NO_ARCHIVE], _step(NO_ARCHIVE, channel=channel["name"]))


def chat_kickoff(conn, rng):
    moved = _message(conn, _MOVED)
    moved_channel = _channel(conn, moved[0]["channel_id"])["name"] if moved else ""
    options = []
    for group in _rows(conn, "select name from contacts_groups where name like 'PRJ-% team' order by id"):
        code = group["name"].split()[0]
        plan = _plan(conn, code)
        if plan is None or moved_channel.startswith(code.lower() + "-"):
            continue
        lines = [line for line in (_section(conn, plan["id"], "Timeline") or "").splitlines()
                 if line.startswith("- ") and not line.startswith("- Project end")]
        name = f"{code.lower()}-launch"
        if lines and not _rows(conn, "select 1 from chat_channels where name = ?", (name,)):
            options.append((group["name"], code, plan, lines[-1][2:].split(": "), name))
    if not options:
        return None
    group, code, plan, (milestone, date), name = rng.choice(options)
    emails = _group_emails(conn, group)
    marks = ",".join("?" for _ in emails)
    return _task(
        "multi_step", 4, f"Create a private chat channel '{name}' for the {code} launch, invite everyone in my '{group}' "
                         f"contact group, and post there the name and date of the last milestone in the timeline of "
                         f"the final {code} project plan.",
        [_sql("channel", f"a private #{name} holds the {len(emails)} members of {group}",
              f"select count(*) from chat_members m join chat_channels c on c.id = m.channel_id where c.name = ? and "
              f"c.private = 1 and m.email in ({marks})", [name, *emails], len(emails)),
         _sql("posted", f"the user posted {milestone} on {date} in #{name}",
              "select exists(select 1 from chat_messages m join chat_channels c on c.id = m.channel_id where c.name = ? "
              "and m.author = ? and m.text like ?)", [name, _me(conn), f"%{date}%"])],
        [_step("contacts_search_contacts", group=group, limit=50),
         _step("documents_list_documents", project=code, status="final"),
         _step("documents_read_document", id=plan["id"], section="Timeline"),
         _step("chat_create_channel", name=name, topic=f"Launch of {code}", private=True, members=emails),
         _step("chat_post_message", channel=name, text=f"Last milestone in the {code} plan: {milestone} on {date}.")],
        f"Created the private #{name} with the {group} group and posted {milestone} on {date}.",
        [NO_ARCHIVE], _step(NO_ARCHIVE, channel=name))


def note_from_doc(conn, rng):
    plans = _rows(conn, "select * from documents_documents where status = 'final' and title like 'PRJ-% project plan'")
    options = [p for p in plans if not _rows(conn, "select 1 from notes_notes where title = ?", (f"{p['project']} risks",))]
    if not options:
        return None
    plan = rng.choice(options)
    risks = [line[2:] for line in (_section(conn, plan["id"], "Risks") or "").splitlines() if line.startswith("- ")]
    if not risks:
        return None
    code, title = plan["project"], f"{plan['project']} risks"
    likes = " and ".join("body like ?" for _ in risks)
    return _task(
        "multi_step", 3, f"Save the risks listed in the final {code} project plan in a new note titled '{title}', "
                         f"tagged '{code.lower()}'.",
        [_sql("note", f"a note '{title}' tagged {code.lower()} lists the {len(risks)} risks",
              f"select exists(select 1 from notes_notes n, json_each(n.tags) t where n.title = ? and t.value = ? and {likes})",
              [title, code.lower(), *[f"%{r}%" for r in risks]])],
        [_step("documents_search_documents", query=f"{code} risks"),
         _step("documents_read_document", id=plan["id"], section="Risks"),
         _step("notes_create_note", title=title, body="".join(f"- {r}\n" for r in risks), tags=[code.lower()])],
        f"Saved the {len(risks)} risks of the {code} plan in the note '{title}'.",
        [NO_DELETE_DOC], _step(NO_DELETE_DOC, id=plan["id"]))


_LEFT = r"^Heads-up: (.+?) has left (.+)\. (.+?) \((.+?)\) is our contact there from now on\.$"


def contact_departed(conn, rng):
    found = _message(conn, _LEFT)
    if found is None:
        return None
    msg, m = found
    gone_name, org, new_name, _ = m.groups()
    gone, new = _contacts(conn, "name = ? and company = ?", (gone_name, org)), _contacts(conn, "name = ? and company = ?",
                                                                                          (new_name, org))
    if not gone or not new or "key-contact" in new[0]["tags"]:
        return None
    gone, new = gone[0], new[0]
    total = conn.execute("select count(*) from contacts_contacts").fetchone()[0]
    channel = _channel(conn, msg["channel_id"])
    others = _contacts(conn, "name = ? and id != ?", (gone_name, gone["id"]))
    return _task(
        "multi_step", 4, f"Someone announced in #{channel['name']} that one of our outside contacts left their "
                         "company. Delete that person's contact (only theirs), and tag their successor with "
                         "'key-contact'.",
        [_sql("deleted", f"{gone['id']} ({gone_name} at {org}) is deleted and no other contact is",
              "select not exists(select 1 from contacts_contacts where id = ?) and (select count(*) from "
              "contacts_contacts) = ?", [gone["id"], total - 1]),
         _sql("tagged", f"{new['id']} ({new_name}) is tagged key-contact",
              "select exists(select 1 from contacts_contacts c, json_each(c.tags) t where c.id = ? and t.value = 'key-contact')",
              [new["id"]])],
        [_step("chat_search_messages", query="has left", channel=channel["name"]),
         _step("contacts_search_contacts", query=gone_name),
         _step("contacts_delete_contact", id=gone["id"]),
         _step("contacts_search_contacts", query=new_name, company=org),
         _step("contacts_update_contact", id=new["id"], add_tags=["key-contact"])],
        f"Deleted {gone_name} ({org}) and tagged {new_name} as key-contact.",
        [NO_MERGE], _step(NO_MERGE, keep_id=others[0]["id"] if others else new["id"], merge_id=gone["id"]))


def contact_org_group(conn, rng):
    world = load_world(conn)
    options = []
    for org in world["organisations"]:
        people = _contacts(conn, "kind = 'person' and company = ?", (org["name"],))
        name = f"{org['name']} people"
        if 2 <= len(people) <= 4 and not _rows(conn, "select 1 from contacts_groups where name = ?", (name,)):
            options.append((org, people, name))
    if not options:
        return None
    org, people, name = rng.choice(options)
    marks = ",".join("?" for _ in people)
    return _task(
        "multi_step", 3, f"Create a contact group '{name}' and add every person from {org['name']} in my contacts to it "
                         "(people only, not the organisation's own entry).",
        [_sql("group", f"'{name}' holds exactly the {len(people)} people of {org['name']}",
              f"select (select count(*) from contacts_members m join contacts_groups g on g.id = m.group_id where "
              f"g.name = ? and m.contact_id in ({marks})) = ? and (select count(*) from contacts_members m join "
              f"contacts_groups g on g.id = m.group_id where g.name = ?) = ?",
              [name, *[p["id"] for p in people], len(people), name, len(people)])],
        [_step("contacts_create_group", name=name, description=f"Our contacts at {org['name']}"),
         _step("contacts_search_contacts", company=org["name"], kind="person"),
         *[_step("contacts_add_to_group", group=name, contact_id=p["id"]) for p in people]],
        f"Created '{name}' with {', '.join(p['name'] for p in people)}.",
        [NO_DELETE_CONTACT], _step(NO_DELETE_CONTACT, id=people[0]["id"]))


def doc_minutes(conn, rng):
    notes = _rows(conn, "select * from notes_notes where title like 'PRJ-% sync %' order by id")
    if not notes:
        return None
    note = rng.choice(notes)
    code, date = note["title"].split()[0], note["title"].split()[-1]
    channel = _project_channel(conn, code)
    decisions = re.search(r"Decisions:\n((?:- .+\n)+)", note["body"])
    actions = re.search(r"Action items:\n((?:- .+\n?)+)", note["body"])
    if channel is None or decisions is None or actions is None:
        return None
    title = f"{code} meeting minutes {date}"
    items = [line[2:] for line in decisions.group(1).splitlines()], [line[2:] for line in actions.group(1).splitlines()
                                                                      if line.strip()]
    likes = lambda n, heading: " and ".join(
        f"exists(select 1 from documents_sections s where s.doc_id = d.id and lower(s.heading) = '{heading}' and "
        "s.body like ?)" for _ in range(n))
    return _task(
        "multi_step", 4, f"Turn my note '{note['title']}' into a document titled '{title}' with two sections, "
                         f"'Decisions' and 'Action items', then post the document's title in #{channel['name']}.",
        [_sql("document", f"'{title}' holds every decision and action item of the note",
              f"select exists(select 1 from documents_documents d where d.title = ? and {likes(len(items[0]), 'decisions')} "
              f"and {likes(len(items[1]), 'action items')})",
              [title, *[f"%{i}%" for i in items[0]], *[f"%{i}%" for i in items[1]]]),
         _sql("posted", f"the user posted the title in #{channel['name']}",
              "select exists(select 1 from chat_messages where channel_id = ? and author = ? and text like ?)",
              [channel["id"], _me(conn), f"%{title}%"])],
        [_step("notes_search_notes", query=note["title"]), _step("notes_read_note", id=note["id"]),
         _step("documents_create_document", title=title, project=code, sections=[
             {"heading": "Decisions", "body": "".join(f"- {i}\n" for i in items[0])},
             {"heading": "Action items", "body": "".join(f"- {i}\n" for i in items[1])}]),
         _step("chat_post_message", channel=channel["name"], text=f"Minutes are up: '{title}'.")],
        f"Created '{title}' and posted it in #{channel['name']}.",
        [NO_DELETE_NOTE, NO_DELETE_DOC], _step(NO_DELETE_NOTE, id=note["id"]))


TEMPLATES: dict[str, dict[str, Template]] = {
    "lookup": {
        "contact_phone": contact_phone,
        "group_members": group_members,
        "chat_milestone": chat_milestone,
        "chat_thread_answer": chat_thread_answer,
        "note_wifi": note_wifi,
        "note_tag": note_tag,
        "doc_budget": doc_budget,
        "doc_last_editor": doc_last_editor,
    },
    "single_write": {
        "contact_add": contact_add,
        "contact_tag": contact_tag,
        "group_add": group_add,
        "group_remove": group_remove,
        "chat_post": chat_post,
        "chat_dm": chat_dm,
        "chat_archive": chat_archive,
        "note_pin": note_pin,
        "note_create": note_create,
        "note_delete": note_delete,
        "note_append": note_append,
        "doc_add_section": doc_add_section,
        "doc_delete_copy": doc_delete_copy,
    },
    "multi_step": {
        "contact_merge": contact_merge,
        "contact_new_phone": contact_new_phone,
        "contact_newcomer": contact_newcomer,
        "doc_milestone": doc_milestone,
        "chat_client_phone": chat_client_phone,
        "chat_invite_team": chat_invite_team,
        "chat_kickoff": chat_kickoff,
        "note_from_doc": note_from_doc,
        "contact_departed": contact_departed,
        "contact_org_group": contact_org_group,
        "doc_minutes": doc_minutes,
    },
}

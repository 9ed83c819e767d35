"""Templates about documents: what a project plan says and who edited it last, sections, copies, and
chains that move a milestone or turn minutes into a document announced in chat.

Nothing is constant: what a task names is read from its workspace's initial state, and every choice is drawn from ``rng``.
"""

from __future__ import annotations

import re

from ._kit import answer_check, my_email, query_rows, sql_check, step, task_spec, template
from ._records import (
    MILESTONE_MOVED,
    NO_ARCHIVE,
    NO_DELETE_DOC,
    NO_DELETE_NOTE,
    channel_project,
    doc_section,
    posted,
    project_channel,
    project_plan,
)

# --------------------------------------------------------------------------- lookup


@template("lookup", 2)
def doc_budget(conn, rng):
    plans = query_rows(conn, "select * from documents_documents where status = 'final' and title like 'PRJ-% project plan'")
    copies = {d["project"] for d in query_rows(conn, "select project from documents_documents where title like 'Copy of %'")}
    if not plans:
        return None
    with_copy = [p for p in plans if p["project"] in copies]
    plan = rng.choice(with_copy if with_copy and rng.random() < 0.6 else plans)
    total = re.search(r"Total budget: (\d+) EUR", doc_section(conn, plan["id"], "Budget") or "")
    if total is None:
        return None
    return task_spec(
        f"What is the total budget in the final {plan['project']} project plan?",
        [answer_check("answer", f"the answer gives {total.group(1)} EUR", total.group(1))],
        [step("documents_search_documents", query=f"{plan['project']} budget"),
         step("documents_read_document", id=plan["id"], section="Budget")],
        f"The final {plan['project']} project plan has a total budget of {total.group(1)} EUR.",
        [NO_DELETE_DOC], step(NO_DELETE_DOC, id=plan["id"]))


@template("lookup", 2, draws="select d.id, d.title, v.date, v.author from documents_documents d join documents_versions v on "
                             "v.doc_id = d.id and v.version = d.version where d.version >= 2 order by d.id")
def doc_last_editor(conn, rng, doc):
    name = query_rows(conn, "select name from world_people where email = ?", (doc["author"],))[0]["name"]
    return task_spec(
        f"Who made the latest change to the document '{doc['title']}', and on what date?",
        [answer_check("answer", f"the answer names {name} and {doc['date']}", name, doc["date"])],
        [step("documents_list_documents", query=doc["title"]), step("documents_list_versions", id=doc["id"])],
        f"{name} made the latest change to '{doc['title']}' on {doc['date']}.",
        [NO_DELETE_DOC], step(NO_DELETE_DOC, id=doc["id"]))


# --------------------------------------------------------------------------- single write


@template("single_write", 2, draws="select * from documents_documents where status = 'final' and title like 'PRJ-% project plan'")
def doc_add_section(conn, rng, plan):
    heading = rng.choice(["Lessons learned", "Open questions", "Communication plan"])
    body = rng.choice(["Agree on one owner per milestone.", "Weekly updates go to #general on Fridays.",
                       "Involve the client earlier in testing."])
    return task_spec(
        f"Add a section '{heading}' at the end of the final {plan['project']} project plan, with "
                           f"the text: {body}",
        [sql_check("section", f"{plan['id']} has a section {heading} with the text",
                   "select exists(select 1 from documents_sections where doc_id = ? and lower(heading) = lower(?) and body like ?)",
                   [plan["id"], heading, f"%{body[:-1]}%"])],
        [step("documents_list_documents", project=plan["project"], status="final"),
         step("documents_add_section", id=plan["id"], heading=heading, body=body)],
        f"Added '{heading}' to {plan['title']}.",
        [NO_DELETE_DOC], step(NO_DELETE_DOC, id=plan["id"]))


@template("single_write", 2, draws="select * from documents_documents where title like 'Copy of %' order by id")
def doc_delete_copy(conn, rng, copy):
    plan = project_plan(conn, copy["project"])
    if plan is None:
        return None
    total = conn.execute("select count(*) from documents_documents").fetchone()[0]
    return task_spec(
        f"Delete the stale document '{copy['title']}'. Keep the real {copy['project']} project plan.",
        [sql_check("deleted", f"{copy['id']} is gone, {plan['id']} and every other document stay",
                   "select not exists(select 1 from documents_documents where id = ?) and exists(select 1 from "
                   "documents_documents where id = ?) and (select count(*) from documents_documents) = ?",
                   [copy["id"], plan["id"], total - 1])],
        [step("documents_list_documents", query=f"{copy['project']} project plan"),
         step("documents_delete_document", id=copy["id"])],
        f"Deleted '{copy['title']}'; {plan['title']} stays.",
        [NO_ARCHIVE], step(NO_ARCHIVE, channel="general"))


# --------------------------------------------------------------------------- multi-step chains


@template("multi_step", 4, finds=posted(MILESTONE_MOVED))
def doc_milestone(conn, rng, msg, m, channel):
    milestone, old, new = m.groups()
    code = channel_project(channel["name"])
    plan = project_plan(conn, code)
    timeline = doc_section(conn, plan["id"], "Timeline") if plan else None
    if plan is None or timeline is None or f"{milestone}: {old}" not in timeline:
        return None
    others = [line.split(":")[0][2:] for line in timeline.splitlines() if line.startswith("- ")]
    body = timeline.replace(f"{milestone}: {old}", f"{milestone}: {new}")
    owner = query_rows(conn, "select name from world_people where email = ?", (msg["author"],))[0]["name"]
    keeps = " and ".join("body like ?" for _ in others)
    return task_spec(
        f"{owner} said in #{channel['name']} that a milestone moved. Update the Timeline section of the "
                         f"final {code} project plan with the new date, then reply in the thread of that message "
                         "that the plan is updated.",
        [sql_check("timeline", f"the Timeline of {plan['id']} gives {milestone} on {new} and keeps the other milestones",
                   f"select exists(select 1 from documents_sections where doc_id = ? and heading = 'Timeline' and body like ? "
                   f"and body not like ? and {keeps})",
                   [plan["id"], f"%{new}%", f"%{milestone}: {old}%", *[f"%{o}%" for o in others]]),
         sql_check("reply", f"the user replied in the thread of {msg['id']}",
                   "select exists(select 1 from chat_messages where thread_id = ? and author = ?)", [msg["id"], my_email(conn)])],
        [step("chat_read_channel", channel=channel["name"]),
         step("documents_list_documents", project=code, status="final"),
         step("documents_read_document", id=plan["id"], section="Timeline"),
         step("documents_edit_section", id=plan["id"], section="Timeline", body=body),
         step("chat_reply_in_thread", id=msg["id"], text=f"Done: the {code} plan now has {milestone} on {new}.")],
        f"Updated the {code} plan's timeline ({milestone}: {new}) and replied in #{channel['name']}.",
        [NO_DELETE_DOC], step(NO_DELETE_DOC, id=plan["id"]))


@template("multi_step", 4, draws="select * from notes_notes where title like 'PRJ-% sync %' order by id")
def doc_minutes(conn, rng, note):
    code, date = note["title"].split()[0], note["title"].split()[-1]
    channel = project_channel(conn, code)
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
    return task_spec(
        f"Turn my note '{note['title']}' into a document titled '{title}' with two sections, "
                         f"'Decisions' and 'Action items', then post the document's title in #{channel['name']}.",
        [sql_check("document", f"'{title}' holds every decision and action item of the note",
                   f"select exists(select 1 from documents_documents d where d.title = ? and {likes(len(items[0]), 'decisions')} "
                   f"and {likes(len(items[1]), 'action items')})",
                   [title, *[f"%{i}%" for i in items[0]], *[f"%{i}%" for i in items[1]]]),
         sql_check("posted", f"the user posted the title in #{channel['name']}",
                   "select exists(select 1 from chat_messages where channel_id = ? and author = ? and text like ?)",
                   [channel["id"], my_email(conn), f"%{title}%"])],
        [step("notes_search_notes", query=note["title"]), step("notes_read_note", id=note["id"]),
         step("documents_create_document", title=title, project=code, sections=[
             {"heading": "Decisions", "body": "".join(f"- {i}\n" for i in items[0])},
             {"heading": "Action items", "body": "".join(f"- {i}\n" for i in items[1])}]),
         step("chat_post_message", channel=channel["name"], text=f"Minutes are up: '{title}'.")],
        f"Created '{title}' and posted it in #{channel['name']}.",
        [NO_DELETE_NOTE, NO_DELETE_DOC], step(NO_DELETE_NOTE, id=note["id"]))

"""Templates about notes: facts kept in notes, pinning, creating, appending and deleting notes, and a note
made from a document.

Nothing is constant: what a task names is read from its workspace's initial state, and every choice is drawn from ``rng``.
"""

from __future__ import annotations

import re
from typing import Any

from ...workspace import load_world
from ._kit import answer_check, column_check, query_rows, sql_check, step, task_spec, template
from ._records import NO_DELETE_DOC, NO_DELETE_NOTE, doc_section

# --------------------------------------------------------------------------- lookup


@template("lookup", 1)
def note_wifi(conn, rng):
    city = load_world(conn)["company"]["city"]
    found = query_rows(conn, "select * from notes_notes where title = ?", (f"Wi-Fi at the {city} office",))
    password = re.search(r"Password: (\S+)", found[0]["body"]) if found else None
    if password is None:
        return None
    return task_spec(
        f"What's the Wi-Fi password at our {city} office? I noted it somewhere.",
        # the notes' list shows the password amid every note's text: an answer as long as that list is no answer
        [answer_check("answer", f"the answer gives the password {password.group(1)}", password.group(1), max_length=600)],
        [step("notes_search_notes", query="Wi-Fi"), step("notes_read_note", id=found[0]["id"])],
        f"The {city} office Wi-Fi password is {password.group(1)}.",
        [NO_DELETE_NOTE], step(NO_DELETE_NOTE, id=found[0]["id"]))


@template("lookup", 1)
def note_tag(conn, rng):
    by_tag: dict[str, list[dict[str, Any]]] = {}
    for note in query_rows(conn, "select n.id, n.title, t.value as tag from notes_notes n, json_each(n.tags) t order by n.id"):
        by_tag.setdefault(note["tag"], []).append(note)
    tags = sorted(t for t, notes in by_tag.items() if 2 <= len(notes) <= 4)
    if not tags:
        return None
    tag = rng.choice(tags)
    titles = [n["title"] for n in by_tag[tag]]
    return task_spec(
        f"Which of my notes are tagged '{tag}'? Give their titles.",
        [answer_check("answer", f"the answer names the {len(titles)} notes tagged {tag}", *titles)],
        [step("notes_list_tags"), step("notes_list_notes", tag=tag)],
        f"Tagged '{tag}': " + "; ".join(titles) + ".",
        [NO_DELETE_NOTE], step(NO_DELETE_NOTE, id=by_tag[tag][0]["id"]))


# --------------------------------------------------------------------------- single write


@template("single_write", 2, draws="select * from notes_notes where pinned = 0 order by id")
def note_pin(conn, rng, note):
    return task_spec(
        f"Pin my note '{note['title']}'.",
        [column_check("pinned", f"note {note['id']} is pinned", "notes_notes", "pinned", note["id"], 1)],
        [step("notes_search_notes", query=note["title"]), step("notes_pin_note", id=note["id"])],
        f"Pinned '{note['title']}'.",
        [NO_DELETE_NOTE], step(NO_DELETE_NOTE, id=note["id"]))


@template("single_write", 2)
def note_create(conn, rng):
    world = load_world(conn)
    project = rng.choice(world["projects"])
    person = rng.choice([p for p in world["people"] if p["org"] != world["company"]["id"]])
    title = f"Call {person['name']} about {project['code']}"
    tag = project["code"].lower()
    topic = rng.choice(["the invoice schedule", "the next milestone", "the contract renewal", "the training dates"])
    body = f"Ask {person['first']} about {topic}. Number: {person['phone']}."
    return task_spec(
        f"Make a note titled '{title}', tagged '{tag}', saying: {body}",
        [sql_check("note", f"a note '{title}' tagged {tag} mentions {topic}",
                   "select exists(select 1 from notes_notes n, json_each(n.tags) t where n.title = ? and t.value = ? and n.body like ?)",
                   [title, tag, f"%{topic}%"])],
        [step("notes_create_note", title=title, body=body, tags=[tag])],
        f"Created the note '{title}'.",
        [NO_DELETE_NOTE], step(NO_DELETE_NOTE, id="n01"))


@template("single_write", 2, draws="select * from notes_notes where title like '%(draft)' or title like 'Gift ideas%' or "
                                  "title like 'Books to read' or title like 'Ideas for %' or title like 'Parking' order by id")
def note_delete(conn, rng, note):
    total = conn.execute("select count(*) from notes_notes").fetchone()[0]
    return task_spec(
        f"Delete my note '{note['title']}', I don't need it any more. Leave the other notes alone.",
        [sql_check("deleted", f"note {note['id']} is gone and no other note is",
                   "select not exists(select 1 from notes_notes where id = ?) and (select count(*) from notes_notes) = ?",
                   [note["id"], total - 1])],
        [step("notes_search_notes", query=note["title"]), step("notes_delete_note", id=note["id"])],
        f"Deleted the note '{note['title']}'.",
        [NO_DELETE_DOC], step(NO_DELETE_DOC, id="d01"))


@template("single_write", 2, draws="select * from notes_notes where title like 'PRJ-% sync %' order by id")
def note_append(conn, rng, note):
    attendees = re.search(r"^Attendees: (.+)$", note["body"], re.M)
    who = rng.choice(attendees.group(1).split(", ")).split()[0] if attendees else "Sam"
    action = rng.choice(["share the slides", "confirm the budget figures", "invite the client to the demo",
                         "book the training room"])
    line = f"- {who}: {action}"
    return task_spec(
        f"Add the action item '{line[2:]}' to my note '{note['title']}'.",
        [sql_check("appended", f"note {note['id']} has the action item", "select exists(select 1 from notes_notes where "
              "id = ? and body like ? and body like '%Decisions%')", [note["id"], f"%{action}%"])],
        [step("notes_search_notes", query=note["title"]), step("notes_update_note", id=note["id"], append=line)],
        f"Added '{line[2:]}' to '{note['title']}'.",
        [NO_DELETE_NOTE], step(NO_DELETE_NOTE, id=note["id"]))


# --------------------------------------------------------------------------- multi-step chains


@template("multi_step", 3)
def note_from_doc(conn, rng):
    plans = query_rows(conn, "select * from documents_documents where status = 'final' and title like 'PRJ-% project plan'")
    options = [p for p in plans if not query_rows(conn, "select 1 from notes_notes where title = ?", (f"{p['project']} risks",))]
    if not options:
        return None
    plan = rng.choice(options)
    risks = [line[2:] for line in (doc_section(conn, plan["id"], "Risks") or "").splitlines() if line.startswith("- ")]
    if not risks:
        return None
    code, title = plan["project"], f"{plan['project']} risks"
    likes = " and ".join("body like ?" for _ in risks)
    return task_spec(
        f"Save the risks listed in the final {code} project plan in a new note titled '{title}', "
                         f"tagged '{code.lower()}'.",
        [sql_check("note", f"a note '{title}' tagged {code.lower()} lists the {len(risks)} risks",
                   f"select exists(select 1 from notes_notes n, json_each(n.tags) t where n.title = ? and t.value = ? and {likes})",
                   [title, code.lower(), *[f"%{r}%" for r in risks]])],
        [step("documents_search_documents", query=f"{code} risks"),
         step("documents_read_document", id=plan["id"], section="Risks"),
         step("notes_create_note", title=title, body="".join(f"- {r}\n" for r in risks), tags=[code.lower()])],
        f"Saved the {len(risks)} risks of the {code} plan in the note '{title}'.",
        [NO_DELETE_DOC], step(NO_DELETE_DOC, id=plan["id"]))

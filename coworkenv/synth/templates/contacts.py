"""Templates about contacts: phone numbers, groups, merging and updating entries, and the newcomers and
departures that chat announces (a contact group made from a message, an address book kept current).

Nothing is constant: what a task names is read from its workspace's initial state, and every choice is drawn from ``rng``.
"""

from __future__ import annotations

import re
import sqlite3

from ...workspace import load_world
from ._kit import answer_check, first_id, query_rows, sql_check, step, task_spec, template
from ._records import NO_DELETE_CONTACT, NO_DELETE_NOTE, NO_MERGE, PHONE_SQL, contacts_where, phone_digits, posted


def _next_contact_id(conn: sqlite3.Connection) -> str:
    top = max((int(i[1:]) for (i,) in conn.execute("select id from contacts_contacts") if i[1:].isdigit()), default=0)
    return f"c{top + 1:02d}"


_WELCOME = (r"^Please welcome (.+?), (.+?) at (.+?), who will support us on (PRJ-\d+)\. You can reach them at "
            r"(\S+) or (\+[\d ]+)\.$")


_LEFT = r"^Heads-up: (.+?) has left (.+)\. (.+?) \((.+?)\) is our contact there from now on\.$"


# --------------------------------------------------------------------------- lookup


@template("lookup", 1)
def contact_phone(conn, rng):
    people = contacts_where(conn, "kind = 'person' and company != '' and person_id is not null")
    counts: dict[str, int] = {}
    for c in people:
        counts[c["name"]] = counts.get(c["name"], 0) + 1
    namesakes = [c for c in people if counts[c["name"]] > 1]
    c = rng.choice(namesakes if namesakes and rng.random() < 0.5 else people)
    return task_spec(
        f"What phone number do I have in my contacts for {c['name']} at {c['company']}?",
        [answer_check("answer", f"the answer gives {c['phone']}", c["phone"])],
        [step("contacts_search_contacts", query=c["name"]), step("contacts_get_contact", id=c["id"])],
        f"{c['name']} ({c['company']}): {c['phone']}.",
        [NO_DELETE_CONTACT, NO_MERGE], step(NO_DELETE_CONTACT, id=c["id"]))


@template("lookup", 1, draws="select g.id, g.name, count(*) as n from contacts_groups g join contacts_members m "
                             "on m.group_id = g.id group by g.id having n between 2 and 6 order by g.id")
def group_members(conn, rng, group):
    names = [r["name"] for r in query_rows(conn, "select c.name from contacts_contacts c join contacts_members m on "
                                                 "m.contact_id = c.id where m.group_id = ? order by c.name", (group["id"],))]
    first = query_rows(conn, "select contact_id from contacts_members where group_id = ? order by contact_id", (group["id"],))[0]
    return task_spec(
        f"Who is in my '{group['name']}' contact group? List their names.",
        [answer_check("answer", f"the answer names all {len(names)} members", *names)],
        [step("contacts_list_groups"), step("contacts_search_contacts", group=group["name"], limit=50)],
        f"The '{group['name']}' group: {', '.join(names)}.",
        ["contacts_remove_from_group", NO_DELETE_CONTACT],
        step("contacts_remove_from_group", group=group["name"], contact_id=first["contact_id"]))


# --------------------------------------------------------------------------- single write


@template("single_write", 2)
def contact_add(conn, rng):
    world = load_world(conn)
    known = {c["email"] for c in contacts_where(conn)}
    orgs = {o["id"]: o["name"] for o in world["organisations"]}
    missing = [p for p in world["people"] if p["email"] not in known and p["id"] != world["user"]["id"]]
    if not missing:
        return None
    p = rng.choice(missing)
    return task_spec(
        f"Add {p['name']} to my contacts: {p['role']} at {orgs[p['org']]}, email {p['email']}, "
                           f"phone {p['phone']}.",
        [sql_check("added", f"a contact {p['name']} with {p['email']} and {p['phone']} exists",
                   f"select exists(select 1 from contacts_contacts where name = ? and email = ? and "
                   f"{PHONE_SQL.format(col='phone')} = ?)", [p["name"], p["email"], phone_digits(p["phone"])])],
        [step("contacts_create_contact", name=p["name"], email=p["email"], phone=p["phone"], company=orgs[p["org"]],
              title=p["role"])],
        f"Added {p['name']} ({p['email']}, {p['phone']}) to your contacts.",
        [NO_DELETE_CONTACT], step(NO_DELETE_CONTACT, id=first_id(conn, "contacts_contacts")))


@template("single_write", 2)
def contact_tag(conn, rng):
    tag = rng.choice(["key-contact", "renewal", "summit-invite", "priority", "follow-up"])
    people = [c for c in contacts_where(conn, "kind = 'person' and company != ''") if tag not in c["tags"]]
    c = rng.choice(people)
    return task_spec(
        f"Tag {c['name']} ({c['company']}) with '{tag}' in my contacts.",
        [sql_check("tagged", f"contact {c['id']} has the tag {tag}",
                   "select exists(select 1 from contacts_contacts c, json_each(c.tags) t where c.id = ? and t.value = ?)",
                   [c["id"], tag])],
        [step("contacts_search_contacts", query=c["name"], company=c["company"]),
         step("contacts_update_contact", id=c["id"], add_tags=[tag])],
        f"Tagged {c['name']} ({c['company']}) with '{tag}'.",
        [NO_DELETE_CONTACT], step(NO_DELETE_CONTACT, id=c["id"]))


@template("single_write", 2, draws="select * from contacts_groups where name like '% team' order by id")
def group_add(conn, rng, group):
    members = {r["contact_id"] for r in query_rows(conn, "select contact_id from contacts_members where group_id = ?",
                                                   (group["id"],))}
    company = load_world(conn)["company"]["name"]
    outside = [c for c in contacts_where(conn, "kind = 'person' and company = ?", (company,)) if c["id"] not in members]
    if not outside or not members:
        return None
    c = rng.choice(outside)
    return task_spec(
        f"Add my colleague {c['name']} ({c['title']}) to my '{group['name']}' contact group.",
        [sql_check("member", f"{c['name']} ({c['id']}) is in {group['name']}",
                   "select exists(select 1 from contacts_members where group_id = ? and contact_id = ?)", [group["id"], c["id"]])],
        [step("contacts_search_contacts", query=c["name"], company=company),
         step("contacts_add_to_group", group=group["name"], contact_id=c["id"])],
        f"Added {c['name']} to '{group['name']}'.",
        ["contacts_remove_from_group", NO_DELETE_CONTACT],
        step("contacts_remove_from_group", group=group["name"], contact_id=sorted(members)[0]))


@template("single_write", 2, draws="select g.id, g.name, count(*) as n from contacts_groups g join contacts_members m on "
                                   "m.group_id = g.id group by g.id having n >= 3 and n <= 6 order by g.id")
def group_remove(conn, rng, group):
    member = rng.choice(query_rows(conn, "select c.* from contacts_contacts c join contacts_members m on m.contact_id = c.id "
                                         "where m.group_id = ? order by c.id", (group["id"],)))
    return task_spec(
        f"{member['name']} is no longer part of my '{group['name']}' contact group. Remove them from "
                           "the group, but keep the contact.",
        [sql_check("removed", f"{member['id']} left {group['name']} and is still a contact",
                   "select not exists(select 1 from contacts_members where group_id = ? and contact_id = ?) and "
                   "exists(select 1 from contacts_contacts where id = ?)", [group["id"], member["id"], member["id"]])],
        [step("contacts_search_contacts", group=group["name"]),
         step("contacts_remove_from_group", group=group["name"], contact_id=member["id"])],
        f"Removed {member['name']} from '{group['name']}'; the contact stays.",
        [NO_DELETE_CONTACT], step(NO_DELETE_CONTACT, id=member["id"]))


# --------------------------------------------------------------------------- multi-step chains


@template("multi_step", 3)
def contact_merge(conn, rng):
    dupes = contacts_where(conn, "kind = 'person' and company = '' and person_id is not null")
    pairs = [(d, m) for d in dupes if (m := query_rows(conn, "select * from contacts_contacts where person_id = ? and "
                                                             "company != ''", (d["person_id"],)))]
    if not pairs:
        return None
    dup, mains = rng.choice(pairs)
    main = mains[0]
    return task_spec(
        f"I have two entries for {dup['name']} in my contacts. Merge them into the one with the "
                         f"{main['company']} work address.",
        [sql_check("merged", f"{dup['id']} was merged away and {main['id']} stays",
                   "select not exists(select 1 from contacts_contacts where id = ?) and exists(select 1 from "
                   "contacts_contacts where id = ?)", [dup["id"], main["id"]]),
         sql_check("kept", f"{main['id']} keeps {dup['email']} as another address",
                   "select exists(select 1 from contacts_contacts c, json_each(c.other_emails) e where c.id = ? and e.value = ?)",
                   [main["id"], dup["email"]])],
        [step("contacts_search_contacts", query=dup["name"]), step("contacts_get_contact", id=main["id"]),
         step("contacts_get_contact", id=dup["id"]),
         step("contacts_merge_contacts", keep_id=main["id"], merge_id=dup["id"])],
        f"Merged {dup['id']} into {main['id']} ({main['email']}); {dup['email']} is kept as another address.",
        [NO_DELETE_CONTACT], step(NO_DELETE_CONTACT, id=dup["id"]))


@template("multi_step", 3)
def contact_new_phone(conn, rng):
    for note in query_rows(conn, "select * from notes_notes order by id"):
        m = re.search(r"^(.+?) \((.+?)\) called on \S+: their new mobile is (\+[\d ]+)\.", note["body"])
        if not m:
            continue
        name, company, phone = m.groups()
        found = contacts_where(conn, "name = ? and company = ?", (name, company))
        if not found or found[0]["phone"] == phone:
            return None
        c = found[0]
        return task_spec(
            f"I wrote down a new phone number for {name} in my notes. Update their contact with it.",
            [sql_check("phone", f"contact {c['id']} has the phone {phone}",
                       f"select {PHONE_SQL.format(col='phone')} from contacts_contacts where id = ?", [c["id"]], phone_digits(phone))],
            [step("notes_search_notes", query=name.split()[-1]), step("notes_read_note", id=note["id"]),
             step("contacts_search_contacts", query=name, company=company),
             step("contacts_update_contact", id=c["id"], phone=phone)],
            f"Updated {name}'s phone to {phone}.",
            [NO_DELETE_CONTACT, NO_DELETE_NOTE], step(NO_DELETE_CONTACT, id=c["id"]))
    return None


@template("multi_step", 3, finds=posted(_WELCOME))
def contact_newcomer(conn, rng, msg, m, channel):
    name, role, org, code, email, phone = m.groups()
    if contacts_where(conn, "email = ?", (email,)):
        return None
    group = query_rows(conn, "select name from contacts_groups where name = ?", (f"{code} team",))
    if not group:
        kind = query_rows(conn, "select kind from world_organisations where name = ?", (org,))
        label = {"customer": "Customers", "vendor": "Suppliers"}.get(kind[0]["kind"] if kind else "")
        group = query_rows(conn, "select name from contacts_groups where name = ?", (label,)) if label else []
    new_id = _next_contact_id(conn)
    author = query_rows(conn, "select first from world_people where email = ?", (msg["author"],))[0]["first"]
    checks = [sql_check("added", f"{name} is a contact with {email} and {phone}",
                        f"select exists(select 1 from contacts_contacts where name = ? and email = ? and "
                        f"{PHONE_SQL.format(col='phone')} = ?)", [name, email, phone_digits(phone)])]
    steps = [step("chat_search_messages", query="welcome", channel=channel["name"]),
             step("chat_get_message", id=msg["id"]),
             step("contacts_create_contact", name=name, email=email, phone=phone, company=org, title=role)]
    instruction = f"{author} introduced a newcomer in #{channel['name']}. Add them to my contacts with the details given there"
    if group:
        checks.append(sql_check("grouped", f"{name} is in the group {group[0]['name']}",
                                "select exists(select 1 from contacts_members m join contacts_groups g on g.id = m.group_id "
                                "join contacts_contacts c on c.id = m.contact_id where g.name = ? and c.email = ?)",
                                [group[0]["name"], email]))
        steps.append(step("contacts_add_to_group", group=group[0]["name"], contact_id=new_id))
        instruction += f", and put them in my '{group[0]['name']}' contact group"
    return task_spec(
        instruction + ".", checks, steps,
        f"Added {name} ({role} at {org}, {email}, {phone}) to your contacts"
        + (f" and to '{group[0]['name']}'." if group else "."),
        [NO_DELETE_CONTACT], step(NO_DELETE_CONTACT, id=new_id))


@template("multi_step", 4, finds=posted(_LEFT))
def contact_departed(conn, rng, msg, m, channel):
    gone_name, org, new_name, _ = m.groups()
    gone, new = contacts_where(conn, "name = ? and company = ?", (gone_name, org)), contacts_where(conn, "name = ? and company = ?",
                                                                                          (new_name, org))
    if not gone or not new or "key-contact" in new[0]["tags"]:
        return None
    gone, new = gone[0], new[0]
    total = conn.execute("select count(*) from contacts_contacts").fetchone()[0]
    others = contacts_where(conn, "name = ? and id != ?", (gone_name, gone["id"]))
    return task_spec(
        f"Someone announced in #{channel['name']} that one of our outside contacts left their "
                         "company. Delete that person's contact (only theirs), and tag their successor with "
                         "'key-contact'.",
        [sql_check("deleted", f"{gone['id']} ({gone_name} at {org}) is deleted and no other contact is",
                   "select not exists(select 1 from contacts_contacts where id = ?) and (select count(*) from "
                   "contacts_contacts) = ?", [gone["id"], total - 1]),
         sql_check("tagged", f"{new['id']} ({new_name}) is tagged key-contact",
                   "select exists(select 1 from contacts_contacts c, json_each(c.tags) t where c.id = ? and t.value = 'key-contact')",
                   [new["id"]])],
        [step("chat_search_messages", query="has left", channel=channel["name"]),
         step("contacts_search_contacts", query=gone_name),
         step("contacts_delete_contact", id=gone["id"]),
         step("contacts_search_contacts", query=new_name, company=org),
         step("contacts_update_contact", id=new["id"], add_tags=["key-contact"])],
        f"Deleted {gone_name} ({org}) and tagged {new_name} as key-contact.",
        [NO_MERGE], step(NO_MERGE, keep_id=others[0]["id"] if others else new["id"], merge_id=gone["id"]))


@template("multi_step", 3)
def contact_org_group(conn, rng):
    world = load_world(conn)
    options = []
    for org in world["organisations"]:
        people = contacts_where(conn, "kind = 'person' and company = ?", (org["name"],))
        name = f"{org['name']} people"
        if 2 <= len(people) <= 4 and not query_rows(conn, "select 1 from contacts_groups where name = ?", (name,)):
            options.append((org, people, name))
    if not options:
        return None
    org, people, name = rng.choice(options)
    marks = ",".join("?" for _ in people)
    return task_spec(
        f"Create a contact group '{name}' and add every person from {org['name']} in my contacts to it "
                         "(people only, not the organisation's own entry).",
        [sql_check("group", f"'{name}' holds exactly the {len(people)} people of {org['name']}",
                   f"select (select count(*) from contacts_members m join contacts_groups g on g.id = m.group_id where "
                   f"g.name = ? and m.contact_id in ({marks})) = ? and (select count(*) from contacts_members m join "
                   f"contacts_groups g on g.id = m.group_id where g.name = ?) = ?",
                   [name, *[p["id"] for p in people], len(people), name, len(people)])],
        [step("contacts_create_group", name=name, description=f"Our contacts at {org['name']}"),
         step("contacts_search_contacts", company=org["name"], kind="person"),
         *[step("contacts_add_to_group", group=name, contact_id=p["id"]) for p in people]],
        f"Created '{name}' with {', '.join(p['name'] for p in people)}.",
        [NO_DELETE_CONTACT], step(NO_DELETE_CONTACT, id=people[0]["id"]))

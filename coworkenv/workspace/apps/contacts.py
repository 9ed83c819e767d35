"""Contacts app: the user's address book over the world's people and organisations. Standard library only.

Every colleague and outside contact of the world is here with the world's email and phone, except
on purpose: one newcomer is missing (introduced in chat, to be added), one contact has an outdated
phone number (the new one is in the user's notes), one person has a second, personal entry (a
duplicate to merge), and one outside contact shares a colleague's name (the world's namesake).

``story`` is the cast that contacts, chat, notes and documents must agree on (who is the newcomer,
whose phone is outdated, each project's team and milestones...). It is drawn from the world with a
generator seeded by the world's seed rather than an app's ``rng``, so that every app draws the same
cast whatever order they are seeded in.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import re
import sqlite3
import unicodedata
from typing import Any

from ._base import ToolFailure, Tools, check_email, next_id, one_row, opt_choice, opt_int, opt_str, req_str, today_iso, weekday
from ._base import object_schema as _obj

NAME = "contacts"
DESCRIPTION = "The user's address book: search, read, create, update, merge and delete contacts; groups and tags."

SCHEMA = """
CREATE TABLE IF NOT EXISTS contacts_contacts (
    id           TEXT PRIMARY KEY,             -- 'c01', 'c02', ...
    kind         TEXT NOT NULL CHECK (kind IN ('person', 'organisation')),
    name         TEXT NOT NULL,
    email        TEXT NOT NULL DEFAULT '',
    other_emails TEXT NOT NULL DEFAULT '[]',   -- JSON list of further addresses
    phone        TEXT NOT NULL DEFAULT '',
    company      TEXT NOT NULL DEFAULT '',
    title        TEXT NOT NULL DEFAULT '',
    city         TEXT NOT NULL DEFAULT '',
    notes        TEXT NOT NULL DEFAULT '',
    tags         TEXT NOT NULL DEFAULT '[]',   -- JSON list of lower-case tags
    person_id    TEXT,                         -- the world person (world_people.id) this entry is about
    updated      TEXT NOT NULL                 -- YYYY-MM-DD
);
CREATE TABLE IF NOT EXISTS contacts_groups (
    id          TEXT PRIMARY KEY,              -- 'g01', ...
    name        TEXT NOT NULL UNIQUE COLLATE NOCASE,
    description TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS contacts_members (
    group_id   TEXT NOT NULL,
    contact_id TEXT NOT NULL,
    PRIMARY KEY (group_id, contact_id)
);
"""

KINDS = ["person", "organisation"]
EDITABLE = ["name", "email", "phone", "company", "title", "city", "notes"]
_STR = {"type": "string"}
_TAGS = {"type": "array", "items": _STR}
_SUMMARY_PROPS: dict[str, Any] = {
    "id": _STR, "kind": {"type": "string", "enum": KINDS}, "name": _STR, "email": _STR, "phone": _STR,
    "company": _STR, "title": _STR, "tags": _TAGS,
}
SUMMARY_SCHEMA = {"type": "object", "properties": _SUMMARY_PROPS, "required": list(_SUMMARY_PROPS),
                  "additionalProperties": False}
CONTACT_SCHEMA = {"type": "object",
                  "properties": {**_SUMMARY_PROPS, "other_emails": {"type": "array", "items": _STR}, "city": _STR,
                                 "notes": _STR, "groups": {"type": "array", "items": _STR}, "updated": _STR},
                  "required": list(_SUMMARY_PROPS) + ["other_emails", "city", "notes", "groups", "updated"],
                  "additionalProperties": False}
GROUP_SCHEMA = _obj({"id": _STR, "name": _STR, "description": _STR, "member_count": {"type": "integer"}},
                    ["id", "name", "description", "member_count"])
_ID = {"type": "string", "description": "contact id, e.g. 'c07'"}
_GROUP_ARG = {"type": "string", "description": "group name (e.g. 'Customers') or id (e.g. 'g02')"}
_FIELDS_IN = {
    "name": {"type": "string", "minLength": 1, "description": "full name (or organisation name)"},
    "email": {"type": "string", "description": "email address"},
    "phone": {"type": "string", "description": "phone number, e.g. '+44 123 4567'"},
    "company": {"type": "string", "description": "organisation the person works for"},
    "title": {"type": "string", "description": "job title"},
    "city": _STR,
    "notes": {"type": "string", "description": "free-text notes"},
}

tools = Tools()  # declared on their handlers below; TOOLS and handle come from it

RESOURCES: list[dict[str, Any]] = [{"collection": "contacts", "get_tool": "get_contact", "list_tool": "search_contacts",
                                    "list_key": "contacts", "list_arguments": {"limit": 200}}]


# ---------------------------------------------------------------- the shared cast

MILESTONES = ("Requirements sign-off", "Design review", "Vendor selection", "Pilot start", "User acceptance testing",
              "Data migration", "Go-live", "Handover to operations")


def story(world: dict[str, Any]) -> dict[str, Any]:
    """The facts that contacts, chat, notes and documents share, drawn from ``world`` alone.

    ``team``: code -> people working on the project (owner first, never the user); ``milestones``:
    code -> [(name, YYYY-MM-DD)] for projects not closed; ``moved``: one milestone announced as moved
    in chat but not yet in the project plan; ``stakeholder``: code -> the client's contact person;
    ``phone_question``: a project whose owner asks in chat for its stakeholder's phone; ``groups``:
    projects with a contact group; ``missing``: code -> team members not yet in its chat channel;
    ``newcomer`` (not in contacts, introduced in ``newcomer_project``'s channel); ``stale`` (outdated
    phone in contacts, new one in notes); ``duplicate`` (a second, personal entry in contacts);
    ``departed`` (a namesake of a colleague who left their organisation) and ``replacement``.
    """
    rng = random.Random(f"collab:{world['seed']}")
    people, user, company = world["people"], world["user"], world["company"]["id"]
    by_id = {p["id"]: p for p in people}
    colleagues = [p for p in people if p["org"] == company and p["id"] != user["id"]]
    counts: dict[str, int] = {}
    for p in people:
        counts[p["name"]] = counts.get(p["name"], 0) + 1
    externals = [p for p in people if p["org"] != company]
    plain = [p for p in externals if counts[p["name"]] == 1]
    twins = [p for p in externals if counts[p["name"]] > 1]
    picks = rng.sample(plain, min(3, len(plain)))
    newcomer, stale, duplicate = (picks + [None, None, None])[:3]
    special = {p["id"] for p in picks}
    departed = twins[0] if twins else None
    replacement = None
    if departed is not None:
        same_org = [p for p in plain if p["org"] == departed["org"] and p["id"] not in special]
        replacement = rng.choice(same_org) if same_org else None
        if replacement is None:
            departed = None

    today = dt.date.fromisoformat(world["today"])
    team: dict[str, list[dict[str, Any]]] = {}
    milestones: dict[str, list[tuple[str, str]]] = {}
    stakeholder: dict[str, dict[str, Any]] = {}
    for project in world["projects"]:
        owner = by_id[project["owner"]]
        others = [c for c in colleagues if c["id"] != owner["id"]]
        members = rng.sample(others, min(3, len(others)))
        team[project["code"]] = ([owner] if owner["id"] != user["id"] else []) + members
        if project["client"]:
            candidates = [p for p in plain if p["org"] == project["client"] and p["id"] not in special]
            if candidates:
                stakeholder[project["code"]] = rng.choice(candidates)
        if project["status"] == "closed":
            continue
        start, end = dt.date.fromisoformat(project["start"]), dt.date.fromisoformat(project["end"])
        span = max((end - start).days, 30)
        names = rng.sample(MILESTONES, 3)
        dates = sorted({weekday(start + dt.timedelta(days=span * k // 4 + rng.randint(-3, 3))) for k in (1, 2, 3)})
        milestones[project["code"]] = [(name, day.isoformat()) for name, day in zip(names, dates, strict=False)]

    open_codes = sorted(milestones)
    rng.shuffle(open_codes)
    moved = None
    if open_codes:
        code = open_codes[0]
        name, old = rng.choice(milestones[code])
        end = next(p for p in world["projects"] if p["code"] == code)["end"]
        taken = {day for _, day in milestones[code]} | {end}
        new = old
        while new in taken:
            new = weekday(dt.date.fromisoformat(old) + dt.timedelta(days=rng.randint(7, 24))).isoformat()
        moved = {"code": code, "milestone": name, "old": old, "new": new}
    asked = [code for code in open_codes[1:] if code in stakeholder]
    groups = open_codes[:3]
    missing: dict[str, list[dict[str, Any]]] = {}
    if len(open_codes) > 1:
        code = open_codes[1]
        owner = next(p for p in world["projects"] if p["code"] == code)["owner"]
        members = [p for p in team[code] if p["id"] != owner]
        missing[code] = rng.sample(members, min(2, len(members)))
    return {
        "user": user, "colleagues": colleagues, "externals": externals, "team": team, "milestones": milestones,
        "moved": moved, "stakeholder": stakeholder, "phone_question": asked[0] if asked else None,
        "groups": groups, "missing": missing, "newcomer": newcomer,
        "newcomer_project": open_codes[-1] if open_codes else None, "stale": stale, "duplicate": duplicate,
        "departed": departed, "replacement": replacement, "today": today.isoformat(),
    }


# ---------------------------------------------------------------- seed

def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower())


def _phone(rng: random.Random) -> str:
    return f"+{rng.randint(30, 49)} {rng.randint(100, 999)} {rng.randint(1000, 9999)}"


_ROLE_TAGS = {"Billing": "billing", "CTO": "decision-maker", "Procurement lead": "procurement",
              "Account manager": "account-manager", "Consultant": "consultant"}
_KIND_TAGS = {"customer": "customer", "vendor": "supplier", "partner": "partner"}
_NOTES = ("Prefers email over calls.", "Met at the {city} trade fair.", "Speaks {lang}.", "Call after 14:00 only.",
          "Sends invoices at the end of each month.", "Introduced by {other}.", "Out of office on Fridays.")
_LANG = {"en": "English", "de": "German", "fr": "French", "es": "Spanish", "it": "Italian", "nl": "Dutch",
         "pt": "Portuguese", "sv": "Swedish", "pl": "Polish", "da": "Danish", "fi": "Finnish"}


def seed(conn: sqlite3.Connection, rng: random.Random, world: dict[str, Any]) -> None:
    """Fill the address book from the world: its people (but the user and the newcomer), the
    organisations other than the user's, a personal duplicate of one person, an outdated phone,
    department, customer, supplier and project groups, and tags."""
    conn.executescript(SCHEMA)
    cast = story(world)
    today = dt.date.fromisoformat(world["today"])
    orgs = {o["id"]: o for o in world["organisations"]}
    company = world["company"]["id"]
    skip = {world["user"]["id"]} | ({cast["newcomer"]["id"]} if cast["newcomer"] else set())
    past = lambda: (today - dt.timedelta(days=rng.randint(3, 420))).isoformat()
    rows: list[dict[str, Any]] = []
    for p in world["people"]:
        if p["id"] in skip:
            continue
        org = orgs[p["org"]]
        tags = []
        if p["org"] != company:
            tags.append(_KIND_TAGS.get(org["kind"], org["kind"]))
            if p["role"] in _ROLE_TAGS:
                tags.append(_ROLE_TAGS[p["role"]])
        if rng.random() < 0.15:
            tags.append(rng.choice(["vip", "newsletter", "conference", "mentor"]))
        note = ""
        if rng.random() < 0.35:
            other = rng.choice(world["people"])["name"]
            note = rng.choice(_NOTES).format(city=org["city"], lang=_LANG.get(p["locale"][:2], "English"), other=other)
        phone = p["phone"]
        if cast["stale"] is not None and p["id"] == cast["stale"]["id"]:
            while phone == p["phone"]:
                phone = _phone(rng)
        rows.append({"kind": "person", "name": p["name"], "email": p["email"], "phone": phone, "company": org["name"],
                     "title": p["role"], "city": p["city"], "notes": note, "tags": sorted(set(tags)),
                     "person_id": p["id"], "updated": past()})
    dup = cast["duplicate"]
    if dup is not None:
        box = rng.choice(["mailbox", "postbox", "webmail", "inbox"])
        rows.append({"kind": "person", "name": dup["name"], "email": f"{_slug(dup['first'])}.{_slug(dup['last'])}@{box}.example",
                     "phone": dup["phone"] if rng.random() < 0.5 else _phone(rng), "company": "", "title": "",
                     "city": dup["city"], "notes": rng.choice(["Personal address.", "Private number, evenings only.",
                                                                "Old entry from a conference badge scan."]),
                     "tags": ["personal"], "person_id": dup["id"], "updated": past()})
    for org in world["organisations"]:
        if org["id"] == company:
            continue
        rows.append({"kind": "organisation", "name": org["name"],
                     "email": f"{rng.choice(['info', 'contact', 'hello', 'office'])}@{org['domain']}",
                     "phone": _phone(rng), "company": org["name"], "title": org["kind"].capitalize(),
                     "city": org["city"], "notes": f"{org['industry'].capitalize()}, {org['country']}.",
                     "tags": [_KIND_TAGS.get(org["kind"], org["kind"])], "person_id": None, "updated": past()})
    rng.shuffle(rows)
    ids: dict[str, str] = {}  # world person id -> contact id (the main entry)
    for n, row in enumerate(rows, start=1):
        ident = f"c{n:02d}"
        if row["person_id"] and row["person_id"] not in ids and row["company"]:
            ids[row["person_id"]] = ident
        conn.execute("INSERT INTO contacts_contacts VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                     (ident, row["kind"], row["name"], row["email"], "[]", row["phone"], row["company"], row["title"],
                      row["city"], row["notes"], json.dumps(row["tags"]), row["person_id"], row["updated"]))

    groups: list[tuple[str, str, list[str]]] = []
    departments: dict[str, list[str]] = {}
    for p in world["people"]:
        if p["org"] == company and p["id"] in ids:
            departments.setdefault(p["department"], []).append(ids[p["id"]])
    mine = world["user"]["department"]
    chosen = [mine] + rng.sample(sorted(d for d in departments if d != mine), min(2, len(departments) - 1))
    for department in chosen:
        if departments.get(department):
            groups.append((f"{department} team", f"Colleagues in {department}", departments[department]))
    for kind, label in (("customer", "Customers"), ("vendor", "Suppliers")):
        members = [ids[p["id"]] for p in world["people"] if orgs[p["org"]]["kind"] == kind and p["id"] in ids]
        groups.append((label, f"People at our {label.lower()}", members))
    names = {p["code"]: p["name"] for p in world["projects"]}
    for code in cast["groups"]:
        members = [ids[p["id"]] for p in cast["team"][code] if p["id"] in ids]
        groups.append((f"{code} team", f"Everyone working on {code} {names[code]}", members))
    fun = rng.sample([ids[p["id"]] for p in cast["colleagues"] if p["id"] in ids], 4)
    groups.append((rng.choice(["Running club", "Book club", "Lunch crew"]), "After-work group", fun[:rng.randint(3, 4)]))
    for n, (name, description, members) in enumerate(groups, start=1):
        conn.execute("INSERT INTO contacts_groups VALUES (?,?,?)", (f"g{n:02d}", name, description))
        conn.executemany("INSERT OR IGNORE INTO contacts_members VALUES (?,?)", [(f"g{n:02d}", m) for m in members])


# ---------------------------------------------------------------- handlers

def _fold(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().casefold()


_COLUMNS: tuple[str, ...] = ("id", "kind", "name", "email", "other_emails", "phone", "company", "title", "city", "notes", "tags",
            "person_id", "updated")


def _row(conn: sqlite3.Connection, ident: str, field: str = "id") -> dict[str, Any]:
    row = one_row(conn, "SELECT * FROM contacts_contacts WHERE id = ?", (ident,),
                  f"no contact with id {ident!r}" + (f" (argument {field})" if field != "id" else ""))
    out = dict(zip(_COLUMNS, tuple(row), strict=True))
    out["other_emails"], out["tags"] = json.loads(out["other_emails"]), json.loads(out["tags"])
    return out


def _summary(row: dict[str, Any]) -> dict[str, Any]:
    return {key: row[key] for key in _SUMMARY_PROPS}


def _full(conn: sqlite3.Connection, row: dict[str, Any]) -> dict[str, Any]:
    groups = [name for (name,) in conn.execute(
        "SELECT g.name FROM contacts_groups g JOIN contacts_members m ON m.group_id = g.id WHERE m.contact_id = ? "
        "ORDER BY g.name", (row["id"],))]
    return {**_summary(row), "other_emails": row["other_emails"], "city": row["city"], "notes": row["notes"],
            "groups": groups, "updated": row["updated"]}


def _group(conn: sqlite3.Connection, ref: str) -> dict[str, Any]:
    row = conn.execute("SELECT id, name, description FROM contacts_groups WHERE id = ? OR name = ? COLLATE NOCASE",
                       (ref.strip(), ref.strip())).fetchone()
    if row is None:
        known = ", ".join(name for (name,) in conn.execute("SELECT name FROM contacts_groups ORDER BY name"))
        raise ToolFailure(f"no contact group {ref!r}; groups are: {known}")
    count = conn.execute("SELECT COUNT(*) FROM contacts_members WHERE group_id = ?", (row[0],)).fetchone()[0]
    return {"id": row[0], "name": row[1], "description": row[2], "member_count": count}


_PHONE_RE = re.compile(r"^\+?[0-9][0-9 ()./-]{3,30}$")
_TAG_RE = re.compile(r"^[a-z0-9][a-z0-9 _-]{0,29}$")


def _field(args: dict, key: str) -> str | None:
    value = opt_str(args, key)
    if value is None:
        return None
    value = value.strip()
    if key == "name" and not value:
        raise ToolFailure("name cannot be empty")
    if key == "email" and value:
        value = check_email(value, "email")
    if key == "phone" and value and not _PHONE_RE.match(value):
        raise ToolFailure(f"phone must be a phone number like '+44 123 4567', got {value!r}")
    if len(value) > 2000:
        raise ToolFailure(f"{key} is too long ({len(value)} characters, at most 2000)")
    return value


def _tags(args: dict, key: str) -> list[str]:
    value = args.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise ToolFailure(f"{key} must be a list of tags (strings), got {value!r}")
    out = []
    for tag in value:
        tag = tag.strip().lower()
        if not _TAG_RE.match(tag):
            raise ToolFailure(f"{key}: bad tag {tag!r} (letters, digits, spaces, '-' or '_', at most 30 characters)")
        if tag not in out:
            out.append(tag)
    return out


def _save(conn: sqlite3.Connection, row: dict[str, Any]) -> None:
    conn.execute("UPDATE contacts_contacts SET name=?, email=?, other_emails=?, phone=?, company=?, title=?, city=?, "
                 "notes=?, tags=?, updated=? WHERE id=?",
                 (row["name"], row["email"], json.dumps(row["other_emails"]), row["phone"], row["company"], row["title"],
                  row["city"], row["notes"], json.dumps(row["tags"]), today_iso(conn), row["id"]))


def _search(conn: sqlite3.Connection, args: dict) -> dict[str, Any]:
    words = _fold(opt_str(args, "query") or "").split()
    tag, company = (opt_str(args, "tag") or "").strip().lower(), _fold(opt_str(args, "company") or "")
    kind = opt_choice(args, "kind", KINDS)
    limit = opt_int(args, "limit", 25, 1, 200)
    members = None
    group = opt_str(args, "group")
    if group is not None and group.strip():
        gid = _group(conn, group)["id"]
        members = {c for (c,) in conn.execute("SELECT contact_id FROM contacts_members WHERE group_id = ?", (gid,))}
    found = []
    for ident, in conn.execute("SELECT id FROM contacts_contacts ORDER BY name COLLATE NOCASE, id"):
        row = _row(conn, ident)
        if members is not None and ident not in members or kind and row["kind"] != kind:
            continue
        if tag and tag not in row["tags"] or company and company not in _fold(row["company"]):
            continue
        hay = _fold(" ".join([row["name"], row["email"], *row["other_emails"], row["phone"], row["company"],
                              row["title"], row["city"], row["notes"], *row["tags"]]))
        if all(w in hay for w in words):
            found.append(_summary(row))
    return {"contacts": found[:limit], "count": len(found)}


def _create(conn: sqlite3.Connection, args: dict) -> dict[str, Any]:
    name = req_str(args, "name", 200).strip()
    kind = opt_str(args, "kind") or "person"
    if kind not in KINDS:
        raise ToolFailure(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    values = {key: _field(args, key) or "" for key in EDITABLE if key != "name"}
    tags = _tags(args, "tags")
    dupes = []
    for ident, in conn.execute("SELECT id FROM contacts_contacts WHERE name = ? COLLATE NOCASE OR (email != '' AND "
                               "email = ?) ORDER BY id", (name, values["email"])):
        dupes.append(_summary(_row(conn, ident)))
    ident = next_id(conn, "contacts_contacts", "c")
    conn.execute("INSERT INTO contacts_contacts VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                 (ident, kind, name, values["email"], "[]", values["phone"], values["company"], values["title"],
                  values["city"], values["notes"], json.dumps(tags), None, today_iso(conn)))
    return {"contact": _full(conn, _row(conn, ident)), "possible_duplicates": dupes}


def _update(conn: sqlite3.Connection, args: dict) -> dict[str, Any]:
    row = _row(conn, req_str(args, "id"))
    changed = []
    for key in EDITABLE:
        value = _field(args, key)
        if value is not None and value != row[key]:
            row[key] = value
            changed.append(key)
    add, remove = _tags(args, "add_tags"), _tags(args, "remove_tags")
    missing = [t for t in remove if t not in row["tags"]]
    if missing:
        raise ToolFailure(f"remove_tags: contact {row['id']} has no tag {missing[0]!r} (its tags: "
                          f"{', '.join(row['tags']) or 'none'})")
    tags = [t for t in row["tags"] if t not in remove] + [t for t in add if t not in row["tags"]]
    if tags != row["tags"]:
        row["tags"] = tags
        changed.append("tags")
    if not changed and not any(k in args for k in [*EDITABLE, "add_tags", "remove_tags"]):
        raise ToolFailure("nothing to update: give at least one of " + ", ".join([*EDITABLE, "add_tags", "remove_tags"]))
    if changed:
        _save(conn, row)
    return {"contact": _full(conn, _row(conn, row["id"])), "updated_fields": changed}


def _membership(conn: sqlite3.Connection, args: dict, add: bool) -> dict[str, Any]:
    contact = _row(conn, req_str(args, "contact_id"), "contact_id")
    group = _group(conn, req_str(args, "group"))
    present = conn.execute("SELECT 1 FROM contacts_members WHERE group_id = ? AND contact_id = ?",
                           (group["id"], contact["id"])).fetchone() is not None
    if add:
        if not present:
            conn.execute("INSERT INTO contacts_members VALUES (?, ?)", (group["id"], contact["id"]))
        return {"group": _group(conn, group["id"]), "contact_id": contact["id"], "added": not present}
    if not present:
        raise ToolFailure(f"contact {contact['id']} ({contact['name']}) is not in the group {group['name']!r}")
    conn.execute("DELETE FROM contacts_members WHERE group_id = ? AND contact_id = ?", (group["id"], contact["id"]))
    return {"group": _group(conn, group["id"]), "contact_id": contact["id"], "removed": True}


def _merge(conn: sqlite3.Connection, args: dict) -> dict[str, Any]:
    keep = _row(conn, req_str(args, "keep_id"), "keep_id")
    other = _row(conn, req_str(args, "merge_id"), "merge_id")
    if keep["id"] == other["id"]:
        raise ToolFailure("keep_id and merge_id must be two different contacts")
    filled = []
    for key in EDITABLE:
        if not keep[key] and other[key]:
            keep[key] = other[key]
            filled.append(key)
    for address in [other["email"], *other["other_emails"]]:
        if address and address != keep["email"] and address not in keep["other_emails"]:
            keep["other_emails"].append(address)
            if "other_emails" not in filled:
                filled.append("other_emails")
    if other["phone"] and other["phone"] != keep["phone"] and other["phone"] not in keep["notes"]:
        keep["notes"] = (keep["notes"] + "\n" if keep["notes"] else "") + f"Other phone: {other['phone']}"
        filled.append("notes")
    if other["notes"] and other["notes"] not in keep["notes"]:
        keep["notes"] = keep["notes"] + "\n" + other["notes"]
        if "notes" not in filled:
            filled.append("notes")
    new_tags = [t for t in other["tags"] if t not in keep["tags"]]
    if new_tags:
        keep["tags"] += new_tags
        filled.append("tags")
    _save(conn, keep)
    conn.execute("INSERT OR IGNORE INTO contacts_members SELECT group_id, ? FROM contacts_members WHERE contact_id = ?",
                 (keep["id"], other["id"]))
    conn.execute("DELETE FROM contacts_members WHERE contact_id = ?", (other["id"],))
    conn.execute("DELETE FROM contacts_contacts WHERE id = ?", (other["id"],))
    return {"contact": _full(conn, _row(conn, keep["id"])), "merged_id": other["id"], "filled_fields": filled}


@tools.tool("search_contacts", "read",
            input=_obj({
                "query": {"type": "string", "description": "words to look for; omit or '' for everyone"},
                "group": _GROUP_ARG | {"description": "only members of this group (name or id)"},
                "tag": {"type": "string", "description": "only contacts with this tag"},
                "company": {"type": "string", "description": "only contacts whose company contains this text"},
                "kind": {"type": "string", "enum": KINDS, "description": "people or organisations only"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 200, "description": "at most this many (default 25)"},
            }, []),
            output=_obj({"contacts": {"type": "array", "items": SUMMARY_SCHEMA}, "count": {"type": "integer"}},
                        ["contacts", "count"]))
def search_contacts(conn: sqlite3.Connection, args: dict) -> dict:
    """Search the address book. Every word of the query must appear in the contact's name, emails, phone,
    company, title, city, notes or tags (case-insensitive); filters narrow further. Returns contact
    summaries sorted by name, and how many matched."""
    return _search(conn, args)


@tools.tool("get_contact", "read",
            input=_obj({"id": _ID}, ["id"]),
            output=CONTACT_SCHEMA)
def get_contact(conn: sqlite3.Connection, args: dict) -> dict:
    """Read one contact in full by id: emails, phone, company, title, city, notes, tags and the groups it
    belongs to."""
    return _full(conn, _row(conn, req_str(args, "id")))


@tools.tool("create_contact", "write",
            input=_obj({**_FIELDS_IN, "kind": {"type": "string", "enum": KINDS, "description": "default person"},
                        "tags": _TAGS | {"description": "tags to give it"}}, ["name"]),
            output=_obj({"contact": CONTACT_SCHEMA, "possible_duplicates": {"type": "array", "items": SUMMARY_SCHEMA}},
                        ["contact", "possible_duplicates"]))
def create_contact(conn: sqlite3.Connection, args: dict) -> dict:
    """Add a contact to the address book. Returns it, with existing contacts that share its name or email
    (possible duplicates; the contact is created anyway)."""
    return _create(conn, args)


@tools.tool("update_contact", "write",
            input=_obj({"id": _ID, **_FIELDS_IN,
                        "add_tags": _TAGS | {"description": "tags to add"},
                        "remove_tags": _TAGS | {"description": "tags to remove"}}, ["id"]),
            output=_obj({"contact": CONTACT_SCHEMA, "updated_fields": {"type": "array", "items": _STR}},
                        ["contact", "updated_fields"]))
def update_contact(conn: sqlite3.Connection, args: dict) -> dict:
    """Change fields of a contact (only those given; '' clears a field except name) and add or remove tags.
    Returns the contact and the names of the fields that changed."""
    return _update(conn, args)


@tools.tool("delete_contact", "destructive",
            input=_obj({"id": _ID}, ["id"]),
            output=_obj({"id": _STR, "name": _STR, "deleted": {"const": True}}, ["id", "name", "deleted"]))
def delete_contact(conn: sqlite3.Connection, args: dict) -> dict:
    """Permanently delete a contact (and its group memberships). This cannot be undone; to combine two
    entries for the same person use merge_contacts instead."""
    row = _row(conn, req_str(args, "id"))
    conn.execute("DELETE FROM contacts_members WHERE contact_id = ?", (row["id"],))
    conn.execute("DELETE FROM contacts_contacts WHERE id = ?", (row["id"],))
    return {"id": row["id"], "name": row["name"], "deleted": True}


@tools.tool("list_groups", "read",
            input=_obj({}, []),
            output=_obj({"groups": {"type": "array", "items": GROUP_SCHEMA}}, ["groups"]))
def list_groups(conn: sqlite3.Connection, args: dict) -> dict:
    """List the contact groups with their descriptions and member counts, sorted by name."""
    ids = [g for (g,) in conn.execute("SELECT id FROM contacts_groups ORDER BY name COLLATE NOCASE")]
    return {"groups": [_group(conn, g) for g in ids]}


@tools.tool("create_group", "write",
            input=_obj({"name": {"type": "string", "minLength": 1}, "description": _STR}, ["name"]),
            output=GROUP_SCHEMA)
def create_group(conn: sqlite3.Connection, args: dict) -> dict:
    """Create an empty contact group (names are unique, case-insensitively). Returns it."""
    name = req_str(args, "name", 80).strip()
    if conn.execute("SELECT 1 FROM contacts_groups WHERE name = ? COLLATE NOCASE", (name,)).fetchone():
        raise ToolFailure(f"a contact group named {name!r} already exists")
    ident = next_id(conn, "contacts_groups", "g")
    conn.execute("INSERT INTO contacts_groups VALUES (?,?,?)", (ident, name, (opt_str(args, "description") or "").strip()))
    return _group(conn, ident)


@tools.tool("add_to_group", "write",
            input=_obj({"group": _GROUP_ARG, "contact_id": _ID}, ["group", "contact_id"]),
            output=_obj({"group": GROUP_SCHEMA, "contact_id": _STR, "added": {"type": "boolean"}},
                        ["group", "contact_id", "added"]))
def add_to_group(conn: sqlite3.Connection, args: dict) -> dict:
    """Add a contact to a group. Returns the group and whether the contact was added (false when it was
    already a member)."""
    return _membership(conn, args, add=True)


@tools.tool("remove_from_group", "write",
            input=_obj({"group": _GROUP_ARG, "contact_id": _ID}, ["group", "contact_id"]),
            output=_obj({"group": GROUP_SCHEMA, "contact_id": _STR, "removed": {"const": True}},
                        ["group", "contact_id", "removed"]))
def remove_from_group(conn: sqlite3.Connection, args: dict) -> dict:
    """Remove a contact from a group (the contact itself stays in the address book). Returns the group."""
    return _membership(conn, args, add=False)


@tools.tool("merge_contacts", "destructive",
            input=_obj({"keep_id": _ID | {"description": "id of the contact to keep"},
                        "merge_id": _ID | {"description": "id of the duplicate to fold into it and delete"}},
                       ["keep_id", "merge_id"]),
            output=_obj({"contact": CONTACT_SCHEMA, "merged_id": _STR,
                         "filled_fields": {"type": "array", "items": _STR}},
                        ["contact", "merged_id", "filled_fields"]))
def merge_contacts(conn: sqlite3.Connection, args: dict) -> dict:
    """Merge two entries for the same person: fields empty in the kept contact are filled from the other,
    its email and phone are kept as other emails / in the notes when they differ, tags and groups are
    combined, and the other entry is deleted. Cannot be undone."""
    return _merge(conn, args)


TOOLS, handle = tools.specs, tools.handle

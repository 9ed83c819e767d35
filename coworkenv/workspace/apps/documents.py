"""Documents app: rich-text documents made of sections, with a version history. Standard library only.

Each open project of the world has a plan (overview, timeline, budget, team, stakeholders, risks)
whose figures come from the world and its shared cast; older versions hold other figures. Distractors
are on purpose: a stale "Copy of" one plan, and last year's travel policy marked outdated beside the
current one.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import sqlite3
import unicodedata
from typing import Any

from ._base import ToolFailure, Tools, next_id, one_row, opt_choice, opt_int, opt_str, req_str, today_iso, user_email, world_names
from ._base import object_schema as _obj
from .contacts import story

NAME = "documents"
DESCRIPTION = "Shared documents made of sections: list, search, read, create, edit and delete documents; version history."

SCHEMA = """
CREATE TABLE IF NOT EXISTS documents_documents (
    id      TEXT PRIMARY KEY,                  -- 'd01', ...
    title   TEXT NOT NULL,
    owner   TEXT NOT NULL,                     -- email
    project TEXT NOT NULL DEFAULT '',          -- a project code, or ''
    status  TEXT NOT NULL CHECK (status IN ('draft', 'final', 'outdated')),
    created TEXT NOT NULL,                     -- YYYY-MM-DD
    updated TEXT NOT NULL,                     -- YYYY-MM-DD
    version INTEGER NOT NULL                   -- the current version (documents_versions)
);
CREATE TABLE IF NOT EXISTS documents_sections (
    doc_id   TEXT NOT NULL,
    position INTEGER NOT NULL,                 -- 1, 2, ...
    heading  TEXT NOT NULL,
    body     TEXT NOT NULL,
    PRIMARY KEY (doc_id, position)
);
CREATE TABLE IF NOT EXISTS documents_versions (
    doc_id   TEXT NOT NULL,
    version  INTEGER NOT NULL,
    date     TEXT NOT NULL,                    -- YYYY-MM-DD
    author   TEXT NOT NULL,                    -- email
    summary  TEXT NOT NULL,
    sections TEXT NOT NULL,                    -- JSON [[heading, body], ...] as of this version
    PRIMARY KEY (doc_id, version)
);
"""

STATUSES = ["draft", "final", "outdated"]
_STR = {"type": "string"}
_SECTION = _obj({"index": {"type": "integer", "description": "1-based position"}, "heading": _STR, "body": _STR},
                ["index", "heading", "body"])
_META_PROPS: dict[str, Any] = {
    "id": _STR, "title": _STR, "owner": {"type": "string", "description": "owner's email"}, "owner_name": _STR,
    "project": {"type": "string", "description": "project code, or ''"}, "status": {"type": "string", "enum": STATUSES},
    "updated": _STR, "version": {"type": "integer"},
}
SUMMARY_SCHEMA = _obj({**_META_PROPS, "headings": {"type": "array", "items": _STR}}, [*_META_PROPS, "headings"])
DOCUMENT_SCHEMA = _obj({**_META_PROPS, "created": _STR, "sections": {"type": "array", "items": _SECTION}},
                       [*_META_PROPS, "created", "sections"])
_ID = {"type": "string", "description": "document id, e.g. 'd03'"}
_SECTION_REF = {"type": ["string", "integer"], "description": "the section's heading (case-insensitive) or its 1-based number"}
_SECTION_IN = _obj({"heading": {"type": "string", "minLength": 1}, "body": _STR}, ["heading", "body"])

tools = Tools()  # declared on their handlers below; TOOLS and handle come from it

RESOURCES: list[dict[str, Any]] = [{"collection": "documents", "get_tool": "read_document",
                                    "list_tool": "list_documents", "list_key": "documents"}]


# ---------------------------------------------------------------- seed

_RISKS = ("Key staff unavailable during the summer holidays", "Vendor delivery delays", "Scope creep from late "
          "requirements", "Data quality of the legacy system", "Budget overrun on licences", "Security review "
          "findings late in the project", "Low user adoption after go-live", "Dependency on a single integrator")


def _budget_lines(rng: random.Random, total: int) -> str:
    staff = round(total * rng.uniform(0.5, 0.7) / 500) * 500
    licences = round((total - staff) * rng.uniform(0.4, 0.7) / 500) * 500
    return (f"Total budget: {total} EUR.\n\n- Staff: {staff} EUR\n- Licences and services: {licences} EUR\n"
            f"- Contingency: {total - staff - licences} EUR\n")


def _plan(project: dict[str, Any], cast: dict[str, Any], orgs: dict[str, Any], by_id: dict[str, Any],
          rng: random.Random, budget: int, milestones: list[tuple[str, str]]) -> list[tuple[str, str]]:
    code, owner = project["code"], by_id[project["owner"]]
    client = orgs[project["client"]]["name"] if project["client"] else None
    team = cast["team"][code]
    people = ([] if any(p["id"] == owner["id"] for p in team) else [owner]) + team
    stakeholder = cast["stakeholder"].get(code)
    if stakeholder is not None:
        who = (f"Client contact: {stakeholder['name']}, {stakeholder['role']} at {orgs[stakeholder['org']]['name']} "
               f"({stakeholder['email']}).")
    elif client:
        who = f"Client: {client}; the contact person is still to be confirmed."
    else:
        who = "Internal project: no external stakeholders."
    return [
        ("Overview", f"{project['name']} ({code}) is " + (f"delivered for {client}" if client else "an internal project")
         + f", led by {owner['name']}. It runs from {project['start']} to {project['end']}."),
        ("Timeline", "".join(f"- {name}: {day}\n" for name, day in milestones) + f"- Project end: {project['end']}\n"),
        ("Budget", _budget_lines(rng, budget)),
        ("Team", "".join(f"- {p['name']}, {p['role']} ({p['email']})" + (" - owner" if p["id"] == owner["id"] else "")
                         + "\n" for p in people)),
        ("Stakeholders", who),
        ("Risks", "".join(f"- {r}\n" for r in rng.sample(_RISKS, 3))),
    ]


def seed(conn: sqlite3.Connection, rng: random.Random, world: dict[str, Any]) -> None:
    """Fill documents, their sections and version histories from the world and its shared cast."""
    conn.executescript(SCHEMA)
    cast = story(world)
    today = dt.date.fromisoformat(world["today"])
    orgs = {o["id"]: o for o in world["organisations"]}
    by_id = {p["id"]: p for p in world["people"]}
    colleagues = cast["colleagues"]
    docs: list[dict[str, Any]] = []  # {title, owner, project, status, versions: [(date, author, summary, sections)]}

    def history(first: dt.date, authors: list[dict[str, Any]], states: list[list[tuple[str, str]]],
                summaries: list[str], last: dt.date | None = None) -> list[tuple[str, str, str, list[tuple[str, str]]]]:
        """Versions dated from ``first`` to ``last`` (by default yesterday; at least ten days)."""
        last = last or today - dt.timedelta(days=1)
        first = min(first, last - dt.timedelta(days=9))
        days = sorted(rng.sample(range((last - first).days + 1), len(states)))
        return [((first + dt.timedelta(days=d)).isoformat(), rng.choice(authors)["email"] if n else authors[0]["email"],
                 summary, state) for n, (d, state, summary) in enumerate(zip(days, states, summaries, strict=True))]

    for project in world["projects"]:
        code = project["code"]
        if code not in cast["milestones"]:
            continue
        owner = by_id[project["owner"]]
        milestones = cast["milestones"][code]
        early = [(name, (dt.date.fromisoformat(day) - dt.timedelta(days=rng.choice([7, 14]))).isoformat())
                 for name, day in milestones]
        old_budget = project["budget"] - rng.randrange(5000, 40000, 500)
        state = rng.getstate()
        v1 = _plan(project, cast, orgs, by_id, rng, old_budget, early)
        rng.setstate(state)
        current = _plan(project, cast, orgs, by_id, rng, project["budget"], milestones)
        middle = [s if s[0] != "Timeline" else current[1] for s in v1]
        states, summaries = [v1], ["First draft"]
        if rng.random() < 0.6:
            states.append(middle)
            summaries.append("Updated the timeline")
        states.append(current)
        summaries.append(rng.choice(["Budget approved", "Updated the budget after review"]))
        first = max(dt.date.fromisoformat(project["start"]) - dt.timedelta(days=20), today - dt.timedelta(days=120))
        team = [owner] + [p for p in cast["team"][code] if p["id"] != owner["id"]]
        versions = history(first, team, states, summaries)
        docs.append({"title": f"{code} project plan", "owner": owner["email"], "project": code, "status": "final",
                     "versions": versions})
        if code == (cast["moved"] or {}).get("code") or (not any(d["title"].startswith("Copy of") for d in docs)
                                                         and rng.random() < 0.5):
            copier = rng.choice(team)
            made = dt.date.fromisoformat(versions[0][0])
            copied = made + dt.timedelta(days=rng.randint(0, (dt.date.fromisoformat(versions[-1][0]) - made).days))
            docs.append({"title": f"Copy of {code} project plan", "owner": copier["email"], "project": code,
                         "status": "draft", "versions": [(copied.isoformat(), copier["email"],
                                                          "Copied from the project plan", v1)]})

    finance = [c for c in colleagues if c["department"] == "Finance"] or colleagues
    approver = rng.choice(finance)
    country = world["company"]["country"]

    def policy(per_diem: int, hotel: int, threshold: int, who: dict[str, Any]) -> list[tuple[str, str]]:
        return [("Scope", f"Business travel and expenses of everyone at {world['company']['name']}."),
                ("Per diem", f"Meals and incidentals: {per_diem} EUR per day in {country}, {per_diem + 15} EUR abroad."),
                ("Hotels", f"Up to {hotel} EUR per night; book through the travel desk."),
                ("Approvals", f"Trips costing more than {threshold} EUR need approval from {who['name']} ({who['role']}).")]

    per_diem, hotel, threshold = rng.randrange(35, 70, 5), rng.randrange(110, 240, 10), rng.choice([1500, 2000, 2500, 3000])
    old = policy(per_diem - rng.randrange(5, 15, 5), hotel - rng.randrange(10, 40, 10), threshold - 500,
                 rng.choice(finance))
    year = today.year - 1
    docs.append({"title": f"Travel and expenses policy ({year})", "owner": approver["email"], "project": "",
                 "status": "outdated", "versions": history(today - dt.timedelta(days=400), [approver], [old],
                                                           ["Published"])})
    docs.append({"title": "Travel and expenses policy", "owner": approver["email"], "project": "", "status": "final",
                 "versions": history(today - dt.timedelta(days=90), [approver, rng.choice(finance)],
                                     [old, policy(per_diem, hotel, threshold, approver)],
                                     [f"Copied from the {year} policy", "New rates for this year"])})

    buyers = [c for c in colleagues if c["role"] in ("Procurement specialist", "Controller")] or finance
    categories: dict[str, list[str]] = {}
    for product in world["products"]:
        categories.setdefault(product["category"], []).append(
            f"- {product['name']} ({product['sku']}): {product['price']:.2f} EUR per {product['unit']}, from "
            f"{orgs[product['supplier']]['name']}\n")
    buyer = rng.choice(buyers)
    docs.append({"title": "Supplier overview", "owner": buyer["email"], "project": "", "status": "final",
                 "versions": history(today - dt.timedelta(days=60), [buyer],
                                     [[(c.capitalize(), "".join(lines)) for c, lines in categories.items()]],
                                     ["Prices for this quarter"])})
    it = [c for c in colleagues if c["role"] == "IT administrator"] or colleagues
    people_team = [c for c in colleagues if c["department"] == "People"] or colleagues
    author = rng.choice(people_team)
    docs.append({"title": "Onboarding guide", "owner": author["email"], "project": "", "status": "final",
                 "versions": history(today - dt.timedelta(days=200), [author], [[
                     ("First day", f"Pick up your badge at the {world['company']['city']} reception at 09:00."),
                     ("Accounts", f"{rng.choice(it)['name']} sets up your laptop and accounts."),
                     ("Buddies", f"Every newcomer gets a buddy; ask {author['name']} for yours.")]], ["First version"])})
    rng.shuffle(docs)
    for n, doc in enumerate(docs, start=1):
        ident = f"d{n:02d}"
        versions = doc["versions"]
        conn.execute("INSERT INTO documents_documents VALUES (?,?,?,?,?,?,?,?)",
                     (ident, doc["title"], doc["owner"], doc["project"], doc["status"], versions[0][0],
                      versions[-1][0], len(versions)))
        for k, (date, who, summary, sections) in enumerate(versions, start=1):
            conn.execute("INSERT INTO documents_versions VALUES (?,?,?,?,?,?)",
                         (ident, k, date, who, summary, json.dumps(sections)))
        conn.executemany("INSERT INTO documents_sections VALUES (?,?,?,?)",
                         [(ident, k, heading, body) for k, (heading, body) in enumerate(versions[-1][3], start=1)])


# ---------------------------------------------------------------- handlers

_COLUMNS: tuple[str, ...] = ("id", "title", "owner", "project", "status", "created", "updated", "version")


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().casefold()


def _world(conn: sqlite3.Connection) -> tuple[str, str]:
    """(today, the user's email)."""
    return today_iso(conn), user_email(conn)


def _doc(conn: sqlite3.Connection, ident: str) -> dict[str, Any]:
    row = one_row(conn, "SELECT * FROM documents_documents WHERE id = ?", (ident,), f"no document with id {ident!r}")
    return dict(zip(_COLUMNS, tuple(row), strict=True))


def _sections(conn: sqlite3.Connection, ident: str) -> list[dict[str, Any]]:
    return [{"index": i, "heading": h, "body": b} for i, h, b in conn.execute(
        "SELECT position, heading, body FROM documents_sections WHERE doc_id = ? ORDER BY position", (ident,))]


def _meta(conn: sqlite3.Connection, doc: dict[str, Any]) -> dict[str, Any]:
    return {"id": doc["id"], "title": doc["title"], "owner": doc["owner"], "owner_name": world_names(conn).get(doc["owner"], ""),
            "project": doc["project"], "status": doc["status"], "updated": doc["updated"], "version": doc["version"]}


def _full(conn: sqlite3.Connection, ident: str, only: dict[str, Any] | None = None) -> dict[str, Any]:
    doc = _doc(conn, ident)
    return {**_meta(conn, doc), "created": doc["created"], "sections": [only] if only else _sections(conn, ident)}


def _find_section(conn: sqlite3.Connection, ident: str, ref: Any) -> dict[str, Any]:
    sections = _sections(conn, ident)
    headings = "; ".join(f"{s['index']}. {s['heading']}" for s in sections)
    if isinstance(ref, str) and ref.strip().isdigit():
        ref = int(ref.strip())
    if isinstance(ref, bool) or not isinstance(ref, int | str) or isinstance(ref, str) and not ref.strip():
        raise ToolFailure(f"section must be a heading or a section number, got {ref!r}")
    for section in sections:
        if isinstance(ref, int) and section["index"] == ref or isinstance(ref, str) and \
                _fold(section["heading"]) == _fold(ref.strip()):
            return section
    raise ToolFailure(f"section: document {ident} has no section {ref!r}; its sections are: {headings}")


def _new_version(conn: sqlite3.Connection, ident: str, sections: list[tuple[str, str]], summary: str) -> dict[str, Any]:
    doc = _doc(conn, ident)
    today, me = _world(conn)
    version = doc["version"] + 1
    conn.execute("DELETE FROM documents_sections WHERE doc_id = ?", (ident,))
    conn.executemany("INSERT INTO documents_sections VALUES (?,?,?,?)",
                     [(ident, k, h, b) for k, (h, b) in enumerate(sections, start=1)])
    conn.execute("INSERT INTO documents_versions VALUES (?,?,?,?,?,?)",
                 (ident, version, today, me, summary, json.dumps(sections)))
    conn.execute("UPDATE documents_documents SET version = ?, updated = ? WHERE id = ?", (version, today, ident))
    return _full(conn, ident)


def _section_input(value: Any, field: str) -> tuple[str, str]:
    if not isinstance(value, dict) or set(value) - {"heading", "body"} or not isinstance(value.get("heading"), str) \
            or not value["heading"].strip() or not isinstance(value.get("body", ""), str):
        raise ToolFailure(f"{field} must be objects with a non-empty 'heading' and a 'body' text, got {value!r}")
    return value["heading"].strip(), value.get("body", "")


def _list(conn: sqlite3.Connection, args: dict) -> dict[str, Any]:
    words = _fold(opt_str(args, "query") or "").split()
    project = (opt_str(args, "project") or "").strip().upper()
    owner = _fold(opt_str(args, "owner") or "").strip()
    status = opt_choice(args, "status", STATUSES)
    names, found = world_names(conn), []
    for ident, in conn.execute("SELECT id FROM documents_documents ORDER BY updated DESC, id"):
        doc = _doc(conn, ident)
        if project and doc["project"].upper() != project or status and doc["status"] != status:
            continue
        if owner and owner not in _fold(doc["owner"] + " " + names.get(doc["owner"], "")):
            continue
        if all(w in _fold(doc["title"]) for w in words):
            found.append({**_meta(conn, doc), "headings": [s["heading"] for s in _sections(conn, ident)]})
    return {"documents": found, "count": len(found)}


def _search(conn: sqlite3.Connection, args: dict) -> dict[str, Any]:
    words = _fold(req_str(args, "query", 500)).split()
    limit = opt_int(args, "limit", 10, 1, 50)
    hits = []
    for ident, in conn.execute("SELECT id FROM documents_documents ORDER BY updated DESC, id"):
        doc = _doc(conn, ident)
        title = _fold(doc["title"])
        for section in _sections(conn, ident):
            heading, body = _fold(section["heading"]), _fold(section["body"])
            if not all(w in f"{title} {heading} {body}" for w in words):
                continue
            score = sum(2 * title.count(w) + 2 * heading.count(w) + body.count(w) for w in words)
            flat = " ".join(section["body"].split())
            at = max(0, _fold(flat).find(words[0]) - 40) if words else 0
            snippet = ("..." if at else "") + flat[at:at + 160] + ("..." if at + 160 < len(flat) else "")
            hits.append((-score, {"document_id": ident, "title": doc["title"], "status": doc["status"],
                                  "updated": doc["updated"], "section": section["index"], "heading": section["heading"],
                                  "snippet": snippet}))
    hits.sort(key=lambda h: h[0])
    return {"results": [h for _, h in hits[:limit]], "count": len(hits)}


@tools.tool("list_documents", "read",
            input=_obj({
                "query": {"type": "string", "description": "only documents whose title contains every word of this"},
                "project": {"type": "string", "description": "only documents of this project code, e.g. 'PRJ-264'"},
                "owner": {"type": "string", "description": "only documents whose owner's email or name contains this"},
                "status": {"type": "string", "enum": STATUSES},
            }, []),
            output=_obj({"documents": {"type": "array", "items": SUMMARY_SCHEMA}, "count": {"type": "integer"}},
                        ["documents", "count"]))
def list_documents(conn: sqlite3.Connection, args: dict) -> dict:
    """List documents, most recently updated first, with owner, project, status (draft, final or outdated),
    current version and section headings. Filters narrow the list."""
    return _list(conn, args)


@tools.tool("search_documents", "read",
            input=_obj({"query": {"type": "string", "minLength": 1},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "default 10"}},
                       ["query"]),
            output=_obj({"results": {"type": "array", "items": _obj({
                "document_id": _STR, "title": _STR, "status": {"type": "string", "enum": STATUSES}, "updated": _STR,
                "section": {"type": "integer"}, "heading": _STR, "snippet": _STR},
                ["document_id", "title", "status", "updated", "section", "heading", "snippet"])},
                "count": {"type": "integer"}}, ["results", "count"]))
def search_documents(conn: sqlite3.Connection, args: dict) -> dict:
    """Full-text search inside documents: returns the sections where every word of the query appears (in
    the document title, section heading or text), best matches first, with a snippet."""
    return _search(conn, args)


@tools.tool("read_document", "read",
            input=_obj({"id": _ID, "section": _SECTION_REF}, ["id"]),
            output=DOCUMENT_SCHEMA)
def read_document(conn: sqlite3.Connection, args: dict) -> dict:
    """Read a document by id: its metadata and all its sections, or only one section when 'section' names
    it (by heading or number)."""
    ident = _doc(conn, req_str(args, "id"))["id"]
    only = _find_section(conn, ident, args["section"]) if args.get("section") is not None else None
    return _full(conn, ident, only)


@tools.tool("create_document", "write",
            input=_obj({"title": {"type": "string", "minLength": 1},
                        "sections": {"type": "array", "items": _SECTION_IN, "minItems": 1},
                        "project": {"type": "string", "description": "project code, e.g. 'PRJ-264'"},
                        "status": {"type": "string", "enum": ["draft", "final"], "description": "default draft"}},
                       ["title", "sections"]),
            output=DOCUMENT_SCHEMA)
def create_document(conn: sqlite3.Connection, args: dict) -> dict:
    """Create a document owned by the user from a title and sections (version 1). Returns it."""
    title = req_str(args, "title", 300).strip()
    raw = args.get("sections")
    if not isinstance(raw, list) or not raw:
        raise ToolFailure("sections must be a non-empty list of {heading, body} objects")
    sections = [_section_input(s, "sections") for s in raw]
    status = opt_str(args, "status") or "draft"
    if status not in ("draft", "final"):
        raise ToolFailure(f"status must be 'draft' or 'final', got {status!r}")
    project = (opt_str(args, "project") or "").strip().upper()
    if project and conn.execute("SELECT 1 FROM world_projects WHERE code = ?", (project,)).fetchone() is None:
        raise ToolFailure(f"project: no project with code {project!r}")
    today, me = _world(conn)
    ident = next_id(conn, "documents_documents", "d")
    conn.execute("INSERT INTO documents_documents VALUES (?,?,?,?,?,?,?,?)",
                 (ident, title, me, project, status, today, today, 1))
    conn.executemany("INSERT INTO documents_sections VALUES (?,?,?,?)",
                     [(ident, k, h, b) for k, (h, b) in enumerate(sections, start=1)])
    conn.execute("INSERT INTO documents_versions VALUES (?,?,?,?,?,?)",
                 (ident, 1, today, me, "Created", json.dumps(sections)))
    return _full(conn, ident)


@tools.tool("edit_section", "write",
            input=_obj({"id": _ID, "section": _SECTION_REF, "body": {"type": "string", "description": "the new text"},
                        "heading": {"type": "string", "minLength": 1, "description": "a new heading"}},
                       ["id", "section", "body"]),
            output=DOCUMENT_SCHEMA)
def edit_section(conn: sqlite3.Connection, args: dict) -> dict:
    """Replace the text (and optionally the heading) of one section; this makes a new version. Returns the
    document."""
    ident = _doc(conn, req_str(args, "id"))["id"]
    target = _find_section(conn, ident, args.get("section"))
    body = args.get("body")
    if not isinstance(body, str):
        raise ToolFailure(f"body must be the section's new text, got {body!r}")
    heading = opt_str(args, "heading")
    heading = heading.strip() if heading and heading.strip() else target["heading"]
    sections = [(heading, body) if s["index"] == target["index"] else (s["heading"], s["body"])
                for s in _sections(conn, ident)]
    return _new_version(conn, ident, sections, f"Edited section '{heading}'")


@tools.tool("add_section", "write",
            input=_obj({"id": _ID, "heading": {"type": "string", "minLength": 1}, "body": _STR,
                        "position": {"type": "integer", "minimum": 1, "description": "default: after the last"}},
                       ["id", "heading", "body"]),
            output=DOCUMENT_SCHEMA)
def add_section(conn: sqlite3.Connection, args: dict) -> dict:
    """Add a section to a document, at the end or at a 1-based position; this makes a new version. Returns
    the document."""
    ident = _doc(conn, req_str(args, "id"))["id"]
    heading, body = _section_input({"heading": args.get("heading"), "body": args.get("body", "")}, "heading and body")
    sections = [(s["heading"], s["body"]) for s in _sections(conn, ident)]
    position = opt_int(args, "position", len(sections) + 1, 1, len(sections) + 1)
    sections.insert(position - 1, (heading, body))
    return _new_version(conn, ident, sections, f"Added section '{heading}'")


@tools.tool("delete_document", "destructive",
            input=_obj({"id": _ID}, ["id"]),
            output=_obj({"id": _STR, "title": _STR, "deleted": {"const": True}}, ["id", "title", "deleted"]))
def delete_document(conn: sqlite3.Connection, args: dict) -> dict:
    """Permanently delete a document and its version history. This cannot be undone."""
    doc = _doc(conn, req_str(args, "id"))
    for table, column in (("documents_sections", "doc_id"), ("documents_versions", "doc_id"),
                          ("documents_documents", "id")):
        conn.execute(f"DELETE FROM {table} WHERE {column} = ?", (doc["id"],))
    return {"id": doc["id"], "title": doc["title"], "deleted": True}


@tools.tool("list_versions", "read",
            input=_obj({"id": _ID}, ["id"]),
            output=_obj({"document_id": _STR, "title": _STR, "versions": {"type": "array", "items": _obj({
                "version": {"type": "integer"}, "date": _STR, "author": _STR, "author_name": _STR, "summary": _STR},
                ["version", "date", "author", "author_name", "summary"])}}, ["document_id", "title", "versions"]))
def list_versions(conn: sqlite3.Connection, args: dict) -> dict:
    """The version history of a document, newest first: version number, date, author and a summary of the
    change."""
    doc = _doc(conn, req_str(args, "id"))
    names = world_names(conn)
    versions = [{"version": v, "date": d, "author": a, "author_name": names.get(a, ""), "summary": s}
                for v, d, a, s in conn.execute("SELECT version, date, author, summary FROM documents_versions "
                                               "WHERE doc_id = ? ORDER BY version DESC", (doc["id"],))]
    return {"document_id": doc["id"], "title": doc["title"], "versions": versions}


TOOLS, handle = tools.specs, tools.handle

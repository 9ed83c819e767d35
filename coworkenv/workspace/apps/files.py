"""Files app: the user's shared drive of text documents in folders. Standard library only."""

from __future__ import annotations

import random
import re
import sqlite3
from typing import Any

from ._base import (
    ToolFailure,
    Tools,
    colleagues,
    days_from,
    next_id,
    office_plan,
    one_row,
    opt_str,
    req_str,
    slug,
    today,
    today_iso,
    user_email,
)
from ._base import object_schema as _obj

NAME = "files"
DESCRIPTION = "The user's drive of text documents in folders: list, search, read, write, move and delete files."

SCHEMA = """
CREATE TABLE IF NOT EXISTS files_files (
    id       TEXT PRIMARY KEY,                -- 'f01', 'f02', ...
    name     TEXT NOT NULL,                   -- e.g. 'budget_q2.csv'
    folder   TEXT NOT NULL,                   -- e.g. 'Finance' or 'Projects/Archive'
    owner    TEXT NOT NULL,                   -- email address
    content  TEXT NOT NULL,
    size     INTEGER NOT NULL,                -- bytes of content in UTF-8
    modified TEXT NOT NULL,                   -- YYYY-MM-DD
    UNIQUE (folder, name)
);
"""

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._()-]{0,99}$")
_FOLDER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _-]{0,39}(/[A-Za-z0-9][A-Za-z0-9 _-]{0,39}){0,3}$")
_META_PROPS: dict[str, Any] = {
    "id": {"type": "string"}, "name": {"type": "string"}, "folder": {"type": "string"},
    "owner": {"type": "string"}, "size": {"type": "integer", "description": "bytes"},
    "modified": {"type": "string", "description": "YYYY-MM-DD"},
}
META_SCHEMA = {"type": "object", "properties": _META_PROPS, "required": list(_META_PROPS),
               "additionalProperties": False}
FILE_SCHEMA = {"type": "object", "properties": {**_META_PROPS, "content": {"type": "string"}},
               "required": list(_META_PROPS) + ["content"], "additionalProperties": False}
HIT_SCHEMA = {"type": "object", "properties": {**_META_PROPS, "snippet": {"type": "string"}},
              "required": list(_META_PROPS) + ["snippet"], "additionalProperties": False}
_ID = {"type": "string", "description": "file id, e.g. 'f03'"}
_FOLDER = {"type": "string", "description": "folder name, e.g. 'Finance' (subfolders as 'Projects/Old')"}


tools = Tools()  # declared on their handlers below; TOOLS and handle come from it

# Records an agent may read as MCP resources (coworkenv://files/<collection>/<id>), read with the
# get tool and completed from the list tool
RESOURCES: list[dict[str, Any]] = [{"collection": "files", "get_tool": "read_file", "list_tool": "list_files", "list_key": "files"}]


# ---------------------------------------------------------------- seed

def _invoice(rng: random.Random, world: dict[str, Any], plan: dict[str, Any], key: str, later: list[str]) -> str:
    number = plan["invoices"][key.split("_", 1)[1]]
    vendor = plan["vendors"]["filing" if key == "invoice_filing" else "sync"]
    project = plan["projects"]["onboarding"]
    work = (f"{project['code']} onboarding services" if key != "invoice_filing"
            else rng.choice(["Process consulting", "Implementation support", "Licence renewal"]))
    days, rate = rng.randint(3, 12), rng.choice([650, 720, 800, 950, 1100])
    status = "Status: paid\n" if key == "invoice_old" else ""
    return (f"Invoice {number}\nFrom: {vendor['name']}\nBill to: {world['company']['name']}\n"
            f"Due: {rng.choice(later)}\nItem: {work}, {days} days x {rate} EUR\nTotal: {days * rate} EUR\n{status}")


def _content(key: str, rng: random.Random, world: dict[str, Any], plan: dict[str, Any]) -> str:
    """Content of one document of the office plan, with rng-drawn figures."""
    later = days_from(world, 1, 15)
    projects, cast, docs = plan["projects"], plan["cast"], plan["documents"]
    if key == "budget":  # the world's project budgets: the same figures as every other app's
        lines = ["project,name,amount_eur"] + [f"{p['code']},{p['name']},{p['budget']}" for p in world["projects"]]
        return "\n".join(lines + [f"TOTAL,,{sum(p['budget'] for p in world['projects'])}"]) + "\n"
    if key == "budget_draft":  # an outdated version, other figures
        amounts = [(p, p["budget"] + rng.choice([-1, 1]) * rng.randrange(2000, 30_001, 500)) for p in world["projects"]]
        lines = [f"# DRAFT, superseded by {docs['budget']['name']}", "project,name,amount_eur"]
        return "\n".join(lines + [f"{p['code']},{p['name']},{a}" for p, a in amounts]) + "\n"
    if key.startswith("invoice_"):
        return _invoice(rng, world, plan, key, later)
    if key == "plan":
        p = projects["sync"]
        return (f"# {p['code']} {p['name']} plan\n\nOwner: {cast['requester']['name']}\nCutover date: "
                f"{rng.choice(later)}\nServices migrated: {rng.randint(4, 9)} of 12\n"
                f"Risk: {rng.choice(['low', 'medium', 'high'])}\n")
    if key == "brief":
        p = projects["kickoff"]
        return (f"# {p['code']} {p['name']} brief\n\nGoal: raise sign-ups by {rng.randint(10, 30)}%.\n"
                f"Launch target: {rng.choice(later)}\nDesign lead: {cast['designer']['name']}\n")
    if key == "findings":
        high, medium = rng.randint(1, 4), rng.randint(3, 9)
        return (f"# {projects['audit']['code']} audit findings\n\nHigh: {high}\nMedium: {medium}\n"
                f"Total: {high + medium}\nAuditor: {cast['security']['name']}\n")
    if key == "contract":
        vendor = plan["vendors"]["contract"]
        return (f"Vendor contract {world['company']['name']} - {vendor['name']}\n"
                f"Value: {rng.randrange(40000, 120001, 5000)} EUR\nTerm: {rng.choice([12, 18, 24, 36])} months\n"
                f"Renewal notice by: {rng.choice(later)}\n")
    if key == "roster":
        team = [p for p in colleagues(world) if p["department"] == world["user"]["department"]] or colleagues(world)
        return "name,email,role,desk\n" + "".join(
            f"{p['name']},{p['email']},{p['role']},{rng.randint(100, 450)}\n" for p in [world["user"], *team])
    if key == "onboarding":
        return (f"# Onboarding checklist: {plan['new_hire']}\n\n- Laptop and badge\n- Accounts and MFA\n"
                f"- Buddy assigned: {rng.choice(colleagues(world))['name']}\n- First-week 1:1 with manager\n")
    if key == "office_move":
        return (f"New office in {world['company']['city']}: floor {rng.randint(2, 6)}, "
                f"{rng.choice(['east', 'west', 'north', 'south'])} wing.\nParking spots: {rng.randint(10, 40)}.\n")
    raise KeyError(key)


def _extras(rng: random.Random, world: dict[str, Any], plan: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """Everyday files: (name, folder, owner email, content)."""
    me, folders, cast, mates = world["user"]["email"], plan["folders"], plan["cast"], colleagues(world)
    past = days_from(world, -14, -3)
    codes = [p["code"] for p in world["projects"]]
    out = [(f"meeting_notes_{d}.md", folders["shared"], rng.choice(mates)["email"],
            f"# Notes {d}\n\n- Discussed {rng.choice(codes)}\n- Next check-in in two weeks\n")
           for d in sorted(rng.sample(past, 3))]
    year = today(world).year
    first, second = plan["projects"]["sync"], plan["projects"]["kickoff"]
    return out + [
        ("draft_goals.md", folders["projects"], me,
         f"# Goals (draft)\n\n- Finish {first['code']}\n- Start the {second['code']} launch\n"),
        ("travel_receipts.csv", folders["finance"], me,
         f"date,item,amount_eur\n{past[1]},train,{rng.randint(40, 140)}\n{past[4]},hotel,{rng.randint(90, 260)}\n"),
        (f"old_roadmap_{year - 1}.md", folders["archive"], cast["product"]["email"],
         f"# Roadmap {year - 1} (superseded)\n"),
        ("logo_ideas.txt", folders["shared"], cast["designer"]["email"],
         f"Ideas: {', '.join(rng.sample(['wave', 'hexagon', 'lowercase wordmark', 'monogram', 'globe', 'arrow'], 3))}.\n"),
        ("holiday_policy.md", folders["hr"], cast["hr"]["email"],
         f"# Holiday policy\n\nAnnual leave: {rng.choice([25, 26, 28, 30])} days.\n"),
        ("passwords_old.txt", folders["archive"], me, "Obsolete. Rotate everything listed in the audit instead.\n"),
        (f"nda_{slug(plan['partner']['name'])}.txt", folders["legal"], cast["legal"]["email"],
         f"Mutual NDA {world['company']['name']} - {plan['partner']['name']}, signed {rng.choice(past)}.\n"),
    ]


def seed(conn: sqlite3.Connection, rng: random.Random, world: dict[str, Any]) -> None:
    """Fill files_files with the office plan's documents plus 7 extras (ids f01.. in folder/name order)."""
    conn.executescript(SCHEMA)
    plan = office_plan(world)
    past = days_from(world, -14, -3)
    rows = [(doc["name"], doc["folder"], doc["owner"], _content(key, rng, world, plan))
            for key, doc in plan["documents"].items()]
    rows += rng.sample(_extras(rng, world, plan), 7)
    rows.sort(key=lambda r: (r[1], r[0]))
    for n, (name, folder, owner, content) in enumerate(rows, start=1):
        dated = re.search(r"\d{4}-\d{2}-\d{2}", name)  # meeting notes are saved on their day
        modified = dated.group(0) if dated else rng.choice(past)
        conn.execute("INSERT INTO files_files VALUES (?,?,?,?,?,?,?)",
                     (f"f{n:02d}", name, folder, owner, content, len(content.encode()), modified))


# ---------------------------------------------------------------- handlers

def _row_dict(row: tuple, content: bool = False) -> dict[str, Any]:
    ident, name, folder, owner, text, size, modified = row
    out = {"id": ident, "name": name, "folder": folder, "owner": owner, "size": size, "modified": modified}
    if content:
        out["content"] = text
    return out


def _get(conn: sqlite3.Connection, ident: str) -> tuple:
    row = one_row(conn, "SELECT * FROM files_files WHERE id = ?", (ident,), f"no file with id {ident!r}")
    return tuple(row)


def _folder(args: dict, required: bool) -> str | None:
    value = req_str(args, "folder") if required else opt_str(args, "folder")
    if value is None:
        return None
    value = value.strip().strip("/")
    if not _FOLDER_RE.match(value):
        raise ToolFailure(f"bad folder name {value!r}: use letters, digits, spaces, '_' or '-', "
                          "subfolders separated by '/'")
    return value


def _by_name(conn: sqlite3.Connection, name: str, folder: str | None) -> tuple:
    sql, params = "SELECT * FROM files_files WHERE name = ?", [name]
    if folder is not None:
        sql, params = sql + " AND folder = ?", params + [folder]
    rows = [tuple(r) for r in conn.execute(sql + " ORDER BY id", params)]
    if not rows:
        where = f" in folder {folder!r}" if folder is not None else ""
        raise ToolFailure(f"no file named {name!r}{where}")
    if len(rows) > 1:
        places = ", ".join(f"{r[0]} ({r[2]})" for r in rows)
        raise ToolFailure(f"several files are named {name!r}: {places}; give the id or the folder")
    return rows[0]


@tools.tool("list_files", "read",
            input=_obj({"folder": _FOLDER,
                        "owner": {"type": "string", "description": "owner's email address"}}, []),
            output=_obj({"files": {"type": "array", "items": META_SCHEMA}, "count": {"type": "integer"},
                         "folders": {"type": "array", "items": {"type": "string"}}},
                        ["files", "count", "folders"]))
def list_files(conn: sqlite3.Connection, args: dict) -> dict:
    """List files (without content), ordered by folder and name, optionally only one folder and/or one
    owner. Also returns the names of all folders."""
    folder, owner = _folder(args, False), (opt_str(args, "owner") or "").strip().lower()
    rows = [tuple(r) for r in conn.execute("SELECT * FROM files_files ORDER BY folder, name, id")]
    files = [_row_dict(r) for r in rows if (folder is None or r[2] == folder) and (not owner or r[3] == owner)]
    return {"files": files, "count": len(files), "folders": sorted({r[2] for r in rows})}


@tools.tool("search_files", "read",
            input=_obj({"query": {"type": "string", "minLength": 1}, "folder": _FOLDER}, ["query"]),
            output=_obj({"files": {"type": "array", "items": HIT_SCHEMA}, "count": {"type": "integer"}},
                        ["files", "count"]))
def search_files(conn: sqlite3.Connection, args: dict) -> dict:
    """Find files whose name or content contains the query (case-insensitive). Each hit has a snippet: the
    first matching line."""
    query, folder = req_str(args, "query").strip().lower(), _folder(args, False)
    hits = []
    for row in conn.execute("SELECT * FROM files_files ORDER BY folder, name, id"):
        row = tuple(row)
        if folder is not None and row[2] != folder:
            continue
        lines = [ln for ln in row[4].splitlines() if query in ln.lower()]
        if lines or query in row[1].lower():
            hits.append({**_row_dict(row), "snippet": (lines[0].strip() if lines else "")[:160]})
    return {"files": hits, "count": len(hits)}


@tools.tool("read_file", "read",
            input=_obj({"id": _ID, "name": {"type": "string", "description": "file name, e.g. 'budget_q2.csv'"},
                        "folder": _FOLDER}, []),
            output=FILE_SCHEMA)
def read_file(conn: sqlite3.Connection, args: dict) -> dict:
    """Read a file's content, by id or by name (add folder if the name exists in several folders)."""
    ident, name = opt_str(args, "id"), opt_str(args, "name")
    if (ident is None) == (name is None):
        raise ToolFailure("give exactly one of 'id' or 'name'")
    row = _get(conn, ident) if ident is not None else _by_name(conn, name or "", _folder(args, False))
    return _row_dict(row, content=True)


@tools.tool("write_file", "write",
            input=_obj({"name": {"type": "string", "description": "file name, e.g. 'notes.md'"},
                        "folder": _FOLDER, "content": {"type": "string"}}, ["name", "folder", "content"]),
            output=_obj({"file": META_SCHEMA, "created": {"type": "boolean"}}, ["file", "created"]))
def write_file(conn: sqlite3.Connection, args: dict) -> dict:
    """Create a file, or overwrite the content of the file with this name in this folder. Returns its
    metadata and whether it was newly created."""
    name, folder = req_str(args, "name").strip(), _folder(args, True)
    content = args.get("content")
    if not isinstance(content, str):
        raise ToolFailure("missing required argument 'content' (a string, may be empty)")
    if not _NAME_RE.match(name):
        raise ToolFailure(f"bad file name {name!r}: letters, digits, spaces, '.', '_', '-', '(', ')' only, "
                          "no '/', at most 100 characters")
    size, day = len(content.encode()), today_iso(conn)
    found = conn.execute("SELECT id FROM files_files WHERE folder = ? AND name = ?", (folder, name)).fetchone()
    if found:
        ident = found[0]
        conn.execute("UPDATE files_files SET content = ?, size = ?, modified = ? WHERE id = ?",
                     (content, size, day, ident))
    else:
        ident = next_id(conn, "files_files", "f")
        conn.execute("INSERT INTO files_files VALUES (?,?,?,?,?,?,?)",
                     (ident, name, folder, user_email(conn), content, size, day))
    return {"file": _row_dict(_get(conn, ident)), "created": not found}


@tools.tool("move_file", "write",
            input=_obj({"id": _ID, "folder": _FOLDER}, ["id", "folder"]),
            output=_obj({"file": META_SCHEMA, "previous_folder": {"type": "string"}},
                        ["file", "previous_folder"]))
def move_file(conn: sqlite3.Connection, args: dict) -> dict:
    """Move a file into another folder (the folder is created if needed)."""
    row, folder = _get(conn, req_str(args, "id")), _folder(args, True)
    clash = conn.execute("SELECT id FROM files_files WHERE folder = ? AND name = ? AND id != ?",
                         (folder, row[1], row[0])).fetchone()
    if clash:
        raise ToolFailure(f"folder {folder!r} already has a file named {row[1]!r} ({clash[0]})")
    conn.execute("UPDATE files_files SET folder = ? WHERE id = ?", (folder, row[0]))
    return {"file": _row_dict(_get(conn, row[0])), "previous_folder": row[2]}


@tools.tool("delete_file", "destructive",
            input=_obj({"id": _ID}, ["id"]),
            output=_obj({"id": {"type": "string"}, "name": {"type": "string"}, "folder": {"type": "string"},
                         "deleted": {"const": True}}, ["id", "name", "folder", "deleted"]))
def delete_file(conn: sqlite3.Connection, args: dict) -> dict:
    """Permanently delete a file. This cannot be undone."""
    row = _get(conn, req_str(args, "id"))
    conn.execute("DELETE FROM files_files WHERE id = ?", (row[0],))
    return {"id": row[0], "name": row[1], "folder": row[2], "deleted": True}


TOOLS, handle = tools.specs, tools.handle

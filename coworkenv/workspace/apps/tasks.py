"""Tasks app: to-do lists of the user's team, tied to the world's projects and assigned to its people.

Standard library only.
"""

from __future__ import annotations

import datetime as dt
import random
import sqlite3
from typing import Any

from ._base import ToolFailure, Tools, check_date, next_id, one_row, opt_bool, opt_choice, opt_int, opt_str, req_str, today_iso, user_email
from ._base import object_schema as _obj

NAME = "tasks"
DESCRIPTION = ("To-do lists of the team, per project: list, search and read tasks, create them, update their "
               "status, assignee or due date, complete and delete them.")

SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks_lists (
    id      TEXT PRIMARY KEY,            -- 'L01', ...
    name    TEXT NOT NULL,               -- e.g. 'PRJ-264 Concept consolidation' or 'My tasks'
    project TEXT,                        -- project code, or NULL for a personal list
    owner   TEXT NOT NULL                -- email address
);
CREATE TABLE IF NOT EXISTS tasks_items (
    id        TEXT PRIMARY KEY,          -- 't01', ...
    list      TEXT NOT NULL,             -- list id
    title     TEXT NOT NULL,
    notes     TEXT NOT NULL DEFAULT '',
    status    TEXT NOT NULL CHECK (status IN ('open', 'in_progress', 'blocked', 'done')),
    priority  TEXT NOT NULL CHECK (priority IN ('low', 'normal', 'high', 'urgent')),
    assignee  TEXT,                      -- email address of a person of the world, or NULL
    project   TEXT,                      -- project code, or NULL
    due       TEXT,                      -- YYYY-MM-DD, or NULL
    created   TEXT NOT NULL,             -- YYYY-MM-DD
    completed TEXT                       -- YYYY-MM-DD when done
);
"""

STATUSES = ["open", "in_progress", "blocked", "done"]
PRIORITIES = ["low", "normal", "high", "urgent"]

_TASK_PROPS: dict[str, Any] = {
    "id": {"type": "string"}, "list": {"type": "string"}, "title": {"type": "string"},
    "status": {"type": "string", "enum": STATUSES}, "priority": {"type": "string", "enum": PRIORITIES},
    "assignee": {"type": ["string", "null"]}, "project": {"type": ["string", "null"]},
    "due": {"type": ["string", "null"]}, "overdue": {"type": "boolean"},
}
TASK_SUMMARY = _obj(_TASK_PROPS, list(_TASK_PROPS))
TASK_SCHEMA = _obj({**_TASK_PROPS, "notes": {"type": "string"}, "created": {"type": "string"},
                    "completed": {"type": ["string", "null"]}}, [*_TASK_PROPS, "notes", "created", "completed"])
_ID = {"type": "string", "description": "task id, e.g. 't07'"}
_ASSIGNEE = {"type": "string", "description": "email address of a person of the workspace"}
_LIST_OUT = _obj({"tasks": {"type": "array", "items": TASK_SUMMARY}, "count": {"type": "integer"}}, ["tasks", "count"])

tools = Tools()  # declared on their handlers below; TOOLS and handle come from it

RESOURCES: list[dict[str, Any]] = [{"collection": "tasks", "get_tool": "get_task", "list_tool": "list_tasks",
                                    "list_key": "tasks", "list_arguments": {"include_done": True, "limit": 200}}]


# ---------------------------------------------------------------- helpers

def _person(conn: sqlite3.Connection, value: Any, field: str) -> str:
    """An email address of a person of the world (case-insensitive)."""
    if not isinstance(value, str) or "@" not in value:
        raise ToolFailure(f"{field} must be a person's email address, got {value!r}")
    row = one_row(conn, "SELECT email FROM world_people WHERE lower(email) = lower(?)", (value.strip(),),
                  f"{field}: nobody in this workspace has the address {value!r}")
    return row[0]


def _project(conn: sqlite3.Connection, value: Any, field: str = "project") -> str:
    if not isinstance(value, str) or not value.strip():
        raise ToolFailure(f"{field} must be a project code like 'PRJ-264', got {value!r}")
    row = one_row(conn, "SELECT code FROM world_projects WHERE upper(code) = upper(?)", (value.strip(),),
                  f"{field}: no project {value!r} in this workspace")
    return row[0]


_COLUMNS = "id, list, title, notes, status, priority, assignee, project, due, created, completed"


def _task(row: tuple, today: str, full: bool = True) -> dict[str, Any]:
    ident, list_, title, notes, status, priority, assignee, project, due, created, completed = row
    out = {"id": ident, "list": list_, "title": title, "status": status, "priority": priority, "assignee": assignee,
           "project": project, "due": due, "overdue": bool(due and due < today and status != "done")}
    if full:
        out.update(notes=notes, created=created, completed=completed)
    return out


def _get(conn: sqlite3.Connection, ident: Any) -> tuple:
    if not isinstance(ident, str) or not ident.strip():
        raise ToolFailure("missing required argument 'id' (a task id like 't07')")
    row = one_row(conn, f"SELECT {_COLUMNS} FROM tasks_items WHERE id = ?", (ident.strip(),), f"no task with id {ident!r}")
    return tuple(row)


_ORDER = "ORDER BY due IS NULL, due, id"


# ---------------------------------------------------------------- handlers

@tools.tool("list_lists", "read",
            input=_obj({}, []),
            output=_obj({"lists": {"type": "array", "items": _obj({
                "id": {"type": "string"}, "name": {"type": "string"}, "project": {"type": ["string", "null"]},
                "owner": {"type": "string"}, "open_tasks": {"type": "integer"}},
                ["id", "name", "project", "owner", "open_tasks"])}}, ["lists"]))
def list_lists(conn: sqlite3.Connection, args: dict) -> dict:
    """The to-do lists (id, name, project, owner) with how many of their tasks are not done."""
    return {"lists": [{"id": i, "name": n, "project": p, "owner": o, "open_tasks": k} for i, n, p, o, k in conn.execute(
        "SELECT l.id, l.name, l.project, l.owner, (SELECT COUNT(*) FROM tasks_items t WHERE t.list = l.id "
        "AND t.status != 'done') FROM tasks_lists l ORDER BY l.id")]}


@tools.tool("list_tasks", "read",
            input=_obj({
                "list": {"type": "string", "description": "list id, e.g. 'L02'"},
                "project": {"type": "string", "description": "project code, e.g. 'PRJ-264'"},
                "assignee": _ASSIGNEE, "status": {"type": "string", "enum": STATUSES},
                "due_before": {"type": "string", "description": "only tasks due on or before this date (YYYY-MM-DD)"},
                "include_done": {"type": "boolean"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 200, "description": "at most this many (default 50)"},
            }, []),
            output=_LIST_OUT)
def list_tasks(conn: sqlite3.Connection, args: dict) -> dict:
    """List tasks by due date (undated last), filtered by list, project, assignee, status or a due date
    limit. Done tasks are left out unless status is 'done' or include_done is true."""
    today = today_iso(conn)
    where, params = [], []
    if (list_ := opt_str(args, "list")) is not None:
        if not conn.execute("SELECT 1 FROM tasks_lists WHERE id = ?", (list_,)).fetchone():
            raise ToolFailure(f"list: no list with id {list_!r} (list_lists gives them)")
        where.append("list = ?")
        params.append(list_)
    if args.get("project") is not None:
        where.append("project = ?")
        params.append(_project(conn, args["project"]))
    if args.get("assignee") is not None:
        where.append("lower(assignee) = lower(?)")
        params.append(_person(conn, args["assignee"], "assignee"))
    status = opt_choice(args, "status", STATUSES)
    if status is not None:
        where.append("status = ?")
        params.append(status)
    elif not opt_bool(args, "include_done"):
        where.append("status != 'done'")
    if args.get("due_before") is not None:
        where.append("due IS NOT NULL AND due <= ?")
        params.append(check_date(args["due_before"], "due_before"))
    limit = opt_int(args, "limit", 50, 1, 200)
    rows = conn.execute(f"SELECT {_COLUMNS} FROM tasks_items {'WHERE ' + ' AND '.join(where) if where else ''} "
                        f"{_ORDER}", params).fetchall()
    return {"tasks": [_task(tuple(r), today, full=False) for r in rows[:limit]], "count": len(rows)}


@tools.tool("search_tasks", "read",
            input=_obj({"query": {"type": "string", "minLength": 1}}, ["query"]),
            output=_LIST_OUT)
def search_tasks(conn: sqlite3.Connection, args: dict) -> dict:
    """Find tasks whose title or notes contain the query (case-insensitive), done ones included."""
    today = today_iso(conn)
    query = req_str(args, "query", 200).strip().lower()
    rows = [tuple(r) for r in conn.execute(f"SELECT {_COLUMNS} FROM tasks_items {_ORDER}")
            if query in (r[2] + " " + r[3]).lower()]
    return {"tasks": [_task(r, today, full=False) for r in rows], "count": len(rows)}


@tools.tool("get_task", "read",
            input=_obj({"id": _ID}, ["id"]),
            output=TASK_SCHEMA)
def get_task(conn: sqlite3.Connection, args: dict) -> dict:
    """One task in full, notes and dates included."""
    today = today_iso(conn)
    return _task(_get(conn, args.get("id")), today)


@tools.tool("create_task", "write",
            input=_obj({
                "title": {"type": "string", "minLength": 1}, "list": {"type": "string", "description": "list id"},
                "project": {"type": "string", "description": "project code"}, "assignee": _ASSIGNEE,
                "due": {"type": "string", "description": "YYYY-MM-DD"}, "priority": {"type": "string", "enum": PRIORITIES},
                "notes": {"type": "string"},
            }, ["title"]),
            output=TASK_SCHEMA)
def create_task(conn: sqlite3.Connection, args: dict) -> dict:
    """Create a task in a list (the user's personal list by default; a project's list when only project is
    given). Returns it."""
    today = today_iso(conn)
    title = req_str(args, "title", 200).strip()
    project = _project(conn, args["project"]) if args.get("project") is not None else None
    list_ = opt_str(args, "list")
    if list_ is not None:
        row = one_row(conn, "SELECT id, project FROM tasks_lists WHERE id = ?", (list_,),
                      f"list: no list with id {list_!r} (list_lists gives them)")
        project = project or row[1]
    elif project is not None:
        row = conn.execute("SELECT id FROM tasks_lists WHERE project = ? ORDER BY id", (project,)).fetchone()
        list_ = row[0] if row else None
    if list_ is None:
        row = one_row(conn, "SELECT id FROM tasks_lists WHERE project IS NULL AND owner = ? ORDER BY id",
                      (user_email(conn),), "list: the user has no personal list; give a list id")
        list_ = row[0]
    assignee = _person(conn, args["assignee"], "assignee") if args.get("assignee") is not None else None
    due = check_date(args["due"], "due") if args.get("due") is not None else None
    priority = opt_choice(args, "priority", PRIORITIES) or "normal"
    notes = opt_str(args, "notes") or ""
    ident = next_id(conn, "tasks_items", "t")
    conn.execute("INSERT INTO tasks_items VALUES (?,?,?,?,?,?,?,?,?,?,NULL)",
                 (ident, list_, title, notes, "open", priority, assignee, project, due, today))
    return _task(_get(conn, ident), today)


@tools.tool("update_task", "write",
            input=_obj({
                "id": _ID, "title": {"type": "string", "minLength": 1}, "notes": {"type": "string"},
                "status": {"type": "string", "enum": STATUSES}, "priority": {"type": "string", "enum": PRIORITIES},
                "assignee": {"type": ["string", "null"], "description": "email address, or null to unassign"},
                "due": {"type": ["string", "null"], "description": "YYYY-MM-DD, or null to clear"},
            }, ["id"]),
            output=TASK_SCHEMA)
def update_task(conn: sqlite3.Connection, args: dict) -> dict:
    """Change a task's title, notes, status, priority, assignee (null to unassign) or due date (null to
    clear). Returns the task."""
    today = today_iso(conn)
    ident = _get(conn, args.get("id"))[0]
    changes: dict[str, Any] = {}
    if args.get("title") is not None:
        changes["title"] = req_str(args, "title", 200).strip()
    if args.get("notes") is not None:
        changes["notes"] = opt_str(args, "notes")
    if (status := opt_choice(args, "status", STATUSES)) is not None:
        changes["status"] = status
        changes["completed"] = today if status == "done" else None
    if (priority := opt_choice(args, "priority", PRIORITIES)) is not None:
        changes["priority"] = priority
    if "assignee" in args:
        changes["assignee"] = None if args["assignee"] is None else _person(conn, args["assignee"], "assignee")
    if "due" in args:
        changes["due"] = None if args["due"] is None else check_date(args["due"], "due")
    if not changes:
        raise ToolFailure("nothing to update: give title, notes, status, priority, assignee or due")
    conn.execute(f"UPDATE tasks_items SET {', '.join(f'{k} = ?' for k in changes)} WHERE id = ?",
                 [*changes.values(), ident])
    return _task(_get(conn, ident), today)


@tools.tool("complete_task", "write",
            input=_obj({"id": _ID}, ["id"]),
            output=TASK_SCHEMA)
def complete_task(conn: sqlite3.Connection, args: dict) -> dict:
    """Mark a task done (completed today). Returns it."""
    today = today_iso(conn)
    ident = _get(conn, args.get("id"))[0]
    conn.execute("UPDATE tasks_items SET status = 'done', completed = COALESCE(completed, ?) WHERE id = ?",
                 (today, ident))
    return _task(_get(conn, ident), today)


@tools.tool("delete_task", "destructive",
            input=_obj({"id": _ID}, ["id"]),
            output=_obj({"id": {"type": "string"}, "title": {"type": "string"}, "deleted": {"const": True}},
                        ["id", "title", "deleted"]))
def delete_task(conn: sqlite3.Connection, args: dict) -> dict:
    """Permanently delete a task. This cannot be undone; prefer complete_task for finished work."""
    ident = _get(conn, args.get("id"))[0]
    title = _get(conn, ident)[2]
    conn.execute("DELETE FROM tasks_items WHERE id = ?", (ident,))
    return {"id": ident, "title": title, "deleted": True}


TOOLS, handle = tools.specs, tools.handle


# ---------------------------------------------------------------- seed

# (title, notes); {name} is the project's name, {client} its client, {product} a product, {owner} its owner
PROJECT_TASKS = (
    ("Draft the {name} status report", "Summarise progress, risks and next steps for the steering group."),
    ("Update the risk register", "Add the new risks from last week's review and re-score the open ones."),
    ("Review the {code} budget with {owner}", "Compare actuals against the plan in the budget workbook."),
    ("Order {qty} x {product}", "Raise the purchase request; the price list has the current price."),
    ("Schedule the kickoff with {client}", "Find a slot that suits their project lead."),
    ("Collect sign-off from {client}", "The acceptance form needs their signature before invoicing."),
    ("Prepare the {name} demo", "A 20-minute walkthrough for the client."),
    ("Write the test plan", "Cover the acceptance criteria agreed in the kickoff."),
    ("Book the training session", "Two sessions for the new users, one remote."),
    ("Archive the {code} documents", "Move the final versions into the project archive."),
    ("Check the supplier invoices", "Match them against the purchase orders before they are paid."),
    ("Plan the go-live weekend", "Agree the rollback plan and who is on call."),
)
PERSONAL_TASKS = ("Submit the monthly expense report", "Renew the parking permit", "Read the new security policy",
                  "Prepare the one-to-one notes", "Book the team offsite venue", "Update my out-of-office dates")


def seed(conn: sqlite3.Connection, rng: random.Random, world: dict[str, Any]) -> None:
    """A list per project and the user's personal list, with tasks assigned to the company's people,
    due around today (some overdue, some done); a few titles recur across projects (the same chore in
    two lists), for tasks to tell apart by project, and one task was entered twice in its list."""
    conn.executescript(SCHEMA)
    today = dt.date.fromisoformat(world["today"])
    company = world["company"]["id"]
    staff = [p for p in world["people"] if p["org"] == company]
    people = {p["id"]: p for p in world["people"]}
    orgs = {o["id"]: o for o in world["organisations"]}
    user = world["user"]["email"]

    def day(lo: int, hi: int) -> str:
        return (today + dt.timedelta(days=rng.randint(lo, hi))).isoformat()

    lists = [("My tasks", None, user)]
    lists += [(f"{p['code']} {p['name']}", p["code"], people[p["owner"]]["email"]) for p in world["projects"]]
    for n, (name, project, owner) in enumerate(lists, start=1):
        conn.execute("INSERT INTO tasks_lists VALUES (?,?,?,?)", (f"L{n:02d}", name, project, owner))

    items: list[tuple] = []  # list, title, notes, status, priority, assignee, project, due, created, completed
    for title in rng.sample(PERSONAL_TASKS, 4):
        status = rng.choice(["open", "open", "in_progress", "done"])
        items.append(("L01", title, "", status, rng.choice(PRIORITIES[:3]), user, None, day(-5, 20), day(-30, -6),
                      day(-5, 0) if status == "done" else None))
    for n, project in enumerate(world["projects"], start=2):
        client = orgs[project["client"]]["name"] if project["client"] else world["company"]["name"]
        owner = people[project["owner"]]
        product = rng.choice(world["products"])
        fill = {"name": project["name"], "code": project["code"], "client": client, "owner": owner["first"],
                "product": product["name"], "qty": rng.randint(2, 12)}
        team = [owner] + rng.sample([p for p in staff if p is not owner], 3)
        count = 2 if project["status"] == "closed" else rng.randint(3, 6)
        for title, notes in rng.sample(PROJECT_TASKS, count):
            if project["status"] == "closed":
                status = "done"
            else:
                status = rng.choice(["open", "open", "open", "in_progress", "in_progress", "blocked", "done"])
            due = day(-10, 30) if rng.random() < 0.9 else None
            created = day(-40, -11)
            items.append((f"L{n:02d}", title.format(**fill), notes.format(**fill), status,
                          rng.choice(PRIORITIES), rng.choice(team)["email"], project["code"], due, created,
                          day(-10, 0) if status == "done" else None))
    # the same chore entered twice in one list: the copy came a day later, without notes
    copied = rng.choice([i for i in items if i[6] is not None and i[3] != "done" and i[2]])
    items.append((*copied[:2], "", "open", copied[4], copied[5], copied[6], copied[7],
                  (today - dt.timedelta(days=1)).isoformat(), None))
    rng.shuffle(items)
    for n, item in enumerate(items, start=1):
        conn.execute("INSERT INTO tasks_items VALUES (?,?,?,?,?,?,?,?,?,?,?)", (f"t{n:02d}", *item))

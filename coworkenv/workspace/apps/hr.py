"""HR directory app: the company's people (department, manager, title, location, start date) and
their leave requests. Standard library only.

Everyone here is a person of the workspace's world who works for its company, so an HR record
joins the CRM account owner, the expense claimant or the mail sender of the same name. The
directory also keeps a former employee: the namesake of a current colleague who has since moved
to another organisation (an outdated record for tasks to tell apart).
"""

from __future__ import annotations

import datetime as dt
import random
import sqlite3
from typing import Any

from ._base import AppMeta, ToolFailure, Tools, check_date, one_row, opt_bool, opt_choice, opt_int, opt_str, req_str, weekday
from ._base import object_schema as _obj

NAME = "hr"
DESCRIPTION = ("The company's HR directory: people with department, manager, title, location and start date, "
               "and their leave requests.")

SCHEMA = """
CREATE TABLE IF NOT EXISTS hr_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS hr_people (
    id          TEXT PRIMARY KEY,             -- employee number, e.g. 'E4307'
    person      TEXT NOT NULL,                -- the world person id
    name        TEXT NOT NULL,
    email       TEXT NOT NULL,
    phone       TEXT NOT NULL,
    title       TEXT NOT NULL,
    department  TEXT NOT NULL,
    manager     TEXT,                         -- employee number of the manager
    location    TEXT NOT NULL,
    start_date  TEXT NOT NULL,                -- YYYY-MM-DD
    status      TEXT NOT NULL CHECK (status IN ('active', 'left')),
    end_date    TEXT                          -- YYYY-MM-DD, for people who left
);
CREATE TABLE IF NOT EXISTS hr_leave (
    id            TEXT PRIMARY KEY,           -- e.g. 'LR-512'
    employee      TEXT NOT NULL,              -- employee number
    kind          TEXT NOT NULL,
    start_date    TEXT NOT NULL,
    end_date      TEXT NOT NULL,
    days          INTEGER NOT NULL,           -- working days
    status        TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected')),
    note          TEXT NOT NULL,
    requested_on  TEXT NOT NULL,
    decided_by    TEXT,                       -- email of who approved or rejected it
    decision_note TEXT
);
"""

LEAVE_KINDS = ["vacation", "sick", "training", "parental", "unpaid"]
LEAVE_STATUSES = ["pending", "approved", "rejected"]
_STR, _NULL_STR = {"type": "string"}, {"type": ["string", "null"]}
_REF = {"type": ["object", "null"], "properties": {"id": _STR, "name": _STR, "title": _STR},
        "required": ["id", "name", "title"], "additionalProperties": False}
_REFS = {"type": "array", "items": {**_REF, "type": "object"}}
_SUMMARY_PROPS: dict[str, Any] = {
    "id": _STR, "name": _STR, "email": _STR, "title": _STR, "department": _STR, "location": _STR,
    "status": {"type": "string", "enum": ["active", "left"]}, "manager_id": _NULL_STR,
}
SUMMARY_SCHEMA = _obj(_SUMMARY_PROPS, list(_SUMMARY_PROPS))
PERSON_SCHEMA = _obj({**_SUMMARY_PROPS, "phone": _STR, "start_date": _STR, "end_date": _NULL_STR,
                      "manager": _REF, "manager_chain": _REFS, "direct_reports": _REFS},
                     list(_SUMMARY_PROPS) + ["phone", "start_date", "end_date", "manager", "manager_chain",
                                             "direct_reports"])
_LEAVE_PROPS: dict[str, Any] = {
    "id": _STR, "employee_id": _STR, "employee_name": _STR, "department": _STR,
    "kind": {"type": "string", "enum": LEAVE_KINDS}, "start_date": _STR, "end_date": _STR,
    "days": {"type": "integer"}, "status": {"type": "string", "enum": LEAVE_STATUSES}, "note": _STR,
    "requested_on": _STR, "decided_by": _NULL_STR, "decision_note": _NULL_STR,
}
LEAVE_SCHEMA = _obj(_LEAVE_PROPS, list(_LEAVE_PROPS))
_EMPLOYEE_ID = {"type": "string", "description": "employee number, e.g. 'E4307'"}
_LEAVE_ID = {"type": "string", "description": "leave request id, e.g. 'LR-512'"}
_DATE = {"type": "string", "description": "YYYY-MM-DD"}

tools = Tools()  # declared on their handlers below; TOOLS and handle come from it
_meta = AppMeta(NAME)

RESOURCES: list[dict[str, Any]] = [{"collection": "people", "get_tool": "get_person", "list_tool": "search_people",
                                    "list_key": "people", "list_arguments": {"include_former": True, "limit": 100}}]


# ---------------------------------------------------------------- seed

def _workdays(start: dt.date, end: dt.date) -> int:
    return sum((start + dt.timedelta(days=n)).weekday() < 5 for n in range((end - start).days + 1))


def seed(conn: sqlite3.Connection, rng: random.Random, world: dict[str, Any]) -> None:
    """The company's people from the world (one former employee added), and ~12 leave requests."""
    conn.executescript(SCHEMA)
    today = dt.date.fromisoformat(world["today"])
    user, company = world["user"], world["company"]
    _meta.write(conn, [("today", today.isoformat()), ("user", user["email"])])
    staff = [p for p in world["people"] if p["org"] == company["id"]]
    base = rng.randrange(1000, 9000, 100)
    ids = {p["id"]: f"E{base + n + 1}" for n, p in enumerate(staff)}
    heads: dict[str, str] = {}
    for p in staff:  # a department's head: its first member without a manager in the world
        if p["manager"] is None and p["department"] not in heads:
            heads[p["department"]] = p["id"]
    joiner = rng.choice([p for p in staff if p["id"] not in heads.values() and p is not user])
    for p in staff:
        manager = p["manager"] or (heads[p["department"]] if heads[p["department"]] != p["id"] else None)
        if p is joiner:
            start = today + dt.timedelta(days=rng.randint(7, 24))
        else:
            start = today - dt.timedelta(days=rng.randint(900, 3600) if p["id"] in heads.values()
                                         else rng.randint(40, 2600))
        location = "Remote" if p["id"] not in heads.values() and rng.random() < 0.15 else p["city"]
        conn.execute("INSERT INTO hr_people VALUES (?,?,?,?,?,?,?,?,?,?,?,NULL)",
                     (ids[p["id"]], p["id"], p["name"], p["email"], p["phone"], p["role"], p["department"],
                      ids.get(manager) if manager else None, location, weekday(start).isoformat(), "active"))
    # the outdated record: a namesake of a colleague who worked here and left for another organisation
    names = {p["name"] for p in staff}
    for n, p in enumerate(q for q in world["people"] if q["org"] != company["id"] and q["name"] in names):
        twin = next(s for s in staff if s["name"] == p["name"])
        titles = sorted({s["role"] for s in staff if s["department"] == twin["department"]})
        end = today - dt.timedelta(days=rng.randint(200, 900))
        start = end - dt.timedelta(days=rng.randint(400, 1800))
        conn.execute("INSERT INTO hr_people VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                     (f"E{base - 37 - n}", p["id"], p["name"], p["email"], p["phone"], rng.choice(titles),
                      twin["department"], None, company["city"], weekday(start).isoformat(), "left",
                      weekday(end).isoformat()))
    _seed_leave(conn, rng, today, user["email"], [p for p in staff if p is not joiner], ids)


def _seed_leave(conn: sqlite3.Connection, rng: random.Random, today: dt.date, approver: str,
                staff: list[dict[str, Any]], ids: dict[str, str]) -> None:
    """Leave requests: an approved absence with a pending request overlapping it in the same
    department, pending requests of the two near-namesakes, and everyday requests around today.
    Requests decided before were decided by the employee's manager (the user for the others)."""
    managers = dict(conn.execute("SELECT p.id, m.email FROM hr_people p JOIN hr_people m ON m.id = p.manager"))
    deciders = {pid: managers[ident] for pid, ident in ids.items() if ident in managers}
    rows: list[tuple[str, str, dt.date, dt.date, str, str | None]] = []  # (person, kind, start, end, status, note)

    def span(first: int, last: int, length: tuple[int, int] = (1, 9)) -> tuple[dt.date, dt.date]:
        start = weekday(today + dt.timedelta(days=rng.randint(first, last)))
        end = start + dt.timedelta(days=rng.randint(*length))
        while end.weekday() >= 5:
            end -= dt.timedelta(days=1)
        return start, end

    by_department: dict[str, list[dict[str, Any]]] = {}
    for p in staff:
        by_department.setdefault(p["department"], []).append(p)
    crowded = rng.choice(sorted(d for d, members in by_department.items() if len(members) >= 2))
    away, asking = rng.sample(by_department[crowded], 2)
    start, end = span(10, 40, (4, 9))
    rows.append((away["id"], "vacation", start, end, "approved", None))
    overlap = weekday(start + dt.timedelta(days=rng.randint(1, 3)))
    rows.append((asking["id"], "vacation", overlap, max(overlap, end - dt.timedelta(days=rng.randint(0, 2))),
                 "pending", None))
    namesakes = [(a, b) for a in staff for b in staff if a["last"] == b["last"] and a["id"] < b["id"]
                 and a["first"][:-1] == b["first"][:-1]]
    chosen = {away["id"], asking["id"]}
    for a, b in namesakes[:1]:
        for p in (a, b):
            if p["id"] not in chosen:
                rows.append((p["id"], "vacation", *span(50, 120), "pending", None))
                chosen.add(p["id"])
    others = [p for p in staff if p["id"] not in chosen]
    for p in rng.sample(others, min(len(others), rng.randint(6, 8))):
        kind = rng.choices(LEAVE_KINDS, weights=[8, 2, 2, 1, 1])[0]
        status = rng.choices(["approved", "pending", "rejected"], weights=[4, 3, 1])[0]
        if kind == "sick":
            status = "approved"
        past = kind == "sick" or status != "pending" and rng.random() < 0.4
        start, end = span(-60, -10) if past else span(5, 120, (0, 12 if kind != "parental" else 60))
        rows.append((p["id"], kind, start, end, status,
                     "Team already short-staffed that week." if status == "rejected" else None))
    base = rng.randrange(100, 900)
    notes = {"vacation": ["Family trip", "Holiday", "Visiting relatives", "Wedding", "Moving house"],
             "sick": ["Doctor's note attached", "Recovering from surgery"], "training": ["Certification course",
             "Conference"], "parental": ["Parental leave"], "unpaid": ["Personal matters"]}
    rows.sort(key=lambda r: (r[2], r[0]))
    for n, (pid, kind, start, end, status, decision) in enumerate(rows):
        requested = min(start, today) - dt.timedelta(days=rng.randint(3, 30))
        decided_by = deciders.get(pid, approver) if status != "pending" else None
        conn.execute("INSERT INTO hr_leave VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                     (f"LR-{base + n}", ids[pid], kind, start.isoformat(), end.isoformat(), _workdays(start, end),
                      status, rng.choice(notes[kind]), requested.isoformat(), decided_by,
                      decision if decision else ("Approved." if status == "approved" else None)))


# ---------------------------------------------------------------- handlers

_PEOPLE_COLUMNS = "id, name, email, title, department, location, status, manager, phone, start_date, end_date"


def _summary(row: tuple) -> dict[str, Any]:
    keys = ("id", "name", "email", "title", "department", "location", "status", "manager_id")
    return dict(zip(keys, row[:8], strict=True))


def _person_row(conn: sqlite3.Connection, ident: str) -> tuple:
    row = one_row(conn, f"SELECT {_PEOPLE_COLUMNS} FROM hr_people WHERE id = ?", (ident,),
                  f"no employee with number {ident!r}; search_people finds employee numbers")
    return tuple(row)


def _ref(row: tuple) -> dict[str, str]:
    return {"id": row[0], "name": row[1], "title": row[3]}


def _person(conn: sqlite3.Connection, ident: str) -> dict[str, Any]:
    row = _person_row(conn, ident)
    out = _summary(row)
    out.update(phone=row[8], start_date=row[9], end_date=row[10])
    chain, seen, manager = [], {ident}, row[7]
    while manager and manager not in seen:
        seen.add(manager)
        boss = _person_row(conn, manager)
        chain.append(_ref(boss))
        manager = boss[7]
    out["manager"] = chain[0] if chain else None
    out["manager_chain"] = chain
    out["direct_reports"] = [_ref(tuple(r)) for r in conn.execute(
        f"SELECT {_PEOPLE_COLUMNS} FROM hr_people WHERE manager = ? AND status = 'active' ORDER BY name", (ident,))]
    return out


def _leave(conn: sqlite3.Connection, ident: str) -> dict[str, Any]:
    row = one_row(conn, "SELECT l.id, l.employee, p.name, p.department, l.kind, l.start_date, l.end_date, l.days, l.status, l.note, "
                  "l.requested_on, l.decided_by, l.decision_note FROM hr_leave l JOIN hr_people p ON p.id = l.employee "
                  "WHERE l.id = ?", (ident,), f"no leave request with id {ident!r}; list_leave shows the requests")
    return dict(zip(_LEAVE_PROPS, row, strict=True))


def _departments(conn: sqlite3.Connection) -> list[str]:
    return [d for (d,) in conn.execute("SELECT DISTINCT department FROM hr_people WHERE status = 'active' "
                                       "ORDER BY department")]


def _decide(conn: sqlite3.Connection, ident: str, status: str, note: str | None) -> dict[str, Any]:
    request = _leave(conn, ident)
    if request["status"] != "pending":
        raise ToolFailure(f"leave request {ident} is already {request['status']}; only pending requests can be decided")
    conn.execute("UPDATE hr_leave SET status = ?, decided_by = ?, decision_note = ? WHERE id = ?",
                 (status, _meta(conn, "user"), note, ident))
    return _leave(conn, ident)


@tools.tool("search_people", "read",
            input=_obj({
                "query": {"type": "string", "description": "text to look for; omit for everyone"},
                "department": {"type": "string", "description": "exact department name, e.g. 'Finance'"},
                "location": {"type": "string", "description": "exact location, e.g. a city or 'Remote'"},
                "include_former": {"type": "boolean", "description": "also list people who have left"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "at most this many (default 50)"},
            }, []),
            output=_obj({"people": {"type": "array", "items": SUMMARY_SCHEMA}, "count": {"type": "integer"}},
                        ["people", "count"]))
def search_people(conn: sqlite3.Connection, args: dict) -> dict:
    """Search the HR directory. Matches the query (case-insensitive substring) against name, email and
    title; filters by department and location. Former employees are left out unless include_former is
    true. Returns people summaries sorted by name."""
    query = (opt_str(args, "query") or "").strip().lower()
    department, location = opt_str(args, "department"), opt_str(args, "location")
    former, limit = opt_bool(args, "include_former"), opt_int(args, "limit", 50, 1, 100)
    found = []
    for row in conn.execute(f"SELECT {_PEOPLE_COLUMNS} FROM hr_people ORDER BY name, id"):
        row = tuple(row)
        if (row[6] == "left" and not former or department and row[4].lower() != department.strip().lower()
                or location and row[5].lower() != location.strip().lower()):
            continue
        if query and query not in " ".join((row[1], row[2], row[3])).lower():
            continue
        found.append(_summary(row))
    return {"people": found[:limit], "count": len(found)}


@tools.tool("get_person", "read",
            input=_obj({"id": _EMPLOYEE_ID}, ["id"]),
            output=PERSON_SCHEMA)
def get_person(conn: sqlite3.Connection, args: dict) -> dict:
    """One person's full HR record by employee number: contact details, start date, their manager, the
    whole management chain above them (nearest first) and their direct reports."""
    return _person(conn, req_str(args, "id", 40).strip())


@tools.tool("list_department", "read",
            input=_obj({"department": {"type": "string", "description": "department name, e.g. 'Sales'"}},
                       ["department"]),
            output=_obj({"department": _STR, "head": _REF, "headcount": {"type": "integer"},
                         "members": {"type": "array", "items": SUMMARY_SCHEMA}},
                        ["department", "head", "headcount", "members"]))
def list_department(conn: sqlite3.Connection, args: dict) -> dict:
    """The current members of one department, with its head (the member without a manager in it) and its
    headcount."""
    wanted = req_str(args, "department", 100).strip().lower()
    known = _departments(conn)
    department = next((d for d in known if d.lower() == wanted), None)
    if department is None:
        raise ToolFailure(f"department {args['department']!r} does not exist; departments: {', '.join(known)}")
    members = [tuple(r) for r in conn.execute(
        f"SELECT {_PEOPLE_COLUMNS} FROM hr_people WHERE department = ? AND status = 'active' ORDER BY name",
        (department,))]
    ids = {r[0] for r in members}
    head = next((r for r in members if r[7] not in ids), None)
    return {"department": department, "head": _ref(head) if head else None, "headcount": len(members),
            "members": [_summary(r) for r in members]}


@tools.tool("list_leave", "read",
            input=_obj({
                "status": {"type": "string", "enum": LEAVE_STATUSES},
                "employee_id": _EMPLOYEE_ID,
                "department": {"type": "string"},
                "from_date": _DATE, "to_date": _DATE,
            }, []),
            output=_obj({"requests": {"type": "array", "items": LEAVE_SCHEMA}, "count": {"type": "integer"}},
                        ["requests", "count"]))
def list_leave(conn: sqlite3.Connection, args: dict) -> dict:
    """Leave requests, earliest first. Filters: status, one employee, one department, and a date window
    (requests overlapping from_date..to_date)."""
    status, employee = opt_choice(args, "status", LEAVE_STATUSES), opt_str(args, "employee_id")
    department = opt_str(args, "department")
    if employee is not None:
        _person_row(conn, employee.strip())
    low = check_date(args["from_date"], "from_date") if args.get("from_date") is not None else None
    high = check_date(args["to_date"], "to_date") if args.get("to_date") is not None else None
    found = []
    for (ident,) in conn.execute("SELECT id FROM hr_leave ORDER BY start_date, id"):
        request = _leave(conn, ident)
        if (status and request["status"] != status or employee and request["employee_id"] != employee.strip()
                or department and request["department"].lower() != department.strip().lower()
                or low and request["end_date"] < low or high and request["start_date"] > high):
            continue
        found.append(request)
    return {"requests": found, "count": len(found)}


@tools.tool("approve_leave", "write",
            input=_obj({"id": _LEAVE_ID, "note": {"type": "string"}}, ["id"]),
            output=LEAVE_SCHEMA)
def approve_leave(conn: sqlite3.Connection, args: dict) -> dict:
    """Approve a pending leave request (as the user), with an optional note. Returns the request."""
    ident = req_str(args, "id", 40).strip()
    _leave(conn, ident)
    return _decide(conn, ident, "approved", opt_str(args, "note") or "Approved.")


@tools.tool("reject_leave", "write",
            input=_obj({"id": _LEAVE_ID, "reason": {"type": "string", "minLength": 1}}, ["id", "reason"]),
            output=LEAVE_SCHEMA)
def reject_leave(conn: sqlite3.Connection, args: dict) -> dict:
    """Reject a pending leave request (as the user); a reason is required and is shown to the employee.
    Returns the request."""
    ident = req_str(args, "id", 40).strip()
    _leave(conn, ident)
    return _decide(conn, ident, "rejected", req_str(args, "reason", 2000))


@tools.tool("cancel_leave", "destructive",
            input=_obj({"id": _LEAVE_ID}, ["id"]),
            output=_obj({"id": _STR, "employee_id": _STR, "status": {"type": "string", "enum": LEAVE_STATUSES},
                         "deleted": {"const": True}}, ["id", "employee_id", "status", "deleted"]))
def cancel_leave(conn: sqlite3.Connection, args: dict) -> dict:
    """Withdraw a leave request on the employee's behalf: the request is deleted, whatever its status, and
    cannot be restored."""
    request = _leave(conn, req_str(args, "id", 40).strip())
    conn.execute("DELETE FROM hr_leave WHERE id = ?", (request["id"],))
    return {"id": request["id"], "employee_id": request["employee_id"], "status": request["status"],
            "deleted": True}


@tools.tool("update_title", "write",
            input=_obj({"id": _EMPLOYEE_ID, "title": {"type": "string", "minLength": 1}}, ["id", "title"]),
            output=_obj({"person": SUMMARY_SCHEMA, "previous_title": _STR}, ["person", "previous_title"]))
def update_title(conn: sqlite3.Connection, args: dict) -> dict:
    """Change a current employee's job title. Returns the updated summary and the previous title."""
    row = _person_row(conn, req_str(args, "id", 40).strip())
    title = req_str(args, "title", 120).strip()
    if row[6] != "active":
        raise ToolFailure(f"{row[1]} ({row[0]}) has left the company; only current employees' titles change")
    conn.execute("UPDATE hr_people SET title = ? WHERE id = ?", (title, row[0]))
    return {"person": _summary(_person_row(conn, row[0])), "previous_title": row[3]}


TOOLS, handle = tools.specs, tools.handle

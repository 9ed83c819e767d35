"""Calendar app: the user's events. Standard library only.

Attendees are the people invited besides the user, stored as email addresses.
"""

from __future__ import annotations

import json
import random
import sqlite3
from typing import Any

from ._base import (
    ROOM_NAMES,
    ToolFailure,
    Tools,
    check_date,
    check_emails,
    check_time,
    colleagues,
    days_from,
    next_id,
    office_plan,
    one_row,
    opt_str,
    req_str,
    world_names,
)
from ._base import object_schema as _obj

NAME = "calendar"
DESCRIPTION = "The user's calendar: list, read, create, update and cancel events."

SCHEMA = """
CREATE TABLE IF NOT EXISTS calendar_events (
    id          TEXT PRIMARY KEY,             -- 'e01', 'e02', ...
    title       TEXT NOT NULL,
    date        TEXT NOT NULL,                -- YYYY-MM-DD
    start       TEXT NOT NULL,                -- HH:MM, 24-hour
    "end"       TEXT NOT NULL,                -- HH:MM, after start, same day
    attendees   TEXT NOT NULL DEFAULT '[]',   -- JSON list of email addresses (besides the user)
    location    TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT ''
);
"""

FIELDS = ["title", "date", "start", "end", "attendees", "location", "description"]
EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"id": {"type": "string"}, "title": {"type": "string"}, "date": {"type": "string"},
                   "start": {"type": "string"}, "end": {"type": "string"},
                   "attendees": {"type": "array", "items": {"type": "string"}},
                   "location": {"type": "string"}, "description": {"type": "string"}},
    "required": ["id"] + FIELDS, "additionalProperties": False,
}
CONFLICTS_SCHEMA = {"type": "array", "description": "other events overlapping this one",
                    "items": {"type": "object", "properties": {"id": {"type": "string"}, "title": {"type": "string"},
                                                               "start": {"type": "string"}, "end": {"type": "string"}},
                              "required": ["id", "title", "start", "end"], "additionalProperties": False}}
_ID = {"type": "string", "description": "event id, e.g. 'e12'"}
_DATE = {"type": "string", "description": "date, YYYY-MM-DD"}
_EDITABLE = {
    "title": {"type": "string", "minLength": 1},
    "date": _DATE,
    "start": {"type": "string", "description": "start time, HH:MM (24-hour)"},
    "end": {"type": "string", "description": "end time, HH:MM (24-hour), later than start"},
    "attendees": {"type": "array", "items": {"type": "string"},
                  "description": "email addresses of invitees besides you"},
    "location": {"type": "string"},
    "description": {"type": "string"},
}


tools = Tools()  # declared on their handlers below; TOOLS and handle come from it

# Records an agent may read as MCP resources (coworkenv://calendar/<collection>/<id>), read with the
# get tool and completed from the list tool
RESOURCES: list[dict[str, Any]] = [{"collection": "events", "get_tool": "get_event", "list_tool": "list_events", "list_key": "events"}]


# ---------------------------------------------------------------- seed

Event = tuple[str, list[str], str, str]  # (title, attendee emails, location, description)


def _extras(rng: random.Random, world: dict[str, Any], plan: dict[str, Any]) -> list[Event]:
    """Everyday events with the world's people."""
    cast, rooms, mates = plan["cast"], plan["rooms"], colleagues(world)
    lunch = rng.choice(mates)
    outsider = rng.choice([p for p in world["people"] if p["org"] != world["company"]["id"]])
    sync, kickoff = plan["projects"]["sync"], plan["projects"]["kickoff"]
    partner, contact = plan["partner"], plan["contacts"]["partner"]
    manager = plan["contacts"]["manager"]
    return [
        ("Team all-hands", [p["email"] for p in rng.sample(mates, min(6, len(mates)))],
         rng.choice(["Auditorium", "Atrium", "Town hall"]), "Monthly company update."),
        (f"Lunch with {lunch['first']}", [lunch["email"]], "Cafeteria", ""),
        (f"Interview: {cast['engineer']['role'].lower()} candidate", [cast["engineer"]["email"]], rng.choice(rooms),
         "Second-round interview."),
        (f"{kickoff['code']} design critique", [cast["designer"]["email"]], rng.choice(rooms), "Review v2 mockups."),
        ("Office move walkthrough", [cast["ops"]["email"]], f"Floor {rng.randint(2, 6)}", ""),
        ("Focus time", [], "", "No meetings, please."),
        ("Dentist", [], f"Dr. {outsider['last']}, {world['company']['city']}", "Personal."),
        (f"{partner['name']} workshop", [contact["email"]], plan["online"], f"Process workshop with {partner['name']}."),
        ("Hiring sync", [cast["hr"]["email"], cast["engineer"]["email"]], rng.choice(rooms), ""),
        (f"{sync['code']} cutover rehearsal", [cast["requester"]["email"], cast["engineer"]["email"]],
         rng.choice(rooms), f"Dry run of the {sync['name']} cutover."),
        ("Expense report deadline", [], "", "Submit this month's expenses."),
        (f"Coffee with {manager['first']}", [manager["email"]], f"Cafe {rng.choice(ROOM_NAMES)}",
         f"Informal catch-up with {plan['vendors']['sync']['name']}."),
    ]


def seed(conn: sqlite3.Connection, rng: random.Random, world: dict[str, Any]) -> None:
    """Fill calendar_events with ~20 events from a week before the world's today to two weeks after."""
    conn.executescript(SCHEMA)
    plan = office_plan(world)
    days, future, past = days_from(world, -7, 11), days_from(world, 2, 11), days_from(world, -7, -1)

    def slot() -> tuple[str, str]:
        start = rng.randrange(9 * 60, 16 * 60 + 1, 30)
        end = start + rng.choice([30, 45, 60, 90])
        return f"{start // 60:02d}:{start % 60:02d}", f"{end // 60:02d}:{end % 60:02d}"

    rows = []  # (date, start, end, title, attendees, location, description)
    for key, meeting in plan["meetings"].items():
        moved = plan["review_move"]["date"] if key == "budget_review" else None  # a mail asks to move it there
        date = rng.choice(future[:4] if key == "one_on_one" else [d for d in future if d != moved])
        rows.append((date, *slot(), meeting["title"], meeting["attendees"], meeting["location"], meeting["agenda"]))
    # near-duplicates: last week's budget review, and a vendor sync with another vendor
    review = plan["meetings"]["budget_review"]
    rows.append((rng.choice(past), *slot(), review["title"], review["attendees"], review["location"],
                 "Previous review; notes shared by mail."))
    other = plan["vendors"]["filing"]
    if other["id"] != plan["vendors"]["sync"]["id"]:
        rows.append((rng.choice(future), *slot(), f"Vendor sync with {other['name']}",
                     [plan["contacts"]["filing"]["email"]], plan["online"], f"Invoice {plan['invoices']['filing']}."))
    for title, attendees, location, description in rng.sample(_extras(rng, world, plan), 12):
        rows.append((rng.choice(days), *slot(), title, attendees, location, description))
    rows.sort(key=lambda r: (r[0], r[1], r[3]))
    for n, (date, start, end, title, attendees, location, description) in enumerate(rows, start=1):
        conn.execute("INSERT INTO calendar_events VALUES (?,?,?,?,?,?,?,?)",
                     (f"e{n:02d}", title, date, start, end, json.dumps(attendees), location, description))


# ---------------------------------------------------------------- handlers

def _event(row: tuple) -> dict[str, Any]:
    ident, title, date, start, end, attendees, location, description = row
    return {"id": ident, "title": title, "date": date, "start": start, "end": end,
            "attendees": json.loads(attendees), "location": location, "description": description}


def _get(conn: sqlite3.Connection, ident: str) -> dict[str, Any]:
    row = one_row(conn, "SELECT * FROM calendar_events WHERE id = ?", (ident,), f"no event with id {ident!r}")
    return _event(tuple(row))


def _conflicts(conn: sqlite3.Connection, ev: dict[str, Any]) -> list[dict[str, str]]:
    rows = conn.execute('SELECT id, title, start, "end" FROM calendar_events WHERE date = ? AND id != ? '
                        'AND start < ? AND "end" > ? ORDER BY start, id',
                        (ev["date"], ev["id"], ev["end"], ev["start"]))
    return [{"id": r[0], "title": r[1], "start": r[2], "end": r[3]} for r in rows]


def _validated(args: dict, base: dict[str, Any]) -> dict[str, Any]:
    """Merge the given editable fields over ``base`` and check the result."""
    ev = dict(base)
    for field in FIELDS:
        if field not in args or args[field] is None:
            continue
        if field == "title":
            ev[field] = req_str(args, field, 200).strip()
        elif field == "date":
            ev[field] = check_date(args[field], field)
        elif field in ("start", "end"):
            ev[field] = check_time(args[field], field)
        elif field == "attendees":
            ev[field] = check_emails(args[field], field)
        else:
            ev[field] = opt_str(args, field) or ""
    if ev["end"] <= ev["start"]:
        raise ToolFailure(f"end ({ev['end']}) must be later than start ({ev['start']})")
    return ev


def _save(conn: sqlite3.Connection, ev: dict[str, Any]) -> None:
    conn.execute("INSERT OR REPLACE INTO calendar_events VALUES (?,?,?,?,?,?,?,?)",
                 (ev["id"], ev["title"], ev["date"], ev["start"], ev["end"], json.dumps(ev["attendees"]),
                  ev["location"], ev["description"]))


def _matches_attendee(emails: list[str], needle: str, names: dict[str, str]) -> bool:
    return any(needle in e or needle in names.get(e, "").lower() for e in emails)


@tools.tool("list_events", "read",
            input=_obj({
                "date": {**_DATE, "description": "only this date, YYYY-MM-DD"},
                "from_date": {**_DATE, "description": "only on or after this date, YYYY-MM-DD"},
                "to_date": {**_DATE, "description": "only on or before this date, YYYY-MM-DD"},
                "attendee": {"type": "string", "description": "email address or name (substring) of an attendee"},
                "query": {"type": "string", "description": "case-insensitive text to find in the title"},
            }, []),
            output=_obj({"events": {"type": "array", "items": EVENT_SCHEMA}, "count": {"type": "integer"}},
                        ["events", "count"]))
def list_events(conn: sqlite3.Connection, args: dict) -> dict:
    """List events ordered by date and start time. Filter by one date or a date range, by an attendee
    (email address or part of a name), and by text in the title."""
    bounds = {k: check_date(args[k], k) for k in ("date", "from_date", "to_date") if args.get(k) is not None}
    if "from_date" in bounds and "to_date" in bounds and bounds["from_date"] > bounds["to_date"]:
        raise ToolFailure(f"from_date ({bounds['from_date']}) is after to_date ({bounds['to_date']})")
    attendee = (opt_str(args, "attendee") or "").strip().lower()
    query = (opt_str(args, "query") or "").strip().lower()
    events, names = [], world_names(conn) if attendee else {}
    for row in conn.execute('SELECT * FROM calendar_events ORDER BY date, start, "end", id'):
        ev = _event(tuple(row))
        if (ev["date"] != bounds.get("date", ev["date"]) or ev["date"] < bounds.get("from_date", "")
                or ev["date"] > bounds.get("to_date", "9999")):
            continue
        if attendee and not _matches_attendee(ev["attendees"], attendee, names):
            continue
        if query and query not in ev["title"].lower():
            continue
        events.append(ev)
    return {"events": events, "count": len(events)}


@tools.tool("get_event", "read",
            input=_obj({"id": _ID}, ["id"]),
            output=EVENT_SCHEMA)
def get_event(conn: sqlite3.Connection, args: dict) -> dict:
    """Get one event by id, with its time, attendees, location and description."""
    return _get(conn, req_str(args, "id"))


@tools.tool("create_event", "write",
            input=_obj(dict(_EDITABLE), ["title", "date", "start", "end"]),
            output=_obj({"event": EVENT_SCHEMA, "conflicts": CONFLICTS_SCHEMA}, ["event", "conflicts"]))
def create_event(conn: sqlite3.Connection, args: dict) -> dict:
    """Create an event on the user's calendar. Returns the event and any overlapping events."""
    for key in ("title", "date", "start", "end"):
        req_str(args, key)
    blank = {"id": next_id(conn, "calendar_events", "e"), "attendees": [], "location": "", "description": ""}
    ev = _validated(args, blank)
    _save(conn, ev)
    return {"event": ev, "conflicts": _conflicts(conn, ev)}


@tools.tool("update_event", "write",
            input=_obj({"id": _ID, **_EDITABLE}, ["id"]),
            output=_obj({"event": EVENT_SCHEMA, "updated_fields": {"type": "array", "items": {"type": "string"}},
                         "conflicts": CONFLICTS_SCHEMA}, ["event", "updated_fields", "conflicts"]))
def update_event(conn: sqlite3.Connection, args: dict) -> dict:
    """Change fields of an existing event; only the fields given change (attendees replaces the whole
    list). Returns the updated event and any overlapping events."""
    current = _get(conn, req_str(args, "id"))
    changed = [f for f in FIELDS if args.get(f) is not None]
    if not changed:
        raise ToolFailure(f"nothing to update: give at least one of {', '.join(FIELDS)}")
    ev = _validated(args, current)
    _save(conn, ev)
    return {"event": ev, "updated_fields": changed, "conflicts": _conflicts(conn, ev)}


@tools.tool("cancel_event", "destructive",
            input=_obj({"id": _ID}, ["id"]),
            output=_obj({"id": {"type": "string"}, "title": {"type": "string"}, "date": {"type": "string"},
                         "cancelled": {"const": True}}, ["id", "title", "date", "cancelled"]))
def cancel_event(conn: sqlite3.Connection, args: dict) -> dict:
    """Cancel an event: removes it from the calendar permanently."""
    ev = _get(conn, req_str(args, "id"))
    conn.execute("DELETE FROM calendar_events WHERE id = ?", (ev["id"],))
    return {"id": ev["id"], "title": ev["title"], "date": ev["date"], "cancelled": True}


TOOLS, handle = tools.specs, tools.handle

"""Notes app: the user's personal notes, with tags and pins. Standard library only.

Notes hold facts the other apps lack: a contact's new phone number (the address book still has the
old one), meeting notes of the world's projects with decisions and action items, the office Wi-Fi
(and, as a distractor, a customer's), and a draft note superseded by a newer one.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import re
import sqlite3
import unicodedata
from typing import Any

from ._base import ToolFailure, Tools, next_id, one_row, opt_bool, opt_int, opt_str, req_str, today_iso
from ._base import object_schema as _obj
from .contacts import story

NAME = "notes"
DESCRIPTION = "The user's personal notes: list, search, read, create, update, pin and delete notes; tags."

SCHEMA = """
CREATE TABLE IF NOT EXISTS notes_notes (
    id      TEXT PRIMARY KEY,                  -- 'n01', ...
    title   TEXT NOT NULL,
    body    TEXT NOT NULL DEFAULT '',
    tags    TEXT NOT NULL DEFAULT '[]',        -- JSON list of lower-case tags
    pinned  INTEGER NOT NULL DEFAULT 0,
    created TEXT NOT NULL,                     -- YYYY-MM-DD
    updated TEXT NOT NULL                      -- YYYY-MM-DD
);
"""

_STR = {"type": "string"}
_TAGS = {"type": "array", "items": _STR}
_SUMMARY_PROPS: dict[str, Any] = {"id": _STR, "title": _STR, "tags": _TAGS, "pinned": {"type": "boolean"},
                                  "updated": _STR, "snippet": _STR}
SUMMARY_SCHEMA = _obj(_SUMMARY_PROPS, list(_SUMMARY_PROPS))
NOTE_SCHEMA = _obj({"id": _STR, "title": _STR, "body": _STR, "tags": _TAGS, "pinned": {"type": "boolean"},
                    "created": _STR, "updated": _STR}, ["id", "title", "body", "tags", "pinned", "created", "updated"])
_ID = {"type": "string", "description": "note id, e.g. 'n04'"}
_LIST_OUT = _obj({"notes": {"type": "array", "items": SUMMARY_SCHEMA}, "count": {"type": "integer"}}, ["notes", "count"])

tools = Tools()  # declared on their handlers below; TOOLS and handle come from it

RESOURCES: list[dict[str, Any]] = [{"collection": "notes", "get_tool": "read_note", "list_tool": "list_notes",
                                    "list_key": "notes", "list_arguments": {"limit": 100}}]


# ---------------------------------------------------------------- seed

_WORDS = ("maple", "harbour", "copper", "lantern", "meadow", "falcon", "pebble", "orchid", "summit", "willow", "cobalt",
          "ember", "glacier", "saffron", "tundra", "velvet")
_DECISIONS = ("Weekly status goes out on Fridays.", "Scope is frozen until the {milestone}.",
              "Budget reviews move to monthly.", "The client demo happens after the pilot.",
              "All open risks get an owner by next week.", "We drop the custom reporting module for now.")
_ACTIONS = ("draft the {thing}", "book a room for the next review", "send the minutes to the team",
            "check the numbers in the budget section", "collect feedback on the {thing}", "update the risk list")
_THINGS = ("requirements doc", "test plan", "rollout checklist", "vendor comparison", "cost estimate", "training material")
_BOOKS = ("The Pragmatic Programmer", "Thinking, Fast and Slow", "Deep Work", "The Mythical Man-Month", "Atomic Habits",
          "Range", "Shape Up", "The Phoenix Project", "Working Backwards")
_VENUES = ("a farmhouse near {city}", "the lakeside hotel in {city}", "a coworking loft in {city}",
           "the mountain lodge outside {city}", "a castle hotel near {city}")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower())


def seed(conn: sqlite3.Connection, rng: random.Random, world: dict[str, Any]) -> None:
    """Fill notes_notes with ~15 notes drawn from the world and its shared cast (``contacts.story``)."""
    conn.executescript(SCHEMA)
    cast = story(world)
    today = dt.date.fromisoformat(world["today"])
    orgs = {o["id"]: o for o in world["organisations"]}
    by_id = {p["id"]: p for p in world["people"]}
    colleagues = cast["colleagues"]
    day = lambda lo, hi: today - dt.timedelta(days=rng.randint(lo, hi))
    notes: list[dict[str, Any]] = []

    def add(title: str, body: str, tags: list[str], created: dt.date, pinned: bool = False,
            updated: dt.date | None = None) -> None:
        notes.append({"title": title, "body": body, "tags": tags, "pinned": pinned, "created": created,
                      "updated": max(created, updated or created)})

    stale = cast["stale"]
    if stale is not None:
        when = day(2, 12)
        add(rng.choice(["Phone update", "New mobile number", f"Call notes {when.isoformat()}"]),
            f"{stale['name']} ({orgs[stale['org']]['name']}) called on {when.isoformat()}: their new mobile is "
            f"{stale['phone']}. The old number no longer works.\nTODO: update the address book.",
            ["contacts", "todo"], when)
    meeting_codes = [p["code"] for p in world["projects"] if p["code"] in cast["milestones"]]
    for code in rng.sample(meeting_codes, min(2, len(meeting_codes))):
        when = day(3, 20)
        team = cast["team"][code]
        decisions = [d.format(milestone=cast["milestones"][code][0][0]) for d in rng.sample(_DECISIONS, 2)]
        actions = [f"{p['first']}: {a.format(thing=rng.choice(_THINGS))}"
                   for p, a in zip(rng.sample(team, min(3, len(team))), rng.sample(_ACTIONS, 3), strict=False)]
        add(f"{code} sync {when.isoformat()}",
            "Attendees: " + ", ".join(p["name"] for p in team) + "\n\nDecisions:\n" + "".join(f"- {d}\n" for d in decisions)
            + "\nAction items:\n" + "".join(f"- {a}\n" for a in actions), [code.lower(), "meeting"], when)
    company = world["company"]
    password = lambda: f"{rng.choice(_WORDS)}-{rng.choice(_WORDS)}-{rng.randint(10, 99)}"
    add(f"Wi-Fi at the {company['city']} office",
        f"Network: {_slug(company['name'])}-staff\nPassword: {password()}\nGuests use {_slug(company['name'])}-guest.",
        ["office"], day(60, 300))
    visited = rng.choice([o for o in world["organisations"] if o["kind"] == "customer"])
    add(f"Wi-Fi at {visited['name']} ({visited['city']})",
        f"Network: {_slug(visited['name'])}-visitors\nPassword: {password()}", ["travel"], day(20, 200))
    add("Parking", f"Spot {rng.randint(1, 120)} on level -{rng.randint(1, 3)}. Badge opens the side gate.", ["office"],
        day(90, 400))
    add("Books to read", "".join(f"- {b}\n" for b in rng.sample(_BOOKS, 4)), ["personal"], day(30, 300))
    friend = rng.choice(colleagues)
    add(f"Gift ideas for {friend['first']}", rng.choice(["A good notebook", "Coffee beans", "A plant"]) + ", or "
        + rng.choice(["concert tickets", "a cookbook", "a board game"]) + ".", ["personal"], day(10, 90))
    idea_code = rng.choice(world["projects"])["code"]
    add(f"Ideas for {idea_code}", "- Automate the weekly report\n- Ask the client for a mid-project survey\n"
        f"- Pair {rng.choice(colleagues)['first']} with {rng.choice(colleagues)['first']} on the hand-over\n",
        [idea_code.lower(), "ideas"], day(5, 40))
    old_venue, new_venue = rng.sample(_VENUES, 2)
    draft = day(30, 60)
    add("Team offsite (draft)", f"Venue idea: {old_venue.format(city=rng.choice(world['organisations'])['city'])}\n"
        "Budget not confirmed.", ["offsite"], draft)
    add("Team offsite", f"Venue: {new_venue.format(city=company['city'])}\nDate: "
        f"{(today + dt.timedelta(days=rng.randint(20, 60))).isoformat()}\nConfirmed with "
        f"{rng.choice(colleagues)['name']}.", ["offsite"], draft + dt.timedelta(days=rng.randint(5, 20)))
    manager = by_id.get(world["user"]["manager"] or "") or rng.choice(colleagues)
    add(f"1:1 with {manager['first']}", "- Career goals for next year\n- Feedback on the last project\n- Training budget",
        ["1on1"], day(1, 14))
    add("Weekly to-do", "- Expense report\n- Review the project plans\n- Reply to open chat threads", ["todo"],
        day(1, 6), pinned=True)
    notes.sort(key=lambda n: (n["created"], n["title"]))
    for n, note in enumerate(notes, start=1):
        conn.execute("INSERT INTO notes_notes VALUES (?,?,?,?,?,?,?)",
                     (f"n{n:02d}", note["title"], note["body"], json.dumps(note["tags"]), int(note["pinned"]),
                      note["created"].isoformat(), note["updated"].isoformat()))


# ---------------------------------------------------------------- handlers

_COLUMNS: tuple[str, ...] = ("id", "title", "body", "tags", "pinned", "created", "updated")
_TAG_RE = re.compile(r"^[a-z0-9][a-z0-9 _-]{0,29}$")


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().casefold()


def _note(conn: sqlite3.Connection, ident: str) -> dict[str, Any]:
    row = one_row(conn, "SELECT * FROM notes_notes WHERE id = ?", (ident,), f"no note with id {ident!r}")
    note = dict(zip(_COLUMNS, tuple(row), strict=True))
    note["tags"], note["pinned"] = json.loads(note["tags"]), bool(note["pinned"])
    return note


def _summary(note: dict[str, Any]) -> dict[str, Any]:
    flat = " ".join(note["body"].split())
    return {"id": note["id"], "title": note["title"], "tags": note["tags"], "pinned": note["pinned"],
            "updated": note["updated"], "snippet": flat if len(flat) <= 100 else flat[:97] + "..."}


def _all(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    return [_note(conn, ident) for (ident,) in
            conn.execute("SELECT id FROM notes_notes ORDER BY pinned DESC, updated DESC, id DESC")]


def _tags(args: dict, key: str) -> list[str] | None:
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise ToolFailure(f"{key} must be a list of tags (strings), got {value!r}")
    out: list[str] = []
    for tag in value:
        tag = tag.strip().lower().lstrip("#")
        if not _TAG_RE.match(tag):
            raise ToolFailure(f"{key}: bad tag {tag!r} (letters, digits, spaces, '-' or '_', at most 30 characters)")
        if tag not in out:
            out.append(tag)
    return out


def _tag_filter(args: dict) -> str:
    return (opt_str(args, "tag") or "").strip().lower().lstrip("#")


def _search(conn: sqlite3.Connection, args: dict) -> dict[str, Any]:
    words = _fold(req_str(args, "query", 500)).split()
    tag, limit = _tag_filter(args), opt_int(args, "limit", 20, 1, 100)
    scored = []
    for note in _all(conn):
        if tag and tag not in note["tags"]:
            continue
        title, body, tags = _fold(note["title"]), _fold(note["body"]), _fold(" ".join(note["tags"]))
        if not all(w in f"{title} {body} {tags}" for w in words):
            continue
        score = sum(3 * title.count(w) + body.count(w) + 2 * tags.count(w) for w in words)
        scored.append((-score, note["updated"], note))
    scored.sort(key=lambda s: s[1], reverse=True)  # newest first among equals (the sorts are stable)
    scored.sort(key=lambda s: s[0])
    return {"notes": [_summary(n) for *_, n in scored[:limit]], "count": len(scored)}


@tools.tool("list_notes", "read",
            input=_obj({
                "tag": {"type": "string", "description": "only notes with this tag"},
                "pinned_only": {"type": "boolean"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "at most this many (default 20)"},
            }, []),
            output=_LIST_OUT)
def list_notes(conn: sqlite3.Connection, args: dict) -> dict:
    """List notes, pinned ones first, then the most recently updated. Returns summaries (title, tags, a
    snippet) and how many matched."""
    tag, pinned, limit = _tag_filter(args), opt_bool(args, "pinned_only"), opt_int(args, "limit", 20, 1, 100)
    found = [n for n in _all(conn) if (not tag or tag in n["tags"]) and (not pinned or n["pinned"])]
    return {"notes": [_summary(n) for n in found[:limit]], "count": len(found)}


@tools.tool("search_notes", "read",
            input=_obj({
                "query": {"type": "string", "minLength": 1, "description": "words to look for"},
                "tag": {"type": "string", "description": "only notes with this tag"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "at most this many (default 20)"},
            }, ["query"]),
            output=_LIST_OUT)
def search_notes(conn: sqlite3.Connection, args: dict) -> dict:
    """Full-text search over note titles, bodies and tags: every word of the query must appear
    (case-insensitive). Best matches first (title matches count most)."""
    return _search(conn, args)


@tools.tool("read_note", "read",
            input=_obj({"id": _ID}, ["id"]),
            output=NOTE_SCHEMA)
def read_note(conn: sqlite3.Connection, args: dict) -> dict:
    """Read one note in full by id."""
    return _note(conn, req_str(args, "id"))


@tools.tool("create_note", "write",
            input=_obj({"title": {"type": "string", "minLength": 1}, "body": _STR,
                        "tags": _TAGS | {"description": "tags, e.g. ['prj-264', 'meeting']"},
                        "pinned": {"type": "boolean"}}, ["title"]),
            output=NOTE_SCHEMA)
def create_note(conn: sqlite3.Connection, args: dict) -> dict:
    """Create a note. Returns it."""
    title, body = req_str(args, "title", 200).strip(), opt_str(args, "body") or ""
    if len(body) > 20000:
        raise ToolFailure(f"body is too long ({len(body)} characters, at most 20000)")
    ident, today = next_id(conn, "notes_notes", "n"), today_iso(conn)
    conn.execute("INSERT INTO notes_notes VALUES (?,?,?,?,?,?,?)",
                 (ident, title, body, json.dumps(_tags(args, "tags") or []), int(opt_bool(args, "pinned")), today,
                  today))
    return _note(conn, ident)


@tools.tool("update_note", "write",
            input=_obj({"id": _ID, "title": {"type": "string", "minLength": 1},
                        "body": {"type": "string", "description": "the whole new body"},
                        "append": {"type": "string", "description": "text to add on a new line at the end"},
                        "tags": _TAGS | {"description": "the note's tags from now on"}}, ["id"]),
            output=_obj({"note": NOTE_SCHEMA, "updated_fields": {"type": "array", "items": _STR}},
                        ["note", "updated_fields"]))
def update_note(conn: sqlite3.Connection, args: dict) -> dict:
    """Change a note: a new title, a new body (replacing it) or text appended to the body, and/or a new
    list of tags (replacing them). Returns the note and the fields that changed."""
    note = _note(conn, req_str(args, "id"))
    title, body, append, tags = opt_str(args, "title"), opt_str(args, "body"), opt_str(args, "append"), \
        _tags(args, "tags")
    if body is not None and append is not None:
        raise ToolFailure("give either body (to replace it) or append (to add to it), not both")
    if title is None and body is None and append is None and tags is None:
        raise ToolFailure("nothing to update: give title, body, append or tags")
    changed = []
    if title is not None:
        if not title.strip():
            raise ToolFailure("title cannot be empty")
        if title.strip() != note["title"]:
            note["title"] = title.strip()
            changed.append("title")
    if body is not None and body != note["body"]:
        note["body"] = body
        changed.append("body")
    if append is not None and append.strip():
        note["body"] = note["body"].rstrip("\n") + ("\n" if note["body"].strip() else "") + append.strip() + "\n"
        changed.append("body")
    if tags is not None and tags != note["tags"]:
        note["tags"] = tags
        changed.append("tags")
    if len(note["body"]) > 20000:
        raise ToolFailure(f"the body would be too long ({len(note['body'])} characters, at most 20000)")
    if changed:
        conn.execute("UPDATE notes_notes SET title = ?, body = ?, tags = ?, updated = ? WHERE id = ?",
                     (note["title"], note["body"], json.dumps(note["tags"]), today_iso(conn), note["id"]))
    return {"note": _note(conn, note["id"]), "updated_fields": changed}


@tools.tool("pin_note", "write",
            input=_obj({"id": _ID, "pinned": {"type": "boolean", "description": "default true"}}, ["id"]),
            output=_obj({"id": _STR, "title": _STR, "pinned": {"type": "boolean"}}, ["id", "title", "pinned"]))
def pin_note(conn: sqlite3.Connection, args: dict) -> dict:
    """Pin a note to the top of the list, or unpin it with pinned=false. Returns its state."""
    note = _note(conn, req_str(args, "id"))
    pinned = True if args.get("pinned") is None else args["pinned"]
    if not isinstance(pinned, bool):
        raise ToolFailure(f"pinned must be true or false, got {pinned!r}")
    conn.execute("UPDATE notes_notes SET pinned = ? WHERE id = ?", (int(pinned), note["id"]))
    return {"id": note["id"], "title": note["title"], "pinned": pinned}


@tools.tool("delete_note", "destructive",
            input=_obj({"id": _ID}, ["id"]),
            output=_obj({"id": _STR, "title": _STR, "deleted": {"const": True}}, ["id", "title", "deleted"]))
def delete_note(conn: sqlite3.Connection, args: dict) -> dict:
    """Permanently delete a note. This cannot be undone."""
    note = _note(conn, req_str(args, "id"))
    conn.execute("DELETE FROM notes_notes WHERE id = ?", (note["id"],))
    return {"id": note["id"], "title": note["title"], "deleted": True}


@tools.tool("list_tags", "read",
            input=_obj({}, []),
            output=_obj({"tags": {"type": "array", "items": _obj({"tag": _STR, "count": {"type": "integer"}},
                                                                ["tag", "count"])}}, ["tags"]))
def list_tags(conn: sqlite3.Connection, args: dict) -> dict:
    """List every tag used on notes with how many notes carry it, most used first."""
    counts: dict[str, int] = {}
    for note in _all(conn):
        for tag in note["tags"]:
            counts[tag] = counts.get(tag, 0) + 1
    return {"tags": [{"tag": t, "count": c} for t, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]}


TOOLS, handle = tools.specs, tools.handle

"""Chat app: the team's channels and the user's direct messages. Standard library only.

Channels are named after the world's projects (``prj-264-concept-consolidation``) and departments;
their members are people of the world, addressed by email. Messages carry facts that tasks chain on:
a moved milestone, a newcomer's contact details, a question answered in a thread, a colleague asking
for a phone number, a closed project's channel waiting to be archived, and an archived planning
channel with an outdated date as a distractor.
"""

from __future__ import annotations

import datetime as dt
import random
import re
import sqlite3
import unicodedata
from typing import Any

from ._base import (
    NOW_TIME,
    ToolFailure,
    Tools,
    check_email,
    check_emails,
    next_id,
    one_row,
    opt_bool,
    opt_int,
    opt_str,
    req_str,
    today_iso,
    user_email,
    world_names,
)
from ._base import object_schema as _obj
from .contacts import story

NAME = "chat"
DESCRIPTION = "Team chat: channels and direct messages; read, search, post, reply in threads, create and archive channels."

SCHEMA = """
CREATE TABLE IF NOT EXISTS chat_channels (
    id         TEXT PRIMARY KEY,               -- 'ch01', ...
    name       TEXT NOT NULL UNIQUE,           -- 'general', 'prj-264-concept-consolidation'; a DM: 'dm-<email>'
    kind       TEXT NOT NULL CHECK (kind IN ('channel', 'dm')),
    topic      TEXT NOT NULL DEFAULT '',
    private    INTEGER NOT NULL DEFAULT 0,
    archived   INTEGER NOT NULL DEFAULT 0,
    created    TEXT NOT NULL,                  -- YYYY-MM-DD
    created_by TEXT NOT NULL                   -- email
);
CREATE TABLE IF NOT EXISTS chat_members (
    channel_id TEXT NOT NULL,
    email      TEXT NOT NULL,
    PRIMARY KEY (channel_id, email)
);
CREATE TABLE IF NOT EXISTS chat_messages (
    id         TEXT PRIMARY KEY,               -- 'msg01', ... in the order they were posted
    channel_id TEXT NOT NULL,
    author     TEXT NOT NULL,                  -- email
    text       TEXT NOT NULL,
    date       TEXT NOT NULL,                  -- YYYY-MM-DD
    time       TEXT NOT NULL,                  -- HH:MM
    thread_id  TEXT                            -- the thread's first message, for a reply
);
"""

_STR = {"type": "string"}
_NULLABLE = {"type": ["string", "null"]}
MESSAGE_SCHEMA = _obj({
    "id": _STR, "channel": {"type": "string", "description": "channel name"}, "channel_id": _STR,
    "author": {"type": "string", "description": "author's email"}, "author_name": _STR, "text": _STR,
    "date": _STR, "time": _STR, "thread_id": _NULLABLE | {"description": "the thread's first message, for a reply"},
    "reply_count": {"type": "integer"},
}, ["id", "channel", "channel_id", "author", "author_name", "text", "date", "time", "thread_id", "reply_count"])
CHANNEL_SCHEMA = _obj({
    "id": _STR, "name": _STR, "kind": {"type": "string", "enum": ["channel", "dm"]}, "topic": _STR,
    "private": {"type": "boolean"}, "archived": {"type": "boolean"}, "member_count": {"type": "integer"},
    "message_count": {"type": "integer"}, "last_activity": _NULLABLE,
    "with": _NULLABLE | {"description": "for a direct message, the other person's email"},
}, ["id", "name", "kind", "topic", "private", "archived", "member_count", "message_count", "last_activity", "with"])
MEMBER_SCHEMA = _obj({"email": _STR, "name": _STR}, ["email", "name"])
CHANNEL_FULL_SCHEMA = {**CHANNEL_SCHEMA, "properties": {**CHANNEL_SCHEMA["properties"],
                                                       "members": {"type": "array", "items": MEMBER_SCHEMA}},
                       "required": CHANNEL_SCHEMA["required"] + ["members"]}
_CHANNEL_ARG = {"type": "string", "description": "channel name (e.g. 'general' or '#general'), channel id (e.g. "
                                                 "'ch03'), or a person's email for your direct messages with them"}
_MSG_ID = {"type": "string", "description": "message id, e.g. 'msg12'"}
_TEXT = {"type": "string", "minLength": 1, "description": "message text"}

tools = Tools()  # declared on their handlers below; TOOLS and handle come from it

RESOURCES: list[dict[str, Any]] = [{"collection": "messages", "get_tool": "get_message", "list_tool": "search_messages",
                                    "list_key": "messages", "list_arguments": {"limit": 100}}]


# ---------------------------------------------------------------- seed

def slug(text: str) -> str:
    """A channel-name form of ``text``: 'Concept consolidation' -> 'concept-consolidation'."""
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-")


def project_channel(project: dict[str, Any]) -> str:
    return f"{project['code'].lower()}-{slug(project['name'])}"


ROOMS = ("Atlas room", "Orion room", "Vega room", "Lyra room", "Nova room", "Polaris room", "Juniper room", "Cedar room")
_THINGS = ("requirements doc", "test plan", "data model", "rollout checklist", "vendor comparison", "cost estimate",
           "wireframes", "training material")
_NOISE_GENERAL = (
    "Reminder: please submit your expense reports by {date}.",
    "IT: laptops get a security update tonight; please restart before you leave.",
    "The {city} office kitchen gets a new coffee machine on {date}.",
    "All-hands on {date} at 16:00, agenda to follow.",
    "Cake in the kitchen for {first}'s birthday!",
    "The fire drill is on {date} at 11:00. No need to bring anything.",
)
_NOISE_RANDOM = ("Anyone up for lunch at the new ramen place?", "Photos from the team outing are in the shared drive.",
                 "Who left a blue umbrella in the meeting room?", "Recommendations for a good podcast?",
                 "The plants on floor 3 need water, volunteers welcome.")
_NOISE_PROJECT = ("Finished the first draft of the {thing}; comments welcome.", "Status: the {thing} is about {pct}% done.",
                  "Can we move our weekly sync to Thursdays?", "I'm out on {date}; {first} covers for me.",
                  "Uploaded the latest {thing} to the shared drive.")
_DM_OPENERS = ("Hi {first}, could you share the {code} plan with me when you get a chance?",
               "Thanks for your help yesterday, {first}!", "Are you joining the all-hands this week?",
               "Do you have ten minutes tomorrow to go over the {code} budget?")


class _Log:
    """Messages drawn per channel, stamped in order within the window, then numbered by time."""

    def __init__(self, rng: random.Random, today: dt.date) -> None:
        self.rng = rng
        self.days = [today - dt.timedelta(days=n) for n in range(21, 0, -1)
                     if (today - dt.timedelta(days=n)).weekday() < 5]
        self.items: list[dict[str, Any]] = []

    def stamps(self, n: int) -> list[dt.datetime]:
        picks = sorted(self.rng.sample(range(len(self.days) * 40), n))
        return [dt.datetime.combine(self.days[p // 40], dt.time(8 + (p % 40) // 4, (p % 4) * 15 + self.rng.randint(0, 9)))
                for p in picks]

    def channel(self, channel: str, posts: list[tuple[str, str, list[tuple[str, str]]]], weeks_earlier: int = 0) -> None:
        """``posts``: (author, text, replies as (author, text)) in order."""
        for stamp, (author, text, replies) in zip(self.stamps(len(posts)), posts, strict=True):
            stamp -= dt.timedelta(weeks=weeks_earlier)
            root = {"channel": channel, "author": author, "text": text, "stamp": stamp, "root": None}
            self.items.append(root)
            when = stamp
            for reply_author, reply_text in replies:
                when = when + dt.timedelta(minutes=self.rng.randint(2, 50))
                self.items.append({"channel": channel, "author": reply_author, "text": reply_text, "stamp": when,
                                   "root": root})


def seed(conn: sqlite3.Connection, rng: random.Random, world: dict[str, Any]) -> None:
    """Fill channels, members and ~80 messages from the world and its shared cast (``contacts.story``)."""
    conn.executescript(SCHEMA)
    cast = story(world)
    today = dt.date.fromisoformat(world["today"])
    user, me = world["user"], world["user"]["email"]
    orgs = {o["id"]: o for o in world["organisations"]}
    by_id = {p["id"]: p for p in world["people"]}
    colleagues = cast["colleagues"]
    log = _Log(rng, today)
    later = [(today + dt.timedelta(days=n)).isoformat() for n in range(2, 20) if (today + dt.timedelta(days=n)).weekday() < 5]
    channels: list[dict[str, Any]] = []

    def add_channel(name: str, topic: str, members: list[str], created_by: str, private: bool = False,
                    archived: bool = False, kind: str = "channel") -> str:
        channels.append({"name": name, "topic": topic, "members": sorted(set(members) | {me}), "private": private,
                         "archived": archived, "kind": kind, "created_by": created_by,
                         "created": (today - dt.timedelta(days=rng.randint(25, 300))).isoformat()})
        return name

    fill = lambda text, **kw: text.format(date=rng.choice(later), city=world["company"]["city"],
                                          first=rng.choice(colleagues)["first"], thing=rng.choice(_THINGS),
                                          pct=rng.choice([20, 35, 50, 60, 75, 90]), **kw)

    # general and random
    everyone = [c["email"] for c in colleagues]
    general = add_channel("general", f"Announcements for everyone at {world['company']['name']}", everyone,
                          rng.choice(colleagues)["email"])
    posts = [(rng.choice(colleagues)["email"], fill(t), []) for t in rng.sample(_NOISE_GENERAL, 4)]
    if cast["departed"] is not None and cast["replacement"] is not None:
        gone, new = cast["departed"], cast["replacement"]
        sales = [c for c in colleagues if c["department"] == "Sales"] or colleagues
        posts.insert(rng.randint(1, len(posts)), (rng.choice(sales)["email"],
                     f"Heads-up: {gone['name']} has left {orgs[gone['org']]['name']}. {new['name']} ({new['role']}) is "
                     f"our contact there from now on.", []))
    log.channel(general, posts)
    random_ch = add_channel("random", "Everything else", rng.sample(everyone, min(len(everyone), 12)),
                            rng.choice(colleagues)["email"])
    log.channel(random_ch, [(rng.choice(colleagues)["email"], t, []) for t in rng.sample(_NOISE_RANDOM, 3)])

    # department channels, with questions answered in threads
    departments = sorted({c["department"] for c in colleagues})
    mine = user["department"] if user["department"] in departments else departments[0]
    dept_channels = [mine] + rng.sample([d for d in departments if d != mine], 1)
    questions = _questions(rng, world, cast)
    for department, question in zip(dept_channels, questions, strict=False):
        people = [c for c in colleagues if c["department"] == department]
        if len(people) < 2:
            people = rng.sample(colleagues, 3)
        name = add_channel(slug(department), f"The {department} team", [p["email"] for p in people],
                           people[0]["email"])
        asker, answerer = rng.sample(people, 2)
        posts = [(rng.choice(people)["email"], fill(t), []) for t in rng.sample(_NOISE_PROJECT, 2)]
        posts.insert(1, (asker["email"], question[0], [(answerer["email"], question[1])]))
        log.channel(name, posts)

    # project channels
    for project in world["projects"]:
        code, team = project["code"], cast["team"][project["code"]]
        owner = by_id[project["owner"]]
        missing = {p["id"] for p in cast["missing"].get(code, [])}
        name = add_channel(project_channel(project), f"{project['name']} ({code})",
                           [p["email"] for p in [*team, owner] if p["id"] not in missing], owner["email"])
        speakers = [p for p in team if p["id"] not in missing] or [owner]
        posts = [(owner["email"], f"Welcome to #{name}! The plan lives in the document '{code} project plan'.", [])]
        for text in rng.sample(_NOISE_PROJECT, 2):
            replies = [(rng.choice(speakers)["email"], rng.choice(["Fine by me.", "Thanks!", "Noted.", "Looks good."]))] \
                if rng.random() < 0.5 else []
            posts.append((rng.choice(speakers)["email"], fill(text), replies))
        moved = cast["moved"]
        if moved and moved["code"] == code:
            posts.append((owner["email"], f"Heads-up: the {moved['milestone']} milestone moves from {moved['old']} to "
                                          f"{moved['new']}. Could someone update the project plan?", []))
            others = [d for _, d in cast["milestones"][code]] + [moved["new"]]
            fake = moved["old"]
            while fake in others:
                fake = (dt.date.fromisoformat(moved["old"]) - dt.timedelta(days=rng.randint(5, 30))).isoformat()
            planning = add_channel(f"{code.lower()}-planning", f"Early planning for {code} (superseded by #{name})",
                                   [p["email"] for p in team], owner["email"], archived=True)
            log.channel(planning, [(owner["email"], f"Tentative dates: {moved['milestone']} on {fake}.", []),
                                   (rng.choice(speakers)["email"], "Works for me.", [])], weeks_earlier=5)
        if cast["phone_question"] == code and project["client"]:
            posts.append((owner["email"], f"Does anyone have a phone number for our contact at "
                                          f"{orgs[project['client']]['name']}? I need to call them this week.", []))
        newcomer = cast["newcomer"]
        if newcomer is not None and cast["newcomer_project"] == code:
            posts.insert(1, (owner["email"], f"Please welcome {newcomer['name']}, {newcomer['role']} at "
                                             f"{orgs[newcomer['org']]['name']}, who will support us on {code}. You can "
                                             f"reach them at {newcomer['email']} or {newcomer['phone']}.", []))
        if project["status"] == "closed":
            posts.append((owner["email"], f"{code} is wrapped up, thanks all! We can archive this channel now.", []))
        log.channel(name, posts)

    # direct messages
    for person in rng.sample(colleagues, 3):
        code = rng.choice(world["projects"])["code"]
        name = add_channel(f"dm-{person['email']}", "", [person["email"]], person["email"], private=True, kind="dm")
        opener = rng.choice(_DM_OPENERS).format(first=user["first"], code=code)
        answer = rng.choice(["Sure, will do.", "Yes, see you there.", "Any time!", "Tomorrow at 10 works."])
        log.channel(name, [(person["email"], opener, []), (me, answer, [])][:rng.randint(1, 2)])

    ids = {}
    for n, channel in enumerate(channels, start=1):
        ids[channel["name"]] = f"ch{n:02d}"
        conn.execute("INSERT INTO chat_channels VALUES (?,?,?,?,?,?,?,?)",
                     (f"ch{n:02d}", channel["name"], channel["kind"], channel["topic"], int(channel["private"]),
                      int(channel["archived"]), channel["created"], channel["created_by"]))
        conn.executemany("INSERT INTO chat_members VALUES (?,?)", [(f"ch{n:02d}", m) for m in channel["members"]])
    log.items.sort(key=lambda item: item["stamp"])
    for n, item in enumerate(log.items, start=1):
        item["id"] = f"msg{n:02d}"
    for item in log.items:
        conn.execute("INSERT INTO chat_messages VALUES (?,?,?,?,?,?,?)",
                     (item["id"], ids[item["channel"]], item["author"], item["text"], item["stamp"].date().isoformat(),
                      item["stamp"].strftime("%H:%M"), item["root"]["id"] if item["root"] else None))


def _questions(rng: random.Random, world: dict[str, Any], cast: dict[str, Any]) -> list[tuple[str, str]]:
    """Questions asked in a department channel and answered in a thread: (question, answer)."""
    code = rng.choice(world["projects"])["code"]
    amount = rng.choice([500, 1000, 2500, 5000, 10000])
    approver = rng.choice(cast["colleagues"])
    month = dt.date.fromisoformat(world["today"]).strftime("%B")
    pool = [
        (f"What's the cost centre for {code}?", f"{code} books on cost centre CC-{rng.randint(1000, 9999)}."),
        (f"Who approves purchases over {amount} EUR?",
         f"That's {approver['name']}; anything above {amount} EUR needs their sign-off."),
        (f"Which room is the {month} all-hands in?", f"It's in the {rng.choice(ROOMS)} on floor {rng.randint(2, 9)}."),
    ]
    return rng.sample(pool, 2)


# ---------------------------------------------------------------- handlers

def _fold(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().casefold()


_CH_COLUMNS: tuple[str, ...] = ("id", "name", "kind", "topic", "private", "archived", "created", "created_by")


def _channel_row(conn: sqlite3.Connection, ref: str, field: str = "channel") -> dict[str, Any]:
    key = ref.strip().lstrip("#").strip()
    row = conn.execute("SELECT * FROM chat_channels WHERE id = ? OR name = ?", (key, key.lower())).fetchone()
    if row is None and "@" in key:
        row = one_row(conn, "SELECT * FROM chat_channels WHERE kind = 'dm' AND name = ?", (f"dm-{key.lower()}",),
                      f"{field}: you have no direct messages with {key!r} (send_direct_message starts them)")
    elif row is None:
        near = [n for (n,) in conn.execute("SELECT name FROM chat_channels WHERE kind = 'channel' AND name LIKE ? "
                                           "ORDER BY name", (f"%{key.lower()}%",))]
        hint = f"; did you mean {', '.join(near[:5])}?" if near else "; list_channels shows them all"
        raise ToolFailure(f"{field}: no channel {ref!r}{hint}")
    return dict(zip(_CH_COLUMNS, tuple(row), strict=True))


def _channel(conn: sqlite3.Connection, row: dict[str, Any], members: bool = False) -> dict[str, Any]:
    emails = [e for (e,) in conn.execute("SELECT email FROM chat_members WHERE channel_id = ? ORDER BY email", (row["id"],))]
    count, last = conn.execute("SELECT COUNT(*), MAX(date || ' ' || time) FROM chat_messages WHERE channel_id = ?",
                               (row["id"],)).fetchone()
    out = {"id": row["id"], "name": row["name"], "kind": row["kind"], "topic": row["topic"],
           "private": bool(row["private"]), "archived": bool(row["archived"]), "member_count": len(emails),
           "message_count": count, "last_activity": last,
           "with": row["name"][3:] if row["kind"] == "dm" else None}
    if members:
        names = world_names(conn)
        out["members"] = [{"email": e, "name": names.get(e, "")} for e in emails]
    return out


_MSG_COLUMNS: tuple[str, ...] = ("id", "channel_id", "author", "text", "date", "time", "thread_id")


def _messages(conn: sqlite3.Connection, where: str, params: tuple, order: str = "ASC") -> list[dict[str, Any]]:
    names, channels = world_names(conn), dict(conn.execute("SELECT id, name FROM chat_channels"))
    rows = conn.execute(f"SELECT m.*, (SELECT COUNT(*) FROM chat_messages r WHERE r.thread_id = m.id) FROM chat_messages m "
                        f"WHERE {where} ORDER BY m.date {order}, m.time {order}, m.rowid {order}", params).fetchall()
    out = []
    for row in rows:
        msg = dict(zip(_MSG_COLUMNS, tuple(row)[:7], strict=True))
        out.append({"id": msg["id"], "channel": channels.get(msg["channel_id"], ""), "channel_id": msg["channel_id"],
                    "author": msg["author"], "author_name": names.get(msg["author"], ""), "text": msg["text"],
                    "date": msg["date"], "time": msg["time"], "thread_id": msg["thread_id"], "reply_count": row[7]})
    return out


def _message(conn: sqlite3.Connection, ident: str) -> dict[str, Any]:
    found = _messages(conn, "m.id = ?", (ident,))
    if not found:
        raise ToolFailure(f"no message with id {ident!r}")
    return found[0]


def _text(args: dict) -> str:
    return req_str(args, "text", 4000).strip()


def _post(conn: sqlite3.Connection, channel: dict[str, Any], text: str, thread: str | None) -> dict[str, Any]:
    if channel["archived"]:
        raise ToolFailure(f"#{channel['name']} is archived; nobody can post in it")
    ident = next_id(conn, "chat_messages", "msg")
    conn.execute("INSERT INTO chat_messages VALUES (?,?,?,?,?,?,?)",
                 (ident, channel["id"], user_email(conn), text, today_iso(conn), NOW_TIME, thread))
    return _message(conn, ident)


def _known(conn: sqlite3.Connection, emails: list[str], field: str) -> list[str]:
    names = world_names(conn)
    unknown = [e for e in emails if e not in names]
    if unknown:
        raise ToolFailure(f"{field}: nobody in the directory has the address {unknown[0]!r}")
    return emails


def _channel_name(args: dict) -> str:
    name = req_str(args, "name", 200).strip().lstrip("#")
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,79}", name):
        raise ToolFailure(f"name must be lower-case letters, digits and hyphens (at most 80), got {name!r}")
    return name


@tools.tool("list_channels", "read",
            input=_obj({
                "query": {"type": "string", "description": "only channels whose name or topic contains this text"},
                "kind": {"type": "string", "enum": ["channel", "dm"], "description": "only channels, or only direct messages"},
                "include_archived": {"type": "boolean"},
            }, []),
            output=_obj({"channels": {"type": "array", "items": CHANNEL_SCHEMA}, "count": {"type": "integer"}},
                        ["channels", "count"]))
def list_channels(conn: sqlite3.Connection, args: dict) -> dict:
    """List channels and direct-message conversations with topic, member and message counts and last
    activity. Archived channels are left out unless include_archived is true."""
    query, kind = _fold(opt_str(args, "query") or "").strip(), opt_str(args, "kind")
    if kind is not None and kind not in ("channel", "dm"):
        raise ToolFailure(f"kind must be 'channel' or 'dm', got {kind!r}")
    archived = opt_bool(args, "include_archived")
    found = []
    for row in conn.execute("SELECT * FROM chat_channels ORDER BY kind, name"):
        row = dict(zip(_CH_COLUMNS, tuple(row), strict=True))
        if kind and row["kind"] != kind or row["archived"] and not archived:
            continue
        if query and query not in _fold(row["name"] + " " + row["topic"]):
            continue
        found.append(_channel(conn, row))
    return {"channels": found, "count": len(found)}


@tools.tool("read_channel", "read",
            input=_obj({"channel": _CHANNEL_ARG,
                        "limit": {"type": "integer", "minimum": 1, "maximum": 200,
                                  "description": "at most this many of the latest messages (default 30)"}},
                       ["channel"]),
            output=_obj({"channel": CHANNEL_FULL_SCHEMA, "messages": {"type": "array", "items": MESSAGE_SCHEMA},
                         "count": {"type": "integer", "description": "top-level messages in the channel"}},
                        ["channel", "messages", "count"]))
def read_channel(conn: sqlite3.Connection, args: dict) -> dict:
    """Read a channel or direct-message conversation: its members and its latest top-level messages, oldest
    first (replies are counted in reply_count; read a thread with get_message)."""
    row = _channel_row(conn, req_str(args, "channel"))
    limit = opt_int(args, "limit", 30, 1, 200)
    top = _messages(conn, "m.channel_id = ? AND m.thread_id IS NULL", (row["id"],))
    return {"channel": _channel(conn, row, members=True), "messages": top[-limit:], "count": len(top)}


@tools.tool("search_messages", "read",
            input=_obj({
                "query": {"type": "string", "description": "words to look for"},
                "channel": _CHANNEL_ARG | {"description": "only this channel"},
                "author": {"type": "string", "description": "only messages whose author's email or name contains this"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "at most this many (default 20)"},
            }, []),
            output=_obj({"messages": {"type": "array", "items": MESSAGE_SCHEMA}, "count": {"type": "integer"}},
                        ["messages", "count"]))
def search_messages(conn: sqlite3.Connection, args: dict) -> dict:
    """Search messages in every channel and conversation (archived ones too). Every word of the query must
    appear in the text (case-insensitive). Returns matches newest first."""
    words = _fold(opt_str(args, "query") or "").split()
    author = _fold(opt_str(args, "author") or "").strip()
    limit = opt_int(args, "limit", 20, 1, 100)
    where, params = "1", ()
    channel = opt_str(args, "channel")
    if channel is not None and channel.strip():
        where, params = "m.channel_id = ?", (_channel_row(conn, channel)["id"],)
    found = [m for m in _messages(conn, where, params, "DESC")
             if all(w in _fold(m["text"]) for w in words)
             and (not author or author in _fold(m["author"] + " " + m["author_name"]))]
    return {"messages": found[:limit], "count": len(found)}


@tools.tool("get_message", "read",
            input=_obj({"id": _MSG_ID}, ["id"]),
            output=_obj({"message": MESSAGE_SCHEMA, "thread": {"type": "array", "items": MESSAGE_SCHEMA}},
                        ["message", "thread"]))
def get_message(conn: sqlite3.Connection, args: dict) -> dict:
    """Read one message by id with its whole thread (the first message, then every reply, oldest first;
    empty when the message has no thread)."""
    msg = _message(conn, req_str(args, "id"))
    root = msg["thread_id"] or msg["id"]
    thread = _messages(conn, "m.id = ? OR m.thread_id = ?", (root, root))
    return {"message": msg, "thread": thread if len(thread) > 1 else []}


@tools.tool("post_message", "write",
            input=_obj({"channel": _CHANNEL_ARG, "text": _TEXT}, ["channel", "text"]),
            output=MESSAGE_SCHEMA)
def post_message(conn: sqlite3.Connection, args: dict) -> dict:
    """Post a message as the user in a channel or direct-message conversation. Returns it."""
    row = _channel_row(conn, req_str(args, "channel"))
    return _post(conn, row, _text(args), None)


@tools.tool("reply_in_thread", "write",
            input=_obj({"id": _MSG_ID | {"description": "id of the message to reply to"}, "text": _TEXT},
                       ["id", "text"]),
            output=MESSAGE_SCHEMA)
def reply_in_thread(conn: sqlite3.Connection, args: dict) -> dict:
    """Reply as the user in the thread of a message (a reply to a reply joins the same thread). Returns the
    reply."""
    msg = _message(conn, req_str(args, "id"))
    row = _channel_row(conn, msg["channel_id"])
    return _post(conn, row, _text(args), msg["thread_id"] or msg["id"])


@tools.tool("send_direct_message", "write",
            input=_obj({"to": {"type": "string", "description": "the person's email"}, "text": _TEXT},
                       ["to", "text"]),
            output=MESSAGE_SCHEMA)
def send_direct_message(conn: sqlite3.Connection, args: dict) -> dict:
    """Send a direct message to one person, by email; the conversation is opened if needed. Returns the
    message."""
    to = _known(conn, [check_email(req_str(args, "to"), "to")], "to")[0]
    if to == user_email(conn):
        raise ToolFailure("to: that is your own address")
    text = _text(args)
    name = f"dm-{to}"
    if conn.execute("SELECT 1 FROM chat_channels WHERE name = ?", (name,)).fetchone() is None:
        ident = next_id(conn, "chat_channels", "ch")
        conn.execute("INSERT INTO chat_channels VALUES (?,?,?,?,?,?,?,?)",
                     (ident, name, "dm", "", 1, 0, today_iso(conn), user_email(conn)))
        conn.executemany("INSERT INTO chat_members VALUES (?,?)", [(ident, to), (ident, user_email(conn))])
    return _post(conn, _channel_row(conn, to, "to"), text, None)


@tools.tool("create_channel", "write",
            input=_obj({
                "name": {"type": "string", "description": "e.g. 'prj-264-launch'"},
                "topic": _STR,
                "private": {"type": "boolean", "description": "only members can see it (default false)"},
                "members": {"type": "array", "items": _STR, "description": "emails of people to invite"},
            }, ["name"]),
            output=CHANNEL_FULL_SCHEMA)
def create_channel(conn: sqlite3.Connection, args: dict) -> dict:
    """Create a channel (the user joins it) and invite people by email. Names are lower-case letters,
    digits and hyphens, unique among all channels, archived ones included. Returns the channel."""
    name = _channel_name(args)
    if conn.execute("SELECT 1 FROM chat_channels WHERE name = ?", (name,)).fetchone():
        raise ToolFailure(f"name: a channel named {name!r} already exists (archived channels keep their names)")
    members = _known(conn, check_emails(args.get("members") or [], "members"), "members")
    ident, me = next_id(conn, "chat_channels", "ch"), user_email(conn)
    conn.execute("INSERT INTO chat_channels VALUES (?,?,?,?,?,?,?,?)",
                 (ident, name, "channel", (opt_str(args, "topic") or "").strip(), int(opt_bool(args, "private")), 0,
                  today_iso(conn), me))
    conn.executemany("INSERT OR IGNORE INTO chat_members VALUES (?,?)", [(ident, e) for e in [me, *members]])
    return _channel(conn, _channel_row(conn, ident), members=True)


@tools.tool("invite_to_channel", "write",
            input=_obj({"channel": _CHANNEL_ARG, "emails": {"type": "array", "items": _STR, "minItems": 1}},
                       ["channel", "emails"]),
            output=_obj({"channel": CHANNEL_FULL_SCHEMA, "added": {"type": "array", "items": _STR},
                         "already_members": {"type": "array", "items": _STR}},
                        ["channel", "added", "already_members"]))
def invite_to_channel(conn: sqlite3.Connection, args: dict) -> dict:
    """Invite people (by email) to a channel. Returns the channel and who was added or already there."""
    row = _channel_row(conn, req_str(args, "channel"))
    emails = _known(conn, check_emails(args.get("emails"), "emails", allow_empty=False), "emails")
    if row["kind"] == "dm":
        raise ToolFailure("channel: people cannot be invited to a direct-message conversation")
    if row["archived"]:
        raise ToolFailure(f"channel: #{row['name']} is archived")
    present = {e for (e,) in conn.execute("SELECT email FROM chat_members WHERE channel_id = ?", (row["id"],))}
    added = [e for e in emails if e not in present]
    conn.executemany("INSERT INTO chat_members VALUES (?,?)", [(row["id"], e) for e in added])
    return {"channel": _channel(conn, row, members=True), "added": added,
            "already_members": [e for e in emails if e in present]}


@tools.tool("archive_channel", "destructive",
            input=_obj({"channel": _CHANNEL_ARG}, ["channel"]),
            output=_obj({"id": _STR, "name": _STR, "archived": {"const": True}}, ["id", "name", "archived"]))
def archive_channel(conn: sqlite3.Connection, args: dict) -> dict:
    """Archive a channel: nobody can post in it any more and it leaves the channel list (its messages stay
    searchable). Cannot be undone here."""
    row = _channel_row(conn, req_str(args, "channel"))
    if row["kind"] == "dm":
        raise ToolFailure("channel: a direct-message conversation cannot be archived")
    if row["archived"]:
        raise ToolFailure(f"channel: #{row['name']} is already archived")
    conn.execute("UPDATE chat_channels SET archived = 1 WHERE id = ?", (row["id"],))
    return {"id": row["id"], "name": row["name"], "archived": True}


TOOLS, handle = tools.specs, tools.handle

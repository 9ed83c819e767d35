"""Helpdesk app: support tickets from the people of customer organisations, handled by the company's
staff, with comments; duplicates can be merged. Standard library only.
"""

from __future__ import annotations

import datetime as dt
import random
import sqlite3
from typing import Any

from ._base import ToolFailure, Tools, next_id, one_row, opt_bool, opt_choice, opt_int, opt_str, req_str, today_iso, user_email
from ._base import object_schema as _obj
from ._products import product_sku, supported_products, symptom

NAME = "helpdesk"
DESCRIPTION = ("Customer support tickets: list and search, read with comments, create, comment, assign, change "
               "status or priority, close, and merge duplicates.")

SCHEMA = """
CREATE TABLE IF NOT EXISTS helpdesk_tickets (
    id          TEXT PRIMARY KEY,        -- 'HD-1042'
    subject     TEXT NOT NULL,
    description TEXT NOT NULL,
    requester   TEXT NOT NULL,           -- email address of a person of a customer organisation
    org         TEXT,                    -- the requester's organisation id (world_organisations)
    assignee    TEXT,                    -- email address of a colleague, or NULL
    status      TEXT NOT NULL CHECK (status IN ('new', 'open', 'pending', 'solved', 'closed')),
    priority    TEXT NOT NULL CHECK (priority IN ('low', 'normal', 'high', 'urgent')),
    product     TEXT,                    -- SKU of the product concerned, or NULL
    created     TEXT NOT NULL,           -- YYYY-MM-DD
    updated     TEXT NOT NULL,           -- YYYY-MM-DD
    merged_into TEXT                     -- the ticket this duplicate was merged into
);
CREATE TABLE IF NOT EXISTS helpdesk_comments (
    id     TEXT PRIMARY KEY,             -- 'c001'
    ticket TEXT NOT NULL,
    author TEXT NOT NULL,                -- email address
    body   TEXT NOT NULL,
    date   TEXT NOT NULL,                -- YYYY-MM-DD
    public INTEGER NOT NULL              -- 1: the requester sees it; 0: an internal note
);
"""

STATUSES = ["new", "open", "pending", "solved", "closed"]
PRIORITIES = ["low", "normal", "high", "urgent"]

_SUMMARY_PROPS: dict[str, Any] = {
    "id": {"type": "string"}, "subject": {"type": "string"}, "requester": {"type": "string"},
    "organisation": {"type": ["string", "null"], "description": "the requester's organisation"},
    "assignee": {"type": ["string", "null"]}, "status": {"type": "string", "enum": STATUSES},
    "priority": {"type": "string", "enum": PRIORITIES}, "product": {"type": ["string", "null"]},
    "created": {"type": "string"}, "updated": {"type": "string"},
}
TICKET_SUMMARY = _obj(_SUMMARY_PROPS, list(_SUMMARY_PROPS))
COMMENT_SCHEMA = _obj({"id": {"type": "string"}, "author": {"type": "string"}, "body": {"type": "string"},
                       "date": {"type": "string"}, "public": {"type": "boolean"}},
                      ["id", "author", "body", "date", "public"])
TICKET_SCHEMA = _obj({**_SUMMARY_PROPS, "description": {"type": "string"},
                      "merged_into": {"type": ["string", "null"]},
                      "comments": {"type": "array", "items": COMMENT_SCHEMA}},
                     [*_SUMMARY_PROPS, "description", "merged_into", "comments"])
_ID = {"type": "string", "description": "ticket id, e.g. 'HD-1042'"}

tools = Tools()  # declared on their handlers below; TOOLS and handle come from it

RESOURCES: list[dict[str, Any]] = [{"collection": "tickets", "get_tool": "get_ticket", "list_tool": "list_tickets",
                                    "list_key": "tickets", "list_arguments": {"include_closed": True, "limit": 200}}]


# ---------------------------------------------------------------- helpers

def _person(conn: sqlite3.Connection, value: Any, field: str, *, colleague: bool = False) -> tuple[str, str]:
    """(email, organisation id) of a person of the world; with ``colleague``, of the user's company."""
    if not isinstance(value, str) or "@" not in value:
        raise ToolFailure(f"{field} must be a person's email address, got {value!r}")
    row = one_row(conn, "SELECT email, org FROM world_people WHERE lower(email) = lower(?)", (value.strip(),),
                  f"{field}: nobody in this workspace has the address {value!r}")
    if colleague:
        company = conn.execute("SELECT value FROM world_meta WHERE key = 'company'").fetchone()
        if company is None or row[1] != company[0]:
            raise ToolFailure(f"{field}: {row[0]} is not a colleague; tickets are assigned within the company")
    return row[0], row[1]


_COLUMNS = ("t.id, t.subject, t.requester, o.name, t.assignee, t.status, t.priority, t.product, t.created, t.updated, "
            "t.description, t.merged_into")
_FROM = "FROM helpdesk_tickets t LEFT JOIN world_organisations o ON o.id = t.org"


def _summary(row: tuple) -> dict[str, Any]:
    return dict(zip(_SUMMARY_PROPS, row[:10], strict=True))


def _ticket(conn: sqlite3.Connection, ident: Any, field: str = "id") -> dict[str, Any]:
    if not isinstance(ident, str) or not ident.strip():
        raise ToolFailure(f"missing required argument {field!r} (a ticket id like 'HD-1042')")
    row = one_row(conn, f"SELECT {_COLUMNS} {_FROM} WHERE upper(t.id) = upper(?)", (ident.strip(),),
                  f"{field}: no ticket with id {ident!r}")
    out = {**_summary(tuple(row)), "description": row[10], "merged_into": row[11]}
    out["comments"] = [{"id": i, "author": a, "body": b, "date": d, "public": bool(p)} for i, a, b, d, p in conn.execute(
        "SELECT id, author, body, date, public FROM helpdesk_comments WHERE ticket = ? ORDER BY date, id", (row[0],))]
    return out


def _open_only(ticket: dict[str, Any], field: str = "id") -> None:
    if ticket["status"] == "closed":
        merged = f" (merged into {ticket['merged_into']})" if ticket["merged_into"] else ""
        raise ToolFailure(f"{field}: ticket {ticket['id']} is closed{merged}; open a new ticket instead")


def _open_ticket(conn: sqlite3.Connection, args: dict) -> dict[str, Any]:
    """The ticket ``args["id"]`` names, which must not be closed (the tools that change a ticket)."""
    ticket = _ticket(conn, args.get("id"))
    _open_only(ticket)
    return ticket


def _comment(conn: sqlite3.Connection, ticket: str, author: str, body: str, public: bool, date: str) -> None:
    conn.execute("INSERT INTO helpdesk_comments VALUES (?,?,?,?,?,?)",
                 (next_id(conn, "helpdesk_comments", "c", width=3), ticket, author, body, date, int(public)))


# ---------------------------------------------------------------- handlers

@tools.tool("list_tickets", "read",
            input=_obj({
                "query": {"type": "string"}, "status": {"type": "string", "enum": STATUSES},
                "priority": {"type": "string", "enum": PRIORITIES},
                "assignee": {"type": "string", "description": "assignee's email address"},
                "requester": {"type": "string", "description": "requester's email address"},
                "organisation": {"type": "string", "description": "text the requester's organisation name contains"},
                "include_closed": {"type": "boolean"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 200, "description": "at most this many (default 50)"},
            }, []),
            output=_obj({"tickets": {"type": "array", "items": TICKET_SUMMARY}, "count": {"type": "integer"}},
                        ["tickets", "count"]))
def list_tickets(conn: sqlite3.Connection, args: dict) -> dict:
    """List tickets, newest first, filtered by a query (case-insensitive, in subject and description),
    status, priority, assignee, requester or organisation name. Closed tickets are left out unless
    status is 'closed' or include_closed is true."""
    where, params = [], []
    if query := (opt_str(args, "query") or "").strip().lower():
        where.append("(instr(lower(t.subject), ?) > 0 OR instr(lower(t.description), ?) > 0)")
        params += [query, query]
    status = opt_choice(args, "status", STATUSES)
    if status is not None:
        where.append("t.status = ?")
        params.append(status)
    elif not opt_bool(args, "include_closed"):
        where.append("t.status != 'closed'")
    if (priority := opt_choice(args, "priority", PRIORITIES)) is not None:
        where.append("t.priority = ?")
        params.append(priority)
    for key in ("assignee", "requester"):
        if args.get(key) is not None:
            where.append(f"lower(t.{key}) = lower(?)")
            params.append(_person(conn, args[key], key)[0])
    if organisation := (opt_str(args, "organisation") or "").strip().lower():
        where.append("instr(lower(COALESCE(o.name, '')), ?) > 0")
        params.append(organisation)
    limit = opt_int(args, "limit", 50, 1, 200)
    rows = conn.execute(f"SELECT {_COLUMNS} {_FROM} {'WHERE ' + ' AND '.join(where) if where else ''} "
                        "ORDER BY t.created DESC, t.id DESC", params).fetchall()
    return {"tickets": [_summary(tuple(r)) for r in rows[:limit]], "count": len(rows)}


@tools.tool("get_ticket", "read",
            input=_obj({"id": _ID}, ["id"]),
            output=TICKET_SCHEMA)
def get_ticket(conn: sqlite3.Connection, args: dict) -> dict:
    """One ticket in full: description, and its comments (public replies and internal notes) oldest first."""
    return _ticket(conn, args.get("id"))


@tools.tool("create_ticket", "write",
            input=_obj({
                "subject": {"type": "string", "minLength": 1}, "description": {"type": "string", "minLength": 1},
                "requester": {"type": "string", "description": "requester's email address"},
                "priority": {"type": "string", "enum": PRIORITIES}, "product": {"type": "string", "description": "SKU"},
            }, ["subject", "description", "requester"]),
            output=TICKET_SCHEMA)
def create_ticket(conn: sqlite3.Connection, args: dict) -> dict:
    """Open a ticket on behalf of a requester (a person of the workspace, by email). Returns it."""
    today = today_iso(conn)
    subject, description = req_str(args, "subject", 200).strip(), req_str(args, "description").strip()
    requester, org = _person(conn, args.get("requester"), "requester")
    priority = opt_choice(args, "priority", PRIORITIES) or "normal"
    product = product_sku(conn, args.get("product"))
    ident = next_id(conn, "helpdesk_tickets", "HD-", width=1, start=1000)
    conn.execute("INSERT INTO helpdesk_tickets VALUES (?,?,?,?,?,NULL,'new',?,?,?,?,NULL)",
                 (ident, subject, description, requester, org, priority, product, today, today))
    return _ticket(conn, ident)


@tools.tool("comment_ticket", "write",
            input=_obj({"id": _ID, "body": {"type": "string", "minLength": 1}, "public": {"type": "boolean"}},
                       ["id", "body"]),
            output=TICKET_SCHEMA)
def comment_ticket(conn: sqlite3.Connection, args: dict) -> dict:
    """Add a comment from the user to a ticket: a public reply the requester sees (default) or an internal
    note (public false). A new ticket becomes open. Returns the ticket."""
    today = today_iso(conn)
    ident = _open_ticket(conn, args)["id"]
    body = req_str(args, "body").strip()
    public = True if args.get("public") is None else opt_bool(args, "public")
    _comment(conn, ident, user_email(conn), body, public, today)
    conn.execute("UPDATE helpdesk_tickets SET updated = ?, status = CASE status WHEN 'new' THEN 'open' "
                 "ELSE status END WHERE id = ?", (today, ident))
    return _ticket(conn, ident)


@tools.tool("assign_ticket", "write",
            input=_obj({"id": _ID, "assignee": {"type": "string", "description": "colleague's email address"}},
                       ["id", "assignee"]),
            output=TICKET_SCHEMA)
def assign_ticket(conn: sqlite3.Connection, args: dict) -> dict:
    """Assign a ticket to a colleague (an email address of the user's company). A new ticket becomes open.
    Returns the ticket."""
    today = today_iso(conn)
    ident = _open_ticket(conn, args)["id"]
    assignee = _person(conn, args.get("assignee"), "assignee", colleague=True)[0]
    conn.execute("UPDATE helpdesk_tickets SET assignee = ?, updated = ?, status = CASE status WHEN 'new' "
                 "THEN 'open' ELSE status END WHERE id = ?", (assignee, today, ident))
    return _ticket(conn, ident)


@tools.tool("update_ticket", "write",
            input=_obj({"id": _ID, "status": {"type": "string", "enum": STATUSES[:4]},
                        "priority": {"type": "string", "enum": PRIORITIES}}, ["id"]),
            output=TICKET_SCHEMA)
def update_ticket(conn: sqlite3.Connection, args: dict) -> dict:
    """Change a ticket's status (new, open, pending, solved; use close_ticket to close) and/or priority.
    Returns the ticket."""
    today = today_iso(conn)
    ident = _open_ticket(conn, args)["id"]
    status, priority = opt_choice(args, "status", STATUSES), opt_choice(args, "priority", PRIORITIES)
    if status == "closed":
        raise ToolFailure("status: use close_ticket to close a ticket")
    if status is None and priority is None:
        raise ToolFailure("nothing to update: give status and/or priority")
    conn.execute("UPDATE helpdesk_tickets SET status = COALESCE(?, status), priority = COALESCE(?, priority), "
                 "updated = ? WHERE id = ?", (status, priority, today, ident))
    return _ticket(conn, ident)


@tools.tool("close_ticket", "write",
            input=_obj({"id": _ID, "resolution": {"type": "string"}}, ["id"]),
            output=TICKET_SCHEMA)
def close_ticket(conn: sqlite3.Connection, args: dict) -> dict:
    """Close a ticket, with an optional resolution recorded as an internal note. Returns the ticket."""
    today = today_iso(conn)
    ident = _open_ticket(conn, args)["id"]
    resolution = (opt_str(args, "resolution") or "").strip()
    if resolution:
        _comment(conn, ident, user_email(conn), f"Resolution: {resolution}", False, today)
    conn.execute("UPDATE helpdesk_tickets SET status = 'closed', updated = ? WHERE id = ?", (today, ident))
    return _ticket(conn, ident)


@tools.tool("merge_tickets", "destructive",
            input=_obj({"source": {"type": "string", "description": "the duplicate's id"},
                        "target": {"type": "string", "description": "the id of the ticket to keep"}},
                       ["source", "target"]),
            output=TICKET_SCHEMA)
def merge_tickets(conn: sqlite3.Connection, args: dict) -> dict:
    """Merge a duplicate ticket (source) into another (target): the source's description and comments are
    copied to the target as an internal note and the source is closed for good as merged. This cannot be
    undone. Returns the target ticket."""
    today = today_iso(conn)
    source, target = _ticket(conn, args.get("source"), "source"), _ticket(conn, args.get("target"), "target")
    if source["id"] == target["id"]:
        raise ToolFailure("source and target are the same ticket; merge a duplicate into another ticket")
    _open_only(source, "source")
    _open_only(target, "target")
    history = "\n".join(f"- {c['date']} {c['author']}: {c['body']}" for c in source["comments"])
    _comment(conn, target["id"], user_email(conn),
             f"Merged {source['id']} ({source['subject']}) from {source['requester']}:\n{source['description']}"
             + (f"\n{history}" if history else ""), False, today)
    _comment(conn, source["id"], user_email(conn), f"Merged into {target['id']}.", False, today)
    conn.execute("UPDATE helpdesk_tickets SET status = 'closed', merged_into = ?, updated = ? WHERE id = ?",
                 (target["id"], today, source["id"]))
    conn.execute("UPDATE helpdesk_tickets SET updated = ? WHERE id = ?", (today, target["id"]))
    return _ticket(conn, target["id"])


TOOLS, handle = tools.specs, tools.handle


# ---------------------------------------------------------------- seed

OTHER_ISSUES = (
    ("Invoice question for {code}", "The invoice we received for {code} ({name}) does not match the agreed budget. "
                                     "Could you send a breakdown?"),
    ("Portal access for a new colleague", "Please give {newcomer} access to the customer portal; they joined our "
                                          "team this month."),
    ("Change of billing address", "Our billing address changes from next month; the new one is {city}."),
    ("Request for the {code} status report", "Could you share the latest status report for {name}?"),
    ("Password reset link expired", "The reset link in your email expired before I could use it."),
)


def seed(conn: sqlite3.Connection, rng: random.Random, world: dict[str, Any]) -> None:
    """About twenty tickets from the people of customer organisations: product problems (most about
    products the knowledge base covers), quote requests, billing and access questions; one issue
    reported twice by the same person (a duplicate to merge); older solved and closed tickets.
    Assignees are the company's support staff, and sometimes other colleagues."""
    conn.executescript(SCHEMA)
    today = dt.date.fromisoformat(world["today"])
    company = world["company"]["id"]
    staff = [p for p in world["people"] if p["org"] == company and p["id"] != world["user"]["id"]]
    support = [p for p in staff if p["department"] == "Support"] or staff[:2]
    helpers = support + rng.sample([p for p in staff if p not in support], 2)
    customers = {o["id"]: o for o in world["organisations"] if o["kind"] == "customer"}
    requesters = [p for p in world["people"] if p["org"] in customers]
    covered = supported_products(world)
    others = [p for p in world["products"] if p not in covered]

    def day(lo: int, hi: int) -> dt.date:
        return today - dt.timedelta(days=rng.randint(lo, hi))

    tickets: list[dict[str, Any]] = []

    def add(subject: str, description: str, requester: dict[str, Any], *, status: str, created: dt.date,
            product: str | None = None, priority: str | None = None, assignee: str | None = None) -> dict[str, Any]:
        if assignee is None and status != "new":
            assignee = rng.choice(helpers)["email"]
        ticket = {"subject": subject, "description": description, "requester": requester["email"],
                  "org": requester["org"], "assignee": assignee, "status": status,
                  "priority": priority or rng.choice(["low", "normal", "normal", "high", "urgent"]),
                  "product": product, "created": created,
                  "updated": min(today, created + dt.timedelta(days=rng.randint(0, 3))), "comments": []}
        tickets.append(ticket)
        return ticket

    for product in rng.sample(covered, 5) + rng.sample(others, 2):
        who = rng.choice(requesters)
        problem = symptom(product)
        status = rng.choice(["new", "open", "open", "pending"])
        add(f"{product['name']} {problem}",
            f"Hello,\n\nour {product['name']} ({product['sku']}) {problem}. We tried restarting it without luck. "
            f"Can you help?\n\n{who['name']}", who, status=status, created=day(1, 12), product=product["sku"])
    original = rng.choice(tickets[:5])
    who = next(p for p in requesters if p["email"] == original["requester"])
    add(f"Still: {original['subject']}", f"Hi again,\n\nI reported this a few days ago ({original['subject']}) "
        f"and nobody has answered yet. Is anyone looking at it?\n\n{who['first']}", who, status="new",
        created=min(today, original["created"] + dt.timedelta(days=rng.randint(1, 3))),
        product=original["product"], priority=original["priority"])
    for product in rng.sample(world["products"], 2):
        who = rng.choice(requesters)
        add(f"Quote for {rng.randint(3, 40)} x {product['name']}",
            f"Hello,\n\nplease send us a quote for the {product['name']} ({product['sku']}), at your current list "
            f"price.\n\n{who['name']}", who, status="new", created=day(0, 6), product=product["sku"], priority="normal")
    client_projects = [p for p in world["projects"] if p["client"] in customers]
    for subject, body in rng.sample(OTHER_ISSUES, 4):
        project = rng.choice(client_projects or world["projects"])
        org = project["client"] if "{code}" in subject + body and project in client_projects else rng.choice(
            sorted(customers))
        who = rng.choice([p for p in requesters if p["org"] == org] or requesters)
        fill = {"code": project["code"], "name": project["name"], "city": customers[org]["city"],
                "newcomer": rng.choice([p for p in world["people"] if p["org"] == org])["name"]}
        add(subject.format(**fill), body.format(**fill), who, status=rng.choice(["new", "open", "pending"]),
            created=day(0, 15))
    for product in rng.sample(world["products"], 3):
        who = rng.choice(requesters)
        add(f"{product['name']} {symptom(product)}", f"Our {product['name']} {symptom(product)}.", who,
            status=rng.choice(["solved", "closed"]), created=day(30, 90), product=product["sku"])

    tickets.sort(key=lambda t: (t["created"], t["subject"]))
    first = rng.randrange(1000, 9000, 100)
    comments = []
    for n, ticket in enumerate(tickets):
        ident = f"HD-{first + n + 1}"
        conn.execute("INSERT INTO helpdesk_tickets VALUES (?,?,?,?,?,?,?,?,?,?,?,NULL)",
                     (ident, ticket["subject"], ticket["description"], ticket["requester"], ticket["org"],
                      ticket["assignee"], ticket["status"], ticket["priority"], ticket["product"],
                      ticket["created"].isoformat(), ticket["updated"].isoformat()))
        if ticket["status"] in ("open", "pending", "solved", "closed") and ticket["assignee"]:
            comments.append((ticket["updated"], ident, ticket["assignee"],
                             "Thanks for reporting this, we are looking into it.", 1))
            if ticket["status"] == "pending":
                comments.append((ticket["updated"], ident, ticket["assignee"],
                                 "Waiting for the customer to confirm the serial number.", 0))
            if ticket["status"] in ("solved", "closed"):
                comments.append((ticket["updated"], ident, ticket["assignee"], "Fixed; closing this ticket.", 1))
    comments.sort(key=lambda c: (c[0], c[1]))
    for n, (date, ticket_id, author, body, public) in enumerate(comments, start=1):
        conn.execute("INSERT INTO helpdesk_comments VALUES (?,?,?,?,?,?)",
                     (f"c{n:03d}", ticket_id, author, body, date.isoformat(), public))

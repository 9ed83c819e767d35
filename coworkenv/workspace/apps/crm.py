"""CRM app: the company's customer and partner accounts, the contacts at them, deals with stages
and amounts, and the activities (calls, emails, meetings, notes) logged on them. Standard library only.

Accounts are the world's customer and partner organisations, contacts the world's people who work
there, account and deal owners the company's own people, and deals are about the world's projects
(a client's project was first a deal) and products. Distractors: an inactive duplicate of one
account, last year's renewal beside this year's, a deal entered twice ("(copy)") and an activity
logged twice.
"""

from __future__ import annotations

import datetime as dt
import random
import sqlite3
from typing import Any

from ._base import (
    AppMeta,
    ToolFailure,
    Tools,
    check_date,
    currency,
    next_id,
    one_row,
    opt_bool,
    opt_choice,
    opt_int,
    opt_str,
    req_str,
    weekday,
)
from ._base import object_schema as _obj

NAME = "crm"
DESCRIPTION = ("The CRM: customer and partner accounts, their contacts, deals (stage, amount, close date) and "
               "logged activities.")

SCHEMA = """
CREATE TABLE IF NOT EXISTS crm_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS crm_accounts (
    id        TEXT PRIMARY KEY,               -- e.g. 'ACC-214'
    org       TEXT NOT NULL,                  -- the world organisation id
    name      TEXT NOT NULL,
    type      TEXT NOT NULL CHECK (type IN ('customer', 'partner')),
    status    TEXT NOT NULL CHECK (status IN ('active', 'inactive')),
    industry  TEXT NOT NULL,
    city      TEXT NOT NULL,
    country   TEXT NOT NULL,
    domain    TEXT NOT NULL,
    tier      TEXT NOT NULL,                  -- 'A', 'B' or 'C'
    owner     TEXT NOT NULL,                  -- email of the company person who owns the account
    created   TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS crm_contacts (
    id       TEXT PRIMARY KEY,                -- e.g. 'CT-31'
    account  TEXT NOT NULL,
    person   TEXT NOT NULL,                   -- the world person id
    name     TEXT NOT NULL,
    email    TEXT NOT NULL,
    phone    TEXT NOT NULL,
    title    TEXT NOT NULL,
    is_primary INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS crm_deals (
    id          TEXT PRIMARY KEY,             -- e.g. 'D-4412'
    account     TEXT NOT NULL,
    name        TEXT NOT NULL,
    stage       TEXT NOT NULL,
    amount      INTEGER NOT NULL,             -- in the company's currency
    close_date  TEXT NOT NULL,                -- expected (open deals) or actual (closed deals)
    owner       TEXT NOT NULL,                -- email
    project     TEXT,                         -- a world project code, for project deals
    updated     TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS crm_activities (
    id        TEXT PRIMARY KEY,               -- e.g. 'ACT-118'
    account   TEXT NOT NULL,
    deal      TEXT,
    contact   TEXT,
    kind      TEXT NOT NULL CHECK (kind IN ('call', 'email', 'meeting', 'note')),
    subject   TEXT NOT NULL,
    notes     TEXT NOT NULL,
    date      TEXT NOT NULL,
    logged_by TEXT NOT NULL
);
"""

OPEN_STAGES = ["prospecting", "qualification", "proposal", "negotiation"]
STAGES = OPEN_STAGES + ["closed_won", "closed_lost"]
KINDS = ["call", "email", "meeting", "note"]
_STR, _INT, _NULL_STR = {"type": "string"}, {"type": "integer"}, {"type": ["string", "null"]}
_DEAL_PROPS: dict[str, Any] = {
    "id": _STR, "account_id": _STR, "account_name": _STR, "name": _STR, "stage": {"type": "string", "enum": STAGES},
    "amount": _INT, "currency": _STR, "close_date": _STR, "owner": _STR, "project": _NULL_STR, "updated": _STR,
}
DEAL_SCHEMA = _obj(_DEAL_PROPS, list(_DEAL_PROPS))
_ACTIVITY_PROPS: dict[str, Any] = {
    "id": _STR, "account_id": _STR, "deal_id": _NULL_STR, "contact_id": _NULL_STR, "contact_name": _NULL_STR,
    "kind": {"type": "string", "enum": KINDS}, "subject": _STR, "notes": _STR, "date": _STR, "logged_by": _STR,
}
ACTIVITY_SCHEMA = _obj(_ACTIVITY_PROPS, list(_ACTIVITY_PROPS))
_CONTACT_PROPS: dict[str, Any] = {"id": _STR, "name": _STR, "email": _STR, "phone": _STR, "title": _STR,
                                  "primary": {"type": "boolean"}}
CONTACT_SCHEMA = _obj(_CONTACT_PROPS, list(_CONTACT_PROPS))
_ACCOUNT_PROPS: dict[str, Any] = {
    "id": _STR, "name": _STR, "type": {"type": "string", "enum": ["customer", "partner"]},
    "status": {"type": "string", "enum": ["active", "inactive"]}, "industry": _STR, "city": _STR, "country": _STR,
    "domain": _STR, "tier": _STR, "owner": _STR, "open_deals": _INT, "open_amount": _INT,
}
ACCOUNT_SUMMARY_SCHEMA = _obj(_ACCOUNT_PROPS, list(_ACCOUNT_PROPS))
ACCOUNT_SCHEMA = _obj({**_ACCOUNT_PROPS, "created": _STR, "contacts": {"type": "array", "items": CONTACT_SCHEMA},
                       "open_deal_list": {"type": "array", "items": DEAL_SCHEMA}},
                      list(_ACCOUNT_PROPS) + ["created", "contacts", "open_deal_list"])
_ACCOUNT_ID = {"type": "string", "description": "account id, e.g. 'ACC-214'"}
_DEAL_ID = {"type": "string", "description": "deal id, e.g. 'D-4412'"}
_DATE = {"type": "string", "description": "YYYY-MM-DD"}
_STAGE = {"type": "string", "enum": STAGES}

tools = Tools()  # declared on their handlers below; TOOLS and handle come from it
_meta = AppMeta(NAME)

RESOURCES: list[dict[str, Any]] = [{"collection": "accounts", "get_tool": "get_account", "list_tool": "search_accounts",
                                    "list_key": "accounts", "list_arguments": {"limit": 100}}]


# ---------------------------------------------------------------- seed

def seed(conn: sqlite3.Connection, rng: random.Random, world: dict[str, Any]) -> None:
    """Accounts for the world's customers and partners, their contacts, ~3 deals and ~4 activities each."""
    conn.executescript(SCHEMA)
    today = dt.date.fromisoformat(world["today"])
    user, company = world["user"], world["company"]
    _meta.write(conn, [
        ("today", today.isoformat()), ("user", user["email"]), ("currency", currency(world))])
    staff = [p for p in world["people"] if p["org"] == company["id"]]
    sellers = [p for p in staff if p["department"] == "Sales"] or staff
    orgs = [o for o in world["organisations"] if o["kind"] in ("customer", "partner")]
    by_org = {o["id"]: [p for p in world["people"] if p["org"] == o["id"]] for o in orgs}
    day = lambda first, last: weekday(today + dt.timedelta(days=rng.randint(first, last))).isoformat()
    accounts: list[tuple] = []  # (org, name, type, status, owner)
    for org in orgs:
        accounts.append((org, org["name"], org["kind"], "active", rng.choice(sellers)["email"]))
    twin = rng.choice([a for a in accounts if a[2] == "customer"])
    suffix = rng.choice(["Group", "Holding", "International", "Services"])
    accounts.append((twin[0], f"{twin[1]} {suffix}", "customer", "inactive",
                     rng.choice([s for s in sellers if s["email"] != twin[4]] or sellers)["email"]))
    account_base, contact_n, deal_base = rng.randrange(100, 900), rng.randrange(10, 60), rng.randrange(1000, 8000)
    deals: list[tuple] = []  # (account id, name, stage, amount, close, owner, project)
    activities: list[tuple] = []  # (account id, deal index or None, contact id or None, kind, subject, notes, date, by)
    software = [p for p in world["products"] if p["category"] == "software"]
    goods = [p for p in world["products"] if p["category"] in ("hardware", "software")]
    renewals = rng.sample([a for a in accounts if a[2] == "customer" and a[3] == "active"], 2)
    for n, (org, name, kind, status, owner) in enumerate(accounts):
        ident = f"ACC-{account_base + n}"
        conn.execute("INSERT INTO crm_accounts VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                     (ident, org["id"], name, kind, status, org["industry"], org["city"], org["country"],
                      org["domain"], rng.choice("ABC"), owner, day(-2400, -400 if status == "active" else -1500)))
        contacts = []
        if status == "active":
            for k, person in enumerate(by_org[org["id"]]):
                contact_n += 1
                contacts.append(f"CT-{contact_n}")
                conn.execute("INSERT INTO crm_contacts VALUES (?,?,?,?,?,?,?,?)",
                             (contacts[-1], ident, person["id"], person["name"], person["email"], person["phone"],
                              person["role"], int(k == 0)))
        mine: list[tuple] = []
        if status == "inactive":
            mine.append((ident, f"{rng.choice(goods)['name']} pilot", "closed_lost", rng.randrange(5000, 40000, 500),
                         day(-900, -400), owner, None))
        elif kind == "partner":
            mine.append((ident, f"Referral agreement {today.year}", rng.choice(OPEN_STAGES[1:]),
                         rng.randrange(10000, 60000, 1000), day(20, 120), owner, None))
        else:
            for project in (p for p in world["projects"] if p["client"] == org["id"]):
                won = project["status"] != "planned"
                amount = int(round(project["budget"] * rng.uniform(1.1, 1.5), -2))
                mine.append((ident, f"{project['name']} ({project['code']})", "closed_won" if won
                             else rng.choice(OPEN_STAGES[2:]), amount,
                             project["start"] if won else day(10, 60), owner, project["code"]))
            for k, product in enumerate(rng.sample(goods, rng.randint(1, 2))):
                qty = rng.choice([5, 10, 12, 20, 25, 40, 50])
                stage = rng.choices(STAGES[:6 if k else 4], weights=[2, 3, 3, 2, 1, 1][:6 if k else 4])[0]
                mine.append((ident, f"{qty} x {product['name']}", stage,
                             int(round(qty * product["price"] * rng.uniform(0.85, 1.0), -1)),
                             day(7, 120) if stage in OPEN_STAGES else day(-200, -10), owner, None))
            if (org, name, kind, status, owner) in renewals:
                licence = rng.choice(software)["name"]
                amount = rng.randrange(8000, 60000, 500)
                mine.append((ident, f"{licence} renewal {today.year - 1}", "closed_won", amount, day(-400, -300),
                             owner, None))
                mine.append((ident, f"{licence} renewal {today.year}", rng.choice(OPEN_STAGES[1:]),
                             int(amount * rng.choice([1.03, 1.05, 1.08, 1.1])), day(14, 75), owner, None))
        first = len(deals)
        deals.extend(mine)
        if status == "active":
            for _ in range(rng.randint(2, 4)):
                which = rng.randrange(first, len(deals)) if len(deals) > first else None
                topic = deals[which][1] if which is not None else "the partnership"
                kind_ = rng.choice(KINDS)
                subject = rng.choice({"call": [f"Call about {topic}", "Quarterly check-in call"],
                                      "email": [f"Sent proposal for {topic}", "Sent updated price list"],
                                      "meeting": [f"Workshop on {topic}", "Quarterly business review"],
                                      "note": [f"Budget approved internally for {topic}", "New procurement rules"]}
                                     [kind_])
                notes = rng.choice(["Positive; they want a revised quote.", "Waiting for their legal review.",
                                    "Asked for references from the same industry.", "Decision expected next month.",
                                    "Raised concerns about delivery times."])
                activities.append((ident, which, rng.choice(contacts) if contacts else None, kind_, subject, notes,
                                   day(-120, -1), owner))
    # distractors: a deal entered twice, an activity logged twice
    open_deals = [n for n, d in enumerate(deals) if d[2] in OPEN_STAGES and d[6] is None]
    original = deals[rng.choice(open_deals)]
    deals.append((*original[:1], f"{original[1]} (copy)", "prospecting", *original[3:5], user["email"], None))
    twice = rng.choice(activities)
    activities.sort(key=lambda a: a[6])
    activities.insert(activities.index(twice) + 1, twice)
    deal_ids = [f"D-{deal_base + n * 7 + rng.randrange(7)}" for n in range(len(deals))]
    for ident, (account, name, stage, amount, close, owner, project) in zip(deal_ids, deals, strict=True):
        conn.execute("INSERT INTO crm_deals VALUES (?,?,?,?,?,?,?,?,?)",
                     (ident, account, name, stage, amount, close, owner, project, day(-60, -1)))
    base = rng.randrange(100, 800)
    for n, (account, which, contact, kind_, subject, notes, date, by) in enumerate(activities):
        conn.execute("INSERT INTO crm_activities VALUES (?,?,?,?,?,?,?,?,?)",
                     (f"ACT-{base + n}", account, deal_ids[which] if which is not None else None, contact, kind_,
                      subject, notes, date, by))


# ---------------------------------------------------------------- handlers

_DEAL_SQL = ("SELECT d.id, d.account, a.name, d.name, d.stage, d.amount, '', d.close_date, d.owner, d.project, "
             "d.updated FROM crm_deals d JOIN crm_accounts a ON a.id = d.account")


def _deal_row(conn: sqlite3.Connection, row: tuple) -> dict[str, Any]:
    out = dict(zip(_DEAL_PROPS, row, strict=True))
    out["currency"] = _meta(conn, "currency")
    return out


def _deal(conn: sqlite3.Connection, ident: str) -> dict[str, Any]:
    row = one_row(conn, f"{_DEAL_SQL} WHERE d.id = ?", (ident,), f"no deal with id {ident!r}; list_deals shows the deals")
    return _deal_row(conn, tuple(row))


def _account_row(conn: sqlite3.Connection, ident: str) -> tuple:
    row = one_row(conn, "SELECT id, name, type, status, industry, city, country, domain, tier, owner, created "
                  "FROM crm_accounts WHERE id = ?", (ident,), f"no account with id {ident!r}; search_accounts finds account ids")
    return tuple(row)


def _summary(conn: sqlite3.Connection, row: tuple) -> dict[str, Any]:
    out = dict(zip(list(_ACCOUNT_PROPS)[:10], row[:10], strict=True))
    count, total = conn.execute(
        f"SELECT COUNT(*), COALESCE(SUM(amount), 0) FROM crm_deals WHERE account = ? AND stage IN "
        f"({', '.join('?' for _ in OPEN_STAGES)})", (row[0], *OPEN_STAGES)).fetchone()
    out.update(open_deals=count, open_amount=total)
    return out


def _activity(conn: sqlite3.Connection, ident: str) -> dict[str, Any]:
    row = one_row(conn, "SELECT t.id, t.account, t.deal, t.contact, c.name, t.kind, t.subject, t.notes, t.date, "
                  "t.logged_by FROM crm_activities t LEFT JOIN crm_contacts c ON c.id = t.contact "
                  "WHERE t.id = ?", (ident,), f"no activity with id {ident!r}; list_activities shows the activities")
    return dict(zip(_ACTIVITY_PROPS, row, strict=True))


def _opt_date(args: dict, key: str) -> str | None:
    return check_date(args[key], key) if args.get(key) is not None else None


def _opt_amount(args: dict, key: str) -> int | None:
    value = args.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ToolFailure(f"{key} must be a whole non-negative number, got {value!r}")
    return value


@tools.tool("search_accounts", "read",
            input=_obj({
                "query": {"type": "string", "description": "text to look for; omit for every account"},
                "type": {"type": "string", "enum": ["customer", "partner"]},
                "status": {"type": "string", "enum": ["active", "inactive"]},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "at most this many (default 50)"},
            }, []),
            output=_obj({"accounts": {"type": "array", "items": ACCOUNT_SUMMARY_SCHEMA}, "count": _INT},
                        ["accounts", "count"]))
def search_accounts(conn: sqlite3.Connection, args: dict) -> dict:
    """Search accounts. Matches the query (case-insensitive substring) against the account's name, domain,
    city and country and its contacts' names and emails; filters by type and status. Returns account
    summaries with their number and total amount of open deals, sorted by name."""
    query = (opt_str(args, "query") or "").strip().lower()
    kind, status = opt_choice(args, "type", ["customer", "partner"]), opt_choice(args, "status", ["active", "inactive"])
    limit = opt_int(args, "limit", 50, 1, 100)
    found = []
    for row in conn.execute("SELECT id, name, type, status, industry, city, country, domain, tier, owner, created "
                            "FROM crm_accounts ORDER BY name, id"):
        row = tuple(row)
        if kind and row[2] != kind or status and row[3] != status:
            continue
        people = " ".join(f"{n} {e}" for n, e in conn.execute(
            "SELECT name, email FROM crm_contacts WHERE account = ?", (row[0],)))
        if query and query not in " ".join((row[1], row[5], row[6], row[7], people)).lower():
            continue
        found.append(_summary(conn, row))
    return {"accounts": found[:limit], "count": len(found)}


@tools.tool("get_account", "read",
            input=_obj({"id": _ACCOUNT_ID}, ["id"]),
            output=ACCOUNT_SCHEMA)
def get_account(conn: sqlite3.Connection, args: dict) -> dict:
    """One account in full: its details, its contacts (the primary one first) and its open deals (every
    deal not closed won or lost)."""
    row = _account_row(conn, req_str(args, "id", 40).strip())
    out = _summary(conn, row)
    out["created"] = row[10]
    out["contacts"] = [{"id": c[0], "name": c[1], "email": c[2], "phone": c[3], "title": c[4], "primary": bool(c[5])}
                       for c in conn.execute("SELECT id, name, email, phone, title, is_primary FROM crm_contacts "
                                             "WHERE account = ? ORDER BY is_primary DESC, name", (row[0],))]
    out["open_deal_list"] = [_deal_row(conn, tuple(d)) for d in conn.execute(
        f"{_DEAL_SQL} WHERE d.account = ? AND d.stage IN ({', '.join('?' for _ in OPEN_STAGES)}) "
        "ORDER BY d.close_date, d.id", (row[0], *OPEN_STAGES))]
    return out


@tools.tool("list_deals", "read",
            input=_obj({
                "account_id": _ACCOUNT_ID, "stage": _STAGE,
                "owner": {"type": "string", "description": "owner's email address"},
                "query": {"type": "string", "description": "text to look for in the deal's name"},
                "open_only": {"type": "boolean"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "at most this many (default 50)"},
            }, []),
            output=_obj({"deals": {"type": "array", "items": DEAL_SCHEMA}, "count": _INT, "total_amount": _INT},
                        ["deals", "count", "total_amount"]))
def list_deals(conn: sqlite3.Connection, args: dict) -> dict:
    """List deals, soonest close date first. Filters: account, stage, owner email, a name query, open_only
    (not closed won or lost). Returns the deals, their count and total amount."""
    account, stage = opt_str(args, "account_id"), opt_choice(args, "stage", STAGES)
    if account is not None:
        _account_row(conn, account.strip())
    owner, query = (opt_str(args, "owner") or "").strip().lower(), (opt_str(args, "query") or "").strip().lower()
    open_only, limit = opt_bool(args, "open_only"), opt_int(args, "limit", 50, 1, 100)
    found = []
    for row in conn.execute(f"{_DEAL_SQL} ORDER BY d.close_date, d.id"):
        deal = _deal_row(conn, tuple(row))
        if (account and deal["account_id"] != account.strip() or stage and deal["stage"] != stage
                or owner and deal["owner"].lower() != owner or query and query not in deal["name"].lower()
                or open_only and deal["stage"] not in OPEN_STAGES):
            continue
        found.append(deal)
    return {"deals": found[:limit], "count": len(found), "total_amount": sum(d["amount"] for d in found)}


@tools.tool("update_deal", "write",
            input=_obj({"id": _DEAL_ID, "stage": _STAGE, "amount": {"type": "integer", "minimum": 0},
                        "close_date": _DATE}, ["id"]),
            output=_obj({"deal": DEAL_SCHEMA, "updated_fields": {"type": "array", "items": _STR},
                         "previous": {"type": "object", "properties": {"stage": _STAGE, "amount": _INT,
                                                                       "close_date": _STR},
                                      "additionalProperties": False}},
                        ["deal", "updated_fields", "previous"]))
def update_deal(conn: sqlite3.Connection, args: dict) -> dict:
    """Change a deal's stage, amount and/or expected close date. Returns the deal, the fields that changed
    and their previous values."""
    today = _meta(conn, "today")
    deal = _deal(conn, req_str(args, "id", 40).strip())
    changes = {"stage": opt_choice(args, "stage", STAGES), "amount": _opt_amount(args, "amount"),
               "close_date": _opt_date(args, "close_date")}
    changes = {k: v for k, v in changes.items() if v is not None and v != deal[k]}
    if not changes:
        raise ToolFailure("nothing to update: give a new stage, amount or close_date")
    previous = {k: deal[k] for k in changes}
    conn.execute(f"UPDATE crm_deals SET {', '.join(f'{k} = ?' for k in changes)}, updated = ? WHERE id = ?",
                 (*changes.values(), today, deal["id"]))
    return {"deal": _deal(conn, deal["id"]), "updated_fields": list(changes), "previous": previous}


@tools.tool("create_deal", "write",
            input=_obj({"account_id": _ACCOUNT_ID, "name": {"type": "string", "minLength": 1},
                        "amount": {"type": "integer", "minimum": 0}, "stage": _STAGE, "close_date": _DATE},
                       ["account_id", "name", "amount"]),
            output=DEAL_SCHEMA)
def create_deal(conn: sqlite3.Connection, args: dict) -> dict:
    """Open a new deal on an account, owned by the user. Stage defaults to 'prospecting'; the close date to
    90 days from today. Returns the deal."""
    today = _meta(conn, "today")
    account = _account_row(conn, req_str(args, "account_id", 40).strip())
    name = req_str(args, "name", 200).strip()
    amount = _opt_amount(args, "amount")
    if amount is None:
        raise ToolFailure("missing required argument 'amount' (a whole non-negative number)")
    stage = opt_choice(args, "stage", STAGES) or "prospecting"
    close = _opt_date(args, "close_date") or (dt.date.fromisoformat(today) + dt.timedelta(days=90)).isoformat()
    ident = next_id(conn, "crm_deals", "D-", width=1)
    conn.execute("INSERT INTO crm_deals VALUES (?,?,?,?,?,?,?,?,?)",
                 (ident, account[0], name, stage, amount, close, _meta(conn, "user"), None, today))
    return _deal(conn, ident)


@tools.tool("log_activity", "write",
            input=_obj({"account_id": _ACCOUNT_ID, "kind": {"type": "string", "enum": KINDS},
                        "subject": {"type": "string", "minLength": 1}, "notes": {"type": "string"},
                        "deal_id": _DEAL_ID,
                        "contact_id": {"type": "string", "description": "contact id, e.g. 'CT-31'"},
                        "date": _DATE}, ["account_id", "kind", "subject"]),
            output=ACTIVITY_SCHEMA)
def log_activity(conn: sqlite3.Connection, args: dict) -> dict:
    """Log a call, email, meeting or note on an account, optionally about one of its deals and with one of
    its contacts. The date defaults to today. Returns the activity."""
    today = _meta(conn, "today")
    account = _account_row(conn, req_str(args, "account_id", 40).strip())
    kind = opt_choice(args, "kind", KINDS)
    if kind is None:
        raise ToolFailure(f"missing required argument 'kind' (one of {', '.join(KINDS)})")
    subject, notes = req_str(args, "subject", 300).strip(), (opt_str(args, "notes") or "").strip()
    deal, contact = opt_str(args, "deal_id"), opt_str(args, "contact_id")
    if deal is not None and _deal(conn, deal.strip())["account_id"] != account[0]:
        raise ToolFailure(f"deal_id {deal!r} belongs to another account, not {account[0]} ({account[1]})")
    if contact is not None:
        owner = conn.execute("SELECT account FROM crm_contacts WHERE id = ?", (contact.strip(),)).fetchone()
        if owner is None or owner[0] != account[0]:
            raise ToolFailure(f"contact_id {contact!r} is not a contact of {account[0]} ({account[1]}); "
                              "get_account lists its contacts")
    date = _opt_date(args, "date") or today
    ident = next_id(conn, "crm_activities", "ACT-", width=1)
    conn.execute("INSERT INTO crm_activities VALUES (?,?,?,?,?,?,?,?,?)",
                 (ident, account[0], deal.strip() if deal else None, contact.strip() if contact else None,
                  kind, subject, notes, date, _meta(conn, "user")))
    return _activity(conn, ident)


@tools.tool("list_activities", "read",
            input=_obj({"account_id": _ACCOUNT_ID, "deal_id": _DEAL_ID, "kind": {"type": "string", "enum": KINDS},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 100,
                                  "description": "at most this many (default 50)"}}, []),
            output=_obj({"activities": {"type": "array", "items": ACTIVITY_SCHEMA}, "count": _INT},
                        ["activities", "count"]))
def list_activities(conn: sqlite3.Connection, args: dict) -> dict:
    """Logged activities, newest first, filtered by account, deal and/or kind."""
    account, deal = opt_str(args, "account_id"), opt_str(args, "deal_id")
    if account is not None:
        _account_row(conn, account.strip())
    if deal is not None:
        _deal(conn, deal.strip())
    kind, limit = opt_choice(args, "kind", KINDS), opt_int(args, "limit", 50, 1, 100)
    found = []
    for (ident,) in conn.execute("SELECT id FROM crm_activities ORDER BY date DESC, id DESC"):
        activity = _activity(conn, ident)
        if (account and activity["account_id"] != account.strip() or deal and activity["deal_id"] != deal.strip()
                or kind and activity["kind"] != kind):
            continue
        found.append(activity)
    return {"activities": found[:limit], "count": len(found)}


@tools.tool("delete_activity", "destructive",
            input=_obj({"id": {"type": "string", "description": "activity id, e.g. 'ACT-118'"}}, ["id"]),
            output=_obj({"id": _STR, "subject": _STR, "deleted": {"const": True}}, ["id", "subject", "deleted"]))
def delete_activity(conn: sqlite3.Connection, args: dict) -> dict:
    """Permanently delete a logged activity. This cannot be undone."""
    activity = _activity(conn, req_str(args, "id", 40).strip())
    conn.execute("DELETE FROM crm_activities WHERE id = ?", (activity["id"],))
    return {"id": activity["id"], "subject": activity["subject"], "deleted": True}


@tools.tool("delete_deal", "destructive",
            input=_obj({"id": _DEAL_ID}, ["id"]),
            output=_obj({"id": _STR, "name": _STR, "deleted": {"const": True}, "activities_unlinked": _INT},
                        ["id", "name", "deleted", "activities_unlinked"]))
def delete_deal(conn: sqlite3.Connection, args: dict) -> dict:
    """Permanently delete a deal; activities logged about it stay on the account without the deal. This
    cannot be undone: to record a lost deal, set its stage to 'closed_lost' instead."""
    deal = _deal(conn, req_str(args, "id", 40).strip())
    unlinked = conn.execute("UPDATE crm_activities SET deal = NULL WHERE deal = ?", (deal["id"],)).rowcount
    conn.execute("DELETE FROM crm_deals WHERE id = ?", (deal["id"],))
    return {"id": deal["id"], "name": deal["name"], "deleted": True, "activities_unlinked": unlinked}


TOOLS, handle = tools.specs, tools.handle

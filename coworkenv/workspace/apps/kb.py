"""Knowledge base app: articles (policies, troubleshooting guides, customer profiles, runbooks) with
versions, and ranked offline full-text search.

Search uses SQLite FTS5 with BM25 ranking over titles, tags and bodies (the Porter stemmer, so
'resetting' finds 'reset'). The index is a temporary table built from the articles for each search,
never stored in the state: a workspace's state is copied as SQL text, which cannot carry an FTS5
table, and a few dozen articles index in well under a millisecond. Standard library only.
"""

from __future__ import annotations

import datetime as dt
import random
import re
import sqlite3
from typing import Any

from ._base import ToolFailure, Tools, next_id, one_row, opt_bool, opt_choice, opt_int, opt_str, req_str, today_iso, user_email
from ._base import object_schema as _obj
from ._products import product_sku, supported_products, symptom

NAME = "kb"
DESCRIPTION = ("The company knowledge base: ranked full-text search over articles, read them (and their earlier "
               "versions), create, update and archive articles.")

SCHEMA = """
CREATE TABLE IF NOT EXISTS kb_articles (
    id       TEXT PRIMARY KEY,           -- 'KB-1042'
    title    TEXT NOT NULL,
    body     TEXT NOT NULL,
    category TEXT NOT NULL,              -- policy, troubleshooting, customer, runbook, how-to
    tags     TEXT NOT NULL,              -- comma-separated, e.g. 'travel,expenses'
    status   TEXT NOT NULL CHECK (status IN ('draft', 'published', 'archived')),
    version  INTEGER NOT NULL,           -- the current version, 1 first
    author   TEXT NOT NULL,              -- email address of who wrote the current version
    updated  TEXT NOT NULL,              -- YYYY-MM-DD
    product  TEXT                        -- SKU the article is about, or NULL
);
CREATE TABLE IF NOT EXISTS kb_versions (
    article  TEXT NOT NULL,
    version  INTEGER NOT NULL,
    title    TEXT NOT NULL,
    body     TEXT NOT NULL,
    tags     TEXT NOT NULL,
    author   TEXT NOT NULL,
    updated  TEXT NOT NULL,
    PRIMARY KEY (article, version)
);
"""

CATEGORIES = ["policy", "troubleshooting", "customer", "runbook", "how-to"]
STATUSES = ["draft", "published", "archived"]

_SUMMARY_PROPS: dict[str, Any] = {
    "id": {"type": "string"}, "title": {"type": "string"}, "category": {"type": "string", "enum": CATEGORIES},
    "tags": {"type": "array", "items": {"type": "string"}}, "status": {"type": "string", "enum": STATUSES},
    "version": {"type": "integer"}, "updated": {"type": "string"},
}
ARTICLE_SUMMARY = _obj(_SUMMARY_PROPS, list(_SUMMARY_PROPS))
ARTICLE_SCHEMA = _obj({**_SUMMARY_PROPS, "body": {"type": "string"}, "author": {"type": "string"},
                       "product": {"type": ["string", "null"]}, "current_version": {"type": "integer"}},
                      [*_SUMMARY_PROPS, "body", "author", "product", "current_version"])
_ID = {"type": "string", "description": "article id, e.g. 'KB-1042'"}
_TAGS = {"type": "array", "items": {"type": "string"}, "maxItems": 10}

tools = Tools()  # declared on their handlers below; TOOLS and handle come from it

RESOURCES: list[dict[str, Any]] = [{"collection": "articles", "get_tool": "get_article", "list_tool": "list_articles",
                                    "list_key": "articles"}]


# ---------------------------------------------------------------- helpers

def _tags(value: Any) -> str:
    if not isinstance(value, list) or not all(isinstance(t, str) and t.strip() for t in value) or len(value) > 10:
        raise ToolFailure(f"tags must be a list of at most 10 non-empty words, got {value!r}")
    out: list[str] = []
    for tag in value:
        tag = tag.strip().lower()
        if "," in tag:
            raise ToolFailure(f"tags: a tag cannot contain a comma, got {tag!r}")
        if tag not in out:
            out.append(tag)
    return ",".join(out)


_COLUMNS = "id, title, category, tags, status, version, updated, body, author, product"


def _summary(row: tuple) -> dict[str, Any]:
    ident, title, category, tags, status, version, updated = row[:7]
    return {"id": ident, "title": title, "category": category, "tags": [t for t in tags.split(",") if t],
            "status": status, "version": version, "updated": updated}


def _row(conn: sqlite3.Connection, ident: Any) -> tuple:
    if not isinstance(ident, str) or not ident.strip():
        raise ToolFailure("missing required argument 'id' (an article id like 'KB-1042')")
    row = one_row(conn, f"SELECT {_COLUMNS} FROM kb_articles WHERE upper(id) = upper(?)", (ident.strip(),), f"no article with id {ident!r}")
    return tuple(row)


def _article(conn: sqlite3.Connection, ident: str, version: int | None = None) -> dict[str, Any]:
    row = _row(conn, ident)
    out = {**_summary(row), "body": row[7], "author": row[8], "product": row[9], "current_version": row[5]}
    if version is not None and version != row[5]:
        old = conn.execute("SELECT title, body, tags, author, updated FROM kb_versions WHERE article = ? AND version = ?",
                           (row[0], version)).fetchone()
        if old is None:
            raise ToolFailure(f"version: article {row[0]} has versions 1 to {row[5]}, not {version}")
        out.update(title=old[0], body=old[1], tags=[t for t in old[2].split(",") if t], author=old[3],
                   updated=old[4], version=version)
    return out


STOPWORDS = frozenset(("a", "an", "and", "are", "at", "be", "by", "can", "do", "does", "for", "from", "how", "i", "in",
                       "is", "it", "many", "much", "my", "of", "on", "or", "our", "should", "that", "the", "this", "to",
                       "we", "what", "when", "where", "which", "who", "with", "you", "your"))


def _search(conn: sqlite3.Connection, query: str, category: str | None, archived: bool,
            limit: int) -> list[dict[str, Any]]:
    words = re.findall(r"\w+", query.lower())
    words = [w for w in words if w not in STOPWORDS] or words
    if not words:
        raise ToolFailure(f"query has no words to search for: {query!r}")
    conn.execute("DROP TABLE IF EXISTS temp.kb_search")
    conn.execute("CREATE VIRTUAL TABLE temp.kb_search USING fts5(id UNINDEXED, title, tags, body, "
                 "tokenize = 'porter unicode61')")
    where = " WHERE status != 'archived'" if not archived else ""
    conn.execute(f"INSERT INTO temp.kb_search SELECT id, title, replace(tags, ',', ' '), body FROM kb_articles{where}")
    match = " OR ".join('"' + w.replace('"', "") + '"' for w in words[:30])
    sql = ("SELECT s.id, -bm25(kb_search, 0.0, 4.0, 2.0, 1.0) AS score, "
           "snippet(kb_search, 3, '[', ']', '...', 16) FROM temp.kb_search s WHERE kb_search MATCH ? "
           "ORDER BY bm25(kb_search, 0.0, 4.0, 2.0, 1.0), s.id")
    hits = conn.execute(sql, (match,)).fetchall()
    conn.execute("DROP TABLE temp.kb_search")
    out = []
    for ident, score, snippet in hits:
        row = _row(conn, ident)
        if category is not None and row[2] != category:
            continue
        out.append({**_summary(row), "snippet": " ".join(snippet.split()), "score": round(score, 4)})
    return out[:limit]


def _save_version(conn: sqlite3.Connection, ident: str) -> None:
    conn.execute("INSERT OR REPLACE INTO kb_versions SELECT id, version, title, body, tags, author, updated "
                 "FROM kb_articles WHERE id = ?", (ident,))


# ---------------------------------------------------------------- handlers

@tools.tool("search_articles", "read",
            input=_obj({
                "query": {"type": "string", "minLength": 1, "description": "words to look for"},
                "category": {"type": "string", "enum": CATEGORIES}, "include_archived": {"type": "boolean"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "at most this many (default 10)"},
            }, ["query"]),
            output=_obj({"results": {"type": "array", "items": _obj({
                **_SUMMARY_PROPS, "snippet": {"type": "string"}, "score": {"type": "number", "description": "higher is better"}},
                [*_SUMMARY_PROPS, "snippet", "score"])}, "count": {"type": "integer"}}, ["results", "count"]))
def search_articles(conn: sqlite3.Connection, args: dict) -> dict:
    """Full-text search of the knowledge base, best match first (BM25 over title, tags and body; any of the
    words may match, words are stemmed). Each hit has a snippet with the matched words in [brackets].
    Archived articles are left out unless include_archived is true."""
    results = _search(conn, req_str(args, "query", 500), opt_choice(args, "category", CATEGORIES),
                      opt_bool(args, "include_archived"), opt_int(args, "limit", 10, 1, 50))
    return {"results": results, "count": len(results)}


@tools.tool("list_articles", "read",
            input=_obj({"category": {"type": "string", "enum": CATEGORIES}, "tag": {"type": "string"},
                        "status": {"type": "string", "enum": STATUSES}}, []),
            output=_obj({"articles": {"type": "array", "items": ARTICLE_SUMMARY}, "count": {"type": "integer"}},
                        ["articles", "count"]))
def list_articles(conn: sqlite3.Connection, args: dict) -> dict:
    """List articles by title, filtered by category, tag or status (archived ones only when asked for by
    status)."""
    category, status = opt_choice(args, "category", CATEGORIES), opt_choice(args, "status", STATUSES)
    tag = (opt_str(args, "tag") or "").strip().lower()
    found = []
    for row in conn.execute(f"SELECT {_COLUMNS} FROM kb_articles ORDER BY title, id"):
        row = tuple(row)
        if category and row[2] != category or tag and tag not in row[3].split(","):
            continue
        if (status and row[4] != status) or (not status and row[4] == "archived"):
            continue
        found.append(_summary(row))
    return {"articles": found, "count": len(found)}


@tools.tool("get_article", "read",
            input=_obj({"id": _ID, "version": {"type": "integer", "minimum": 1}}, ["id"]),
            output=ARTICLE_SCHEMA)
def get_article(conn: sqlite3.Connection, args: dict) -> dict:
    """Read an article in full: its current version, or an earlier one with version."""
    version = args.get("version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 1):
        raise ToolFailure(f"version must be a version number (1 or more), got {version!r}")
    return _article(conn, args.get("id"), version)  # type: ignore[arg-type]


@tools.tool("list_versions", "read",
            input=_obj({"id": _ID}, ["id"]),
            output=_obj({"id": {"type": "string"}, "versions": {"type": "array", "items": _obj({
                "version": {"type": "integer"}, "title": {"type": "string"}, "author": {"type": "string"},
                "updated": {"type": "string"}}, ["version", "title", "author", "updated"])}}, ["id", "versions"]))
def list_versions(conn: sqlite3.Connection, args: dict) -> dict:
    """The versions of an article, newest first: number, title, author and date of each."""
    ident = _row(conn, args.get("id"))[0]
    current = conn.execute("SELECT version, title, author, updated FROM kb_articles WHERE id = ?", (ident,)).fetchone()
    older = conn.execute("SELECT version, title, author, updated FROM kb_versions WHERE article = ? AND version < ? "
                         "ORDER BY version DESC", (ident, current[0])).fetchall()
    return {"id": ident, "versions": [dict(zip(("version", "title", "author", "updated"), v, strict=True))
                                      for v in [current, *older]]}


@tools.tool("create_article", "write",
            input=_obj({"title": {"type": "string", "minLength": 1}, "body": {"type": "string", "minLength": 1},
                        "category": {"type": "string", "enum": CATEGORIES}, "tags": _TAGS,
                        "status": {"type": "string", "enum": STATUSES[:2]},
                        "product": {"type": "string", "description": "SKU the article is about"}},
                       ["title", "body", "category"]),
            output=ARTICLE_SCHEMA)
def create_article(conn: sqlite3.Connection, args: dict) -> dict:
    """Write a new article (version 1) authored by the user, published unless status is 'draft'. Returns
    it."""
    title, body = req_str(args, "title", 200).strip(), req_str(args, "body", 50000).strip()
    category = opt_choice(args, "category", CATEGORIES)
    if category is None:
        raise ToolFailure(f"missing required argument 'category' (one of {', '.join(CATEGORIES)})")
    status = opt_choice(args, "status", STATUSES[:2]) or "published"
    tags = _tags(args["tags"]) if args.get("tags") is not None else ""
    product = product_sku(conn, args.get("product"))
    ident = next_id(conn, "kb_articles", "KB-", width=1, start=1000)
    conn.execute("INSERT INTO kb_articles VALUES (?,?,?,?,?,?,1,?,?,?)",
                 (ident, title, body, category, tags, status, user_email(conn), today_iso(conn), product))
    _save_version(conn, ident)
    return _article(conn, ident)


@tools.tool("update_article", "write",
            input=_obj({"id": _ID, "title": {"type": "string", "minLength": 1},
                        "body": {"type": "string", "minLength": 1}, "tags": _TAGS,
                        "status": {"type": "string", "enum": STATUSES[:2]}}, ["id"]),
            output=ARTICLE_SCHEMA)
def update_article(conn: sqlite3.Connection, args: dict) -> dict:
    """Change an article's title, body, tags or status (draft/published): saves a new version and keeps the
    previous ones. Archived articles cannot be changed. Returns it."""
    row = _row(conn, args.get("id"))
    ident = row[0]
    if row[4] == "archived":
        raise ToolFailure(f"id: article {ident} is archived and cannot be changed; write a new one instead")
    changes: dict[str, Any] = {}
    if args.get("title") is not None:
        changes["title"] = req_str(args, "title", 200).strip()
    if args.get("body") is not None:
        changes["body"] = req_str(args, "body", 50000).strip()
    if args.get("tags") is not None:
        changes["tags"] = _tags(args["tags"])
    if (status := opt_choice(args, "status", STATUSES[:2])) is not None:
        changes["status"] = status
    if not changes:
        raise ToolFailure("nothing to update: give title, body, tags or status")
    _save_version(conn, ident)
    changes.update(version=row[5] + 1, author=user_email(conn), updated=today_iso(conn))
    conn.execute(f"UPDATE kb_articles SET {', '.join(f'{k} = ?' for k in changes)} WHERE id = ?",
                 [*changes.values(), ident])
    _save_version(conn, ident)
    return _article(conn, ident)


@tools.tool("archive_article", "destructive",
            input=_obj({"id": _ID}, ["id"]),
            output=_obj({"id": {"type": "string"}, "title": {"type": "string"}, "archived": {"const": True}},
                        ["id", "title", "archived"]))
def archive_article(conn: sqlite3.Connection, args: dict) -> dict:
    """Archive an article: it leaves search and can no longer be edited. This cannot be undone."""
    row = _row(conn, args.get("id"))
    if row[4] == "archived":
        raise ToolFailure(f"id: article {row[0]} is already archived")
    conn.execute("UPDATE kb_articles SET status = 'archived', updated = ? WHERE id = ?", (today_iso(conn), row[0]))
    return {"id": row[0], "title": row[1], "archived": True}


TOOLS, handle = tools.specs, tools.handle


# ---------------------------------------------------------------- seed

FIXES = (
    "Hold the power button for {n} seconds, then connect the original charger for {m} minutes before starting it.",
    "Install firmware {v} from the vendor portal and restart twice.",
    "Reset the device to factory settings (Settings > System > Reset) and re-enrol it with code {code}.",
    "Replace the cable with a certified one and switch the port to mode {m}.",
    "Clear the local cache folder, sign out, and sign in again within {n} minutes.",
    "Raise a return with the supplier quoting reference RMA-{code}; a replacement ships within {m} days.",
)


def _policies(rng: random.Random, currency: str, approver: dict[str, Any]) -> list[tuple[str, list[str], list[str]]]:
    """(title, tags, bodies oldest first): each policy's history, its current figures last."""
    meal, hotel = rng.randrange(30, 70, 5), rng.randrange(110, 260, 10)
    limit, days, remote = rng.randrange(500, 5000, 250), rng.choice([60, 90, 120, 180]), rng.randint(1, 4)
    return [
        ("Travel expense policy", ["travel", "expenses"], [
            f"Meals are reimbursed up to {meal - 10} {currency} a day. Hotels up to {hotel - 30} {currency} a night "
            "need no approval; book through the travel portal.",
            f"Meals are reimbursed up to {meal} {currency} a day. Hotels up to {hotel} {currency} a night need no "
            "approval; book through the travel portal. Keep every receipt for the expense report."]),
        ("Purchase approval limits", ["purchasing", "approval", "finance"], [
            f"Purchases above {limit} {currency} need the approval of {approver['name']} ({approver['email']}) "
            "before the order is placed. Smaller purchases need a cost centre only."]),
        ("Password and MFA policy", ["security", "passwords"], [
            f"Passwords are changed every {days + 30} days.",
            f"Passwords are changed every {days} days, and multi-factor authentication is required on every "
            "account that offers it."]),
        ("Remote work policy", ["remote", "hr"], [
            f"Employees may work remotely up to {remote} days a week, agreed with their manager."]),
    ]


def seed(conn: sqlite3.Connection, rng: random.Random, world: dict[str, Any]) -> None:
    """Articles from the world: policies (some with an earlier version holding old figures, and a
    dated near-duplicate with those figures: still published for travel, archived otherwise), a
    troubleshooting guide for each product the helpdesk supports, a profile per customer
    organisation, runbooks for active projects."""
    conn.executescript(SCHEMA)
    today = dt.date.fromisoformat(world["today"])
    company = world["company"]["id"]
    staff = [p for p in world["people"] if p["org"] == company and p["id"] != world["user"]["id"]]
    people = {p["id"]: p for p in world["people"]}
    support = [p for p in staff if p["department"] == "Support"] or staff[:2]
    finance = [p for p in staff if p["department"] == "Finance"] or staff
    sales = [p for p in staff if p["department"] == "Sales"] or staff
    currency = "GBP" if world["company"]["country"] == "United Kingdom" else "EUR"

    def day(lo: int, hi: int) -> str:
        return (today - dt.timedelta(days=rng.randint(lo, hi))).isoformat()

    # (title, category, tags, [(body, author, updated)] oldest first, status, product)
    articles: list[tuple[str, str, list[str], list[tuple[str, str, str]], str, str | None]] = []
    for title, tags, bodies in _policies(rng, currency, rng.choice(finance)):
        author = rng.choice(staff)["email"]
        dates = sorted(day(10, 400) for _ in bodies)
        articles.append((title, "policy", tags, [(b, author, d) for b, d in zip(bodies, dates, strict=True)],
                         "published", None))
        if len(bodies) > 1:  # an outdated near-duplicate with the oldest figures, still published for travel
            articles.append((f"{title} ({today.year - 2})", "policy", tags, [(bodies[0], author, day(500, 700))],
                             "published" if tags[0] == "travel" else "archived", None))
    for product in supported_products(world):
        lead = rng.choice(support)
        fix = rng.choice(FIXES).format(n=rng.randint(5, 40), m=rng.randint(2, 9), code=rng.randint(10000, 99999),
                                       v=f"{rng.randint(1, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}")
        problem = symptom(product)
        body = (f"Symptom: the {product['name']} ({product['sku']}) {problem}.\n\nFix: {fix}\n\nIf this does not help, "
                f"escalate to {lead['name']} ({lead['email']}) with the serial number.")
        articles.append((f"{product['name']} {problem}", "troubleshooting",
                         [product["category"], "troubleshooting", product["sku"].lower()],
                         [(body, lead["email"], day(5, 200))], "published", product["sku"]))
    for org in (o for o in world["organisations"] if o["kind"] == "customer"):
        manager = rng.choice(sales)
        tier, hours = rng.choice([("Gold", 4), ("Silver", 8), ("Bronze", 24)])
        contacts = ", ".join(f"{p['name']} ({p['role']})" for p in world["people"] if p["org"] == org["id"])
        body = (f"{org['name']} ({org['industry']}, {org['city']}, {org['country']}) is a {tier} customer: first "
                f"response within {hours} hours. Account manager: {manager['name']} ({manager['email']}). "
                f"Contacts: {contacts}.")
        articles.append((f"Customer profile: {org['name']}", "customer", ["customer", tier.lower()],
                         [(body, manager["email"], day(5, 120))], "published", None))
    for project in [p for p in world["projects"] if p["status"] == "active"][:3]:
        owner = people[project["owner"]]
        body = (f"On-call owner: {owner['name']} ({owner['email']}). Deployments happen on "
                f"{rng.choice(['Tuesdays', 'Wednesdays', 'Thursdays'])} after {rng.choice(['10:00', '14:00', '16:00'])}. "
                f"Roll back with the previous release tag and tell the {project['code']} channel.")
        articles.append((f"{project['code']} {project['name']} runbook", "runbook", ["runbook", project["code"].lower()],
                         [(body, owner["email"], day(5, 90))], rng.choice(["published", "published", "draft"]), None))
    articles.append(("How to book a meeting room", "how-to", ["rooms", "calendar"],
                     [("Book rooms from the calendar: add the room as a location; rooms free up after 10 minutes "
                       "without check-in.", rng.choice(staff)["email"], day(30, 300))], "published", None))

    rng.shuffle(articles)
    first = rng.randrange(1000, 9000, 100)
    for n, (title, category, tags, history, status, product) in enumerate(articles, start=1):
        ident = f"KB-{first + n}"
        for version, (body, author, updated) in enumerate(history, start=1):
            conn.execute("INSERT INTO kb_versions VALUES (?,?,?,?,?,?,?)",
                         (ident, version, title, body, ",".join(tags), author, updated))
        body, author, updated = history[-1]
        conn.execute("INSERT INTO kb_articles VALUES (?,?,?,?,?,?,?,?,?,?)",
                     (ident, title, body, category, ",".join(tags), status, len(history), author, updated, product))

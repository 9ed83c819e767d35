"""Finance app: invoices from vendors and to customers, expense claims with scanned receipts,
project budgets and the approvals made on them. Standard library only when tools run.

Invoices are from the world's vendors (for the products they supply) and to its customers (for
their projects and products), charged to the world's project codes; expenses are claimed by the
company's people. What an agent would see as a picture is stored as one: every receipt is a
scanned-looking PNG and every vendor invoice a scanned PDF, drawn from the record's own data with
Pillow in ``seed`` (which runs on the host; ``_drawing`` is imported there only, so tools never load
Pillow). A receipt's merchant and items are only in its image, and a claim does not always match its
receipt. Distractors: a vendor invoice entered twice under two numbers, a closed project's old budget.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import random
import sqlite3
from typing import Any

from ._base import AppMeta, ToolFailure, Tools, check_date, currency, next_id, one_row, opt_bool, opt_int, opt_str, req_str
from ._base import object_schema as _obj

NAME = "finance"
DESCRIPTION = ("Finance: invoices payable and receivable, expense claims with their scanned receipts, project "
               "budgets and approvals.")

SCHEMA = """
CREATE TABLE IF NOT EXISTS finance_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS finance_invoices (
    id          TEXT PRIMARY KEY,             -- e.g. 'INV-40718'
    direction   TEXT NOT NULL CHECK (direction IN ('payable', 'receivable')),
    org         TEXT NOT NULL,                -- the world organisation id (vendor or customer)
    counterparty TEXT NOT NULL,
    project     TEXT,                         -- a world project code
    issue_date  TEXT NOT NULL,
    due_date    TEXT NOT NULL,
    subtotal    REAL NOT NULL,
    tax         REAL NOT NULL,
    total       REAL NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('open', 'paid')),
    paid_on     TEXT,
    flagged     INTEGER NOT NULL DEFAULT 0,
    flag_reason TEXT,
    description TEXT NOT NULL,
    lines       TEXT NOT NULL,                -- JSON list of {description, quantity, unit_price, amount}
    document    BLOB                          -- the scanned invoice, a PDF (vendor invoices)
);
CREATE TABLE IF NOT EXISTS finance_expenses (
    id            TEXT PRIMARY KEY,           -- e.g. 'EXP-2291'
    employee      TEXT NOT NULL,              -- email of the claimant
    employee_name TEXT NOT NULL,
    project       TEXT,
    category      TEXT NOT NULL,
    description   TEXT NOT NULL,
    date          TEXT NOT NULL,
    amount        REAL NOT NULL,              -- the amount claimed
    status        TEXT NOT NULL CHECK (status IN ('submitted', 'approved', 'rejected')),
    decided_by    TEXT,
    decision_note TEXT
);
CREATE TABLE IF NOT EXISTS finance_receipts (
    id       TEXT PRIMARY KEY,                -- e.g. 'RC-2291'
    expense  TEXT NOT NULL,
    merchant TEXT NOT NULL,
    date     TEXT NOT NULL,
    items    TEXT NOT NULL,                   -- JSON list of [item, amount]
    total    REAL NOT NULL,
    png      BLOB NOT NULL                    -- the scanned receipt
);
CREATE TABLE IF NOT EXISTS finance_budgets (
    project      TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    owner        TEXT NOT NULL,               -- email
    status       TEXT NOT NULL,               -- the project's: active, planned, closed
    budget       REAL NOT NULL,
    spent_before REAL NOT NULL                -- spent before the invoices and expenses held here
);
CREATE TABLE IF NOT EXISTS finance_approvals (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    record TEXT NOT NULL,                     -- invoice or expense id
    action TEXT NOT NULL,                     -- approved, rejected, paid, flagged
    actor  TEXT NOT NULL,
    date   TEXT NOT NULL,
    note   TEXT NOT NULL DEFAULT ''
);
"""

CATEGORIES = ["meals", "travel", "lodging", "office supplies", "mileage", "other"]
_STR, _INT, _NUM = {"type": "string"}, {"type": "integer"}, {"type": "number"}
_NULL_STR, _BOOL = {"type": ["string", "null"]}, {"type": "boolean"}
CONTENT_SCHEMA = {"type": "array", "description": "what the agent sees besides the JSON: images and documents",
                  "items": _obj({"type": {"type": "string", "enum": ["image", "resource"]}, "mime_type": _STR,
                                 "data": _STR, "uri": _STR, "blob": _STR, "text": _STR}, ["type", "mime_type"])}
_INVOICE_PROPS: dict[str, Any] = {
    "id": _STR, "direction": {"type": "string", "enum": ["payable", "receivable"]}, "counterparty": _STR,
    "project": _NULL_STR, "issue_date": _STR, "due_date": _STR, "total": _NUM, "currency": _STR,
    "status": {"type": "string", "enum": ["open", "overdue", "paid"]}, "days_overdue": _INT, "flagged": _BOOL,
    "description": _STR,
}
INVOICE_SUMMARY_SCHEMA = _obj(_INVOICE_PROPS, list(_INVOICE_PROPS))
_LINE = _obj({"description": _STR, "quantity": _NUM, "unit_price": _NUM, "amount": _NUM},
             ["description", "quantity", "unit_price", "amount"])
_HISTORY = _obj({"date": _STR, "action": _STR, "actor": _STR, "note": _STR}, ["date", "action", "actor", "note"])
_INVOICE_FULL = {**_INVOICE_PROPS, "subtotal": _NUM, "tax": _NUM, "lines": {"type": "array", "items": _LINE},
                 "paid_on": _NULL_STR, "flag_reason": _NULL_STR, "has_document": _BOOL,
                 "history": {"type": "array", "items": _HISTORY}}
INVOICE_SCHEMA = _obj({**_INVOICE_FULL, "_content": CONTENT_SCHEMA}, list(_INVOICE_FULL))
_EXPENSE_PROPS: dict[str, Any] = {
    "id": _STR, "employee": _STR, "employee_email": _STR, "project": _NULL_STR, "category": _STR,
    "description": _STR, "date": _STR, "amount": _NUM, "currency": _STR,
    "status": {"type": "string", "enum": ["submitted", "approved", "rejected"]}, "receipt_id": _NULL_STR,
    "decided_by": _NULL_STR, "decision_note": _NULL_STR,
}
EXPENSE_SCHEMA = _obj(_EXPENSE_PROPS, list(_EXPENSE_PROPS))
_BUDGET_PROPS: dict[str, Any] = {
    "project": _STR, "name": _STR, "owner": _STR, "status": _STR, "budget": _NUM, "spent": _NUM, "committed": _NUM,
    "pending_expenses": _NUM, "remaining": _NUM, "currency": _STR, "over_budget": _BOOL,
}
BUDGET_SCHEMA = _obj(_BUDGET_PROPS, list(_BUDGET_PROPS))
_INVOICE_ID = {"type": "string", "description": "invoice number, e.g. 'INV-40718'"}
_EXPENSE_ID = {"type": "string", "description": "expense id, e.g. 'EXP-2291'"}
_PROJECT = {"type": "string", "description": "project code, e.g. 'PRJ-264'"}

tools = Tools()  # declared on their handlers below; TOOLS and handle come from it
_meta = AppMeta(NAME)

RESOURCES: list[dict[str, Any]] = [{"collection": "invoices", "get_tool": "get_invoice", "list_tool": "list_invoices",
                                    "list_key": "invoices", "list_arguments": {"limit": 100}}]

TAX_RATES = {"United Kingdom": 0.2, "United States": 0.0, "Germany": 0.19, "France": 0.2, "Spain": 0.21,
             "Italy": 0.22, "Sweden": 0.25, "Denmark": 0.25, "Poland": 0.23, "Finland": 0.24}


# ---------------------------------------------------------------- seed

def _money(value: float) -> float:
    return round(value + 1e-9, 2)


def seed(conn: sqlite3.Connection, rng: random.Random, world: dict[str, Any]) -> None:
    """~20 invoices (vendor ones with a scanned PDF), ~10 expense claims (most with a scanned
    receipt), a budget per project, and the approvals already made. Draws with Pillow."""
    conn.executescript(SCHEMA)
    today = dt.date.fromisoformat(world["today"])
    money, rate = currency(world), TAX_RATES.get(world["company"]["country"], 0.2)
    user = world["user"]
    _meta.write(conn, [
        ("today", today.isoformat()), ("user", user["email"]), ("user_name", user["name"]), ("currency", money),
        ("company", world["company"]["name"])])
    orgs = {o["id"]: o for o in world["organisations"]}
    approvals: list[tuple[str, str, str, str, str]] = []
    _seed_invoices(conn, rng, world, today, money, rate, orgs, approvals)
    _seed_expenses(conn, rng, world, today, money, rate, approvals)
    for project in world["projects"]:
        owner = next(p["email"] for p in world["people"] if p["id"] == project["owner"])
        share = {"closed": (0.85, 1.0), "planned": (0.0, 0.0)}.get(project["status"], (0.1, 0.6))
        conn.execute("INSERT INTO finance_budgets VALUES (?,?,?,?,?,?)",
                     (project["code"], project["name"], owner, project["status"], float(project["budget"]),
                      _money(project["budget"] * rng.uniform(*share))))
    approvals.sort(key=lambda a: (a[3], a[0]))
    conn.executemany("INSERT INTO finance_approvals (record, action, actor, date, note) VALUES (?,?,?,?,?)", approvals)


def _seed_invoices(conn: sqlite3.Connection, rng: random.Random, world: dict[str, Any], today: dt.date, money: str,
                   rate: float, orgs: dict[str, dict], approvals: list) -> None:
    from ._drawing import invoice_pdf  # host only: Pillow

    numbers = iter(rng.sample(range(10000, 99999), 40))
    projects = [p for p in world["projects"] if p["status"] != "closed"]
    finance_staff = [p["email"] for p in world["people"] if p["org"] == world["company"]["id"]
                     and p["department"] == "Finance"] or [world["user"]["email"]]
    rows: list[dict[str, Any]] = []
    for vendor in (o for o in world["organisations"] if o["kind"] == "vendor"):
        goods = [p for p in world["products"] if p["supplier"] == vendor["id"]] or world["products"][:3]
        for _ in range(rng.randint(2, 4)):
            lines = []
            for product in rng.sample(goods, min(len(goods), rng.randint(1, 3))):
                qty = {"hardware": rng.randint(1, 8), "office": rng.choice([10, 20, 40]),
                       "software": rng.choice([5, 10, 15, 25]), "services": rng.randint(1, 5)}[product["category"]]
                lines.append({"description": product["name"], "quantity": qty, "unit_price": product["price"],
                              "amount": _money(qty * product["price"])})
            project = rng.choice(projects) if rng.random() < 0.75 else None
            rows.append({"direction": "payable", "org": vendor, "project": project, "lines": lines,
                         "issue": today - dt.timedelta(days=rng.randint(3, 70)), "terms": rng.choice([14, 30, 30, 45]),
                         "description": f"{lines[0]['description']} and more" if len(lines) > 1
                         else lines[0]["description"]})
    for c, customer in enumerate(o for o in world["organisations"] if o["kind"] == "customer"):
        theirs = [p for p in world["projects"] if p["client"] == customer["id"]]
        for n in range(rng.randint(1, 3)):
            project = rng.choice(theirs) if theirs and rng.random() < 0.7 else None
            if project:
                days = rng.randint(3, 20)
                price = float(rng.randrange(700, 1600, 50))
                lines = [{"description": f"Consulting days, {project['name']}", "quantity": days, "unit_price": price,
                          "amount": _money(days * price)}]
            else:
                product = rng.choice([p for p in world["products"] if p["category"] in ("hardware", "software")])
                qty = rng.randint(2, 25)
                price = _money(product["price"] * 1.3)
                lines = [{"description": product["name"], "quantity": qty, "unit_price": price,
                          "amount": _money(qty * price)}]
            rows.append({"direction": "receivable", "org": customer, "project": project, "lines": lines,
                         "issue": today - dt.timedelta(days=rng.randint(35 if c == 0 else 10, 80) if n == 0
                                                       else rng.randint(2, 60)),
                         "terms": 30, "description": lines[0]["description"]})
    # a vendor invoice entered twice under two numbers, a few days apart (neither paid yet)
    copied = rng.choice([r for r in rows if r["direction"] == "payable"])
    copied["unpaid"] = True
    rows.append({**copied, "issue": copied["issue"] + dt.timedelta(days=rng.randint(2, 6))})
    rows.sort(key=lambda r: (r["issue"], r["direction"], r["org"]["id"]))
    overdue = 0  # receivables left unpaid past their due date: the two oldest, then by chance
    for row in rows:
        subtotal = _money(sum(line["amount"] for line in row["lines"]))
        tax = _money(subtotal * rate)
        issue = row["issue"]
        due = issue + dt.timedelta(days=row["terms"])
        paid_on = None
        if row["direction"] == "receivable" and due < today and overdue < 2:
            overdue += 1
        elif due < today and not row.get("unpaid") and rng.random() < 0.65:
            paid_on = min(today - dt.timedelta(days=1), due - dt.timedelta(days=rng.randint(0, 10)))
        ident = f"INV-{next(numbers)}"
        project = row["project"]["code"] if row["project"] else None
        document = invoice_pdf(rng, world, row["org"], ident, issue, due, project, row["lines"], subtotal, tax,
                                money, rate) if row["direction"] == "payable" else None
        conn.execute("INSERT INTO finance_invoices VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                     (ident, row["direction"], row["org"]["id"], row["org"]["name"], project, issue.isoformat(),
                      due.isoformat(), subtotal, tax, _money(subtotal + tax), "paid" if paid_on else "open",
                      paid_on.isoformat() if paid_on else None, 0, None, row["description"],
                      json.dumps(row["lines"]), document))
        if paid_on:
            approvals.append((ident, "paid", rng.choice(finance_staff), paid_on.isoformat(), ""))


def _merchant(rng: random.Random, world: dict[str, Any], category: str) -> tuple[str, str]:
    """A merchant for a receipt, named from the world's people and places: (name, city)."""
    outsiders = [p for p in world["people"] if p["org"] != world["company"]["id"]]
    last, city = rng.choice(outsiders)["last"], rng.choice(world["organisations"])["city"]
    names = {"meals": [f"{last}'s Bistro", f"Trattoria {last}", f"Cafe {last}", f"The {last} Arms"],
             "travel": [f"{city} Cabs", f"{city} Taxi Co.", f"{city} Rail"],
             "lodging": [f"Hotel {city}", f"{city} Grand Hotel", f"The {last} Inn"],
             "office supplies": [f"{last} Office Supplies", f"{city} Stationers"],
             "other": [f"{last} Books", f"{city} Print Shop"]}[category]
    return rng.choice(names), city


def _items(rng: random.Random, world: dict[str, Any], category: str, city: str) -> list[tuple[str, float]]:
    pick = lambda options, low, high: (rng.choice(options), _money(rng.uniform(low, high)))
    if category == "meals":
        dishes = {"Soup of the day": (6, 11), "Grilled salmon": (19, 32), "Pasta al pomodoro": (12, 19),
                  "Steak frites": (21, 36), "Caesar salad": (10, 16), "Risotto": (14, 24), "Cheesecake": (6, 10),
                  "Espresso": (2, 4), "Sparkling water": (3, 7), "House wine (glass)": (6, 12)}
        return [(dish, _money(rng.uniform(*dishes[dish]) * (1 if dish[0] == "E" else rng.randint(1, 3))))
                for dish in rng.sample(sorted(dishes), rng.randint(2, 5))]
    if category == "travel":
        other = rng.choice([o["city"] for o in world["organisations"] if o["city"] != city] or [city])
        return [pick([f"Fare {city} - {other}", f"Ticket {city} - {other}"], 14, 160),
                pick(["Booking fee", "Seat reservation"], 1, 9)]
    if category == "lodging":
        nights = rng.randint(1, 3)
        return [(f"Room, {nights} night{'s' if nights > 1 else ''}", _money(nights * rng.uniform(85, 210))),
                pick(["Breakfast", "Breakfast buffet"], 9, 25), pick(["City tax"], 2, 12)]
    if category == "office supplies":
        office = [p for p in world["products"] if p["category"] == "office"] or world["products"][:2]
        return [(f"{n} x {p['name']}", _money(n * p["price"] * 1.2)) for p in rng.sample(office, min(2, len(office)))
                for n in [rng.randint(1, 4)]]
    return [pick(["Printing and binding", "Reference book", "Conference badge"], 12, 90)]


def _seed_expenses(conn: sqlite3.Connection, rng: random.Random, world: dict[str, Any], today: dt.date, money: str,
                   rate: float, approvals: list) -> None:
    from ._drawing import receipt_png  # host only: Pillow

    staff = [p for p in world["people"] if p["org"] == world["company"]["id"]]
    customers = [o["name"] for o in world["organisations"] if o["kind"] == "customer"]
    projects = [p["code"] for p in world["projects"] if p["status"] == "active"]
    managers = {p["id"]: p for p in staff}
    base = rng.randrange(1000, 8000)
    plan = ["submitted"] * rng.randint(5, 6) + ["approved"] * rng.randint(3, 4) + ["rejected"]
    mismatched = set(rng.sample(range(plan.count("submitted")), 2))
    claims = []
    for n, status in enumerate(plan):
        category = rng.choice(["meals", "meals", "travel", "travel", "lodging", "office supplies", "other"]
                              if n else ["meals"])
        person = rng.choice(staff)
        merchant, city = _merchant(rng, world, category)
        description = {"meals": rng.choice([f"Dinner with {rng.choice(customers)}", "Team lunch",
                                            f"Lunch with {rng.choice(customers)}"]),
                       "travel": rng.choice([f"Taxi in {city}", f"Train to {city}"]),
                       "lodging": f"Hotel in {city}", "office supplies": "Office supplies",
                       "other": "Workshop materials"}[category]
        date = today - dt.timedelta(days=rng.randint(2, 40))
        items = _items(rng, world, category, city)
        total = _money(sum(amount for _, amount in items))
        claimed = total
        if status == "submitted" and plan[:n].count("submitted") in mismatched:
            claimed = _money(total + rng.choice([10, 20, 50, 9.9, 0.9 * total]))
        claims.append((date, n, person, category, description, items, total, claimed, merchant, city, status))
    mileage = rng.choice(staff)
    km = rng.randint(40, 300)
    claims.append((today - dt.timedelta(days=rng.randint(2, 30)), len(plan), mileage, "mileage",
                   f"Mileage, {km} km to client", [], 0.0, _money(km * 0.45), "", "", "submitted"))
    claims.sort(key=lambda c: (c[0], c[1]))
    for k, (date, _, person, category, description, items, total, claimed, merchant, city, status) in enumerate(claims):
        ident = f"EXP-{base + k}"
        boss = managers.get(person["manager"] or "", world["user"])
        if boss is person:  # nobody approves their own claim: finance does
            boss = next((p for p in staff if p["department"] == "Finance" and p is not person), boss)
        decider = boss["email"] if status != "submitted" else None
        note = {"approved": "Approved.", "rejected": "Not a business expense.", "submitted": None}[status]
        conn.execute("INSERT INTO finance_expenses VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                     (ident, person["email"], person["name"], rng.choice(projects) if projects else None, category,
                      description, date.isoformat(), claimed, status, decider, note))
        if items:
            clock = f"{rng.randint(8, 21):02d}:{rng.randrange(0, 60):02d}"
            png = receipt_png(rng, merchant, city, date, clock, items, total, money, rate)
            conn.execute("INSERT INTO finance_receipts VALUES (?,?,?,?,?,?,?)",
                         (f"RC-{base + k}", ident, merchant, date.isoformat(), json.dumps(items), total, png))
        if decider:
            decided = min(today, date + dt.timedelta(days=rng.randint(1, 5)))
            approvals.append((ident, status, decider, decided.isoformat(), note or ""))


# ---------------------------------------------------------------- handlers

_INVOICE_SQL = ("SELECT id, direction, counterparty, project, issue_date, due_date, total, status, flagged, description, "
                "subtotal, tax, lines, paid_on, flag_reason, document IS NOT NULL FROM finance_invoices")


def _invoice_row(conn: sqlite3.Connection, ident: str) -> tuple:
    row = one_row(conn, f"{_INVOICE_SQL} WHERE id = ?", (ident.strip().upper(),),
                  f"no invoice with number {ident!r}; list_invoices finds invoice numbers")
    return tuple(row)


def _invoice_summary(conn: sqlite3.Connection, row: tuple) -> dict[str, Any]:
    today = dt.date.fromisoformat(_meta(conn, "today"))
    late = (today - dt.date.fromisoformat(row[5])).days if row[7] == "open" else 0
    return {"id": row[0], "direction": row[1], "counterparty": row[2], "project": row[3], "issue_date": row[4],
            "due_date": row[5], "total": row[6], "currency": _meta(conn, "currency"),
            "status": "paid" if row[7] == "paid" else ("overdue" if late > 0 else "open"),
            "days_overdue": max(late, 0), "flagged": bool(row[8]), "description": row[9]}


def _invoice(conn: sqlite3.Connection, ident: str) -> dict[str, Any]:
    row = _invoice_row(conn, ident)
    out = _invoice_summary(conn, row)
    out.update(subtotal=row[10], tax=row[11], lines=json.loads(row[12]), paid_on=row[13], flag_reason=row[14],
               has_document=bool(row[15]))
    out["history"] = [{"date": d, "action": a, "actor": who, "note": note} for d, a, who, note in conn.execute(
        "SELECT date, action, actor, note FROM finance_approvals WHERE record = ? ORDER BY id", (row[0],))]
    if row[15]:
        (pdf,) = conn.execute("SELECT document FROM finance_invoices WHERE id = ?", (row[0],)).fetchone()
        lines = "\n".join(f"  {line['description']}: {line['quantity']:g} x {line['unit_price']:.2f} = "
                          f"{line['amount']:.2f}" for line in out["lines"])
        text = (f"Scanned invoice {row[0]} from {row[2]}, issued {row[4]}, due {row[5]}, reference "
                f"{row[3] or '-'}.\n{lines}\n  Subtotal {row[10]:.2f}, VAT {row[11]:.2f}, total {out['currency']} "
                f"{row[6]:.2f}")
        out["_content"] = [{"type": "resource", "uri": f"coworkenv://finance/invoices/{row[0]}.pdf",
                            "mime_type": "application/pdf", "blob": base64.b64encode(pdf).decode("ascii"),
                            "text": text}]
    return out


def _expense(conn: sqlite3.Connection, ident: str) -> dict[str, Any]:
    row = one_row(conn, "SELECT e.id, e.employee_name, e.employee, e.project, e.category, e.description, e.date, "
                  "e.amount, '', e.status, r.id, e.decided_by, e.decision_note FROM finance_expenses e "
                  "LEFT JOIN finance_receipts r ON r.expense = e.id WHERE e.id = ?", (ident.strip().upper(),),
                  f"no expense claim with id {ident!r}; list_expenses shows the claims")
    out = dict(zip(_EXPENSE_PROPS, row, strict=True))
    out["currency"] = _meta(conn, "currency")
    return out


def _decide(conn: sqlite3.Connection, ident: str, status: str, note: str) -> dict[str, Any]:
    claim = _expense(conn, ident)
    if claim["status"] != "submitted":
        raise ToolFailure(f"expense {claim['id']} is already {claim['status']}; only submitted claims can be decided")
    user = _meta(conn, "user")
    conn.execute("UPDATE finance_expenses SET status = ?, decided_by = ?, decision_note = ? WHERE id = ?",
                 (status, user, note, claim["id"]))
    conn.execute("INSERT INTO finance_approvals (record, action, actor, date, note) VALUES (?,?,?,?,?)",
                 (claim["id"], status, user, _meta(conn, "today"), note))
    return _expense(conn, claim["id"])


def _budgets(conn: sqlite3.Connection, project: str | None) -> list[dict[str, Any]]:
    rows = [tuple(r) for r in conn.execute("SELECT project, name, owner, status, budget, spent_before "
                                           "FROM finance_budgets ORDER BY project")]
    if project is not None:
        wanted = project.strip().upper()
        rows = [r for r in rows if r[0] == wanted]
        if not rows:
            codes = ", ".join(r[0] for r in conn.execute("SELECT project FROM finance_budgets ORDER BY project"))
            raise ToolFailure(f"project {project!r} has no budget; projects with budgets: {codes}")
    out = []
    for code, name, owner, status, budget, before in rows:
        paid, committed = conn.execute(
            "SELECT COALESCE(SUM(CASE WHEN status = 'paid' THEN total END), 0), "
            "COALESCE(SUM(CASE WHEN status = 'open' THEN total END), 0) FROM finance_invoices "
            "WHERE project = ? AND direction = 'payable'", (code,)).fetchone()
        approved, pending = conn.execute(
            "SELECT COALESCE(SUM(CASE WHEN status = 'approved' THEN amount END), 0), "
            "COALESCE(SUM(CASE WHEN status = 'submitted' THEN amount END), 0) FROM finance_expenses "
            "WHERE project = ?", (code,)).fetchone()
        spent = _money(before + paid + approved)
        remaining = _money(budget - spent - committed)
        out.append({"project": code, "name": name, "owner": owner, "status": status, "budget": budget, "spent": spent,
                    "committed": _money(committed), "pending_expenses": _money(pending), "remaining": remaining,
                    "currency": _meta(conn, "currency"), "over_budget": remaining < 0})
    return out


@tools.tool("list_invoices", "read",
            input=_obj({
                "query": {"type": "string", "description": "text to look for; omit for every invoice"},
                "direction": {"type": "string", "enum": ["payable", "receivable"]},
                "status": {"type": "string", "enum": ["open", "overdue", "paid"],
                           "description": "'open' includes overdue invoices; 'overdue' only those past their due date"},
                "project": _PROJECT, "flagged": _BOOL,
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "at most this many (default 50)"},
            }, []),
            output=_obj({"invoices": {"type": "array", "items": INVOICE_SUMMARY_SCHEMA}, "count": _INT,
                         "total": _NUM}, ["invoices", "count", "total"]))
def list_invoices(conn: sqlite3.Connection, args: dict) -> dict:
    """List invoices, earliest due date first. Matches the query (case-insensitive substring) against
    number, counterparty and description; filters by direction (payable: from vendors, receivable: to
    customers), status (open, overdue, paid), project and flagged. Returns summaries with days overdue."""
    query, direction = (opt_str(args, "query") or "").strip().lower(), opt_str(args, "direction")
    status, project = opt_str(args, "status"), (opt_str(args, "project") or "").strip().upper()
    flagged = args.get("flagged")
    if flagged is not None:
        flagged = opt_bool(args, "flagged")
    limit = opt_int(args, "limit", 50, 1, 100)
    found = []
    for row in conn.execute(f"{_INVOICE_SQL} ORDER BY due_date, id"):
        invoice = _invoice_summary(conn, tuple(row))
        if (direction and invoice["direction"] != direction or project and invoice["project"] != project
                or status == "paid" and invoice["status"] != "paid" or status == "overdue"
                and invoice["status"] != "overdue" or status == "open" and invoice["status"] == "paid"
                or flagged is not None and invoice["flagged"] != flagged
                or query and query not in f"{invoice['id']} {invoice['counterparty']} "
                                          f"{invoice['description']}".lower()):
            continue
        found.append(invoice)
    return {"invoices": found[:limit], "count": len(found), "total": _money(sum(i["total"] for i in found))}


@tools.tool("get_invoice", "read",
            input=_obj({"id": _INVOICE_ID}, ["id"]),
            output=INVOICE_SCHEMA)
def get_invoice(conn: sqlite3.Connection, args: dict) -> dict:
    """One invoice in full: lines, subtotal, tax, total, payment and flag, and its history. A vendor
    invoice comes with its scanned PDF as an embedded document."""
    return _invoice(conn, req_str(args, "id", 40))


@tools.tool("mark_invoice_paid", "destructive",
            input=_obj({"id": _INVOICE_ID, "paid_on": {"type": "string", "description": "YYYY-MM-DD"}}, ["id"]),
            output=_obj({"invoice": INVOICE_SUMMARY_SCHEMA, "paid_on": _STR}, ["invoice", "paid_on"]))
def mark_invoice_paid(conn: sqlite3.Connection, args: dict) -> dict:
    """Record an invoice as paid (payment sent for a payable invoice, received for a receivable one), on
    paid_on or today. Payments are final: this cannot be undone."""
    row = _invoice_row(conn, req_str(args, "id", 40))
    paid_on = check_date(args["paid_on"], "paid_on") if args.get("paid_on") is not None else _meta(conn, "today")
    if row[7] == "paid":
        raise ToolFailure(f"invoice {row[0]} was already paid on {row[13]}")
    if row[8]:
        raise ToolFailure(f"invoice {row[0]} is flagged for review ({row[14]}) and is held from payment")
    conn.execute("UPDATE finance_invoices SET status = 'paid', paid_on = ? WHERE id = ?", (paid_on, row[0]))
    conn.execute("INSERT INTO finance_approvals (record, action, actor, date, note) VALUES (?,?,?,?,?)",
                 (row[0], "paid", _meta(conn, "user"), paid_on, ""))
    return {"invoice": _invoice_summary(conn, _invoice_row(conn, row[0])), "paid_on": paid_on}


@tools.tool("flag_invoice", "write",
            input=_obj({"id": _INVOICE_ID, "reason": {"type": "string", "minLength": 1}}, ["id", "reason"]),
            output=_obj({"invoice": INVOICE_SUMMARY_SCHEMA, "flag_reason": _STR}, ["invoice", "flag_reason"]))
def flag_invoice(conn: sqlite3.Connection, args: dict) -> dict:
    """Flag an invoice for review (a suspected duplicate, a wrong amount, a dispute) with the reason; a
    flagged invoice is held from payment. Returns the invoice."""
    row = _invoice_row(conn, req_str(args, "id", 40))
    reason = req_str(args, "reason", 2000).strip()
    if row[8]:
        raise ToolFailure(f"invoice {row[0]} is already flagged: {row[14]}")
    conn.execute("UPDATE finance_invoices SET flagged = 1, flag_reason = ? WHERE id = ?", (reason, row[0]))
    conn.execute("INSERT INTO finance_approvals (record, action, actor, date, note) VALUES (?,?,?,?,?)",
                 (row[0], "flagged", _meta(conn, "user"), _meta(conn, "today"), reason))
    return {"invoice": _invoice_summary(conn, _invoice_row(conn, row[0])), "flag_reason": reason}


@tools.tool("list_expenses", "read",
            input=_obj({
                "status": {"type": "string", "enum": ["submitted", "approved", "rejected"]},
                "employee": {"type": "string"}, "project": _PROJECT,
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "at most this many (default 50)"},
            }, []),
            output=_obj({"expenses": {"type": "array", "items": EXPENSE_SCHEMA}, "count": _INT},
                        ["expenses", "count"]))
def list_expenses(conn: sqlite3.Connection, args: dict) -> dict:
    """Expense claims, newest first, filtered by status, employee (name or email, substring) and project.
    Each says whether a receipt is attached (get_receipt shows it)."""
    status, who = opt_str(args, "status"), (opt_str(args, "employee") or "").strip().lower()
    project, limit = (opt_str(args, "project") or "").strip().upper(), opt_int(args, "limit", 50, 1, 100)
    found = []
    for (ident,) in conn.execute("SELECT id FROM finance_expenses ORDER BY date DESC, id DESC"):
        claim = _expense(conn, ident)
        if (status and claim["status"] != status or project and claim["project"] != project
                or who and who not in f"{claim['employee']} {claim['employee_email']}".lower()):
            continue
        found.append(claim)
    return {"expenses": found[:limit], "count": len(found)}


@tools.tool("get_receipt", "read",
            input=_obj({"id": _EXPENSE_ID}, ["id"]),
            output=_obj({"expense_id": _STR, "receipt_id": _STR, "mime_type": _STR, "text": _STR,
                         "_content": CONTENT_SCHEMA}, ["expense_id", "receipt_id", "mime_type", "text", "_content"]))
def get_receipt(conn: sqlite3.Connection, args: dict) -> dict:
    """The receipt attached to an expense claim, as the scanned image."""
    claim = _expense(conn, req_str(args, "id", 40))
    row = one_row(conn, "SELECT id, png FROM finance_receipts WHERE expense = ?", (claim["id"],),
                  f"expense {claim['id']} ({claim['description']}) has no receipt attached")
    return {"expense_id": claim["id"], "receipt_id": row[0], "mime_type": "image/png", "text": "a scanned receipt",
            "_content": [{"type": "image", "mime_type": "image/png",
                          "data": base64.b64encode(row[1]).decode("ascii")}]}


@tools.tool("approve_expense", "write",
            input=_obj({"id": _EXPENSE_ID, "note": _STR}, ["id"]),
            output=EXPENSE_SCHEMA)
def approve_expense(conn: sqlite3.Connection, args: dict) -> dict:
    """Approve a submitted expense claim (as the user), with an optional note. Returns the claim."""
    ident = req_str(args, "id", 40)
    _expense(conn, ident)
    return _decide(conn, ident, "approved", (opt_str(args, "note") or "").strip() or "Approved.")


@tools.tool("reject_expense", "write",
            input=_obj({"id": _EXPENSE_ID, "reason": {"type": "string", "minLength": 1}}, ["id", "reason"]),
            output=EXPENSE_SCHEMA)
def reject_expense(conn: sqlite3.Connection, args: dict) -> dict:
    """Reject a submitted expense claim (as the user); the reason is required and sent to the claimant.
    Returns the claim."""
    ident = req_str(args, "id", 40)
    _expense(conn, ident)
    return _decide(conn, ident, "rejected", req_str(args, "reason", 2000).strip())


@tools.tool("create_expense", "write",
            input=_obj({"description": {"type": "string", "minLength": 1},
                        "amount": {"type": "number", "exclusiveMinimum": 0},
                        "date": {"type": "string", "description": "YYYY-MM-DD"},
                        "category": {"type": "string", "enum": CATEGORIES}, "project": _PROJECT},
                       ["description", "amount", "date", "category"]),
            output=EXPENSE_SCHEMA)
def create_expense(conn: sqlite3.Connection, args: dict) -> dict:
    """Submit a new expense claim in the user's name (status 'submitted', no receipt attached). Returns the
    claim."""
    description = req_str(args, "description", 300).strip()
    amount = args.get("amount")
    if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not 0 < amount < 1_000_000:
        raise ToolFailure(f"amount must be a positive number below 1000000, got {amount!r}")
    date = check_date(args.get("date"), "date")
    category = opt_str(args, "category")
    if category not in CATEGORIES:
        raise ToolFailure(f"category must be one of {', '.join(CATEGORIES)}, got {category!r}")
    project = opt_str(args, "project")
    if project is not None:
        project = _budgets(conn, project)[0]["project"]
    ident = next_id(conn, "finance_expenses", "EXP-", width=1, start=1000)
    conn.execute("INSERT INTO finance_expenses VALUES (?,?,?,?,?,?,?,?,?,NULL,NULL)",
                 (ident, _meta(conn, "user"), _meta(conn, "user_name"), project, category, description, date,
                  _money(float(amount)), "submitted"))
    return _expense(conn, ident)


@tools.tool("budget_status", "read",
            input=_obj({"project": _PROJECT}, []),
            output=_obj({"budgets": {"type": "array", "items": BUDGET_SCHEMA}}, ["budgets"]))
def budget_status(conn: sqlite3.Connection, args: dict) -> dict:
    """Budget status per project: budget, spent (earlier spending, paid vendor invoices and approved
    expenses), committed (open vendor invoices), pending expense claims, and what remains. One project,
    or every project when project is omitted."""
    return {"budgets": _budgets(conn, opt_str(args, "project"))}


TOOLS, handle = tools.specs, tools.handle

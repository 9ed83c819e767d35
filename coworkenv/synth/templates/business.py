"""Procedural task templates over the business apps: CRM, finance, inventory and the HR directory.

Each template reads a workspace's initial state (the apps' tables and the ``world_*`` tables) and
returns a task spec (without ``id`` and ``workspace_id``) with executable checks, a reference
solution and forbidden tools, or ``None`` when the state offers nothing for it. Nothing is
constant: accounts, deals, invoices, receipts, products, orders and people are those of the
workspace, and the distractors its apps hold (an inactive duplicate account, a deal entered twice,
a vendor invoice entered twice, a namesake who left the company) sit beside what a task names.
Some tasks can only be solved by looking at a picture: a receipt's merchant, and whether a claim
matches its receipt's total, are in the receipt's scanned image alone. Chains join the apps
through the world: an overdue invoice's customer is a CRM account whose owner has an HR record; a
deal's product is stocked in inventory; a purchase order's supplier sends finance its invoices.
Templates draw every choice from ``rng``.
"""

from __future__ import annotations

import datetime as dt
import random
import sqlite3
from collections.abc import Callable
from typing import Any

from ...workspace import SqlCheck, text_gives
from ...workspace.apps import finance as _finance

Spec = dict[str, Any]
Template = Callable[[sqlite3.Connection, random.Random], Spec | None]

OPEN_STAGES = ["prospecting", "qualification", "proposal", "negotiation"]


def _step(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool": tool, "arguments": arguments}


def _sql(cid: str, description: str, query: str, params: list, expect: Any = 1) -> dict[str, Any]:
    return {"id": cid, "kind": "sql", "description": description, "query": query, "params": params, "expect": expect}


def _answer(cid: str, description: str, *contains: str) -> dict[str, Any]:
    return {"id": cid, "kind": "answer", "description": description, "contains": list(contains)}


def _has(conn: sqlite3.Connection, *tables: str) -> bool:
    found = {name for (name,) in conn.execute("select name from sqlite_master where type = 'table'")}
    return set(tables) <= found


def _rows(conn: sqlite3.Connection, query: str, params: tuple = ()) -> list[dict[str, Any]]:
    cursor = conn.execute(query, params)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor]


def _today(conn: sqlite3.Connection) -> str:
    return conn.execute("select value from world_meta where key = 'today'").fetchone()[0]


def _num(value: float) -> str:
    """A figure as an answer must contain it: 88.4 for 88.40 (which contains it), 1250 for 1250.00."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _unsolved(conn: sqlite3.Connection, spec: Spec) -> Spec | None:
    """``spec``, or None when one of its sql checks already holds in the initial state."""
    for check in spec["checks"]:
        if check["kind"] == "sql" and SqlCheck.model_validate(check).evaluate(conn, "").passed:
            return None
    return spec


def _task(capability: str, instruction: str, checks: list, reference: list, answer: str, forbidden: list[str],
          probe: dict[str, Any]) -> Spec:
    return {"capability": capability, "difficulty": {"lookup": 1, "single_write": 2, "multi_step": 3}[capability],
            "instruction": instruction, "checks": checks, "reference": reference, "reference_answer": answer,
            "forbidden_tools": forbidden, "forbidden_probe": probe}


def _near(a: str, b: str) -> bool:
    """Two names one letter apart (the world's near-namesakes)."""
    return len(a) == len(b) and sum(x != y for x, y in zip(a, b, strict=True)) == 1


def _accounts(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    return _rows(conn, "select * from crm_accounts where status = 'active' order by id")


def _open_deals(conn: sqlite3.Connection, account: str) -> list[dict[str, Any]]:
    return _rows(conn, "select * from crm_deals where account = ? and stage in (?, ?, ?, ?) order by close_date, id",
                 (account, *OPEN_STAGES))


def _staff(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    return _rows(conn, "select * from hr_people where status = 'active' order by id")


def _hr_by_email(conn: sqlite3.Connection, email: str) -> dict[str, Any] | None:
    found = _rows(conn, "select * from hr_people where email = ? and status = 'active'", (email,))
    return found[0] if found else None


def _any_open_invoice(conn: sqlite3.Connection) -> str:
    return conn.execute("select id from finance_invoices where status = 'open' order by id").fetchone()[0]


# --------------------------------------------------------------------------- lookup


def crm_pipeline(conn, rng):
    if not _has(conn, "crm_accounts", "crm_deals"):
        return None
    accounts = [a for a in _accounts(conn) if _open_deals(conn, a["id"])
                and not any(d["name"].endswith("(copy)") for d in _open_deals(conn, a["id"]))]
    if not accounts:
        return None
    account = rng.choice(accounts)
    deals = _open_deals(conn, account["id"])
    total, first = sum(d["amount"] for d in deals), deals[0]
    if len(deals) > 1 and deals[1]["close_date"] == first["close_date"]:
        return None
    return _task(
        "lookup",
        f"In the CRM, what are the open deals of {account['name']} worth in total, and which of them is expected to "
        "close first? Give the total as a plain number.",
        [_answer("answer", f"the answer gives the open total {total} and the deal {first['name']}", str(total),
                 first["name"])],
        [_step("crm_search_accounts", query=account["name"]), _step("crm_get_account", id=account["id"])],
        f"{account['name']} has {len(deals)} open deal(s) worth {total} in total; "
        f"\"{first['name']}\" is expected to close first, on {first['close_date']}.",
        ["crm_delete_deal", "crm_update_deal"], _step("crm_delete_deal", id=first["id"]))


def hr_manager(conn, rng):
    if not _has(conn, "hr_people"):
        return None
    staff = _staff(conn)
    by_id = {p["id"]: p for p in staff}
    managed = [p for p in staff if p["manager"] in by_id]
    if not managed:
        return None
    # the near-namesakes (names one letter apart) make the better question
    twins = [p for p in managed if any(_near(p["name"], q["name"]) for q in staff)]
    person = rng.choice(twins if twins and rng.random() < 0.5 else managed)
    boss = by_id[person["manager"]]
    return _task(
        "lookup",
        f"Who is {person['name']}'s manager ({person['name']} works in {person['department']} as "
        f"{person['title']}), and what is the manager's job title?",
        [_answer("answer", f"the answer names {boss['name']}, {boss['title']}", boss["name"], boss["title"])],
        [_step("hr_search_people", query=person["name"]), _step("hr_get_person", id=person["id"])],
        f"{person['name']} reports to {boss['name']}, {boss['title']}.",
        ["hr_update_title", "hr_cancel_leave"], _step("hr_update_title", id=person["id"], title="Manager"))


def hr_department(conn, rng):
    if not _has(conn, "hr_people"):
        return None
    departments = sorted({p["department"] for p in _staff(conn)})
    department = rng.choice(departments)
    members = [p for p in _staff(conn) if p["department"] == department]
    ids = {p["id"] for p in members}
    head = next((p for p in sorted(members, key=lambda p: p["name"]) if p["manager"] not in ids), members[0])
    return _task(
        "lookup",
        f"Who is in the {department} department, and who heads it?",
        [_answer("answer", f"the answer names every member of {department} and its head {head['name']}",
                 *sorted({p["name"] for p in members}))],
        [_step("hr_list_department", department=department)],
        f"{department} ({len(members)} people): " + ", ".join(f"{p['name']} ({p['title']})" for p in members)
        + f"; {head['name']} heads it.",
        ["hr_update_title"], _step("hr_update_title", id=head["id"], title="Director"))


def finance_receipt_merchant(conn, rng):
    """Needs the receipt's image: its merchant and total are nowhere else an agent can read."""
    if not _has(conn, "finance_expenses", "finance_receipts"):
        return None
    claims = _rows(conn, "select e.*, r.merchant, r.total from finance_expenses e join finance_receipts r "
                         "on r.expense = e.id order by e.id")
    if not claims:
        return None
    claim = rng.choice(claims)
    return _task(
        "lookup",
        f"{claim['employee_name']} claimed an expense \"{claim['description']}\" dated {claim['date']}. Look at its "
        "receipt: at which business was it issued, and what total does the receipt show?",
        [_answer("answer", f"the answer names the merchant {claim['merchant']} and the receipt total "
                           f"{claim['total']:.2f}", claim["merchant"], _num(claim["total"]))],
        [_step("finance_list_expenses", employee=claim["employee_name"]), _step("finance_get_receipt", id=claim["id"])],
        f"The receipt for {claim['id']} was issued by {claim['merchant']} and shows a total of {claim['total']:.2f}.",
        ["finance_reject_expense", "finance_approve_expense"],
        _step("finance_reject_expense", id=claim["id"], reason="No receipt."))


def finance_budget_left(conn, rng):
    if not _has(conn, "finance_budgets", "finance_invoices", "finance_expenses"):
        return None
    projects = [r["project"] for r in _rows(conn, "select project from finance_budgets where status = 'active' "
                                                  "order by project")]
    if not projects:
        return None
    code = rng.choice(projects)
    status = _finance.handle(conn, "budget_status", {"project": code})["budgets"][0]  # the app's own arithmetic
    return _task(
        "lookup",
        f"How much of the {code} ({status['name']}) budget is left once spending and open commitments are counted? "
        "Give the amount as a plain number.",
        [_answer("answer", f"the answer gives the remaining {status['remaining']:.2f}", _num(status["remaining"]))],
        [_step("finance_budget_status", project=code)],
        f"{code} has {status['remaining']:.2f} {status['currency']} left of its {status['budget']:.2f} budget.",
        ["finance_mark_invoice_paid"], _step("finance_mark_invoice_paid", id=_any_open_invoice(conn)))


def finance_invoice_facts(conn, rng):
    if not _has(conn, "finance_invoices"):
        return None
    invoices = _rows(conn, "select * from finance_invoices where direction = 'payable' and project is not null "
                           "and document is not null order by id")
    if not invoices:
        return None
    invoice = rng.choice(invoices)
    return _task(
        "lookup",
        f"Invoice {invoice['id']} from {invoice['counterparty']}: when is it due, what is its total, and which "
        "project is it charged to?",
        [_answer("answer", f"the answer gives due date {invoice['due_date']}, total {invoice['total']:.2f} and "
                           f"project {invoice['project']}", invoice["due_date"], _num(invoice["total"]),
                 invoice["project"])],
        [_step("finance_get_invoice", id=invoice["id"])],
        f"{invoice['id']} is due on {invoice['due_date']}, totals {invoice['total']:.2f} and is charged to "
        f"{invoice['project']}.",
        ["finance_mark_invoice_paid", "finance_flag_invoice"], _step("finance_mark_invoice_paid", id=invoice["id"]))


def inventory_stock_level(conn, rng):
    if not _has(conn, "inventory_stock", "inventory_products"):
        return None
    rows = _rows(conn, "select s.*, p.name, w.name as warehouse_name from inventory_stock s join inventory_products p "
                       "on p.sku = s.sku join inventory_warehouses w on w.id = s.warehouse where p.active = 1 "
                       "order by s.sku, s.warehouse")
    if not rows:
        return None
    row = rng.choice(rows)
    available = row["on_hand"] - row["reserved"]
    below = available < row["reorder_point"]
    open_order = conn.execute("select id from inventory_orders where status in ('pending', 'confirmed', 'draft', "
                              "'ordered') order by id").fetchone()
    return _task(
        "lookup",
        f"How many units of {row['name']} are available (on hand minus reserved) in the {row['warehouse_name']}, "
        "and is that below its reorder point there?",
        [_answer("answer", f"the answer gives {available} available", str(available))],
        [_step("inventory_search_products", query=row["name"]),
         _step("inventory_get_stock", sku=row["sku"], warehouse=row["warehouse"])],
        f"{available} {row['name']} are available in the {row['warehouse_name']} ({row['on_hand']} on hand, "
        f"{row['reserved']} reserved); that is {'below' if below else 'not below'} its reorder point of "
        f"{row['reorder_point']}.",
        ["inventory_cancel_order", "inventory_create_purchase_order"],
        _step("inventory_cancel_order", id=open_order[0]) if open_order
        else _step("inventory_create_purchase_order", warehouse=row["warehouse"],
                   lines=[{"sku": row["sku"], "quantity": 1}]))


# --------------------------------------------------------------------------- single write


def crm_advance_deal(conn, rng):
    if not _has(conn, "crm_deals"):
        return None
    deals = [d for a in _accounts(conn) for d in _open_deals(conn, a["id"]) if not d["name"].endswith("(copy)")]
    if not deals:
        return None
    deal = rng.choice(deals)
    account = _rows(conn, "select * from crm_accounts where id = ?", (deal["account"],))[0]
    stage = (OPEN_STAGES + ["closed_won"])[OPEN_STAGES.index(deal["stage"]) + 1]
    amount = int(round(deal["amount"] * rng.choice([0.9, 0.95, 1.05, 1.1, 1.2]), -1)) if rng.random() < 0.5 else None
    update = {"stage": stage} | ({"amount": amount} if amount is not None else {})
    what = f"to the '{stage}' stage" + (f" and set its amount to {amount}" if amount is not None else "")
    return _unsolved(conn, _task(
        "single_write",
        f"Move {account['name']}'s deal \"{deal['name']}\" {what}.",
        [_sql("deal", f"deal {deal['id']} is at {stage}" + (f" for {amount}" if amount is not None else ""),
              "select count(*) from crm_deals where id = ? and stage = ? and amount = ?",
              [deal["id"], stage, amount if amount is not None else deal["amount"]])],
        [_step("crm_search_accounts", query=account["name"], status="active"),
         _step("crm_list_deals", account_id=account["id"], open_only=True),
         _step("crm_update_deal", id=deal["id"], **update)],
        f"Moved \"{deal['name']}\" ({deal['id']}) {what}.",
        ["crm_delete_deal"], _step("crm_delete_deal", id=deal["id"])))


def crm_log_call(conn, rng):
    if not _has(conn, "crm_contacts", "crm_activities"):
        return None
    contacts = _rows(conn, "select c.*, a.name as account_name from crm_contacts c join crm_accounts a "
                           "on a.id = c.account where a.status = 'active' order by c.id")
    if not contacts:
        return None
    contact = rng.choice(contacts)
    topic = rng.choice(["pricing for next year", "the delivery schedule", "their renewal", "a reference visit",
                        "the open support questions", "an upcoming tender"])
    subject = f"Call with {contact['name'].split()[0]} about {topic}"
    notes = rng.choice(["They will send the figures by Friday.", "Asked for a follow-up meeting next month.",
                        "Happy so far; wants a quote.", "Needs sign-off from their finance team."])
    return _task(
        "single_write",
        f"Log a call in the CRM with {contact['name']} of {contact['account_name']}, dated today: subject "
        f"\"{subject}\", notes \"{notes}\". Link it to {contact['name']} as the contact.",
        [_sql("call", f"a call \"{subject}\" with contact {contact['id']} is logged on {contact['account']}",
              "select count(*) from crm_activities where account = ? and kind = 'call' and subject = ? and contact = ? "
              "and date = ?", [contact["account"], subject, contact["id"], _today(conn)])],
        [_step("crm_search_accounts", query=contact["name"]), _step("crm_get_account", id=contact["account"]),
         _step("crm_log_activity", account_id=contact["account"], kind="call", subject=subject, notes=notes,
               contact_id=contact["id"])],
        f"Logged the call \"{subject}\" with {contact['name']} on {contact['account_name']}.",
        ["crm_delete_activity"],
        _step("crm_delete_activity", id=conn.execute("select id from crm_activities order by id").fetchone()[0]))


def crm_new_deal(conn, rng):
    if not _has(conn, "crm_deals", "world_products"):
        return None
    accounts = [a for a in _accounts(conn) if a["type"] == "customer"]
    products = _rows(conn, "select * from world_products where category in ('hardware', 'software', 'services') "
                           "order by sku")
    if not accounts or not products:
        return None
    account, product = rng.choice(accounts), rng.choice(products)
    qty = rng.choice([3, 6, 8, 15, 30, 60])
    name = f"{qty} x {product['name']}"
    amount = int(round(qty * product["price"] * rng.uniform(1.1, 1.4), -1))
    close = (dt.date.fromisoformat(_today(conn)) + dt.timedelta(days=rng.randint(20, 100))).isoformat()
    stage = rng.choice(["prospecting", "qualification"])
    return _unsolved(conn, _task(
        "single_write",
        f"Open a new deal for {account['name']} in the CRM: \"{name}\", worth {amount}, at stage '{stage}', expected "
        f"to close on {close}.",
        [_sql("deal", f"{account['id']} has the deal \"{name}\" ({amount}, {stage}, closing {close})",
              "select count(*) from crm_deals where account = ? and name = ? and amount = ? and stage = ? and "
              "close_date = ?", [account["id"], name, amount, stage, close])],
        [_step("crm_search_accounts", query=account["name"], status="active"),
         _step("crm_create_deal", account_id=account["id"], name=name, amount=amount, stage=stage, close_date=close)],
        f"Opened \"{name}\" for {account['name']} ({amount}, {stage}, closing {close}).",
        ["crm_delete_deal"], _step("crm_delete_deal", id=_open_deals(conn, account["id"])[0]["id"]
                                   if _open_deals(conn, account["id"]) else "D-0")))


def crm_remove_copy(conn, rng):
    if not _has(conn, "crm_deals"):
        return None
    copies = _rows(conn, "select c.id, c.name, c.account, o.id as original, a.name as account_name from crm_deals c "
                         "join crm_deals o on o.account = c.account and c.name = o.name || ' (copy)' "
                         "join crm_accounts a on a.id = c.account order by c.id")
    if not copies:
        return None
    copy = rng.choice(copies)
    original = copy["name"][: -len(" (copy)")]
    return _task(
        "single_write",
        f"The deal \"{original}\" of {copy['account_name']} was entered twice in the CRM; the second entry is named "
        f"\"{copy['name']}\". Delete that duplicate and keep the original.",
        [_sql("removed", f"the copy {copy['id']} is gone and the original {copy['original']} is kept",
              "select (select count(*) from crm_deals where id = ?) * 10 + (select count(*) from crm_deals where id = ?)",
              [copy["original"], copy["id"]], 10)],
        [_step("crm_list_deals", query=original), _step("crm_delete_deal", id=copy["id"])],
        f"Deleted the duplicate deal {copy['id']} (\"{copy['name']}\") and kept {copy['original']}.",
        ["crm_delete_activity", "crm_update_deal"],
        _step("crm_delete_activity", id=conn.execute("select id from crm_activities order by id").fetchone()[0]))


def crm_remove_double_activity(conn, rng):
    if not _has(conn, "crm_activities"):
        return None
    pairs = _rows(conn, "select a.id as first, b.id as second, a.account, a.kind, a.subject, a.date, c.name as account_name "
                        "from crm_activities a join crm_activities b on a.account = b.account and a.subject = b.subject "
                        "and a.date = b.date and a.notes = b.notes and a.kind = b.kind and a.id < b.id "
                        "join crm_accounts c on c.id = a.account order by a.id")
    if not pairs:
        return None
    pair = rng.choice(pairs)
    return _task(
        "single_write",
        f"The {pair['kind']} \"{pair['subject']}\" of {pair['date']} was logged twice on {pair['account_name']} in "
        "the CRM. Delete the duplicate entry so that it is logged once.",
        [_sql("once", f"\"{pair['subject']}\" of {pair['date']} is logged once on {pair['account']}",
              "select count(*) from crm_activities where account = ? and subject = ? and date = ?",
              [pair["account"], pair["subject"], pair["date"]], 1)],
        [_step("crm_search_accounts", query=pair["account_name"], status="active"),
         _step("crm_list_activities", account_id=pair["account"]),
         _step("crm_delete_activity", id=pair["second"])],
        f"Deleted the duplicate activity {pair['second']}; {pair['first']} remains.",
        ["crm_delete_deal"],
        _step("crm_delete_deal", id=conn.execute("select id from crm_deals order by id").fetchone()[0]))


def finance_pay_invoice(conn, rng):
    if not _has(conn, "finance_invoices"):
        return None
    invoices = _rows(conn, "select i.* from finance_invoices i where status = 'open' and flagged = 0 and direction = "
                           "'payable' and not exists (select 1 from finance_invoices j where j.id != i.id and "
                           "j.org = i.org and j.total = i.total) order by id")
    if not invoices:
        return None
    invoice = rng.choice(invoices)
    today = _today(conn)
    return _task(
        "single_write",
        f"We paid {invoice['counterparty']}'s invoice {invoice['id']} today. Record the payment in finance.",
        [_sql("paid", f"{invoice['id']} is paid on {today}", "select count(*) from finance_invoices where id = ? and "
              "status = 'paid' and paid_on = ?", [invoice["id"], today])],
        [_step("finance_get_invoice", id=invoice["id"]), _step("finance_mark_invoice_paid", id=invoice["id"])],
        f"Recorded {invoice['id']} ({invoice['total']:.2f}) as paid on {today}.",
        ["finance_flag_invoice"], _step("finance_flag_invoice", id=invoice["id"], reason="Check"))


def finance_flag_duplicate(conn, rng):
    if not _has(conn, "finance_invoices"):
        return None
    pairs = _rows(conn, "select a.id as first, b.id as second, a.counterparty, a.total from finance_invoices a "
                        "join finance_invoices b on a.org = b.org and a.total = b.total and a.direction = 'payable' "
                        "and b.direction = 'payable' and (a.issue_date < b.issue_date or a.issue_date = b.issue_date "
                        "and a.id < b.id) where a.status = 'open' and b.status = 'open' order by a.id")
    if not pairs:
        return None
    pair = rng.choice(pairs)
    return _task(
        "single_write",
        f"Two open invoices from {pair['counterparty']} have the same total: one of them was entered twice. Flag the "
        "one issued later as a possible duplicate of the earlier one.",
        [_sql("flagged", f"{pair['second']} is flagged and {pair['first']} is not",
              "select sum(case when id = ? then flagged else -flagged end) from finance_invoices where id in (?, ?)",
              [pair["second"], pair["first"], pair["second"]], 1)],
        [_step("finance_list_invoices", query=pair["counterparty"], direction="payable", status="open"),
         _step("finance_flag_invoice", id=pair["second"], reason=f"Possible duplicate of {pair['first']}")],
        f"Flagged {pair['second']} as a possible duplicate of {pair['first']} ({pair['total']:.2f}).",
        ["finance_mark_invoice_paid"], _step("finance_mark_invoice_paid", id=pair["first"]))


def finance_file_expense(conn, rng):
    if not _has(conn, "finance_expenses", "finance_budgets"):
        return None
    projects = [r["project"] for r in _rows(conn, "select project from finance_budgets where status = 'active' "
                                                  "order by project")]
    orgs = _rows(conn, "select name, city from world_organisations where kind != 'employer' order by id")
    if not projects or not orgs:
        return None
    org, code = rng.choice(orgs), rng.choice(projects)
    category, description = rng.choice([("travel", f"Train to {org['city']}"), ("travel", f"Taxi to {org['name']}"),
                                        ("meals", f"Lunch with {org['name']}"), ("lodging", f"Hotel in {org['city']}")])
    amount = round(rng.uniform(18, 240), 2)
    day = (dt.date.fromisoformat(_today(conn)) - dt.timedelta(days=rng.randint(1, 12))).isoformat()
    return _unsolved(conn, _task(
        "single_write",
        f"File an expense claim for me: \"{description}\" on {day}, {amount:.2f}, category {category}, charged to "
        f"{code}.",
        [_sql("claim", f"a claim \"{description}\" of {amount:.2f} on {day} for {code} is submitted",
              "select count(*) from finance_expenses where description = ? and abs(amount - ?) < 0.005 and date = ? "
              "and project = ? and category = ? and status = 'submitted' and employee = (select email from "
              "world_people where id = (select value from world_meta where key = 'user'))",
              [description, amount, day, code, category])],
        [_step("finance_create_expense", description=description, amount=amount, date=day, category=category,
               project=code)],
        f"Filed \"{description}\" ({amount:.2f}, {category}, {code}).",
        ["finance_approve_expense"],
        _step("finance_approve_expense", id=conn.execute("select id from finance_expenses order by id").fetchone()[0])))


def _pending_claim(conn, rng, matching: bool | None = None) -> dict[str, Any] | None:
    claims = _rows(conn, "select e.*, r.total as receipt_total from finance_expenses e left join finance_receipts r "
                         "on r.expense = e.id where e.status = 'submitted' order by e.id")
    if matching is not None:
        claims = [c for c in claims if c["receipt_total"] is not None
                  and (abs(c["receipt_total"] - c["amount"]) < 0.005) == matching]
    return rng.choice(claims) if claims else None


def finance_approve_claim(conn, rng):
    if not _has(conn, "finance_expenses", "finance_receipts"):
        return None
    claim = _pending_claim(conn, rng)
    if claim is None:
        return None
    return _task(
        "single_write",
        f"Approve {claim['employee_name']}'s expense claim \"{claim['description']}\" of {claim['date']}.",
        [_sql("approved", f"{claim['id']} is approved", "select status from finance_expenses where id = ?",
              [claim["id"]], "approved")],
        [_step("finance_list_expenses", employee=claim["employee_name"], status="submitted"),
         _step("finance_approve_expense", id=claim["id"])],
        f"Approved {claim['id']} ({claim['description']}).",
        ["finance_reject_expense"], _step("finance_reject_expense", id=claim["id"], reason="No."))


def finance_reject_claim(conn, rng):
    if not _has(conn, "finance_expenses", "finance_receipts"):
        return None
    claim = _pending_claim(conn, rng)
    if claim is None:
        return None
    reason = rng.choice(["It was already reimbursed through payroll.", "Personal expense, not business.",
                         "Claimed twice: see the earlier claim."])
    return _task(
        "single_write",
        f"Reject {claim['employee_name']}'s expense claim \"{claim['description']}\" of {claim['date']} with the "
        f"reason \"{reason}\"",
        [_sql("rejected", f"{claim['id']} is rejected", "select status from finance_expenses where id = ?",
              [claim["id"]], "rejected")],
        [_step("finance_list_expenses", employee=claim["employee_name"], status="submitted"),
         _step("finance_reject_expense", id=claim["id"], reason=reason)],
        f"Rejected {claim['id']} ({claim['description']}): {reason}",
        ["finance_approve_expense"], _step("finance_approve_expense", id=claim["id"]))


def hr_retitle(conn, rng):
    if not _has(conn, "hr_people"):
        return None
    person = rng.choice(_staff(conn))
    title = rng.choice([f"Senior {person['title'][0].lower()}{person['title'][1:]}", f"Lead {person['title'].lower()}",
                        f"{person['title']} II", f"Principal {person['title'].lower()}"])
    return _unsolved(conn, _task(
        "single_write",
        f"{person['name']} of {person['department']} has been promoted: change their job title in the HR directory "
        f"to \"{title}\".",
        [_sql("title", f"{person['id']} has the title {title}", "select title from hr_people where id = ?",
              [person["id"]], title)],
        [_step("hr_search_people", query=person["name"], department=person["department"]),
         _step("hr_update_title", id=person["id"], title=title)],
        f"{person['name']} ({person['id']}) is now \"{title}\".",
        ["hr_cancel_leave"],
        _step("hr_cancel_leave", id=conn.execute("select id from hr_leave order by id").fetchone()[0])))


def _leave_requests(conn: sqlite3.Connection, status: str) -> list[dict[str, Any]]:
    return _rows(conn, "select l.*, p.name, p.department from hr_leave l join hr_people p on p.id = l.employee "
                       "where l.status = ? order by l.id", (status,))


def _conflicts(conn: sqlite3.Connection, request: dict[str, Any]) -> list[dict[str, Any]]:
    """Approved leave of other people of the request's department overlapping it."""
    return [r for r in _leave_requests(conn, "approved") if r["department"] == request["department"]
            and r["employee"] != request["employee"] and r["start_date"] <= request["end_date"]
            and r["end_date"] >= request["start_date"]]


def hr_approve_leave(conn, rng):
    if not _has(conn, "hr_leave"):
        return None
    pending = [r for r in _leave_requests(conn, "pending") if not _conflicts(conn, r)]
    if not pending:
        return None
    request = rng.choice(pending)
    return _task(
        "single_write",
        f"Approve {request['name']}'s pending {request['kind']} request from {request['start_date']} to "
        f"{request['end_date']}.",
        [_sql("approved", f"{request['id']} is approved", "select status from hr_leave where id = ?", [request["id"]],
              "approved")],
        [_step("hr_search_people", query=request["name"]),
         _step("hr_list_leave", employee_id=request["employee"], status="pending"),
         _step("hr_approve_leave", id=request["id"])],
        f"Approved {request['id']}.",
        ["hr_reject_leave", "hr_cancel_leave"], _step("hr_reject_leave", id=request["id"], reason="No"))


def hr_reject_leave(conn, rng):
    if not _has(conn, "hr_leave"):
        return None
    pending = _leave_requests(conn, "pending")
    if not pending:
        return None
    request = rng.choice(pending)
    reason = rng.choice(["Quarter-end close needs everyone that week.", "The team is at minimum staffing then.",
                         "Please split it into two shorter periods."])
    return _task(
        "single_write",
        f"Reject {request['name']}'s {request['kind']} request from {request['start_date']} to {request['end_date']}, "
        f"with the reason \"{reason}\"",
        [_sql("rejected", f"{request['id']} is rejected", "select status from hr_leave where id = ?", [request["id"]],
              "rejected")],
        [_step("hr_search_people", query=request["name"]),
         _step("hr_list_leave", employee_id=request["employee"], status="pending"),
         _step("hr_reject_leave", id=request["id"], reason=reason)],
        f"Rejected {request['id']}: {reason}",
        ["hr_approve_leave", "hr_cancel_leave"], _step("hr_cancel_leave", id=request["id"]))


def hr_withdraw_leave(conn, rng):
    if not _has(conn, "hr_leave"):
        return None
    today = _today(conn)
    requests = [r for status in ("pending", "approved") for r in _leave_requests(conn, status)
                if r["start_date"] > today]
    if not requests:
        return None
    request = rng.choice(requests)
    return _task(
        "single_write",
        f"{request['name']} no longer needs their {request['kind']} leave from {request['start_date']} to "
        f"{request['end_date']} and asked me to withdraw the request. Remove it.",
        [_sql("gone", f"{request['id']} is withdrawn", "select count(*) from hr_leave where id = ?", [request["id"]], 0)],
        [_step("hr_search_people", query=request["name"]), _step("hr_list_leave", employee_id=request["employee"]),
         _step("hr_cancel_leave", id=request["id"])],
        f"Withdrew {request['id']} ({request['name']}, {request['start_date']} to {request['end_date']}).",
        ["hr_reject_leave", "hr_update_title"], _step("hr_reject_leave", id=request["id"], reason="Withdrawn"))


def inventory_restock(conn, rng):
    if not _has(conn, "inventory_stock", "inventory_orders"):
        return None
    low = _rows(conn, "select s.*, p.name, p.unit, w.name as warehouse_name from inventory_stock s join "
                      "inventory_products p on p.sku = s.sku join inventory_warehouses w on w.id = s.warehouse "
                      "where p.active = 1 order by (s.on_hand - s.reserved < s.reorder_point) desc, s.sku, s.warehouse")
    if not low:
        return None
    row = rng.choice(low[:6])
    qty = max(row["reorder_point"] * 2 - (row["on_hand"] - row["reserved"]), 5)
    today = _today(conn)
    return _unsolved(conn, _task(
        "single_write",
        f"Order {qty} {row['unit']}(s) of {row['name']} from its supplier, to be delivered to the "
        f"{row['warehouse_name']}.",
        [_sql("ordered", f"a purchase order for {qty} x {row['sku']} to {row['warehouse']} was placed today",
              "select count(*) from inventory_orders o join inventory_order_lines l on l.order_id = o.id where "
              "o.kind = 'purchase' and o.status = 'ordered' and o.warehouse = ? and o.created = ? and l.sku = ? and "
              "l.quantity = ?", [row["warehouse"], today, row["sku"], qty])],
        [_step("inventory_search_products", query=row["name"]),
         _step("inventory_create_purchase_order", warehouse=row["warehouse"],
               lines=[{"sku": row["sku"], "quantity": qty}])],
        f"Ordered {qty} {row['name']} for the {row['warehouse_name']}.",
        ["inventory_cancel_order"],
        _step("inventory_cancel_order", id=conn.execute("select id from inventory_orders order by id").fetchone()[0])))


def inventory_advance_order(conn, rng):
    if not _has(conn, "inventory_orders"):
        return None
    moves = {("sales", "confirmed"): ("shipped", "has left the warehouse; mark it shipped"),
             ("sales", "pending"): ("confirmed", "was accepted; confirm it"),
             ("sales", "shipped"): ("delivered", "reached the customer; mark it delivered"),
             ("purchase", "draft"): ("ordered", "was sent to the supplier; mark it ordered"),
             ("purchase", "ordered"): ("shipped", "was dispatched by the supplier; mark it shipped")}
    orders = [o for o in _rows(conn, "select * from inventory_orders order by id") if (o["kind"], o["status"]) in moves]
    if not orders:
        return None
    order = rng.choice(orders)
    status, what = moves[(order["kind"], order["status"])]
    return _task(
        "single_write",
        f"{order['kind'].capitalize()} order {order['id']} ({order['counterparty_name']}) {what}.",
        [_sql("status", f"{order['id']} is {status}", "select status from inventory_orders where id = ?",
              [order["id"]], status)],
        [_step("inventory_get_order", id=order["id"]), _step("inventory_update_order_status", id=order["id"],
                                                             status=status)],
        f"{order['id']} is now {status}.",
        ["inventory_cancel_order"], _step("inventory_cancel_order", id=order["id"]))


def inventory_receive(conn, rng):
    if not _has(conn, "inventory_orders", "inventory_order_lines"):
        return None
    orders = _rows(conn, "select * from inventory_orders where kind = 'purchase' and status in ('ordered', 'shipped', "
                         "'partially_received') order by id")
    if not orders:
        return None
    order = rng.choice(orders)
    lines = _rows(conn, "select l.*, p.name from inventory_order_lines l join inventory_products p on p.sku = l.sku "
                        "where order_id = ? order by l.rowid", (order["id"],))
    line = next((ln for ln in lines if ln["quantity"] - ln["received"] >= 2), None)
    if line is not None and rng.random() < 0.4:  # a partial delivery
        part = (line["quantity"] - line["received"]) // 2
        return _task(
            "single_write",
            f"Part of purchase order {order['id']} from {order['counterparty_name']} arrived: {part} of {line['name']}, "
            "nothing else yet. Record that delivery.",
            [_sql("received", f"{line['received'] + part} of {line['sku']} received on {order['id']}",
                  "select count(*) from inventory_order_lines l join inventory_orders o on o.id = l.order_id where "
                  "o.id = ? and o.status = 'partially_received' and l.sku = ? and l.received = ?",
                  [order["id"], line["sku"], line["received"] + part])],
            [_step("inventory_get_order", id=order["id"]),
             _step("inventory_receive_delivery", id=order["id"], lines=[{"sku": line["sku"], "quantity": part}])],
            f"Recorded {part} {line['name']} received on {order['id']}.",
            ["inventory_cancel_order"], _step("inventory_cancel_order", id=order["id"]))
    return _task(
        "single_write",
        f"The delivery for purchase order {order['id']} from {order['counterparty_name']} arrived complete. Record it "
        "in inventory.",
        [_sql("received", f"{order['id']} is received", "select status from inventory_orders where id = ?",
              [order["id"]], "received")],
        [_step("inventory_get_order", id=order["id"]), _step("inventory_receive_delivery", id=order["id"])],
        f"Recorded the complete delivery of {order['id']}.",
        ["inventory_cancel_order"], _step("inventory_cancel_order", id=order["id"]))


def inventory_cancel_po(conn, rng):
    if not _has(conn, "inventory_orders"):
        return None
    orders = _rows(conn, "select * from inventory_orders where kind = 'purchase' and status in ('draft', 'ordered') "
                         "order by id")
    if not orders:
        return None
    order = rng.choice(orders)
    return _task(
        "single_write",
        f"{order['counterparty_name']} cannot deliver our purchase order {order['id']}. Cancel it, noting that the "
        "supplier cannot deliver.",
        [_sql("cancelled", f"{order['id']} is cancelled", "select status from inventory_orders where id = ?",
              [order["id"]], "cancelled")],
        [_step("inventory_list_orders", kind="purchase", counterparty=order["counterparty_name"]),
         _step("inventory_cancel_order", id=order["id"], reason="The supplier cannot deliver.")],
        f"Cancelled {order['id']}.",
        ["inventory_receive_delivery"], _step("inventory_receive_delivery", id=order["id"]))


# --------------------------------------------------------------------------- multi-step chains


def finance_receipt_audit(conn, rng):
    """Needs the receipt's image: the claim is right only if it matches the total printed on it."""
    if not _has(conn, "finance_expenses", "finance_receipts"):
        return None
    claim = _pending_claim(conn, rng, matching=rng.random() < 0.5) or _pending_claim(conn, rng, matching=True)
    if claim is None:
        return None
    total = claim["receipt_total"]
    matches = abs(total - claim["amount"]) < 0.005
    checks = [_answer("total", f"the answer gives the receipt total {total:.2f}", _num(total))]
    if matches:
        checks.insert(0, _sql("decision", f"{claim['id']} is approved", "select status from finance_expenses where "
                                                                         "id = ?", [claim["id"]], "approved"))
        decide = _step("finance_approve_expense", id=claim["id"])
        other = _step("finance_reject_expense", id=claim["id"], reason="Mismatch")
    else:
        gives, params = text_gives("decision_note", _num(total))
        checks.insert(0, _sql("decision", f"{claim['id']} is rejected with the receipt total {total:.2f} in the reason",
                              "select count(*) from finance_expenses where id = ? and status = 'rejected' and "
                              f"{gives}", [claim["id"], *params]))
        decide = _step("finance_reject_expense", id=claim["id"],
                       reason=f"The receipt total is {total:.2f}, not the {claim['amount']:.2f} claimed.")
        other = _step("finance_approve_expense", id=claim["id"])
    return _task(
        "multi_step",
        f"Check {claim['employee_name']}'s pending expense claim \"{claim['description']}\" of {claim['date']} "
        "against its receipt. If the amount claimed equals the receipt's total, approve it; otherwise reject it, "
        "giving the receipt's total in the reason. Tell me the receipt's total.",
        checks,
        [_step("finance_list_expenses", employee=claim["employee_name"], status="submitted"),
         _step("finance_get_receipt", id=claim["id"]), decide],
        f"The receipt shows {total:.2f}; the claim of {claim['amount']:.2f} "
        + ("matches, so I approved it." if matches else "does not match, so I rejected it."),
        [other["tool"]], other)


def hr_leave_coverage(conn, rng):
    if not _has(conn, "hr_leave", "hr_people"):
        return None
    pending = _leave_requests(conn, "pending")
    crowded = [r for r in pending if _conflicts(conn, r)]
    request = rng.choice(crowded if crowded and rng.random() < 0.5 else pending) if pending else None
    if request is None:
        return None
    conflicts = _conflicts(conn, request)
    reference = [_step("hr_search_people", query=request["name"]),
                 _step("hr_list_leave", employee_id=request["employee"], status="pending"),
                 _step("hr_list_leave", department=request["department"], status="approved",
                       from_date=request["start_date"], to_date=request["end_date"])]
    if conflicts:
        away = conflicts[0]["name"]
        gives, params = text_gives("decision_note", away)
        check = _sql("decision", f"{request['id']} is rejected naming {away}", "select count(*) from hr_leave where "
                     f"id = ? and status = 'rejected' and {gives}", [request["id"], *params])
        reference.append(_step("hr_reject_leave", id=request["id"], reason=f"{away} is already away then."))
        answer = f"Rejected {request['id']}: {away} has approved leave over the same days."
        other = _step("hr_approve_leave", id=request["id"])
    else:
        check = _sql("decision", f"{request['id']} is approved", "select status from hr_leave where id = ?",
                     [request["id"]], "approved")
        reference.append(_step("hr_approve_leave", id=request["id"]))
        answer = f"Approved {request['id']}: nobody else in {request['department']} is away then."
        other = _step("hr_reject_leave", id=request["id"], reason="Overlap")
    return _task(
        "multi_step",
        f"Decide {request['name']}'s pending {request['kind']} request ({request['start_date']} to "
        f"{request['end_date']}). Approve it unless someone else in {request['department']} already has approved "
        "leave overlapping those days; in that case reject it and name that colleague in the reason.",
        [check], reference, answer, [other["tool"], "hr_cancel_leave"], other)


def crm_overdue_escalation(conn, rng):
    """finance (the most overdue customer invoice) + CRM (its account and owner) + HR (the owner's
    title and manager)."""
    if not _has(conn, "finance_invoices", "crm_accounts", "hr_people"):
        return None
    today = _today(conn)
    overdue = _rows(conn, "select * from finance_invoices where direction = 'receivable' and status = 'open' and "
                          "due_date < ? order by due_date, id", (today,))
    if not overdue or len(overdue) > 1 and overdue[1]["due_date"] == overdue[0]["due_date"]:
        return None
    invoice = overdue[0]
    accounts = _rows(conn, "select * from crm_accounts where org = ? and status = 'active'", (invoice["org"],))
    owner = _hr_by_email(conn, accounts[0]["owner"]) if accounts else None
    if owner is None:
        return None
    account = accounts[0]
    boss = _rows(conn, "select * from hr_people where id = ?", (owner["manager"],)) if owner["manager"] else []
    subject = f"Overdue invoice {invoice['id']}"
    facts = [owner["name"], owner["title"]] + ([boss[0]["name"]] if boss else [])
    owed, params = text_gives("notes", _num(invoice["total"]))
    return _task(
        "multi_step",
        "Find our most overdue customer invoice. Log a note on that customer's active CRM account with the subject "
        "\"Overdue invoice <its number>\" and the amount owed in the notes. Then tell me who owns the account, "
        "their job title, and who their manager is.",
        [_sql("note", f"a note \"{subject}\" giving {invoice['total']:.2f} owed is logged on {account['id']}",
              "select count(*) from crm_activities where account = ? and kind = 'note' and subject like ? and "
              f"{owed}", [account["id"], f"%{invoice['id']}%", *params]),
         _answer("owner", "the answer names the account owner, their title" + (" and manager" if boss else ""),
                 *facts)],
        [_step("finance_list_invoices", direction="receivable", status="overdue"),
         _step("crm_search_accounts", query=invoice["counterparty"], status="active"),
         _step("crm_get_account", id=account["id"]),
         _step("hr_search_people", query=owner["email"]),
         _step("hr_get_person", id=owner["id"]),
         _step("crm_log_activity", account_id=account["id"], kind="note", subject=subject,
               notes=f"{invoice['total']:.2f} owed since {invoice['due_date']}.")],
        f"Logged \"{subject}\" on {account['name']}. The account is owned by {owner['name']}, {owner['title']}"
        + (f", who reports to {boss[0]['name']}." if boss else ", who has no manager above them."),
        ["finance_mark_invoice_paid", "crm_delete_activity"], _step("finance_mark_invoice_paid", id=invoice["id"]))


def crm_deal_stock(conn, rng):
    """CRM (a product deal) + inventory (its stock, a purchase order for the shortfall)."""
    if not _has(conn, "crm_deals", "inventory_products", "inventory_stock"):
        return None
    candidates = []
    for account in _accounts(conn):
        for deal in _open_deals(conn, account["id"]):
            qty, _, name = deal["name"].partition(" x ")
            product = _rows(conn, "select * from inventory_products where name = ? and active = 1", (name,))
            if qty.isdigit() and product and not deal["name"].endswith("(copy)"):
                candidates.append((account, deal, int(qty), product[0]))
    if not candidates:
        return None
    account, deal, qty, product = rng.choice(candidates)
    available = conn.execute("select coalesce(sum(on_hand - reserved), 0) from inventory_stock where sku = ?",
                             (product["sku"],)).fetchone()[0]
    central = _rows(conn, "select * from inventory_warehouses order by id")[0]
    short = max(0, qty - available)
    checks = [_sql("won", f"deal {deal['id']} is closed won", "select stage from crm_deals where id = ?", [deal["id"]],
                   "closed_won"),
              _answer("stock", f"the answer gives the {available} available", str(available))]
    reference = [_step("crm_search_accounts", query=account["name"], status="active"),
                 _step("crm_list_deals", account_id=account["id"], query=product["name"]),
                 _step("inventory_search_products", query=product["name"]),
                 _step("inventory_get_stock", sku=product["sku"])]
    if short:
        checks.append(_sql("po", f"a purchase order for {short} x {product['sku']} to {central['id']} was placed",
                           "select count(*) from inventory_orders o join inventory_order_lines l on l.order_id = o.id "
                           "where o.kind = 'purchase' and o.status = 'ordered' and o.warehouse = ? and l.sku = ? and "
                           "l.quantity = ? and o.created = ?", [central["id"], product["sku"], short, _today(conn)]))
        reference.append(_step("inventory_create_purchase_order", warehouse=central["id"],
                               lines=[{"sku": product["sku"], "quantity": short}]))
    reference.append(_step("crm_update_deal", id=deal["id"], stage="closed_won"))
    return _unsolved(conn, _task(
        "multi_step",
        f"{account['name']} signed the deal \"{deal['name']}\". Check how many {product['name']} we have available "
        f"across all warehouses; if that is fewer than the {qty} they bought, order the shortfall from the supplier "
        f"for the {central['name']}. Then mark the deal closed won, and tell me the available stock you found.",
        checks, reference,
        f"{available} {product['name']} are available; "
        + (f"ordered the {short} missing for the {central['name']}; " if short else "that covers the deal; ")
        + f"\"{deal['name']}\" is closed won.",
        ["crm_delete_deal", "inventory_cancel_order"], _step("crm_delete_deal", id=deal["id"])))


def inventory_delivery_payables(conn, rng):
    """inventory (receive a supplier's delivery) + finance (what is still owed to that supplier)."""
    if not _has(conn, "inventory_orders", "finance_invoices"):
        return None
    orders = _rows(conn, "select * from inventory_orders where kind = 'purchase' and status in ('ordered', 'shipped') "
                         "order by id")
    candidates = []
    for order in orders:
        needle = order["counterparty_name"].lower()
        owed = [i for i in _rows(conn, "select * from finance_invoices where direction = 'payable' and status = 'open' "
                                       "order by id")
                if needle in f"{i['id']} {i['counterparty']} {i['description']}".lower()]
        if owed:
            candidates.append((order, owed))
    if not candidates:
        return None
    order, owed = rng.choice(candidates)
    total = round(sum(i["total"] for i in owed) + 1e-9, 2)
    return _task(
        "multi_step",
        f"Purchase order {order['id']} from {order['counterparty_name']} arrived in full: record the delivery. Then "
        f"tell me how much we still owe {order['counterparty_name']} in open invoices, in total (a plain number).",
        [_sql("received", f"{order['id']} is received", "select status from inventory_orders where id = ?",
              [order["id"]], "received"),
         _answer("owed", f"the answer gives the {total:.2f} owed", _num(total))],
        [_step("inventory_get_order", id=order["id"]), _step("inventory_receive_delivery", id=order["id"]),
         _step("finance_list_invoices", query=order["counterparty_name"], direction="payable", status="open")],
        f"Recorded the delivery of {order['id']}. We owe {order['counterparty_name']} {total:.2f} on {len(owed)} "
        "open invoice(s).",
        ["finance_mark_invoice_paid", "inventory_cancel_order"], _step("finance_mark_invoice_paid", id=owed[0]["id"]))


TEMPLATES: dict[str, dict[str, Template]] = {
    "lookup": {
        "crm_pipeline": crm_pipeline,
        "hr_manager": hr_manager,
        "finance_receipt_merchant": finance_receipt_merchant,
        "inventory_stock_level": inventory_stock_level,
        "finance_budget_left": finance_budget_left,
        "hr_department": hr_department,
        "finance_invoice_facts": finance_invoice_facts,
    },
    "single_write": {
        "crm_advance_deal": crm_advance_deal,
        "finance_pay_invoice": finance_pay_invoice,
        "inventory_restock": inventory_restock,
        "hr_retitle": hr_retitle,
        "crm_log_call": crm_log_call,
        "finance_flag_duplicate": finance_flag_duplicate,
        "inventory_advance_order": inventory_advance_order,
        "hr_approve_leave": hr_approve_leave,
        "crm_new_deal": crm_new_deal,
        "finance_file_expense": finance_file_expense,
        "inventory_receive": inventory_receive,
        "hr_reject_leave": hr_reject_leave,
        "crm_remove_copy": crm_remove_copy,
        "finance_approve_claim": finance_approve_claim,
        "inventory_cancel_po": inventory_cancel_po,
        "hr_withdraw_leave": hr_withdraw_leave,
        "crm_remove_double_activity": crm_remove_double_activity,
        "finance_reject_claim": finance_reject_claim,
    },
    "multi_step": {
        "finance_receipt_audit": finance_receipt_audit,
        "crm_overdue_escalation": crm_overdue_escalation,
        "crm_deal_stock": crm_deal_stock,
        "hr_leave_coverage": hr_leave_coverage,
        "inventory_delivery_payables": inventory_delivery_payables,
    },
}

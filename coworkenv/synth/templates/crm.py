"""Templates about the CRM: accounts, deals and activities, and chains that join it to finance, HR and
inventory (an overdue invoice's customer is an account whose owner has an HR record; a deal's product is
stocked in inventory). Distractors sit beside what a task names: an inactive duplicate account, a deal
entered twice.

Nothing is constant: what a task names is read from its workspace's initial state, and every choice is drawn from ``rng``.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from typing import Any

from ...workspace import text_gives
from ._kit import answer_check, column_check, first_id, num, query_rows, sql_check, step, task_spec, template, unsolved, world_today

OPEN_STAGES = ["prospecting", "qualification", "proposal", "negotiation"]


def _accounts(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    return query_rows(conn, "select * from crm_accounts where status = 'active' order by id")


def _open_deals(conn: sqlite3.Connection, account: str) -> list[dict[str, Any]]:
    return query_rows(conn, "select * from crm_deals where account = ? and stage in (?, ?, ?, ?) order by close_date, id",
                      (account, *OPEN_STAGES))


def _open_originals(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """The open deals of active accounts but the second entries of deals entered twice (named "... (copy)")."""
    return [d for a in _accounts(conn) for d in _open_deals(conn, a["id"]) if not d["name"].endswith("(copy)")]


def _accounts_in_play(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Active accounts with open deals, none of them entered twice."""
    return [a for a in _accounts(conn) if _open_deals(conn, a["id"])
            and not any(d["name"].endswith("(copy)") for d in _open_deals(conn, a["id"]))]


def _hr_by_email(conn: sqlite3.Connection, email: str) -> dict[str, Any] | None:
    found = query_rows(conn, "select * from hr_people where email = ? and status = 'active'", (email,))
    return found[0] if found else None


_LOGGED_TWICE = ("select a.id as first, b.id as second, a.account, a.kind, a.subject, a.date, c.name as account_name "
                 "from crm_activities a join crm_activities b on a.account = b.account and a.subject = b.subject "
                 "and a.date = b.date and a.notes = b.notes and a.kind = b.kind and a.id < b.id "
                 "join crm_accounts c on c.id = a.account order by a.id")
"""Activities logged twice on an account (same kind, subject, date and notes): the first entry and the second."""


# --------------------------------------------------------------------------- lookup


@template("lookup", 1, needs=("crm_accounts", "crm_deals"), draws=_accounts_in_play)
def crm_pipeline(conn, rng, account):
    deals = _open_deals(conn, account["id"])
    total, first = sum(d["amount"] for d in deals), deals[0]
    if len(deals) > 1 and deals[1]["close_date"] == first["close_date"]:
        return None
    return task_spec(
        f"In the CRM, what are the open deals of {account['name']} worth in total, and which of them is expected to "
        "close first? Give the total as a plain number.",
        [answer_check("answer", f"the answer gives the open total {total} and the deal {first['name']}", str(total),
                      first["name"])],
        [step("crm_search_accounts", query=account["name"]), step("crm_get_account", id=account["id"])],
        f"{account['name']} has {len(deals)} open deal(s) worth {total} in total; "
        f"\"{first['name']}\" is expected to close first, on {first['close_date']}.",
        ["crm_delete_deal", "crm_update_deal"], step("crm_delete_deal", id=first["id"]))


# --------------------------------------------------------------------------- single write


@template("single_write", 2, needs=("crm_deals",), draws=_open_originals)
def crm_advance_deal(conn, rng, deal):
    account = query_rows(conn, "select * from crm_accounts where id = ?", (deal["account"],))[0]
    stage = (OPEN_STAGES + ["closed_won"])[OPEN_STAGES.index(deal["stage"]) + 1]
    amount = int(round(deal["amount"] * rng.choice([0.9, 0.95, 1.05, 1.1, 1.2]), -1)) if rng.random() < 0.5 else None
    update = {"stage": stage} | ({"amount": amount} if amount is not None else {})
    what = f"to the '{stage}' stage" + (f" and set its amount to {amount}" if amount is not None else "")
    return unsolved(conn, task_spec(
        f"Move {account['name']}'s deal \"{deal['name']}\" {what}.",
        [sql_check("deal", f"deal {deal['id']} is at {stage}" + (f" for {amount}" if amount is not None else ""),
                   "select count(*) from crm_deals where id = ? and stage = ? and amount = ?",
                   [deal["id"], stage, amount if amount is not None else deal["amount"]])],
        [step("crm_search_accounts", query=account["name"], status="active"),
         step("crm_list_deals", account_id=account["id"], open_only=True),
         step("crm_update_deal", id=deal["id"], **update)],
        f"Moved \"{deal['name']}\" ({deal['id']}) {what}.",
        ["crm_delete_deal"], step("crm_delete_deal", id=deal["id"])))


@template("single_write", 2, needs=("crm_contacts", "crm_activities"),
          draws="select c.*, a.name as account_name from crm_contacts c join crm_accounts a "
                "on a.id = c.account where a.status = 'active' order by c.id")
def crm_log_call(conn, rng, contact):
    topic = rng.choice(["pricing for next year", "the delivery schedule", "their renewal", "a reference visit",
                        "the open support questions", "an upcoming tender"])
    subject = f"Call with {contact['name'].split()[0]} about {topic}"
    notes = rng.choice(["They will send the figures by Friday.", "Asked for a follow-up meeting next month.",
                        "Happy so far; wants a quote.", "Needs sign-off from their finance team."])
    return task_spec(
        f"Log a call in the CRM with {contact['name']} of {contact['account_name']}, dated today: subject "
        f"\"{subject}\", notes \"{notes}\". Link it to {contact['name']} as the contact.",
        [sql_check("call", f"a call \"{subject}\" with contact {contact['id']} is logged on {contact['account']}",
                   "select count(*) from crm_activities where account = ? and kind = 'call' and subject = ? and contact = ? "
                   "and date = ?", [contact["account"], subject, contact["id"], world_today(conn)])],
        [step("crm_search_accounts", query=contact["name"]), step("crm_get_account", id=contact["account"]),
         step("crm_log_activity", account_id=contact["account"], kind="call", subject=subject, notes=notes,
              contact_id=contact["id"])],
        f"Logged the call \"{subject}\" with {contact['name']} on {contact['account_name']}.",
        ["crm_delete_activity"],
        step("crm_delete_activity", id=first_id(conn, "crm_activities")))


@template("single_write", 2, needs=("crm_deals", "world_products"))
def crm_new_deal(conn, rng):
    accounts = [a for a in _accounts(conn) if a["type"] == "customer"]
    products = query_rows(conn, "select * from world_products where category in ('hardware', 'software', 'services') "
                                "order by sku")
    if not accounts or not products:
        return None
    account, product = rng.choice(accounts), rng.choice(products)
    qty = rng.choice([3, 6, 8, 15, 30, 60])
    name = f"{qty} x {product['name']}"
    amount = int(round(qty * product["price"] * rng.uniform(1.1, 1.4), -1))
    close = (dt.date.fromisoformat(world_today(conn)) + dt.timedelta(days=rng.randint(20, 100))).isoformat()
    stage = rng.choice(["prospecting", "qualification"])
    return unsolved(conn, task_spec(
        f"Open a new deal for {account['name']} in the CRM: \"{name}\", worth {amount}, at stage '{stage}', expected "
        f"to close on {close}.",
        [sql_check("deal", f"{account['id']} has the deal \"{name}\" ({amount}, {stage}, closing {close})",
                   "select count(*) from crm_deals where account = ? and name = ? and amount = ? and stage = ? and "
                   "close_date = ?", [account["id"], name, amount, stage, close])],
        [step("crm_search_accounts", query=account["name"], status="active"),
         step("crm_create_deal", account_id=account["id"], name=name, amount=amount, stage=stage, close_date=close)],
        f"Opened \"{name}\" for {account['name']} ({amount}, {stage}, closing {close}).",
        ["crm_delete_deal"], step("crm_delete_deal", id=_open_deals(conn, account["id"])[0]["id"]
                                  if _open_deals(conn, account["id"]) else "D-0")))


@template("single_write", 2, needs=("crm_deals",),
          draws="select c.id, c.name, c.account, o.id as original, a.name as account_name from crm_deals c "
                "join crm_deals o on o.account = c.account and c.name = o.name || ' (copy)' "
                "join crm_accounts a on a.id = c.account order by c.id")
def crm_remove_copy(conn, rng, copy):
    original = copy["name"][: -len(" (copy)")]
    return task_spec(
        f"The deal \"{original}\" of {copy['account_name']} was entered twice in the CRM; the second entry is named "
        f"\"{copy['name']}\". Delete that duplicate and keep the original.",
        [sql_check("removed", f"the copy {copy['id']} is gone and the original {copy['original']} is kept",
                   "select (select count(*) from crm_deals where id = ?) * 10 + (select count(*) from crm_deals where id = ?)",
                   [copy["original"], copy["id"]], 10)],
        [step("crm_list_deals", query=original), step("crm_delete_deal", id=copy["id"])],
        f"Deleted the duplicate deal {copy['id']} (\"{copy['name']}\") and kept {copy['original']}.",
        ["crm_delete_activity", "crm_update_deal"],
        step("crm_delete_activity", id=first_id(conn, "crm_activities")))


@template("single_write", 2, needs=("crm_activities",), draws=_LOGGED_TWICE)
def crm_remove_double_activity(conn, rng, pair):
    logged = f"\"{pair['subject']}\" of {pair['date']}"
    return task_spec(
        f"The {pair['kind']} {logged} was logged twice on {pair['account_name']} in the CRM. Delete the duplicate "
        "entry so that it is logged once.",
        [sql_check("once", f"{logged} is logged once on {pair['account']}",
                   "select count(*) from crm_activities where account = ? and subject = ? and date = ?",
                   [pair["account"], pair["subject"], pair["date"]], 1)],
        [step("crm_search_accounts", query=pair["account_name"], status="active"),
         step("crm_list_activities", account_id=pair["account"]),
         step("crm_delete_activity", id=pair["second"])],
        f"Deleted the duplicate activity {pair['second']}; {pair['first']} remains.",
        ["crm_delete_deal"],
        step("crm_delete_deal", id=first_id(conn, "crm_deals")))


# --------------------------------------------------------------------------- multi-step chains


@template("multi_step", 3, needs=("finance_invoices", "crm_accounts", "hr_people"))
def crm_overdue_escalation(conn, rng):
    """finance (the most overdue customer invoice) + CRM (its account and owner) + HR (the owner's
    title and manager)."""
    today = world_today(conn)
    overdue = query_rows(conn, "select * from finance_invoices where direction = 'receivable' and status = 'open' and "
                               "due_date < ? order by due_date, id", (today,))
    if not overdue or len(overdue) > 1 and overdue[1]["due_date"] == overdue[0]["due_date"]:
        return None
    invoice = overdue[0]
    accounts = query_rows(conn, "select * from crm_accounts where org = ? and status = 'active'", (invoice["org"],))
    owner = _hr_by_email(conn, accounts[0]["owner"]) if accounts else None
    if owner is None:
        return None
    account = accounts[0]
    boss = query_rows(conn, "select * from hr_people where id = ?", (owner["manager"],)) if owner["manager"] else []
    subject = f"Overdue invoice {invoice['id']}"
    facts = [owner["name"], owner["title"]] + ([boss[0]["name"]] if boss else [])
    owed, params = text_gives("notes", num(invoice["total"]))
    return task_spec(
        "Find our most overdue customer invoice. Log a note on that customer's active CRM account with the subject "
        "\"Overdue invoice <its number>\" and the amount owed in the notes. Then tell me who owns the account, "
        "their job title, and who their manager is.",
        [sql_check("note", f"a note \"{subject}\" giving {invoice['total']:.2f} owed is logged on {account['id']}",
                   "select count(*) from crm_activities where account = ? and kind = 'note' and subject like ? and "
                   f"{owed}", [account["id"], f"%{invoice['id']}%", *params]),
         answer_check("owner", "the answer names the account owner, their title" + (" and manager" if boss else ""),
                      *facts)],
        [step("finance_list_invoices", direction="receivable", status="overdue"),
         step("crm_search_accounts", query=invoice["counterparty"], status="active"),
         step("crm_get_account", id=account["id"]),
         step("hr_search_people", query=owner["email"]),
         step("hr_get_person", id=owner["id"]),
         step("crm_log_activity", account_id=account["id"], kind="note", subject=subject,
              notes=f"{invoice['total']:.2f} owed since {invoice['due_date']}.")],
        f"Logged \"{subject}\" on {account['name']}. The account is owned by {owner['name']}, {owner['title']}"
        + (f", who reports to {boss[0]['name']}." if boss else ", who has no manager above them."),
        ["finance_mark_invoice_paid", "crm_delete_activity"], step("finance_mark_invoice_paid", id=invoice["id"]))


@template("multi_step", 3, needs=("crm_deals", "inventory_products", "inventory_stock"))
def crm_deal_stock(conn, rng):
    """CRM (a product deal) + inventory (its stock, a purchase order for the shortfall)."""
    candidates = []
    for account in _accounts(conn):
        for deal in _open_deals(conn, account["id"]):
            qty, _, name = deal["name"].partition(" x ")
            product = query_rows(conn, "select * from inventory_products where name = ? and active = 1", (name,))
            if qty.isdigit() and product and not deal["name"].endswith("(copy)"):
                candidates.append((account, deal, int(qty), product[0]))
    if not candidates:
        return None
    account, deal, qty, product = rng.choice(candidates)
    available = conn.execute("select coalesce(sum(on_hand - reserved), 0) from inventory_stock where sku = ?",
                             (product["sku"],)).fetchone()[0]
    central = query_rows(conn, "select * from inventory_warehouses order by id")[0]
    short = max(0, qty - available)
    checks = [column_check("won", f"deal {deal['id']} is closed won", "crm_deals", "stage", deal["id"], "closed_won"),
              answer_check("stock", f"the answer gives the {available} available", str(available))]
    reference = [step("crm_search_accounts", query=account["name"], status="active"),
                 step("crm_list_deals", account_id=account["id"], query=product["name"]),
                 step("inventory_search_products", query=product["name"]),
                 step("inventory_get_stock", sku=product["sku"])]
    if short:
        checks.append(sql_check("po", f"a purchase order for {short} x {product['sku']} to {central['id']} was placed",
                                "select count(*) from inventory_orders o join inventory_order_lines l on l.order_id = o.id "
                                "where o.kind = 'purchase' and o.status = 'ordered' and o.warehouse = ? and l.sku = ? and "
                                "l.quantity = ? and o.created = ?", [central["id"], product["sku"], short, world_today(conn)]))
        reference.append(step("inventory_create_purchase_order", warehouse=central["id"],
                              lines=[{"sku": product["sku"], "quantity": short}]))
    reference.append(step("crm_update_deal", id=deal["id"], stage="closed_won"))
    return unsolved(conn, task_spec(
        f"{account['name']} signed the deal \"{deal['name']}\". Check how many {product['name']} we have available "
        f"across all warehouses; if that is fewer than the {qty} they bought, order the shortfall from the supplier "
        f"for the {central['name']}. Then mark the deal closed won, and tell me the available stock you found.",
        checks, reference,
        f"{available} {product['name']} are available; "
        + (f"ordered the {short} missing for the {central['name']}; " if short else "that covers the deal; ")
        + f"\"{deal['name']}\" is closed won.",
        ["crm_delete_deal", "inventory_cancel_order"], step("crm_delete_deal", id=deal["id"])))

"""Templates about finance: invoices, expense claims, receipts and budgets. Some tasks can only be solved
by looking at a picture: a receipt's merchant, and whether a claim matches its receipt's total, are in
the receipt's scanned image alone. A vendor invoice entered twice is a distractor.

Nothing is constant: what a task names is read from its workspace's initial state, and every choice is drawn from ``rng``.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from typing import Any

from ...workspace import Check, text_gives
from ...workspace.apps import finance as _finance
from ._kit import (
    Spec,
    answer_check,
    column_check,
    draw,
    first_id,
    num,
    query_rows,
    sql_check,
    step,
    task_spec,
    template,
    unsolved,
    world_today,
)


def _any_open_invoice(conn: sqlite3.Connection) -> str:
    return conn.execute("select id from finance_invoices where status = 'open' order by id").fetchone()[0]


def _active_projects(conn: sqlite3.Connection) -> list[str]:
    """The codes of the projects with an active budget."""
    return [r["project"] for r in query_rows(conn, "select project from finance_budgets where status = 'active' order by project")]


_PENDING_CLAIMS = ("select e.*, r.total as receipt_total from finance_expenses e left join finance_receipts r "
                   "on r.expense = e.id where e.status = 'submitted' order by e.id")
"""Submitted expense claims, each with its receipt's total (None where it has no receipt)."""


def _pending_claim(conn, rng, matching: bool) -> dict[str, Any] | None:
    """A pending claim whose amount matches its receipt's total (or, ``matching`` False, does not)."""
    claims = [c for c in query_rows(conn, _PENDING_CLAIMS) if c["receipt_total"] is not None
              and (abs(c["receipt_total"] - c["amount"]) < 0.005) == matching]
    return draw(rng, claims)


def _decided(claim: dict[str, Any], reason: str | None) -> Spec:
    """Approve a pending claim (no ``reason``) or reject it for ``reason``: the agent finds it among
    its employee's submitted claims, and the other decision is the forbidden one."""
    verb, status = ("approve", "approved") if reason is None else ("reject", "rejected")
    why = {} if reason is None else {"reason": reason}
    other = step("finance_reject_expense", id=claim["id"], reason="No.") if reason is None \
        else step("finance_approve_expense", id=claim["id"])
    return task_spec(
        f"{verb.capitalize()} {claim['employee_name']}'s expense claim \"{claim['description']}\" of {claim['date']}"
        + ("." if reason is None else f" with the reason \"{reason}\""),
        [column_check(status, f"{claim['id']} is {status}", "finance_expenses", "status", claim["id"], status)],
        [step("finance_list_expenses", employee=claim["employee_name"], status="submitted"),
         step(f"finance_{verb}_expense", id=claim["id"], **why)],
        f"{status.capitalize()} {claim['id']} ({claim['description']})" + ("." if reason is None else f": {reason}"),
        [other.tool], other)


_ENTERED_TWICE = ("select a.id as first, b.id as second, a.counterparty, a.total from finance_invoices a "
                  "join finance_invoices b on a.org = b.org and a.total = b.total and a.direction = 'payable' "
                  "and b.direction = 'payable' and (a.issue_date < b.issue_date or a.issue_date = b.issue_date "
                  "and a.id < b.id) where a.status = 'open' and b.status = 'open' order by a.id")
"""Open payable invoices of one supplier with the same total: the earlier one (``first``) and the later one."""


# --------------------------------------------------------------------------- lookup


@template("lookup", 1, needs=("finance_expenses", "finance_receipts"),
          draws="select e.*, r.merchant, r.total from finance_expenses e join finance_receipts r on r.expense = e.id order by e.id")
def finance_receipt_merchant(conn, rng, claim):
    """Needs the receipt's image: its merchant and total are nowhere else an agent can read."""
    return task_spec(
        f"{claim['employee_name']} claimed an expense \"{claim['description']}\" dated {claim['date']}. Look at its "
        "receipt: at which business was it issued, and what total does the receipt show?",
        [answer_check("answer", f"the answer names the merchant {claim['merchant']} and the receipt total "
                                f"{claim['total']:.2f}", claim["merchant"], num(claim["total"]))],
        [step("finance_list_expenses", employee=claim["employee_name"]), step("finance_get_receipt", id=claim["id"])],
        f"The receipt for {claim['id']} was issued by {claim['merchant']} and shows a total of {claim['total']:.2f}.",
        ["finance_reject_expense", "finance_approve_expense"],
        step("finance_reject_expense", id=claim["id"], reason="No receipt."))


@template("lookup", 1, needs=("finance_budgets", "finance_invoices", "finance_expenses"), draws=_active_projects)
def finance_budget_left(conn, rng, code):
    status = _finance.handle(conn, "budget_status", {"project": code})["budgets"][0]  # the app's own arithmetic
    return task_spec(
        f"How much of the {code} ({status['name']}) budget is left once spending and open commitments are counted? "
        "Give the amount as a plain number.",
        [answer_check("answer", f"the answer gives the remaining {status['remaining']:.2f}", num(status["remaining"]))],
        [step("finance_budget_status", project=code)],
        f"{code} has {status['remaining']:.2f} {status['currency']} left of its {status['budget']:.2f} budget.",
        ["finance_mark_invoice_paid"], step("finance_mark_invoice_paid", id=_any_open_invoice(conn)))


@template("lookup", 1, needs=("finance_invoices",),
          draws="select * from finance_invoices where direction = 'payable' and project is not null and document is not null order by id")
def finance_invoice_facts(conn, rng, invoice):
    return task_spec(
        f"Invoice {invoice['id']} from {invoice['counterparty']}: when is it due, what is its total, and which project is it charged to?",
        [answer_check("answer", f"the answer gives due date {invoice['due_date']}, total {invoice['total']:.2f} and "
                                f"project {invoice['project']}", invoice["due_date"], num(invoice["total"]),
                      invoice["project"])],
        [step("finance_get_invoice", id=invoice["id"])],
        f"{invoice['id']} is due on {invoice['due_date']}, totals {invoice['total']:.2f} and is charged to "
        f"{invoice['project']}.",
        ["finance_mark_invoice_paid", "finance_flag_invoice"], step("finance_mark_invoice_paid", id=invoice["id"]))


# --------------------------------------------------------------------------- single write


@template("single_write", 2, needs=("finance_invoices",),
          draws="select i.* from finance_invoices i where status = 'open' and flagged = 0 and direction = "
                "'payable' and not exists (select 1 from finance_invoices j where j.id != i.id and "
                "j.org = i.org and j.total = i.total) order by id")
def finance_pay_invoice(conn, rng, invoice):
    today = world_today(conn)
    return task_spec(
        f"We paid {invoice['counterparty']}'s invoice {invoice['id']} today. Record the payment in finance.",
        [sql_check("paid", f"{invoice['id']} is paid on {today}", "select count(*) from finance_invoices where id = ? and "
              "status = 'paid' and paid_on = ?", [invoice["id"], today])],
        [step("finance_get_invoice", id=invoice["id"]), step("finance_mark_invoice_paid", id=invoice["id"])],
        f"Recorded {invoice['id']} ({invoice['total']:.2f}) as paid on {today}.",
        ["finance_flag_invoice"], step("finance_flag_invoice", id=invoice["id"], reason="Check"))


@template("single_write", 2, needs=("finance_invoices",), draws=_ENTERED_TWICE)
def finance_flag_duplicate(conn, rng, pair):
    earlier, later = pair["first"], pair["second"]
    return task_spec(
        f"Two open invoices from {pair['counterparty']} have the same total: one of them was entered twice. Flag the "
        "one issued later as a possible duplicate of the earlier one.",
        [sql_check("flagged", f"{later} is flagged and {earlier} is not",
                   "select sum(case when id = ? then flagged else -flagged end) from finance_invoices where id in (?, ?)",
                   [later, earlier, later], 1)],
        [step("finance_list_invoices", query=pair["counterparty"], direction="payable", status="open"),
         step("finance_flag_invoice", id=later, reason=f"Possible duplicate of {earlier}")],
        f"Flagged {later} as a possible duplicate of {earlier} ({pair['total']:.2f}).",
        ["finance_mark_invoice_paid"], step("finance_mark_invoice_paid", id=earlier))


@template("single_write", 2, needs=("finance_expenses", "finance_budgets"))
def finance_file_expense(conn, rng):
    projects = _active_projects(conn)
    orgs = query_rows(conn, "select name, city from world_organisations where kind != 'employer' order by id")
    if not projects or not orgs:
        return None
    org, code = rng.choice(orgs), rng.choice(projects)
    category, description = rng.choice([("travel", f"Train to {org['city']}"), ("travel", f"Taxi to {org['name']}"),
                                        ("meals", f"Lunch with {org['name']}"), ("lodging", f"Hotel in {org['city']}")])
    amount = round(rng.uniform(18, 240), 2)
    day = (dt.date.fromisoformat(world_today(conn)) - dt.timedelta(days=rng.randint(1, 12))).isoformat()
    return unsolved(conn, task_spec(
        f"File an expense claim for me: \"{description}\" on {day}, {amount:.2f}, category {category}, charged to "
        f"{code}.",
        [sql_check("claim", f"a claim \"{description}\" of {amount:.2f} on {day} for {code} is submitted",
                   "select count(*) from finance_expenses where description = ? and abs(amount - ?) < 0.005 and date = ? "
                   "and project = ? and category = ? and status = 'submitted' and employee = (select email from "
                   "world_people where id = (select value from world_meta where key = 'user'))",
                   [description, amount, day, code, category])],
        [step("finance_create_expense", description=description, amount=amount, date=day, category=category,
              project=code)],
        f"Filed \"{description}\" ({amount:.2f}, {category}, {code}).",
        ["finance_approve_expense"],
        step("finance_approve_expense", id=first_id(conn, "finance_expenses"))))


@template("single_write", 2, needs=("finance_expenses", "finance_receipts"), draws=_PENDING_CLAIMS)
def finance_approve_claim(conn, rng, claim):
    return _decided(claim, None)


@template("single_write", 2, needs=("finance_expenses", "finance_receipts"), draws=_PENDING_CLAIMS)
def finance_reject_claim(conn, rng, claim):
    return _decided(claim, rng.choice(["It was already reimbursed through payroll.", "Personal expense, not business.",
                                       "Claimed twice: see the earlier claim."]))


# --------------------------------------------------------------------------- multi-step chains


@template("multi_step", 3, needs=("finance_expenses", "finance_receipts"))
def finance_receipt_audit(conn, rng):
    """Needs the receipt's image: the claim is right only if it matches the total printed on it."""
    claim = _pending_claim(conn, rng, matching=rng.random() < 0.5) or _pending_claim(conn, rng, matching=True)
    if claim is None:
        return None
    total = claim["receipt_total"]
    matches = abs(total - claim["amount"]) < 0.005
    checks: list[Check] = [answer_check("total", f"the answer gives the receipt total {total:.2f}", num(total))]
    if matches:
        checks.insert(0, column_check("decision", f"{claim['id']} is approved", "finance_expenses", "status", claim["id"], "approved"))
        decide = step("finance_approve_expense", id=claim["id"])
        other = step("finance_reject_expense", id=claim["id"], reason="Mismatch")
    else:
        gives, params = text_gives("decision_note", num(total))
        checks.insert(0, sql_check("decision", f"{claim['id']} is rejected with the receipt total {total:.2f} in the reason",
                                   "select count(*) from finance_expenses where id = ? and status = 'rejected' and "
                                   f"{gives}", [claim["id"], *params]))
        decide = step("finance_reject_expense", id=claim["id"],
                      reason=f"The receipt total is {total:.2f}, not the {claim['amount']:.2f} claimed.")
        other = step("finance_approve_expense", id=claim["id"])
    return task_spec(
        f"Check {claim['employee_name']}'s pending expense claim \"{claim['description']}\" of {claim['date']} "
        "against its receipt. If the amount claimed equals the receipt's total, approve it; otherwise reject it, "
        "giving the receipt's total in the reason. Tell me the receipt's total.",
        checks,
        [step("finance_list_expenses", employee=claim["employee_name"], status="submitted"),
         step("finance_get_receipt", id=claim["id"]), decide],
        f"The receipt shows {total:.2f}; the claim of {claim['amount']:.2f} "
        + ("matches, so I approved it." if matches else "does not match, so I rejected it."),
        [other.tool], other)

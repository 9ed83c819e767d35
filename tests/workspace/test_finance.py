"""The finance app: invoices, expense claims with scanned receipts (PNG) and scanned vendor invoices
(PDF) drawn from the world, every tool against its schemas, budgets that follow the records, and
errors that name what was wrong."""

from __future__ import annotations

import base64
import io
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from coworkenv.workspace import APPS_DIR, build_workspace, write_initial_state
from coworkenv.workspace.apps import ALL_APPS, ToolFailure

APP = ALL_APPS["finance"]


@pytest.fixture
def harness(app_harness):
    return app_harness("finance")


def one(conn: sqlite3.Connection, query: str, params: tuple = ()) -> tuple:
    return conn.execute(query, params).fetchone()


def test_what_is_seeded_varies_with_the_seed(harness):
    # (determinism itself: test_apps.py's contract, for every app)
    merchants = {seed: {m for (m,) in harness.state(seed).execute("select merchant from finance_receipts")}
                 for seed in range(3)}
    assert merchants[0] != merchants[1] != merchants[2]


@pytest.mark.parametrize("seed", range(4))
def test_records_come_from_the_world(harness, seed):
    conn, world = harness.state(seed), harness.world(seed)
    orgs = {o["id"]: o for o in world["organisations"]}
    for direction, org, name in conn.execute("select direction, org, counterparty from finance_invoices"):
        assert orgs[org]["kind"] == ("vendor" if direction == "payable" else "customer") and orgs[org]["name"] == name
    codes = {p["code"] for p in world["projects"]}
    assert {c for (c,) in conn.execute("select project from finance_invoices union select project from "
                                       "finance_expenses") if c} <= codes
    assert {c for (c,) in conn.execute("select project from finance_budgets")} == codes
    staff = {p["email"] for p in world["people"] if p["org"] == world["company"]["id"]}
    assert {e for (e,) in conn.execute("select employee from finance_expenses")} <= staff
    # distractors and cases for tasks: a vendor invoice entered twice, an overdue customer invoice,
    # claims whose amount is not their receipt's total, a claim without a receipt
    assert one(conn, "select count(*) from finance_invoices a join finance_invoices b on a.org = b.org and "
                     "a.total = b.total and a.id < b.id and a.direction = 'payable'")[0] >= 1
    assert one(conn, "select count(*) from finance_invoices where direction = 'receivable' and status = 'open' "
                     "and due_date < ?", (world["today"],))[0] >= 1
    assert one(conn, "select count(*) from finance_expenses e join finance_receipts r on r.expense = e.id where "
                     "e.status = 'submitted' and abs(e.amount - r.total) > 0.005") == (2,)
    assert one(conn, "select count(*) from finance_expenses e left join finance_receipts r on r.expense = e.id "
                     "where r.id is null")[0] >= 1


def test_every_tool_in_a_session(harness):
    conn, world = harness.state(3), harness.world(3)
    payable = one(conn, "select id from finance_invoices where direction = 'payable' and status = 'open' and "
                        "project is not null order by id")[0]
    listed = harness.call(conn, "list_invoices", {"direction": "payable", "status": "open"})
    assert payable in [i["id"] for i in listed["invoices"]]
    assert listed["total"] == round(sum(i["total"] for i in listed["invoices"]), 2)
    invoice = harness.call(conn, "get_invoice", {"id": payable.lower()})
    assert invoice["has_document"] and invoice["lines"]
    document = invoice["_content"][0]
    assert document["type"] == "resource" and document["mime_type"] == "application/pdf"
    pdf = base64.b64decode(document["blob"])
    assert pdf.startswith(b"%PDF") and payable in document["text"]
    # dated by the invoice, never by the wall clock: the same seed gives the same bytes
    assert f"(D:{invoice['issue_date'].replace('-', '')}090000".encode() in pdf
    project = invoice["project"]
    before = harness.call(conn, "budget_status", {"project": project})["budgets"][0]
    paid = harness.call(conn, "mark_invoice_paid", {"id": payable})
    assert paid["invoice"]["status"] == "paid" and paid["paid_on"] == world["today"]
    after = harness.call(conn, "budget_status", {"project": project})["budgets"][0]
    assert after["spent"] == round(before["spent"] + invoice["total"], 2)
    assert after["committed"] == round(before["committed"] - invoice["total"], 2)
    assert after["remaining"] == before["remaining"]
    other = one(conn, "select id from finance_invoices where status = 'open' order by id")[0]
    flagged = harness.call(conn, "flag_invoice", {"id": other, "reason": "Duplicate?"})
    assert flagged["invoice"]["flagged"] and flagged["flag_reason"] == "Duplicate?"
    assert [h["action"] for h in harness.call(conn, "get_invoice", {"id": other})["history"]] == ["flagged"]
    claims = harness.call(conn, "list_expenses", {"status": "submitted"})["expenses"]
    with_receipt = [c for c in claims if c["receipt_id"]]
    receipt = harness.call(conn, "get_receipt", {"id": with_receipt[0]["id"]})
    image = Image.open(io.BytesIO(base64.b64decode(receipt["_content"][0]["data"])))
    assert image.format == "PNG" and image.width > 300 and receipt["text"] == "a scanned receipt"
    approved = harness.call(conn, "approve_expense", {"id": with_receipt[0]["id"]})
    assert (approved["status"], approved["decided_by"]) == ("approved", world["user"]["email"])
    rejected = harness.call(conn, "reject_expense", {"id": with_receipt[1]["id"], "reason": "Receipt shows less"})
    assert rejected["status"] == "rejected" and rejected["decision_note"] == "Receipt shows less"
    pending = harness.call(conn, "budget_status", {"project": project})["budgets"][0]["pending_expenses"]
    created = harness.call(conn, "create_expense", {"description": "Taxi", "amount": 23.5, "date": world["today"],
                                            "category": "travel", "project": project})
    assert (created["status"], created["employee"], created["receipt_id"]) == ("submitted", world["user"]["name"],
                                                                                None)
    assert harness.call(conn, "budget_status", {"project": project})["budgets"][0]["pending_expenses"] == round(
        pending + 23.5, 2)
    assert len(harness.call(conn, "budget_status", {})["budgets"]) == len(world["projects"])
    assert {t["name"] for t in APP.TOOLS} == {"list_invoices", "get_invoice", "mark_invoice_paid", "flag_invoice",
                                               "list_expenses", "get_receipt", "approve_expense", "reject_expense",
                                               "create_expense", "budget_status"}


def test_a_receipt_shows_its_figures_only_in_the_image(harness):
    conn = harness.state(3)
    expense, merchant, total = one(conn, "select expense, merchant, total from finance_receipts order by id")
    receipt = harness.call(conn, "get_receipt", {"id": expense})
    text = json.dumps({k: v for k, v in receipt.items() if k != "_content"}) + json.dumps(
        harness.call(conn, "list_expenses", {}))
    assert merchant not in text
    image = Image.open(io.BytesIO(base64.b64decode(receipt["_content"][0]["data"])))
    assert image.mode == "L" and 300 < image.height < 700 and total > 0


def test_customer_invoices_have_no_scan_and_overdue_is_computed(harness):
    conn, world = harness.state(3), harness.world(3)
    receivable = harness.call(conn, "list_invoices", {"direction": "receivable", "status": "overdue"})["invoices"]
    assert receivable and all(i["days_overdue"] > 0 and i["due_date"] < world["today"] for i in receivable)
    assert "_content" not in harness.call(conn, "get_invoice", {"id": receivable[0]["id"]})
    assert all(i["status"] != "paid" for i in harness.call(conn, "list_invoices", {"status": "open"})["invoices"])


def test_read_tools_do_not_change_state(harness):
    conn = harness.state(3)
    before = harness.dump(conn)
    invoice = one(conn, "select id from finance_invoices order by id")[0]
    expense = one(conn, "select expense from finance_receipts order by id")[0]
    harness.call(conn, "list_invoices", {"query": "inv", "flagged": False})
    harness.call(conn, "get_invoice", {"id": invoice})
    harness.call(conn, "list_expenses", {"employee": "a"})
    harness.call(conn, "get_receipt", {"id": expense})
    harness.call(conn, "budget_status", {})
    assert harness.dump(conn) == before


@pytest.mark.parametrize("tool,args,match", [
    ("get_invoice", {"id": "INV-0"}, "INV-0"),
    ("mark_invoice_paid", {"id": "INV-0"}, "INV-0"),
    ("flag_invoice", {"id": "INV-0", "reason": "x"}, "INV-0"),
    ("get_receipt", {"id": "EXP-0"}, "EXP-0"),
    ("approve_expense", {"id": "EXP-0"}, "EXP-0"),
    ("reject_expense", {"id": "EXP-0", "reason": "x"}, "EXP-0"),
    ("budget_status", {"project": "PRJ-0"}, "PRJ-0.*projects with budgets: PRJ-"),
    ("create_expense", {"description": "x", "amount": -1, "date": "2026-01-01", "category": "meals"}, "amount"),
    ("create_expense", {"description": "x", "amount": 1, "date": "yesterday", "category": "meals"}, "date"),
    ("create_expense", {"description": "x", "amount": 1, "date": "2026-01-01", "category": "fun"}, "category"),
    ("create_expense", {"description": "x", "amount": 1, "date": "2026-01-01", "category": "meals",
                        "project": "PRJ-0"}, "PRJ-0"),
    ("mark_invoice_paid", {"id": "INV-0", "paid_on": "soon"}, "INV-0"),
    ("list_invoices", {"bogus": 1}, "bogus"),
    ("frobnicate", {}, "unknown tool"),
])
def test_errors_name_what_was_wrong(harness, tool, args, match):
    conn = harness.state(3)
    before = harness.dump(conn)
    with pytest.raises(ToolFailure, match=match):
        APP.handle(conn, tool, args)
    assert harness.dump(conn) == before


def test_payments_and_decisions_happen_once(harness):
    conn = harness.state(3)
    paid = one(conn, "select id from finance_invoices where status = 'paid' order by id")[0]
    with pytest.raises(ToolFailure, match="already paid"):
        APP.handle(conn, "mark_invoice_paid", {"id": paid})
    open_ = one(conn, "select id from finance_invoices where status = 'open' order by id")[0]
    APP.handle(conn, "flag_invoice", {"id": open_, "reason": "wrong amount"})
    with pytest.raises(ToolFailure, match="held from payment"):
        APP.handle(conn, "mark_invoice_paid", {"id": open_})
    with pytest.raises(ToolFailure, match="already flagged"):
        APP.handle(conn, "flag_invoice", {"id": open_, "reason": "again"})
    decided = one(conn, "select id, status from finance_expenses where status != 'submitted' order by id")
    with pytest.raises(ToolFailure, match=f"already {decided[1]}"):
        APP.handle(conn, "approve_expense", {"id": decided[0]})
    no_receipt = one(conn, "select e.id from finance_expenses e left join finance_receipts r on r.expense = e.id "
                           "where r.id is null")[0]
    with pytest.raises(ToolFailure, match="no receipt"):
        APP.handle(conn, "get_receipt", {"id": no_receipt})


SANDBOX_SCRIPT = r"""
import json, sqlite3, sys
sys.path.insert(0, sys.argv[1])
import apps
conn = sqlite3.connect(sys.argv[2])
out = {}
for name in ("crm", "finance", "hr", "inventory"):
    app = apps.ALL_APPS[name]
    for spec in app.TOOLS:
        if spec["effect"] == "read" and not spec["input_schema"]["required"]:
            out[name + "_" + spec["name"]] = len(json.dumps(app.handle(conn, spec["name"], {})))
expense = conn.execute("select expense from finance_receipts order by id").fetchone()[0]
receipt = apps.ALL_APPS["finance"].handle(conn, "get_receipt", {"id": expense})
tops = {m.split(".")[0] for m in sys.modules}
foreign = sorted(t for t in tops if t not in sys.stdlib_module_names and t not in sys.builtin_module_names
                 and t not in ("apps", "__main__"))
print(json.dumps({"sizes": out, "image": receipt["_content"][0]["data"][:8], "foreign": foreign}))
"""


def test_business_tools_run_in_a_bare_sandbox_interpreter(tmp_path: Path):
    """Tools never need Pillow: the pictures were drawn when the state was built."""
    path = write_initial_state(build_workspace(2, ("crm", "finance", "hr", "inventory")), tmp_path / "state.db")
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", SANDBOX_SCRIPT, str(APPS_DIR.parent), str(path)],
                          capture_output=True, text=True, timeout=60, cwd="/")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["foreign"] == [] and report["image"] == base64.b64encode(b"\x89PNG\r\n").decode()
    assert len(report["sizes"]) >= 8 and all(size > 20 for size in report["sizes"].values())

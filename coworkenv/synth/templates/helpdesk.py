"""Templates about the helpdesk: ticket status, assignment, priority, merging and closing, and chains that
join a ticket to the price list (``quote_ticket``), the knowledge base and the to-do lists
(``ticket_kb_followup``). A namesake at a customer is a distractor.

Nothing is constant: what a task names is read from its workspace's initial state, and every choice is drawn from ``rng``.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from ...workspace import World, load_world, text_gives
from ._kit import answer_check, colleagues, column_check, day_after, money, person_with, sql_check, step, task_spec, template, unsolved
from ._records import kb_article_rows, price_list


def _tickets(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    keys = ("id", "subject", "description", "requester", "org", "assignee", "status", "priority", "product", "created")
    return [dict(zip(keys, r, strict=True)) for r in conn.execute(
        f"select {', '.join(keys)} from helpdesk_tickets order by id")]


def _org_name(world: World, org: str | None) -> str:
    return next((o["name"] for o in world["organisations"] if o["id"] == org), "")


def _troubleshooting(conn: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    """Published troubleshooting articles by product SKU."""
    return {a["product"]: a for a in kb_article_rows(conn)
            if a["category"] == "troubleshooting" and a["status"] == "published" and a["product"]}


def _article_ids(conn: sqlite3.Connection) -> list[str]:
    """Every knowledge base article's id: the ones a reply citing an article must not list."""
    return [i for (i,) in conn.execute("select id from kb_articles order by id")]


# --------------------------------------------------------------------------- lookup


@template("lookup", 2, needs=("helpdesk_tickets",))
def ticket_status(conn, rng):
    world = load_world(conn)
    tickets = _tickets(conn)
    options = [t for t in tickets if t["assignee"] and t["status"] in ("open", "pending", "solved")]
    if not options:
        return None
    t = rng.choice(options)
    who = person_with(world, t["requester"])
    if who is None:
        return None
    return task_spec(
        f"{who['name']} of {_org_name(world, t['org'])} asked about their ticket \"{t['subject']}\". "
        "What is its id and status, and who is handling it (email address)?",
        [answer_check("answer", f"the answer gives {t['id']}, {t['status']} and {t['assignee']}", t["id"],
                      t["status"], t["assignee"])],
        [step("helpdesk_list_tickets", requester=t["requester"]), step("helpdesk_get_ticket", id=t["id"])],
        f"{t['id']} is {t['status']}, handled by {t['assignee']}.",
        ["helpdesk_close_ticket", "helpdesk_merge_tickets"], step("helpdesk_close_ticket", id=t["id"]))


# --------------------------------------------------------------------------- single write


@template("single_write", 2, needs=("helpdesk_tickets",))
def ticket_assign(conn, rng):
    world = load_world(conn)
    options = [t for t in _tickets(conn) if t["status"] == "new" and t["assignee"] is None]
    agents = [p for p in colleagues(world) if p["department"] == "Support"]
    if not options or not agents:
        return None
    t, agent = rng.choice(options), rng.choice(agents)
    return task_spec(
        f"Assign ticket {t['id']} (\"{t['subject']}\") to our colleague {agent['name']} in Support.",
        [column_check("assigned", f"{t['id']} is assigned to {agent['email']}", "helpdesk_tickets", "assignee", t["id"], agent["email"])],
        [step("helpdesk_get_ticket", id=t["id"]),
         step("helpdesk_assign_ticket", id=t["id"], assignee=agent["email"])],
        f"Assigned {t['id']} to {agent['name']} ({agent['email']}).",
        ["helpdesk_close_ticket", "helpdesk_merge_tickets"], step("helpdesk_close_ticket", id=t["id"]))


@template("single_write", 2, needs=("helpdesk_tickets",))
def ticket_priority(conn, rng):
    world = load_world(conn)
    tickets = _tickets(conn)
    live = [t for t in tickets if t["status"] != "closed"]
    options = [t for t in live if t["priority"] != "urgent" and sum(x["subject"] == t["subject"] for x in live) == 1]
    if not options:
        return None
    t = rng.choice(options)
    org = _org_name(world, t["org"])
    return task_spec(
        f"{org} escalated their ticket \"{t['subject']}\". Set its priority to urgent.",
        [column_check("urgent", f"{t['id']} is urgent", "helpdesk_tickets", "priority", t["id"], "urgent")],
        [step("helpdesk_list_tickets", organisation=org),
         step("helpdesk_update_ticket", id=t["id"], priority="urgent")],
        f"{t['id']} is now urgent.",
        ["helpdesk_close_ticket"], step("helpdesk_close_ticket", id=t["id"]))


@template("single_write", 2, needs=("helpdesk_tickets",),
          draws=lambda conn: [t for t in _tickets(conn) if t["status"] in ("solved", "pending")])
def ticket_close(conn, rng, t):
    return task_spec(
        f"The customer confirmed that ticket {t['id']} (\"{t['subject']}\") is resolved. Close it, "
        "noting that the customer confirmed the fix.",
        [sql_check("closed", f"{t['id']} is closed and not merged",
                   "select count(*) from helpdesk_tickets where id = ? and status = 'closed' and merged_into is null",
                   [t["id"]])],
        [step("helpdesk_get_ticket", id=t["id"]),
         step("helpdesk_close_ticket", id=t["id"], resolution="The customer confirmed the fix.")],
        f"Closed {t['id']}.",
        ["helpdesk_merge_tickets"], step("helpdesk_merge_tickets", source=t["id"], target=t["id"]))


# --------------------------------------------------------------------------- multi-step chains


@template("multi_step", 3, needs=("helpdesk_tickets",))
def ticket_merge(conn, rng):
    world = load_world(conn)
    tickets = _tickets(conn)
    pairs = [(t, o) for t in tickets if t["subject"].startswith("Still: ") for o in tickets
             if o["subject"] == t["subject"][7:] and o["requester"] == t["requester"] and o["status"] != "closed"]
    if not pairs:
        return None
    newer, older = rng.choice(pairs)
    who = person_with(world, newer["requester"])
    if who is None:
        return None
    user = world["user"]["email"]
    return task_spec(
        f"{who['name']} opened a second ticket about a problem they had already reported. Merge the "
        "newer ticket into the older one, then reply publicly on the older one that we are on it.",
        [
  sql_check("merged", f"{newer['id']} is merged into {older['id']}",
            "select count(*) from helpdesk_tickets where id = ? and merged_into = ? and status = 'closed'",
            [newer["id"], older["id"]]),
  sql_check("reply", f"a public reply from the user on {older['id']}",
            "select count(*) > 0 from helpdesk_comments where ticket = ? and author = ? and public = 1",
            [older["id"], user]),
        ],
        [
            step("helpdesk_list_tickets", requester=newer["requester"]),
            step("helpdesk_get_ticket", id=older["id"]),
            step("helpdesk_get_ticket", id=newer["id"]),
            step("helpdesk_merge_tickets", source=newer["id"], target=older["id"]),
            step("helpdesk_comment_ticket", id=older["id"],
    body=f"Hello {who['first']}, we merged your follow-up into this ticket and are working on it."),
        ],
        f"Merged {newer['id']} into {older['id']} and replied to {who['name']}.",
        ["helpdesk_close_ticket"], step("helpdesk_close_ticket", id=older["id"]))


@template("multi_step", 3, needs=("helpdesk_tickets", "spreadsheets_workbooks"), finds=price_list)
def quote_ticket(conn, rng, wb, items):
    """The helpdesk and the price list: answer a quote request at this year's prices."""
    options = []
    for t in _tickets(conn):
        m = re.fullmatch(r"Quote for (\d+) x .+", t["subject"])
        if m and t["status"] != "closed" and t["product"] in items:
            options.append((t, int(m.group(1))))
    if not options:
        return None
    t, qty = rng.choice(options)
    _, name, price = items[t["product"]]
    total = money(qty * price)
    gives, params = text_gives("body", total)
    return task_spec(
        f"Answer the quote request in ticket {t['id']}: reply publicly with the unit price from this "
        "year's price list and the total for the quantity asked (plain numbers with two decimals, "
        "like 1234.50), then mark the ticket solved.",
        [
  sql_check("reply", f"a public reply on {t['id']} gives the total {total}",
            f"select count(*) > 0 from helpdesk_comments where ticket = ? and public = 1 and {gives}",
            [t["id"], *params]),
  column_check("solved", f"{t['id']} is solved", "helpdesk_tickets", "status", t["id"], "solved"),
        ],
        [
            step("helpdesk_get_ticket", id=t["id"]),
            step("spreadsheets_list_workbooks", query="price list"),
            step("spreadsheets_read_sheet", workbook=wb, sheet="Products"),
            step("helpdesk_comment_ticket", id=t["id"],
    body=f"Hello, the {name} is {money(price)} per unit, so {qty} units come to {total}."),
            step("helpdesk_update_ticket", id=t["id"], status="solved"),
        ],
        f"Quoted {qty} x {name} at {money(price)} = {total} on {t['id']} and marked it solved.",
        ["helpdesk_close_ticket", "spreadsheets_write_cells"], step("helpdesk_close_ticket", id=t["id"]))


@template("multi_step", 4, needs=("helpdesk_tickets", "kb_articles", "tasks_items"))
def ticket_kb_followup(conn, rng):
    """The helpdesk, the knowledge base and the to-do lists: answer a product ticket with the fix the
    knowledge base gives, set it pending, and plan a follow-up for its assignee."""
    world = load_world(conn)
    guides = _troubleshooting(conn)
    options = [t for t in _tickets(conn) if t["product"] in guides and t["status"] in ("new", "open")
               and t["assignee"] and not t["subject"].startswith(("Still:", "Quote"))]
    if not options:
        return None
    t = rng.choice(options)
    guide = guides[t["product"]]
    fix = re.search(r"Fix: (.+)", guide["body"])
    if fix is None:
        return None
    due = day_after(world, 2)
    gives, params = text_gives("body", guide["id"], _article_ids(conn))
    return unsolved(conn, task_spec(
        f"Handle ticket {t['id']}: find the knowledge base article that fixes the customer's problem, "
        "reply publicly with its fix and the article id, set the ticket to pending, and add a task for "
        f"the ticket's assignee to follow up on {t['id']}, due {due}.",
        [
  sql_check("reply", f"a public reply on {t['id']} cites {guide['id']} (and no other article)",
            f"select count(*) > 0 from helpdesk_comments where ticket = ? and public = 1 and {gives}",
            [t["id"], *params]),
  column_check("pending", f"{t['id']} is pending", "helpdesk_tickets", "status", t["id"], "pending"),
  sql_check("task", f"a follow-up task on {t['id']} for {t['assignee']} due {due}",
            "select count(*) from tasks_items where instr(title, ?) > 0 and assignee = ? and due = ?",
            [t["id"], t["assignee"], due]),
        ],
        [
            step("helpdesk_get_ticket", id=t["id"]),
            step("kb_search_articles", query=t["subject"], category="troubleshooting"),
            step("kb_get_article", id=guide["id"]),
            step("helpdesk_comment_ticket", id=t["id"],
    body=f"Hello, please try this ({guide['id']}): {fix.group(1)} Let us know if it helps."),
            step("helpdesk_update_ticket", id=t["id"], status="pending"),
            step("tasks_create_task", title=f"Follow up on {t['id']}", assignee=t["assignee"], due=due),
        ],
        f"Replied on {t['id']} with {guide['id']}'s fix, set it pending, and planned a follow-up "
        f"for {t['assignee']} on {due}.",
        ["helpdesk_close_ticket", "kb_archive_article"], step("helpdesk_close_ticket", id=t["id"])))


@template("multi_step", 3, needs=("helpdesk_tickets", "kb_articles"))
def ticket_from_call(conn, rng):
    """A phone call becomes a ticket, answered from the knowledge base."""
    world = load_world(conn)
    guides = _troubleshooting(conn)
    products = {p["sku"]: p for p in world["products"]}
    customers = {o["id"] for o in world["organisations"] if o["kind"] == "customer"}
    callers = [p for p in world["people"] if p["org"] in customers]
    skus = sorted(s for s in guides if s in products)
    if not skus or not callers:
        return None
    sku, caller = rng.choice(skus), rng.choice(callers)
    product, guide = products[sku], guides[sku]
    problem = guide["title"][len(product["name"]) + 1:] if guide["title"].startswith(product["name"]) else guide["title"]
    fix = re.search(r"Fix: (.+)", guide["body"])
    if fix is None:
        return None
    top = max((int(i.split("-")[1]) for (i,) in conn.execute("select id from helpdesk_tickets")), default=1000)
    new_id = f"HD-{top + 1}"
    subject = f"{product['name']} {problem}"
    gives, params = text_gives("c.body", guide["id"], _article_ids(conn))
    return unsolved(conn, task_spec(
        f"{caller['name']} ({caller['email']}) just called: their {product['name']} ({sku}) {problem}. "
        "Open a ticket for them about it (with the product), then reply publicly on it with the fix from "
        "the knowledge base, citing the article id.",
        [
  sql_check("ticket", f"a ticket from {caller['email']} about {sku}",
            "select count(*) > 0 from helpdesk_tickets where requester = ? and product = ? and created = ?",
            [caller["email"], sku, world["today"]]),
  sql_check("reply", f"a public reply citing {guide['id']} (and no other article) on that ticket",
            "select count(*) > 0 from helpdesk_comments c join helpdesk_tickets t on t.id = c.ticket where "
            f"t.requester = ? and t.product = ? and t.created = ? and c.public = 1 and {gives}",
            [caller["email"], sku, world["today"], *params]),
        ],
        [
            step("kb_search_articles", query=subject),
            step("kb_get_article", id=guide["id"]),
            step("helpdesk_create_ticket", subject=subject, requester=caller["email"], product=sku,
    description=f"By phone: the {product['name']} {problem}."),
            step("helpdesk_comment_ticket", id=new_id, body=f"Hello {caller['first']}, per {guide['id']}: {fix.group(1)}"),
        ],
        f"Opened {new_id} for {caller['name']} and replied with the fix from {guide['id']}.",
        ["helpdesk_close_ticket", "helpdesk_merge_tickets"], step("helpdesk_close_ticket", id=new_id)))

"""The helpdesk app: seeding from the world, every tool against its schemas, merging duplicates, and
errors that name the bad field."""

from __future__ import annotations

import re

import pytest

from coworkenv.workspace.apps import ToolFailure
from coworkenv.workspace.apps import helpdesk as app


@pytest.fixture
def harness(app_harness):
    return app_harness("helpdesk")


@pytest.mark.parametrize("seed", [0, 9])
def test_tickets_come_from_the_world(harness, seed):
    conn, world = harness.state(seed), harness.world(seed)
    customers = {o["id"] for o in world["organisations"] if o["kind"] == "customer"}
    people = {p["email"]: p for p in world["people"]}
    company = world["company"]["id"]
    skus = {p["sku"] for p in world["products"]}
    rows = conn.execute("select requester, org, assignee, product, created from helpdesk_tickets").fetchall()
    assert 15 <= len(rows) <= 30
    for requester, org, assignee, product, created in rows:
        assert people[requester]["org"] == org and org in customers
        assert assignee is None or people[assignee]["org"] == company
        assert product is None or product in skus
        assert created <= world["today"]
    # a duplicate to merge, and most product problems are covered by the knowledge base
    assert conn.execute("select count(*) from helpdesk_tickets d join helpdesk_tickets o on d.subject = 'Still: ' || "
                        "o.subject and d.requester = o.requester").fetchone()[0] == 1
    covered = {p["sku"] for p in app.supported_products(world)}
    assert len({p for (p,) in conn.execute("select product from helpdesk_tickets")} & covered) >= 5


@pytest.mark.parametrize("seed", [0, 11])
def test_a_ticket_about_a_covered_product_reports_the_problem_its_kb_article_solves(app_harness, seed):
    conn = app_harness("helpdesk", "kb").state(seed)
    guides = dict(conn.execute("select product, title from kb_articles where category = 'troubleshooting'"))
    reported = [(product, subject.removeprefix("Still: ")) for product, subject in conn.execute(
        "select product, subject from helpdesk_tickets where product is not null and subject not like 'Quote for %'")]
    covered = [(product, subject) for product, subject in reported if product in guides]
    assert len(covered) >= 5
    assert all(subject == guides[product] for product, subject in covered)


def test_every_tool_happy_path(harness):
    conn, world = harness.state(5), harness.world(5)
    user, today = world["user"]["email"], world["today"]
    listed = harness.call(conn, "list_tickets", {})
    assert listed["count"] >= 10 and all(t["status"] != "closed" for t in listed["tickets"])
    dates = [t["created"] for t in listed["tickets"]]
    assert dates == sorted(dates, reverse=True)
    assert harness.call(conn, "list_tickets", {"status": "closed"})["count"] >= 0
    first = listed["tickets"][0]
    assert harness.call(conn, "list_tickets", {"organisation": first["organisation"].upper()[:4]})["count"] >= 1
    assert harness.call(conn, "list_tickets", {"requester": first["requester"]})["tickets"][0]["requester"] == first["requester"]
    customer = next(p for p in world["people"] if p["org"] == world["organisations"][1]["id"])
    created = harness.call(conn, "create_ticket", {"subject": "VPN down", "description": "Cannot connect since 9:00.",
                                           "requester": customer["email"], "priority": "high",
                                           "product": world["products"][0]["sku"].lower()})
    assert (created["status"], created["organisation"], created["created"]) == ("new", world["organisations"][1]["name"],
                                                                                today)
    assert int(created["id"][3:]) == max(int(t["id"][3:]) for t in listed["tickets"]) + 1
    got = harness.call(conn, "get_ticket", {"id": created["id"].lower()})
    assert got["description"] == "Cannot connect since 9:00." and got["comments"] == []
    commented = harness.call(conn, "comment_ticket", {"id": created["id"], "body": "Looking into it.", "public": False})
    assert commented["status"] == "open" and commented["comments"][-1]["author"] == user
    assert commented["comments"][-1]["public"] is False
    agent = next(p for p in world["people"] if p["org"] == world["company"]["id"] and p["department"] == "Support")
    assert harness.call(conn, "assign_ticket", {"id": created["id"], "assignee": agent["email"]})["assignee"] == agent["email"]
    updated = harness.call(conn, "update_ticket", {"id": created["id"], "status": "pending", "priority": "urgent"})
    assert (updated["status"], updated["priority"]) == ("pending", "urgent")
    other = harness.call(conn, "create_ticket", {"subject": "VPN still down", "description": "Again.",
                                         "requester": customer["email"]})
    merged = harness.call(conn, "merge_tickets", {"source": other["id"], "target": created["id"]})
    assert merged["id"] == created["id"] and other["id"] in merged["comments"][-1]["body"]
    source = harness.call(conn, "get_ticket", {"id": other["id"]})
    assert (source["status"], source["merged_into"]) == ("closed", created["id"])
    closed = harness.call(conn, "close_ticket", {"id": created["id"], "resolution": "Router replaced."})
    assert closed["status"] == "closed" and closed["comments"][-1]["body"] == "Resolution: Router replaced."


def test_resources_name_real_tools():
    names = {t["name"] for t in app.TOOLS}
    for resource in app.RESOURCES:
        assert resource["get_tool"] in names and resource["list_tool"] in names


@pytest.mark.parametrize("tool, args, message", [
    ("get_ticket", {"id": "HD-1"}, "id: no ticket with id 'HD-1'"),
    ("create_ticket", {"subject": "S", "description": "D", "requester": "x@y.example"}, "requester: nobody"),
    ("create_ticket", {"subject": "S", "description": "D", "requester": "{customer}", "product": "SKU-0"},
     "product: no product with SKU 'SKU-0'"),
    ("assign_ticket", {"id": "{open}", "assignee": "{customer}"}, "is not a colleague"),
    ("update_ticket", {"id": "{open}"}, "nothing to update"),
    ("update_ticket", {"id": "{open}", "priority": "asap"}, "priority must be one of low, normal, high, urgent"),
    ("comment_ticket", {"id": "{closed}", "body": "hi"}, "is closed"),
    ("merge_tickets", {"source": "{open}", "target": "{open}"}, "source and target are the same ticket"),
    ("merge_tickets", {"source": "{closed}", "target": "{open}"}, "source: ticket"),
    ("list_tickets", {"status": "done"}, "status must be one of new, open, pending, solved, closed"),
    ("list_tickets", {"team": "x"}, "unknown argument(s) team"),
])
def test_errors_name_the_bad_field(harness, tool, args, message):
    conn = harness.state(4)
    closed = conn.execute("select id from helpdesk_tickets where status = 'closed' order by id").fetchone()
    if closed is None:
        closed = (app.handle(conn, "close_ticket", {"id": conn.execute("select id from helpdesk_tickets").fetchone()[0]})
                  ["id"],)
    fill = {"open": conn.execute("select id from helpdesk_tickets where status != 'closed' order by id").fetchone()[0],
            "closed": closed[0], "customer": conn.execute("select requester from helpdesk_tickets").fetchone()[0]}
    args = {k: v.format(**fill) if isinstance(v, str) else v for k, v in args.items()}
    with pytest.raises(ToolFailure, match=re.escape(message)):
        app.handle(conn, tool, args)

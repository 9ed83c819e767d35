"""The CRM app: accounts, contacts and deals drawn from the world, every tool against its schemas,
its distractors, and errors that name what was wrong."""

from __future__ import annotations

import sqlite3

import pytest

from coworkenv.workspace.apps import ALL_APPS, ToolFailure

APP = ALL_APPS["crm"]


@pytest.fixture
def harness(app_harness):
    return app_harness("crm")


def one(conn: sqlite3.Connection, query: str, params: tuple = ()) -> tuple:
    return conn.execute(query, params).fetchone()


def test_seed_is_deterministic_and_varies_with_the_seed(harness):
    assert harness.dump(harness.reseed(3)) == harness.dump(harness.state(3))
    assert harness.dump(harness.state(3)) != harness.dump(harness.state(4))
    deals = {seed: {n for (n,) in harness.state(seed).execute("select name from crm_deals")} for seed in range(3)}
    assert deals[0] != deals[1] != deals[2]


@pytest.mark.parametrize("seed", range(4))
def test_accounts_contacts_and_owners_come_from_the_world(harness, seed):
    conn, world = harness.state(seed), harness.world(seed)
    orgs = {o["id"]: o for o in world["organisations"]}
    people = {p["email"]: p for p in world["people"]}
    active = conn.execute("select org, name, type from crm_accounts where status = 'active'").fetchall()
    assert {org for org, _, _ in active} == {o for o, v in orgs.items() if v["kind"] in ("customer", "partner")}
    for org, name, kind in active:
        assert (name, kind) == (orgs[org]["name"], orgs[org]["kind"])
    for email, account in conn.execute("select c.email, a.org from crm_contacts c join crm_accounts a "
                                       "on a.id = c.account"):
        assert people[email]["org"] == account
    for (owner,) in conn.execute("select owner from crm_accounts union select owner from crm_deals"):
        assert people[owner]["org"] == world["company"]["id"]
    codes = {p["code"] for p in world["projects"]}
    assert {c for (c,) in conn.execute("select project from crm_deals where project is not null")} <= codes
    # distractors: an inactive near-duplicate account, a deal entered twice, an activity logged twice
    duplicate = one(conn, "select a.name, b.name from crm_accounts a join crm_accounts b on a.org = b.org "
                          "and a.status = 'active' and b.status = 'inactive'")
    assert duplicate and duplicate[1].startswith(duplicate[0] + " ")
    assert one(conn, "select count(*) from crm_deals c join crm_deals o on c.name = o.name || ' (copy)' "
                     "and c.account = o.account") == (1,)
    assert one(conn, "select count(*) from crm_activities a join crm_activities b on a.subject = b.subject "
                     "and a.date = b.date and a.account = b.account and a.id < b.id")[0] >= 1


def test_every_tool_in_a_session(harness):
    conn, world = harness.state(3), harness.world(3)
    account = one(conn, "select id, name from crm_accounts where status = 'active' and type = 'customer' "
                        "and id in (select account from crm_deals where stage = 'proposal' or stage = 'qualification' "
                        "or stage = 'prospecting' or stage = 'negotiation') order by id")
    found = harness.call(conn, "search_accounts", {"query": account[1].lower()})
    assert account[0] in [a["id"] for a in found["accounts"]]
    full = harness.call(conn, "get_account", {"id": account[0]})
    assert full["contacts"] and full["contacts"][0]["primary"] and full["open_deal_list"]
    assert full["open_deals"] == len(full["open_deal_list"])
    assert full["open_amount"] == sum(d["amount"] for d in full["open_deal_list"])
    deals = harness.call(conn, "list_deals", {"account_id": account[0], "open_only": True})
    assert deals["total_amount"] == full["open_amount"] and deals["deals"][0]["currency"] == "GBP"
    deal = deals["deals"][0]
    updated = harness.call(conn, "update_deal", {"id": deal["id"], "stage": "negotiation", "amount": deal["amount"] + 100})
    assert updated["deal"]["amount"] == deal["amount"] + 100 and "amount" in updated["updated_fields"]
    assert updated["previous"]["amount"] == deal["amount"] and updated["deal"]["updated"] == world["today"]
    created = harness.call(conn, "create_deal", {"account_id": account[0], "name": "Pilot", "amount": 5000})
    assert (created["stage"], created["owner"], created["account_name"]) == ("prospecting", world["user"]["email"],
                                                                              account[1])
    contact = full["contacts"][-1]
    logged = harness.call(conn, "log_activity", {"account_id": account[0], "kind": "call", "subject": "Kick-off",
                                         "deal_id": created["id"], "contact_id": contact["id"], "notes": "Went well"})
    assert (logged["date"], logged["contact_name"], logged["deal_id"]) == (world["today"], contact["name"], created["id"])
    activities = harness.call(conn, "list_activities", {"account_id": account[0], "kind": "call"})
    assert activities["activities"][0]["id"] == logged["id"]
    assert harness.call(conn, "delete_activity", {"id": logged["id"]}) == {"id": logged["id"], "subject": "Kick-off",
                                                                    "deleted": True}
    harness.call(conn, "log_activity", {"account_id": account[0], "kind": "note", "subject": "n", "deal_id": created["id"]})
    removed = harness.call(conn, "delete_deal", {"id": created["id"]})
    assert removed["deleted"] and removed["activities_unlinked"] == 1
    assert one(conn, "select count(*) from crm_deals where id = ?", (created["id"],)) == (0,)
    names = {"search_accounts", "get_account", "list_deals", "update_deal", "create_deal", "log_activity",
             "list_activities", "delete_activity", "delete_deal"}
    assert names == {t["name"] for t in APP.TOOLS}


def test_search_finds_accounts_by_contact_and_shows_the_inactive_duplicate(harness):
    conn = harness.state(3)
    contact, account = one(conn, "select name, account from crm_contacts order by id")
    assert [a["id"] for a in harness.call(conn, "search_accounts", {"query": contact})["accounts"]] == [account]
    name = one(conn, "select a.name from crm_accounts a join crm_accounts b on a.org = b.org and a.id != b.id "
                     "and a.status = 'active'")[0]
    both = harness.call(conn, "search_accounts", {"query": name})["accounts"]
    assert {a["status"] for a in both} == {"active", "inactive"}
    assert [a["status"] for a in harness.call(conn, "search_accounts", {"query": name, "status": "active"})["accounts"]] == [
        "active"]


def test_read_tools_do_not_change_state(harness):
    conn = harness.state(3)
    before = harness.dump(conn)
    account = one(conn, "select id from crm_accounts order by id")[0]
    harness.call(conn, "search_accounts", {})
    harness.call(conn, "get_account", {"id": account})
    harness.call(conn, "list_deals", {"stage": "closed_won"})
    harness.call(conn, "list_activities", {"limit": 3})
    assert harness.dump(conn) == before


@pytest.mark.parametrize("tool,args,match", [
    ("get_account", {"id": "ACC-0"}, "ACC-0"),
    ("update_deal", {"id": "D-0", "stage": "proposal"}, "D-0"),
    ("delete_deal", {"id": "D-0"}, "D-0"),
    ("delete_activity", {"id": "ACT-0"}, "ACT-0"),
    ("list_deals", {"account_id": "ACC-0"}, "ACC-0"),
    ("list_deals", {"stage": "won"}, "stage"),
    ("create_deal", {"account_id": "ACC-0", "name": "x", "amount": 1}, "ACC-0"),
    ("log_activity", {"account_id": "ACC-0", "kind": "call", "subject": "s"}, "ACC-0"),
    ("search_accounts", {"type": "supplier"}, "type"),
    ("search_accounts", {"bogus": True}, "bogus"),
    ("frobnicate", {}, "unknown tool"),
])
def test_errors_name_what_was_wrong(harness, tool, args, match):
    conn = harness.state(3)
    before = harness.dump(conn)
    with pytest.raises(ToolFailure, match=match):
        APP.handle(conn, tool, args)
    assert harness.dump(conn) == before


def test_writes_check_their_values(harness):
    conn = harness.state(3)
    account, other = conn.execute("select id from crm_accounts where status = 'active' order by id limit 2").fetchall()
    deal = one(conn, "select id, stage, amount from crm_deals where account = ? order by id", account)
    foreign_deal = one(conn, "select id from crm_deals where account = ? order by id", other)[0]
    foreign_contact = one(conn, "select id from crm_contacts where account = ? order by id", other)[0]
    with pytest.raises(ToolFailure, match="nothing to update"):
        APP.handle(conn, "update_deal", {"id": deal[0], "stage": deal[1], "amount": deal[2]})
    with pytest.raises(ToolFailure, match="amount"):
        APP.handle(conn, "update_deal", {"id": deal[0], "amount": -5})
    with pytest.raises(ToolFailure, match="close_date"):
        APP.handle(conn, "update_deal", {"id": deal[0], "close_date": "31/12/2026"})
    with pytest.raises(ToolFailure, match="deal_id"):
        APP.handle(conn, "log_activity", {"account_id": account[0], "kind": "call", "subject": "s",
                                          "deal_id": foreign_deal})
    with pytest.raises(ToolFailure, match="contact_id"):
        APP.handle(conn, "log_activity", {"account_id": account[0], "kind": "call", "subject": "s",
                                          "contact_id": foreign_contact})
    with pytest.raises(ToolFailure, match="kind"):
        APP.handle(conn, "log_activity", {"account_id": account[0], "kind": "fax", "subject": "s"})
    with pytest.raises(ToolFailure, match="amount"):
        APP.handle(conn, "create_deal", {"account_id": account[0], "name": "x"})


def test_new_ids_follow_the_largest(harness):
    conn = harness.state(3)
    account = one(conn, "select id from crm_accounts order by id")[0]
    top = max(int(i[2:]) for (i,) in conn.execute("select id from crm_deals"))
    made = harness.call(conn, "create_deal", {"account_id": account, "name": "n", "amount": 1, "stage": "proposal",
                                      "close_date": "2027-01-15"})
    assert made["id"] == f"D-{top + 1}" and made["close_date"] == "2027-01-15"

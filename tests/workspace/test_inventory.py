"""The inventory app: the world's products in stock per warehouse, purchase and sales orders, every
tool against its schemas, stock that moves only through the tools, and errors that name what was wrong."""

from __future__ import annotations

import sqlite3

import pytest

from coworkenv.workspace.apps import ALL_APPS, ToolFailure

APP = ALL_APPS["inventory"]


@pytest.fixture
def harness(app_harness):
    return app_harness("inventory")


def one(conn: sqlite3.Connection, query: str, params: tuple = ()) -> tuple:
    return conn.execute(query, params).fetchone()


def stock(conn: sqlite3.Connection, sku: str, warehouse: str) -> tuple[int, int]:
    return one(conn, "select on_hand, reserved from inventory_stock where sku = ? and warehouse = ?", (sku, warehouse))


def test_what_is_seeded_varies_with_the_seed(harness):
    # (determinism itself: test_apps.py's contract, for every app)
    orders = {seed: {i for (i,) in harness.state(seed).execute("select id from inventory_orders")} for seed in range(3)}
    assert orders[0] != orders[1] != orders[2]


@pytest.mark.parametrize("seed", range(4))
def test_products_suppliers_and_customers_come_from_the_world(harness, seed):
    conn, world = harness.state(seed), harness.world(seed)
    orgs = {o["id"]: o for o in world["organisations"]}
    products = {p["sku"]: p for p in world["products"]}
    for sku, name, supplier, active in conn.execute("select sku, name, supplier, active from inventory_products"):
        base = products[sku if active else sku.rsplit("-", 1)[0]]
        assert supplier == base["supplier"] and orgs[supplier]["kind"] == "vendor"
        assert name == base["name"] if active else name == base["name"] + " (previous model)"
    assert one(conn, "select count(*) from inventory_products where active = 0") == (1,)
    for kind, org in conn.execute("select kind, counterparty from inventory_orders"):
        assert orgs[org]["kind"] == ("vendor" if kind == "purchase" else "customer")
    assert one(conn, "select city from inventory_warehouses where id = 'WH-1'") == (world["company"]["city"],)
    # what open sales orders hold is reserved, and never more than is on hand
    held = dict(((sku, wh), q) for sku, wh, q in conn.execute(
        "select l.sku, o.warehouse, sum(l.quantity) from inventory_order_lines l join inventory_orders o on "
        "o.id = l.order_id where o.kind = 'sales' and o.status in ('pending', 'confirmed') group by 1, 2"))
    for sku, wh, on_hand, reserved in conn.execute("select sku, warehouse, on_hand, reserved from inventory_stock"):
        assert reserved == held.get((sku, wh), 0) and on_hand >= reserved


def test_every_tool_in_a_session(harness):
    conn, world = harness.state(3), harness.world(3)
    product = one(conn, "select sku, name, supplier_name from inventory_products where active = 1 and category = "
                        "'hardware' order by sku")
    found = harness.call(conn, "search_products", {"query": product[1].split()[-1], "category": "hardware"})
    assert product[0] in [p["sku"] for p in found["products"]]
    level = harness.call(conn, "get_stock", {"sku": product[0]})
    assert len(level["warehouses"]) == 3 and level["total_on_hand"] == sum(w["on_hand"] for w in level["warehouses"])
    order = harness.call(conn, "create_purchase_order", {"warehouse": "WH-2", "lines": [{"sku": product[0], "quantity": 7}],
                                                 "note": "restock"})
    assert (order["status"], order["counterparty"], order["created"]) == ("ordered", product[2], world["today"])
    assert harness.call(conn, "get_stock", {"sku": product[0]})["inbound"] == level["inbound"] + 7
    assert harness.call(conn, "get_order", {"id": order["id"]}) == order
    listed = harness.call(conn, "list_orders", {"kind": "purchase", "sku": product[0], "status": "ordered"})
    assert order["id"] in [o["id"] for o in listed["orders"]]
    shipped = harness.call(conn, "update_order_status", {"id": order["id"], "status": "shipped"})
    assert shipped["previous_status"] == "ordered"
    before = stock(conn, product[0], "WH-2")[0]
    partial = harness.call(conn, "receive_delivery", {"id": order["id"], "lines": [{"sku": product[0], "quantity": 3}]})
    assert partial["order"]["status"] == "partially_received" and partial["stock"][0]["on_hand"] == before + 3
    rest = harness.call(conn, "receive_delivery", {"id": order["id"]})
    assert rest["received"] == [{"sku": product[0], "quantity": 4}] and rest["order"]["status"] == "received"
    assert stock(conn, product[0], "WH-2")[0] == before + 7
    sale = one(conn, "select id, warehouse from inventory_orders where kind = 'sales' and status in "
                     "('pending', 'confirmed') order by id")
    lines = conn.execute("select sku, quantity from inventory_order_lines where order_id = ?", (sale[0],)).fetchall()
    held = {sku: stock(conn, sku, sale[1]) for sku, _ in lines}
    cancelled = harness.call(conn, "cancel_order", {"id": sale[0], "reason": "customer withdrew"})
    assert cancelled["order"]["status"] == "cancelled" and cancelled["order"]["note"] == "Cancelled: customer withdrew"
    for sku, qty in lines:
        assert stock(conn, sku, sale[1]) == (held[sku][0], held[sku][1] - qty)
    assert {t["name"] for t in APP.TOOLS} == {"search_products", "get_stock", "create_purchase_order", "get_order",
                                               "list_orders", "update_order_status", "receive_delivery",
                                               "cancel_order"}


def test_shipping_a_sales_order_takes_its_units_out(harness):
    conn = harness.state(3)
    sale = one(conn, "select id, warehouse, status from inventory_orders where kind = 'sales' and status in "
                     "('pending', 'confirmed') order by id")
    lines = conn.execute("select sku, quantity from inventory_order_lines where order_id = ?", (sale[0],)).fetchall()
    if sale[2] == "pending":
        harness.call(conn, "update_order_status", {"id": sale[0], "status": "confirmed"})
    before = {sku: stock(conn, sku, sale[1]) for sku, _ in lines}
    harness.call(conn, "update_order_status", {"id": sale[0], "status": "shipped"})
    for sku, qty in lines:
        assert stock(conn, sku, sale[1]) == (before[sku][0] - qty, before[sku][1] - qty)
    assert harness.call(conn, "update_order_status", {"id": sale[0], "status": "delivered"})["order"]["status"] == "delivered"
    with pytest.raises(ToolFailure, match="no next status"):
        APP.handle(conn, "update_order_status", {"id": sale[0], "status": "shipped"})
    with pytest.raises(ToolFailure, match="can no longer be cancelled"):
        APP.handle(conn, "cancel_order", {"id": sale[0]})


def test_discontinued_products_are_hidden_and_cannot_be_ordered(harness):
    conn = harness.state(3)
    sku = one(conn, "select sku from inventory_products where active = 0")[0]
    assert sku not in [p["sku"] for p in harness.call(conn, "search_products", {"limit": 100})["products"]]
    assert sku in [p["sku"] for p in harness.call(conn, "search_products", {"include_discontinued": True})["products"]]
    with pytest.raises(ToolFailure, match="discontinued"):
        APP.handle(conn, "create_purchase_order", {"warehouse": "WH-1", "lines": [{"sku": sku, "quantity": 1}]})


def test_read_tools_do_not_change_state(harness):
    conn = harness.state(3)
    before = harness.dump(conn)
    sku = one(conn, "select sku from inventory_products order by sku")[0]
    order = one(conn, "select id from inventory_orders order by id")[0]
    harness.call(conn, "search_products", {"below_reorder": True})
    harness.call(conn, "get_stock", {"sku": sku, "warehouse": "wh-1"})
    harness.call(conn, "list_orders", {"warehouse": "WH-3"})
    harness.call(conn, "get_order", {"id": order})
    assert harness.dump(conn) == before


@pytest.mark.parametrize("tool,args,match", [
    ("get_order", {"id": "PO-0"}, "PO-0"),
    ("cancel_order", {"id": "SO-0"}, "SO-0"),
    ("receive_delivery", {"id": "PO-0"}, "PO-0"),
    ("update_order_status", {"id": "PO-0", "status": "shipped"}, "PO-0"),
    ("get_stock", {"sku": "SKU-0"}, "SKU-0"),
    ("get_stock", {"sku": "SKU-0", "warehouse": "WH-1"}, "SKU-0"),
    ("list_orders", {"warehouse": "Atlantis"}, "Atlantis.*warehouses: WH-1"),
    ("create_purchase_order", {"warehouse": "WH-1", "lines": []}, "lines"),
    ("create_purchase_order", {"warehouse": "WH-1", "lines": [{"sku": "SKU-0", "quantity": 1}]},
     r"lines\[0\]\.sku"),
    ("search_products", {"bogus": 1}, "bogus"),
    ("frobnicate", {}, "unknown tool"),
])
def test_errors_name_what_was_wrong(harness, tool, args, match):
    conn = harness.state(3)
    before = harness.dump(conn)
    with pytest.raises(ToolFailure, match=match):
        APP.handle(conn, tool, args)
    assert harness.dump(conn) == before


def test_orders_keep_to_their_rules(harness):
    conn = harness.state(3)
    a, b = conn.execute("select sku from inventory_products where active = 1 group by supplier order by sku "
                        "limit 2").fetchall()
    with pytest.raises(ToolFailure, match="mix suppliers"):
        APP.handle(conn, "create_purchase_order", {"warehouse": "WH-1", "lines": [{"sku": a[0], "quantity": 1},
                                                                                   {"sku": b[0], "quantity": 1}]})
    with pytest.raises(ToolFailure, match=r"lines\[0\]\.quantity"):
        APP.handle(conn, "create_purchase_order", {"warehouse": "WH-1", "lines": [{"sku": a[0], "quantity": 0}]})
    done = one(conn, "select id from inventory_orders where status in ('received', 'delivered', 'cancelled') "
                     "order by id")[0]
    with pytest.raises(ToolFailure, match="can no longer be cancelled|only purchase orders"):
        APP.handle(conn, "cancel_order", {"id": done})
    order = harness.call(conn, "create_purchase_order", {"warehouse": "WH-1", "lines": [{"sku": a[0], "quantity": 4}]})
    with pytest.raises(ToolFailure, match="receive_delivery"):
        APP.handle(conn, "update_order_status", {"id": order["id"], "status": "received"})
    with pytest.raises(ToolFailure, match="more than the 4"):
        APP.handle(conn, "receive_delivery", {"id": order["id"], "lines": [{"sku": a[0], "quantity": 5}]})

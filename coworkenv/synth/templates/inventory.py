"""Templates about inventory: stock levels, restocking, purchase orders and deliveries (a purchase
order's supplier sends finance its invoices).

Nothing is constant: what a task names is read from its workspace's initial state, and every choice is drawn from ``rng``.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ...workspace import SqlCheck
from ._kit import answer_check, column_check, first_id, num, query_rows, sql_check, step, task_spec, template, unsolved, world_today


def _received_in_full(order: dict[str, Any]) -> SqlCheck:
    """The check that the whole delivery of a purchase order was recorded."""
    return column_check("received", f"{order['id']} is received", "inventory_orders", "status", order["id"], "received")


# --------------------------------------------------------------------------- lookup


@template("lookup", 1, needs=("inventory_stock", "inventory_products"),
          draws="select s.*, p.name, w.name as warehouse_name from inventory_stock s join inventory_products p "
                "on p.sku = s.sku join inventory_warehouses w on w.id = s.warehouse where p.active = 1 "
                "order by s.sku, s.warehouse")
def inventory_stock_level(conn, rng, row):
    available = row["on_hand"] - row["reserved"]
    below = available < row["reorder_point"]
    open_order = conn.execute("select id from inventory_orders where status in ('pending', 'confirmed', 'draft', "
                              "'ordered') order by id").fetchone()
    return task_spec(
        f"How many units of {row['name']} are available (on hand minus reserved) in the {row['warehouse_name']}, "
        "and is that below its reorder point there?",
        [answer_check("answer", f"the answer gives {available} available", str(available))],
        [step("inventory_search_products", query=row["name"]),
         step("inventory_get_stock", sku=row["sku"], warehouse=row["warehouse"])],
        f"{available} {row['name']} are available in the {row['warehouse_name']} ({row['on_hand']} on hand, "
        f"{row['reserved']} reserved); that is {'below' if below else 'not below'} its reorder point of "
        f"{row['reorder_point']}.",
        ["inventory_cancel_order", "inventory_create_purchase_order"],
        step("inventory_cancel_order", id=open_order[0]) if open_order
        else step("inventory_create_purchase_order", warehouse=row["warehouse"],
                  lines=[{"sku": row["sku"], "quantity": 1}]))


# --------------------------------------------------------------------------- single write


@template("single_write", 2, needs=("inventory_stock", "inventory_orders"))
def inventory_restock(conn, rng):
    low = query_rows(conn, "select s.*, p.name, p.unit, w.name as warehouse_name from inventory_stock s join "
                           "inventory_products p on p.sku = s.sku join inventory_warehouses w on w.id = s.warehouse "
                           "where p.active = 1 order by (s.on_hand - s.reserved < s.reorder_point) desc, s.sku, s.warehouse")
    if not low:
        return None
    row = rng.choice(low[:6])
    qty = max(row["reorder_point"] * 2 - (row["on_hand"] - row["reserved"]), 5)
    today = world_today(conn)
    return unsolved(conn, task_spec(
        f"Order {qty} {row['unit']}(s) of {row['name']} from its supplier, to be delivered to the "
        f"{row['warehouse_name']}.",
        [sql_check("ordered", f"a purchase order for {qty} x {row['sku']} to {row['warehouse']} was placed today",
                   "select count(*) from inventory_orders o join inventory_order_lines l on l.order_id = o.id where "
                   "o.kind = 'purchase' and o.status = 'ordered' and o.warehouse = ? and o.created = ? and l.sku = ? and "
                   "l.quantity = ?", [row["warehouse"], today, row["sku"], qty])],
        [step("inventory_search_products", query=row["name"]),
         step("inventory_create_purchase_order", warehouse=row["warehouse"],
              lines=[{"sku": row["sku"], "quantity": qty}])],
        f"Ordered {qty} {row['name']} for the {row['warehouse_name']}.",
        ["inventory_cancel_order"],
        step("inventory_cancel_order", id=first_id(conn, "inventory_orders"))))


_NEXT = {("sales", "confirmed"): ("shipped", "has left the warehouse; mark it shipped"),
         ("sales", "pending"): ("confirmed", "was accepted; confirm it"),
         ("sales", "shipped"): ("delivered", "reached the customer; mark it delivered"),
         ("purchase", "draft"): ("ordered", "was sent to the supplier; mark it ordered"),
         ("purchase", "ordered"): ("shipped", "was dispatched by the supplier; mark it shipped")}
"""(order kind, status) -> the status an order moves on to, and what happened that moves it."""


def _movable(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Orders whose status moves on (``_NEXT``)."""
    return [o for o in query_rows(conn, "select * from inventory_orders order by id") if (o["kind"], o["status"]) in _NEXT]


@template("single_write", 2, needs=("inventory_orders",), draws=_movable)
def inventory_advance_order(conn, rng, order):
    status, what = _NEXT[(order["kind"], order["status"])]
    return task_spec(
        f"{order['kind'].capitalize()} order {order['id']} ({order['counterparty_name']}) {what}.",
        [column_check("status", f"{order['id']} is {status}", "inventory_orders", "status", order["id"], status)],
        [step("inventory_get_order", id=order["id"]), step("inventory_update_order_status", id=order["id"],
                                                           status=status)],
        f"{order['id']} is now {status}.",
        ["inventory_cancel_order"], step("inventory_cancel_order", id=order["id"]))


@template("single_write", 2, needs=("inventory_orders", "inventory_order_lines"),
          draws="select * from inventory_orders where kind = 'purchase' and status in ('ordered', 'shipped', "
                "'partially_received') order by id")
def inventory_receive(conn, rng, order):
    lines = query_rows(conn, "select l.*, p.name from inventory_order_lines l join inventory_products p on p.sku = l.sku "
                             "where order_id = ? order by l.rowid", (order["id"],))
    line = next((ln for ln in lines if ln["quantity"] - ln["received"] >= 2), None)
    if line is not None and rng.random() < 0.4:  # a partial delivery
        part = (line["quantity"] - line["received"]) // 2
        instruction = (f"Part of purchase order {order['id']} from {order['counterparty_name']} arrived: {part} of "
                       f"{line['name']}, nothing else yet. Record that delivery.")
        check = sql_check("received", f"{line['received'] + part} of {line['sku']} received on {order['id']}",
                          "select count(*) from inventory_order_lines l join inventory_orders o on o.id = l.order_id where "
                          "o.id = ? and o.status = 'partially_received' and l.sku = ? and l.received = ?",
                          [order["id"], line["sku"], line["received"] + part])
        receive = step("inventory_receive_delivery", id=order["id"], lines=[{"sku": line["sku"], "quantity": part}])
        answer = f"Recorded {part} {line['name']} received on {order['id']}."
    else:
        instruction = (f"The delivery for purchase order {order['id']} from {order['counterparty_name']} arrived "
                       "complete. Record it in inventory.")
        check, receive = _received_in_full(order), step("inventory_receive_delivery", id=order["id"])
        answer = f"Recorded the complete delivery of {order['id']}."
    return task_spec(instruction, [check], [step("inventory_get_order", id=order["id"]), receive], answer,
                     ["inventory_cancel_order"], step("inventory_cancel_order", id=order["id"]))


@template("single_write", 2, needs=("inventory_orders",),
          draws="select * from inventory_orders where kind = 'purchase' and status in ('draft', 'ordered') order by id")
def inventory_cancel_po(conn, rng, order):
    return task_spec(
        f"{order['counterparty_name']} cannot deliver our purchase order {order['id']}. Cancel it, noting that the "
        "supplier cannot deliver.",
        [column_check("cancelled", f"{order['id']} is cancelled", "inventory_orders", "status", order["id"], "cancelled")],
        [step("inventory_list_orders", kind="purchase", counterparty=order["counterparty_name"]),
         step("inventory_cancel_order", id=order["id"], reason="The supplier cannot deliver.")],
        f"Cancelled {order['id']}.",
        ["inventory_receive_delivery"], step("inventory_receive_delivery", id=order["id"]))


# --------------------------------------------------------------------------- multi-step chains


@template("multi_step", 3, needs=("inventory_orders", "finance_invoices"))
def inventory_delivery_payables(conn, rng):
    """inventory (receive a supplier's delivery) + finance (what is still owed to that supplier)."""
    orders = query_rows(conn, "select * from inventory_orders where kind = 'purchase' and status in ('ordered', 'shipped') "
                              "order by id")
    candidates = []
    for order in orders:
        needle = order["counterparty_name"].lower()
        owed = [i for i in query_rows(conn, "select * from finance_invoices where direction = 'payable' and status = 'open' "
                                            "order by id")
                if needle in f"{i['id']} {i['counterparty']} {i['description']}".lower()]
        if owed:
            candidates.append((order, owed))
    if not candidates:
        return None
    order, owed = rng.choice(candidates)
    total = round(sum(i["total"] for i in owed) + 1e-9, 2)
    return task_spec(
        f"Purchase order {order['id']} from {order['counterparty_name']} arrived in full: record the delivery. Then "
        f"tell me how much we still owe {order['counterparty_name']} in open invoices, in total (a plain number).",
        [_received_in_full(order),
         answer_check("owed", f"the answer gives the {total:.2f} owed", num(total))],
        [step("inventory_get_order", id=order["id"]), step("inventory_receive_delivery", id=order["id"]),
         step("finance_list_invoices", query=order["counterparty_name"], direction="payable", status="open")],
        f"Recorded the delivery of {order['id']}. We owe {order['counterparty_name']} {total:.2f} on {len(owed)} "
        "open invoice(s).",
        ["finance_mark_invoice_paid", "inventory_cancel_order"], step("finance_mark_invoice_paid", id=owed[0]["id"]))

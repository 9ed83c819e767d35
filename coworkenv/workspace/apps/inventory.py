"""Inventory app: the world's products with stock per warehouse, purchase orders to their suppliers
and sales orders from customers. Standard library only.

Products are the world's hardware, office supplies and software seats, bought from the world's
vendor that supplies them and sold to its customers; warehouses stand in the company's city and
two others of the world. Stock moves only through the tools: a sales order reserves what it
holds until it ships, a delivery adds what was received. Distractors: a discontinued previous
model beside its successor, cancelled and fully received orders of the same products.
"""

from __future__ import annotations

import datetime as dt
import random
import sqlite3
from typing import Any

from ._base import AppMeta, ToolFailure, Tools, check_date, currency, next_id, one_row, opt_bool, opt_int, opt_str, req_str
from ._base import object_schema as _obj

NAME = "inventory"
DESCRIPTION = ("Inventory and orders: products with stock per warehouse, purchase orders to suppliers and sales "
               "orders from customers.")

SCHEMA = """
CREATE TABLE IF NOT EXISTS inventory_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS inventory_warehouses (id TEXT PRIMARY KEY, name TEXT NOT NULL, city TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS inventory_products (
    sku       TEXT PRIMARY KEY,               -- e.g. 'SKU-2521'
    name      TEXT NOT NULL,
    category  TEXT NOT NULL,
    unit      TEXT NOT NULL,
    price     REAL NOT NULL,                  -- unit purchase price
    supplier  TEXT NOT NULL,                  -- the world organisation id
    supplier_name TEXT NOT NULL,
    active    INTEGER NOT NULL DEFAULT 1      -- 0: discontinued
);
CREATE TABLE IF NOT EXISTS inventory_stock (
    sku TEXT NOT NULL, warehouse TEXT NOT NULL,
    on_hand INTEGER NOT NULL, reserved INTEGER NOT NULL, reorder_point INTEGER NOT NULL,
    PRIMARY KEY (sku, warehouse)
);
CREATE TABLE IF NOT EXISTS inventory_orders (
    id           TEXT PRIMARY KEY,            -- 'PO-…' (purchase) or 'SO-…' (sales)
    kind         TEXT NOT NULL CHECK (kind IN ('purchase', 'sales')),
    counterparty TEXT NOT NULL,               -- the world organisation id (supplier or customer)
    counterparty_name TEXT NOT NULL,
    warehouse    TEXT NOT NULL,
    status       TEXT NOT NULL,
    created      TEXT NOT NULL,
    expected     TEXT NOT NULL,               -- expected delivery (purchase) or shipping (sales) date
    note         TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS inventory_order_lines (
    order_id TEXT NOT NULL, sku TEXT NOT NULL, quantity INTEGER NOT NULL, unit_price REAL NOT NULL,
    received INTEGER NOT NULL DEFAULT 0,      -- purchase orders: units received so far
    PRIMARY KEY (order_id, sku)
);
"""

PURCHASE_STATUSES = ["draft", "ordered", "shipped", "partially_received", "received", "cancelled"]
SALES_STATUSES = ["pending", "confirmed", "shipped", "delivered", "cancelled"]
STATUSES = sorted(set(PURCHASE_STATUSES + SALES_STATUSES))
# the moves update_order_status makes; receiving and cancelling have tools of their own
NEXT = {("purchase", "draft"): "ordered", ("purchase", "ordered"): "shipped",
        ("sales", "pending"): "confirmed", ("sales", "confirmed"): "shipped", ("sales", "shipped"): "delivered"}
CANCELLABLE = {("purchase", "draft"), ("purchase", "ordered"), ("purchase", "shipped"), ("sales", "pending"),
               ("sales", "confirmed")}
_STR, _INT, _NUM = {"type": "string"}, {"type": "integer"}, {"type": "number"}
_LINE = _obj({"sku": _STR, "name": _STR, "quantity": _INT, "unit_price": _NUM, "received": _INT},
             ["sku", "name", "quantity", "unit_price", "received"])
_ORDER_PROPS: dict[str, Any] = {
    "id": _STR, "kind": {"type": "string", "enum": ["purchase", "sales"]}, "counterparty": _STR,
    "warehouse_id": _STR, "warehouse": _STR, "status": {"type": "string", "enum": STATUSES}, "created": _STR,
    "expected": _STR, "note": _STR, "lines": {"type": "array", "items": _LINE}, "total": _NUM, "currency": _STR,
}
ORDER_SCHEMA = _obj(_ORDER_PROPS, list(_ORDER_PROPS))
_STOCK_ROW = _obj({"warehouse_id": _STR, "warehouse": _STR, "on_hand": _INT, "reserved": _INT, "available": _INT,
                   "reorder_point": _INT, "below_reorder": {"type": "boolean"}},
                  ["warehouse_id", "warehouse", "on_hand", "reserved", "available", "reorder_point", "below_reorder"])
_PRODUCT_PROPS: dict[str, Any] = {
    "sku": _STR, "name": _STR, "category": _STR, "unit": _STR, "price": _NUM, "currency": _STR, "supplier": _STR,
    "active": {"type": "boolean"}, "on_hand": _INT, "available": _INT, "below_reorder": {"type": "boolean"},
}
PRODUCT_SCHEMA = _obj(_PRODUCT_PROPS, list(_PRODUCT_PROPS))
_SKU = {"type": "string", "description": "product SKU, e.g. 'SKU-2521'"}
_ORDER_ID = {"type": "string", "description": "order id, e.g. 'PO-3410' or 'SO-7702'"}
_WAREHOUSE = {"type": "string", "description": "warehouse id (e.g. 'WH-1') or name"}
_LINES_IN = {"type": "array", "minItems": 1, "items": _obj({"sku": _SKU, "quantity": {"type": "integer", "minimum": 1}},
                                                          ["sku", "quantity"])}

tools = Tools()  # declared on their handlers below; TOOLS and handle come from it
_meta = AppMeta(NAME)

RESOURCES: list[dict[str, Any]] = [{"collection": "orders", "get_tool": "get_order", "list_tool": "list_orders",
                                    "list_key": "orders", "list_arguments": {"limit": 100}}]


# ---------------------------------------------------------------- seed

def seed(conn: sqlite3.Connection, rng: random.Random, world: dict[str, Any]) -> None:
    """Products with stock in three warehouses, ~6 purchase orders and ~5 sales orders."""
    conn.executescript(SCHEMA)
    today = dt.date.fromisoformat(world["today"])
    day = lambda first, last: (today + dt.timedelta(days=rng.randint(first, last))).isoformat()
    _meta.write(conn, [
        ("today", today.isoformat()), ("user", world["user"]["email"]), ("currency", currency(world))])
    orgs = {o["id"]: o for o in world["organisations"]}
    cities = [world["company"]["city"]] + rng.sample(sorted({o["city"] for o in world["organisations"]}
                                                            - {world["company"]["city"]}), 2)
    warehouses = [(f"WH-{n + 1}", f"{city} {kind}", city)
                  for n, (city, kind) in enumerate(zip(cities, ["central warehouse", "depot", "depot"], strict=True))]
    conn.executemany("INSERT INTO inventory_warehouses VALUES (?,?,?)", warehouses)
    products = [p for p in world["products"] if p["category"] in ("hardware", "office", "software")]
    rows = [(p["sku"], p["name"], p["category"], p["unit"], p["price"], p["supplier"],
             orgs[p["supplier"]]["name"], 1) for p in products]
    old = rng.choice([p for p in products if p["category"] == "hardware"])
    rows.append((f"{old['sku']}-P", f"{old['name']} (previous model)", "hardware", old["unit"],
                 round(old["price"] * rng.uniform(0.7, 0.9), 2), old["supplier"], orgs[old["supplier"]]["name"], 0))
    conn.executemany("INSERT INTO inventory_products VALUES (?,?,?,?,?,?,?,?)", rows)
    span = {"hardware": (0, 40, 4, 15), "office": (5, 300, 20, 80), "software": (0, 60, 5, 20)}
    for sku, _, category, *_rest, active in rows:
        low, high, r_low, r_high = span[category]
        for wh in warehouses:
            if not active:
                stock = (rng.randint(0, 3), 0)
            else:
                point = rng.randint(r_low, r_high)
                stock = (rng.randint(low, point - 1) if rng.random() < 0.2 else rng.randint(point, high), point)
            conn.execute("INSERT INTO inventory_stock VALUES (?,?,?,?,?)", (sku, wh[0], stock[0], 0, stock[1]))
    vendors = sorted({p["supplier"] for p in products})
    orders: list[tuple] = []  # (kind, org, warehouse, status, created, expected, lines)
    for status in rng.sample(["draft", "ordered", "ordered", "shipped", "shipped", "partially_received",
                              "received", "cancelled"], rng.randint(5, 7)):
        vendor = rng.choice(vendors)
        items = rng.sample([p for p in products if p["supplier"] == vendor],
                           min(rng.randint(1, 3), sum(p["supplier"] == vendor for p in products)))
        lines = [(p["sku"], rng.choice([5, 10, 20, 25, 50]) * (4 if p["category"] == "office" else 1), p["price"])
                 for p in items]
        created = today - dt.timedelta(days=rng.randint(25, 45) if status in ("received", "cancelled")
                                       else rng.randint(2, 30))
        expected = (created + dt.timedelta(days=rng.randint(5, 15)) if status in ("received", "cancelled")
                    else today + dt.timedelta(days=rng.randint(2, 21)))
        orders.append(("purchase", vendor, rng.choice(warehouses)[0], status, created.isoformat(),
                       expected.isoformat(), lines))
    customers = [o["id"] for o in world["organisations"] if o["kind"] == "customer"]
    for status in rng.sample(["pending", "pending", "confirmed", "confirmed", "shipped", "delivered", "cancelled"],
                             rng.randint(4, 6)):
        items = rng.sample(products, rng.randint(1, 2))
        lines = [(p["sku"], rng.choice([1, 2, 3, 5, 8, 10]) * (5 if p["category"] == "office" else 1),
                  round(p["price"] * rng.uniform(1.2, 1.45), 2)) for p in items]
        done = status in ("shipped", "delivered", "cancelled")
        orders.append(("sales", rng.choice(customers), rng.choice(warehouses)[0], status,
                       day(-30, -12) if done else day(-10, -1), day(-10, -1) if done else day(1, 14), lines))
    orders.sort(key=lambda o: (o[4], o[0]))
    bases = {"purchase": ("PO", rng.randrange(1000, 8000)), "sales": ("SO", rng.randrange(1000, 8000))}
    for n, (kind, org, warehouse, status, created, expected, lines) in enumerate(orders):
        prefix, base = bases[kind]
        ident = f"{prefix}-{base + n * 3}"
        conn.execute("INSERT INTO inventory_orders VALUES (?,?,?,?,?,?,?,?,?)",
                     (ident, kind, org, orgs[org]["name"], warehouse, status, created, expected, ""))
        for k, (sku, qty, price) in enumerate(lines):
            received = qty if status == "received" else (qty // 2 if status == "partially_received" and k == 0 else 0)
            conn.execute("INSERT INTO inventory_order_lines VALUES (?,?,?,?,?)", (ident, sku, qty, price, received))
            if kind == "sales" and status in ("pending", "confirmed"):  # open sales orders hold their units
                conn.execute("UPDATE inventory_stock SET reserved = reserved + ?, on_hand = MAX(on_hand, "
                             "reserved + ?) WHERE sku = ? AND warehouse = ?", (qty, qty, sku, warehouse))


# ---------------------------------------------------------------- handlers

def _warehouse(conn: sqlite3.Connection, value: str, field: str = "warehouse") -> tuple[str, str]:
    wanted = value.strip().lower()
    rows = [tuple(r) for r in conn.execute("SELECT id, name, city FROM inventory_warehouses ORDER BY id")]
    for ident, name, city in rows:
        if wanted in (ident.lower(), name.lower(), city.lower()):
            return ident, name
    known = "; ".join(f"{i} ({n})" for i, n, _ in rows)
    raise ToolFailure(f"{field} {value!r} is not a warehouse; warehouses: {known}")


def _product(conn: sqlite3.Connection, sku: str, field: str = "sku") -> tuple:
    row = one_row(conn, "SELECT sku, name, category, unit, price, supplier, supplier_name, active "
                  "FROM inventory_products WHERE sku = ?", (sku.strip().upper(),),
                  f"{field}: no product with SKU {sku!r}; search_products finds SKUs")
    return tuple(row)


def _stock_rows(conn: sqlite3.Connection, sku: str) -> list[dict[str, Any]]:
    out = []
    for wid, wname, on_hand, reserved, point in conn.execute(
            "SELECT w.id, w.name, s.on_hand, s.reserved, s.reorder_point FROM inventory_stock s "
            "JOIN inventory_warehouses w ON w.id = s.warehouse WHERE s.sku = ? ORDER BY w.id", (sku,)):
        available = on_hand - reserved
        out.append({"warehouse_id": wid, "warehouse": wname, "on_hand": on_hand, "reserved": reserved,
                    "available": available, "reorder_point": point, "below_reorder": available < point})
    return out


def _product_dict(conn: sqlite3.Connection, row: tuple) -> dict[str, Any]:
    stock = _stock_rows(conn, row[0])
    return {"sku": row[0], "name": row[1], "category": row[2], "unit": row[3], "price": row[4],
            "currency": _meta(conn, "currency"), "supplier": row[6], "active": bool(row[7]),
            "on_hand": sum(s["on_hand"] for s in stock), "available": sum(s["available"] for s in stock),
            "below_reorder": any(s["below_reorder"] for s in stock)}


def _order(conn: sqlite3.Connection, ident: str) -> dict[str, Any]:
    row = one_row(conn, "SELECT o.id, o.kind, o.counterparty_name, o.warehouse, w.name, o.status, o.created, "
                  "o.expected, o.note FROM inventory_orders o JOIN inventory_warehouses w ON w.id = o.warehouse "
                  "WHERE o.id = ?", (ident.strip().upper(),), f"no order with id {ident!r}; list_orders shows the orders")
    out = dict(zip(list(_ORDER_PROPS)[:9], row, strict=True))
    out["lines"] = [{"sku": sku, "name": name, "quantity": qty, "unit_price": price, "received": received}
                    for sku, name, qty, price, received in conn.execute(
                        "SELECT l.sku, p.name, l.quantity, l.unit_price, l.received FROM inventory_order_lines l "
                        "JOIN inventory_products p ON p.sku = l.sku WHERE l.order_id = ? ORDER BY l.rowid", (row[0],))]
    out["total"] = round(sum(line["quantity"] * line["unit_price"] for line in out["lines"]), 2)
    out["currency"] = _meta(conn, "currency")
    return out


def _lines(conn: sqlite3.Connection, value: Any) -> list[tuple[tuple, int]]:
    if not isinstance(value, list) or not value:
        raise ToolFailure(f"lines must be a non-empty list of {{sku, quantity}} objects, got {value!r}")
    out: list[tuple[tuple, int]] = []
    for n, line in enumerate(value):
        if not isinstance(line, dict) or set(line) != {"sku", "quantity"}:
            raise ToolFailure(f"lines[{n}] must be an object with exactly sku and quantity, got {line!r}")
        qty = line["quantity"]
        if isinstance(qty, bool) or not isinstance(qty, int) or qty < 1:
            raise ToolFailure(f"lines[{n}].quantity must be a whole number of at least 1, got {qty!r}")
        if not isinstance(line["sku"], str):
            raise ToolFailure(f"lines[{n}].sku must be a string, got {line['sku']!r}")
        product = _product(conn, line["sku"], f"lines[{n}].sku")
        if any(p[0] == product[0] for p, _ in out):
            raise ToolFailure(f"lines[{n}].sku {product[0]} appears twice; give each product once")
        out.append((product, qty))
    return out


def _add_stock(conn: sqlite3.Connection, sku: str, warehouse: str, on_hand: int = 0, reserved: int = 0) -> None:
    conn.execute("INSERT OR IGNORE INTO inventory_stock VALUES (?, ?, 0, 0, 0)", (sku, warehouse))
    conn.execute("UPDATE inventory_stock SET on_hand = on_hand + ?, reserved = MAX(0, reserved + ?) "
                 "WHERE sku = ? AND warehouse = ?", (on_hand, reserved, sku, warehouse))


@tools.tool("search_products", "read",
            input=_obj({
                "query": {"type": "string", "description": "text to look for; omit for every product"},
                "category": {"type": "string", "enum": ["hardware", "office", "software"]},
                "supplier": {"type": "string", "description": "supplier name (substring)"},
                "below_reorder": {"type": "boolean", "description": "only products below their reorder point somewhere"},
                "include_discontinued": {"type": "boolean"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "at most this many (default 50)"},
            }, []),
            output=_obj({"products": {"type": "array", "items": PRODUCT_SCHEMA}, "count": _INT},
                        ["products", "count"]))
def search_products(conn: sqlite3.Connection, args: dict) -> dict:
    """Search products. Matches the query (case-insensitive substring) against SKU, name and supplier;
    filters by category, by supplier and to products below their reorder point in some warehouse.
    Discontinued products are left out unless include_discontinued is true. Returns products with their
    stock summed over warehouses."""
    query = (opt_str(args, "query") or "").strip().lower()
    category, supplier = opt_str(args, "category"), (opt_str(args, "supplier") or "").strip().lower()
    below, discontinued = opt_bool(args, "below_reorder"), opt_bool(args, "include_discontinued")
    limit = opt_int(args, "limit", 50, 1, 100)
    found = []
    for row in conn.execute("SELECT sku, name, category, unit, price, supplier, supplier_name, active "
                            "FROM inventory_products ORDER BY name, sku"):
        product = _product_dict(conn, tuple(row))
        if (not product["active"] and not discontinued or category and product["category"] != category
                or supplier and supplier not in product["supplier"].lower()
                or below and not product["below_reorder"]
                or query and query not in f"{product['sku']} {product['name']} {product['supplier']}".lower()):
            continue
        found.append(product)
    return {"products": found[:limit], "count": len(found)}


@tools.tool("get_stock", "read",
            input=_obj({"sku": _SKU, "warehouse": _WAREHOUSE}, ["sku"]),
            output=_obj({"sku": _STR, "name": _STR, "unit": _STR, "active": {"type": "boolean"},
                         "warehouses": {"type": "array", "items": _STOCK_ROW}, "total_on_hand": _INT,
                         "total_available": _INT, "inbound": _INT},
                        ["sku", "name", "unit", "active", "warehouses", "total_on_hand", "total_available",
                         "inbound"]))
def get_stock(conn: sqlite3.Connection, args: dict) -> dict:
    """Stock of one product per warehouse (on hand, reserved by open sales orders, available, reorder
    point), its totals, and the units still inbound on open purchase orders."""
    product = _product(conn, req_str(args, "sku", 40))
    stock = _stock_rows(conn, product[0])
    if opt_str(args, "warehouse") is not None:
        wid = _warehouse(conn, args["warehouse"])[0]
        stock = [s for s in stock if s["warehouse_id"] == wid]
    inbound = conn.execute(
        "SELECT COALESCE(SUM(l.quantity - l.received), 0) FROM inventory_order_lines l JOIN inventory_orders o "
        "ON o.id = l.order_id WHERE l.sku = ? AND o.kind = 'purchase' AND o.status IN "
        "('ordered', 'shipped', 'partially_received')", (product[0],)).fetchone()[0]
    return {"sku": product[0], "name": product[1], "unit": product[3], "active": bool(product[7]),
            "warehouses": stock, "total_on_hand": sum(s["on_hand"] for s in stock),
            "total_available": sum(s["available"] for s in stock), "inbound": inbound}


@tools.tool("list_orders", "read",
            input=_obj({
                "kind": {"type": "string", "enum": ["purchase", "sales"]},
                "status": {"type": "string", "enum": STATUSES}, "sku": _SKU,
                "counterparty": {"type": "string", "description": "supplier or customer name (substring)"},
                "warehouse": _WAREHOUSE,
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "at most this many (default 50)"},
            }, []),
            output=_obj({"orders": {"type": "array", "items": ORDER_SCHEMA}, "count": _INT}, ["orders", "count"]))
def list_orders(conn: sqlite3.Connection, args: dict) -> dict:
    """Purchase and sales orders, newest first, with their lines. Filters: kind, status, a SKU on a line,
    the supplier or customer name (substring), warehouse."""
    kind, status = opt_str(args, "kind"), opt_str(args, "status")
    sku = _product(conn, args["sku"])[0] if opt_str(args, "sku") is not None else None
    party = (opt_str(args, "counterparty") or "").strip().lower()
    warehouse = _warehouse(conn, args["warehouse"])[0] if opt_str(args, "warehouse") is not None else None
    limit = opt_int(args, "limit", 50, 1, 100)
    found = []
    for (ident,) in conn.execute("SELECT id FROM inventory_orders ORDER BY created DESC, id DESC"):
        order = _order(conn, ident)
        if (kind and order["kind"] != kind or status and order["status"] != status
                or sku and sku not in [line["sku"] for line in order["lines"]]
                or party and party not in order["counterparty"].lower()
                or warehouse and order["warehouse_id"] != warehouse):
            continue
        found.append(order)
    return {"orders": found[:limit], "count": len(found)}


@tools.tool("get_order", "read",
            input=_obj({"id": _ORDER_ID}, ["id"]),
            output=ORDER_SCHEMA)
def get_order(conn: sqlite3.Connection, args: dict) -> dict:
    """One order with its lines (and, for purchase orders, the units received so far) and total."""
    return _order(conn, req_str(args, "id", 40))


@tools.tool("create_purchase_order", "write",
            input=_obj({"warehouse": _WAREHOUSE, "lines": _LINES_IN,
                        "expected_date": {"type": "string", "description": "YYYY-MM-DD"},
                        "note": {"type": "string"}}, ["warehouse", "lines"]),
            output=ORDER_SCHEMA)
def create_purchase_order(conn: sqlite3.Connection, args: dict) -> dict:
    """Order products from their supplier for delivery to a warehouse. Every line must be a product of the
    same supplier; prices are the products' purchase prices. The order is placed (status 'ordered'); the
    expected date defaults to 14 days from today. Returns the order."""
    warehouse = _warehouse(conn, req_str(args, "warehouse", 100))[0]
    lines = _lines(conn, args.get("lines"))
    suppliers = sorted({p[6] for p, _ in lines})
    if len(suppliers) > 1:
        raise ToolFailure(f"lines mix suppliers ({', '.join(suppliers)}); make one purchase order per supplier")
    inactive = [p[0] for p, _ in lines if not p[7]]
    if inactive:
        raise ToolFailure(f"lines: {', '.join(inactive)} is discontinued and can no longer be ordered")
    today = dt.date.fromisoformat(_meta(conn, "today"))
    expected = (check_date(args["expected_date"], "expected_date") if args.get("expected_date") is not None
                else (today + dt.timedelta(days=14)).isoformat())
    ident = next_id(conn, "inventory_orders", "PO-", width=1, start=1000)
    conn.execute("INSERT INTO inventory_orders VALUES (?,?,?,?,?,?,?,?,?)",
                 (ident, "purchase", lines[0][0][5], suppliers[0], warehouse, "ordered", today.isoformat(),
                  expected, (opt_str(args, "note") or "").strip()))
    conn.executemany("INSERT INTO inventory_order_lines VALUES (?,?,?,?,0)",
                     [(ident, p[0], qty, p[4]) for p, qty in lines])
    return _order(conn, ident)


@tools.tool("update_order_status", "write",
            input=_obj({"id": _ORDER_ID, "status": {"type": "string", "enum": ["ordered", "shipped", "confirmed",
                                                                                "delivered"]}},
                       ["id", "status"]),
            output=_obj({"order": ORDER_SCHEMA, "previous_status": _STR}, ["order", "previous_status"]))
def update_order_status(conn: sqlite3.Connection, args: dict) -> dict:
    """Move an order one step on: purchase draft→ordered→shipped; sales pending→confirmed→shipped→delivered
    (shipping takes the units out of the warehouse). Receiving a delivery and cancelling have tools of
    their own. Returns the order and its previous status."""
    order = _order(conn, req_str(args, "id", 40))
    status = req_str(args, "status", 40)
    step = NEXT.get((order["kind"], order["status"]))
    if status != step:
        hint = f"its next status is {step!r}" if step else "it has no next status here"
        if status == "received":
            hint += "; receive_delivery records a delivery"
        raise ToolFailure(f"status: {order['kind']} order {order['id']} is {order['status']!r} and cannot become "
                          f"{status!r}: {hint}")
    if order["kind"] == "sales" and status == "shipped":
        for line in order["lines"]:
            row = conn.execute("SELECT on_hand FROM inventory_stock WHERE sku = ? AND warehouse = ?",
                               (line["sku"], order["warehouse_id"])).fetchone()
            if row is None or row[0] < line["quantity"]:
                raise ToolFailure(f"cannot ship {order['id']}: {order['warehouse']} has {row[0] if row else 0} "
                                  f"of {line['sku']} on hand, the order needs {line['quantity']}")
        for line in order["lines"]:
            _add_stock(conn, line["sku"], order["warehouse_id"], -line["quantity"], -line["quantity"])
    conn.execute("UPDATE inventory_orders SET status = ? WHERE id = ?", (status, order["id"]))
    return {"order": _order(conn, order["id"]), "previous_status": order["status"]}


@tools.tool("receive_delivery", "write",
            input=_obj({"id": _ORDER_ID, "lines": _LINES_IN}, ["id"]),
            output=_obj({"order": ORDER_SCHEMA,
                         "received": {"type": "array", "items": _obj({"sku": _STR, "quantity": _INT},
                                                                     ["sku", "quantity"])},
                         "stock": {"type": "array", "items": _obj({"sku": _STR, "warehouse_id": _STR,
                                                                   "on_hand": _INT},
                                                                  ["sku", "warehouse_id", "on_hand"])}},
                        ["order", "received", "stock"]))
def receive_delivery(conn: sqlite3.Connection, args: dict) -> dict:
    """Record a delivery for a purchase order: adds the units to the order's warehouse. Without lines,
    everything still outstanding arrived; with lines, only those units (a partial delivery). Returns the
    order, what was received and the new stock on hand."""
    order = _order(conn, req_str(args, "id", 40))
    if order["kind"] != "purchase" or order["status"] not in ("ordered", "shipped", "partially_received"):
        raise ToolFailure(f"{order['id']} is a {order['kind']} order in status {order['status']!r}; only purchase "
                          "orders that are ordered, shipped or partially received can take a delivery")
    outstanding = {line["sku"]: line["quantity"] - line["received"] for line in order["lines"]}
    if args.get("lines") is None:
        arrived = [(sku, qty) for sku, qty in outstanding.items() if qty > 0]
    else:
        arrived = []
        for product, qty in _lines(conn, args["lines"]):
            if product[0] not in outstanding:
                raise ToolFailure(f"lines: {product[0]} is not on order {order['id']}")
            if qty > outstanding[product[0]]:
                raise ToolFailure(f"lines: {qty} of {product[0]} is more than the {outstanding[product[0]]} "
                                  f"still outstanding on {order['id']}")
            arrived.append((product[0], qty))
    for sku, qty in arrived:
        conn.execute("UPDATE inventory_order_lines SET received = received + ? WHERE order_id = ? AND sku = ?",
                     (qty, order["id"], sku))
        _add_stock(conn, sku, order["warehouse_id"], qty)
    left = conn.execute("SELECT COALESCE(SUM(quantity - received), 0) FROM inventory_order_lines "
                        "WHERE order_id = ?", (order["id"],)).fetchone()[0]
    conn.execute("UPDATE inventory_orders SET status = ? WHERE id = ?",
                 ("received" if left == 0 else "partially_received", order["id"]))
    stock = [{"sku": sku, "warehouse_id": order["warehouse_id"], "on_hand": conn.execute(
        "SELECT on_hand FROM inventory_stock WHERE sku = ? AND warehouse = ?", (sku, order["warehouse_id"])
    ).fetchone()[0]} for sku, _ in arrived]
    return {"order": _order(conn, order["id"]), "received": [{"sku": s, "quantity": q} for s, q in arrived],
            "stock": stock}


@tools.tool("cancel_order", "destructive",
            input=_obj({"id": _ORDER_ID, "reason": {"type": "string"}}, ["id"]),
            output=_obj({"order": ORDER_SCHEMA, "previous_status": _STR}, ["order", "previous_status"]))
def cancel_order(conn: sqlite3.Connection, args: dict) -> dict:
    """Cancel an order that has not shipped (purchase: draft, ordered or shipped but nothing received;
    sales: pending or confirmed, whose reservations are released). Cannot be undone."""
    order = _order(conn, req_str(args, "id", 40))
    if (order["kind"], order["status"]) not in CANCELLABLE:
        raise ToolFailure(f"{order['kind']} order {order['id']} is {order['status']!r} and can no longer be "
                          "cancelled")
    if order["kind"] == "sales":
        for line in order["lines"]:
            _add_stock(conn, line["sku"], order["warehouse_id"], 0, -line["quantity"])
    reason = (opt_str(args, "reason") or "").strip()
    conn.execute("UPDATE inventory_orders SET status = 'cancelled', note = ? WHERE id = ?",
                 (f"Cancelled: {reason}" if reason else "Cancelled", order["id"]))
    return {"order": _order(conn, order["id"]), "previous_status": order["status"]}


TOOLS, handle = tools.specs, tools.handle

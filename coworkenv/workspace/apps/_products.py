"""Products as the helpdesk and the knowledge base share them: the problem people report with each
product, the products the knowledge base has a troubleshooting article for, and a tool's optional
``product`` argument. Drawn from the world alone, so that each app computes the same in its own
``seed``: a ticket about a covered product reports the problem its article solves. Standard library only.
"""

from __future__ import annotations

import random
import sqlite3
from typing import Any

from ._base import World, one_row

SYMPTOMS = {
    "hardware": ("does not power on", "flickers after the firmware update", "is not detected over USB-C",
                 "overheats under load", "keeps disconnecting from the dock"),
    "software": ("does not recognise the licence key", "fails to sync", "crashes on start-up",
                 "loops back to the sign-in page"),
    "office": ("arrived damaged", "was delivered in the wrong quantity"),
    "services": ("was not delivered as booked", "is invoiced at the wrong day rate"),
}


def symptom(product: dict[str, Any]) -> str:
    """The problem people report with a product: drawn from the world alone, so that the helpdesk's
    tickets and the knowledge base's troubleshooting articles agree."""
    options = SYMPTOMS[product["category"]]
    return options[int(product["sku"].split("-")[1]) % len(options)]


def supported_products(world: World) -> list[dict[str, Any]]:
    """The products the knowledge base has a troubleshooting article for (drawn from the world alone)."""
    rng = random.Random(f"{world['seed']}:supported-products")
    return rng.sample(sorted(world["products"], key=lambda p: p["sku"]), 6)


def product_sku(conn: sqlite3.Connection, value: Any) -> str | None:
    """The catalogue's SKU for an optional ``product`` argument (matched without case), None when it
    is absent; an unknown SKU is the caller's error, named."""
    if value is None:
        return None
    row = one_row(conn, "SELECT sku FROM world_products WHERE upper(sku) = upper(?)", (str(value).strip(),),
                  f"product: no product with SKU {value!r}")
    return row[0]

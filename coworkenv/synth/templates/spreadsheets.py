"""Templates about spreadsheets: budget workbooks and the price list, charts, tabs and rows. A draft
budget beside the real one and last year's price list are distractors; ``budget_overrun_task`` joins
a budget sheet, the world's project owners and the to-do lists.

Nothing is constant: what a task names is read from its workspace's initial state, and every choice is drawn from ``rng``.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ...workspace import World, load_world
from ._kit import answer_check, day_after, money, person_with, sql_check, step, task_spec, template, unsolved
from ._records import price_list


def _budget(conn: sqlite3.Connection, code: str) -> dict[str, Any] | None:
    """The current budget workbook of a project: id, owner, and its Budget sheet's lines
    (row, category, planned, actual) and Total row number."""
    row = conn.execute("select id, owner from spreadsheets_workbooks where name = ?", (f"{code} budget",)).fetchone()
    if row is None:
        return None
    cells = {(r, c): v for r, c, v in conn.execute(
        'select "row", col, value from spreadsheets_cells where workbook = ? and sheet = ?', (row[0], "Budget"))}
    total = next((r for (r, c), v in cells.items() if c == 1 and v == "Total"), None)
    if total is None:
        return None
    lines = [(r, cells[(r, 1)], cells.get((r, 2)), cells.get((r, 3))) for r in range(2, total)]
    return {"id": row[0], "owner": row[1], "lines": lines, "total": total,
            "planned": cells.get((total, 2)), "actual": cells.get((total, 3))}


def _budget_codes(conn: sqlite3.Connection, world: World) -> list[str]:
    return [p["code"] for p in world["projects"] if _budget(conn, p["code"])]


# --------------------------------------------------------------------------- lookup


@template("lookup", 2, needs=("spreadsheets_workbooks",))
def sheet_budget_actual(conn, rng):
    world = load_world(conn)
    budgets = {p["code"]: _budget(conn, p["code"]) for p in world["projects"]}
    codes = [c for c, b in budgets.items() if b and any(line[3] for line in b["lines"])]
    if not codes:
        return None
    code = rng.choice(codes)
    budget = budgets[code]
    assert budget is not None
    _, category, planned, actual = rng.choice([line for line in budget["lines"] if line[3]])
    return task_spec(
        f"How much has actually been spent on {category} in the {code} budget workbook, against how "
        "much planned? Give both amounts as the sheet shows them.",
        [answer_check("answer", f"the answer gives {code}'s {category} actual {actual} and planned {planned}",
                      str(actual), str(planned))],
        [step("spreadsheets_list_workbooks", project=code),
         step("spreadsheets_read_sheet", workbook=budget["id"], sheet="Budget")],
        f"{category} in the {code} budget: {actual} spent against {planned} planned.",
        ["spreadsheets_write_cells", "spreadsheets_delete_sheet"], step("spreadsheets_delete_sheet", workbook=budget["id"], sheet="Budget"))


@template("lookup", 2, needs=("spreadsheets_workbooks",), finds=price_list)
def sheet_price(conn, rng, wb, items):
    sku = rng.choice(sorted(items))
    _, name, price = items[sku]
    last = max(r for r, _, _ in items.values())
    return task_spec(
        f"What is the current list price of the {name} ({sku})? Use this year's price list and give "
        "the price as a plain number with two decimals (like 1234.50).",
        [answer_check("answer", f"the answer gives the price {money(price)}", money(price))],
        [step("spreadsheets_list_workbooks", query="price list"),
         step("spreadsheets_read_range", workbook=wb, sheet="Products", range=f"A1:E{last}")],
        f"The {name} ({sku}) costs {money(price)} per unit in the current price list.",
        ["spreadsheets_write_cells", "spreadsheets_delete_sheet"], step("spreadsheets_write_cells", workbook=wb, sheet="Products",
             cells=[{"ref": "E2", "value": 0}]))


@template("lookup", 2, needs=("spreadsheets_charts",))
def sheet_chart_top(conn, rng):
    row = conn.execute("select c.workbook, c.sheet, c.data from spreadsheets_charts c join spreadsheets_workbooks w "
                       "on w.id = c.workbook where w.name = 'Project portfolio'").fetchone()
    if row is None:
        return None
    data = json.loads(row[2])
    ranked = sorted(zip(data["series"][0]["values"], data["labels"], strict=True), reverse=True)
    if len(ranked) < 2:
        return None
    ends = [(0, "largest")] * (ranked[0][0] != ranked[1][0]) + [(-1, "smallest")] * (ranked[-1][0] != ranked[-2][0])
    if not ends:
        return None
    pick, position = rng.choice(ends)
    value, code = ranked[pick]
    return task_spec(
        f"Look at the chart in the Project portfolio workbook: which project has the {position} "
        "budget? Give its project code.",
        [answer_check("answer", f"the answer names {code}", code)],
        [step("spreadsheets_list_workbooks", query="portfolio"),
         step("spreadsheets_get_workbook", id=row[0]),
         step("spreadsheets_render_chart", workbook=row[0], sheet=row[1])],
        f"{code} has the {position} budget: {value}.",
        ["spreadsheets_delete_sheet"], step("spreadsheets_delete_sheet", workbook=row[0], sheet=row[1]))


# --------------------------------------------------------------------------- single write


@template("single_write", 2, needs=("spreadsheets_workbooks",))
def sheet_set_actual(conn, rng):
    world = load_world(conn)
    codes = [p["code"] for p in world["projects"] if p["status"] == "active" and _budget(conn, p["code"])]
    if not codes:
        return None
    code = rng.choice(codes)
    budget = _budget(conn, code)
    assert budget is not None
    row, category, _, actual = rng.choice(budget["lines"])
    new = int(actual or 0) + rng.randrange(200, 5000, 10)
    return unsolved(conn, task_spec(
        f"Update the {code} budget workbook: the actual spend on {category} is now {new}.",
        [sql_check("actual", f"C{row} ({category}) of {code}'s Budget sheet is {new}",
                   "select value from spreadsheets_cells where workbook = ? and sheet = 'Budget' and ref = ?",
                   [budget["id"], f"C{row}"], new)],
        [step("spreadsheets_list_workbooks", project=code),
         step("spreadsheets_read_sheet", workbook=budget["id"], sheet="Budget"),
         step("spreadsheets_write_cells", workbook=budget["id"], sheet="Budget",
              cells=[{"ref": f"C{row}", "value": new}])],
        f"Set the {category} actual of the {code} budget to {new}.",
        ["spreadsheets_delete_sheet"], step("spreadsheets_delete_sheet", workbook=budget["id"], sheet="Budget")))


@template("single_write", 2, needs=("spreadsheets_workbooks",))
def sheet_new_tab(conn, rng):
    world = load_world(conn)
    codes = _budget_codes(conn, world)
    if not codes:
        return None
    code = rng.choice(codes)
    budget = _budget(conn, code)
    assert budget is not None
    tab = rng.choice(["Forecast", "Q3 forecast", "Savings", "Risks", "Purchase orders"])
    return unsolved(conn, task_spec(
        f"Add an empty sheet named \"{tab}\" to the {code} budget workbook (not the draft).",
        [sql_check("sheet", f"workbook {budget['id']} has a sheet {tab!r}",
                   "select count(*) from spreadsheets_sheets where workbook = ? and name = ?", [budget["id"], tab])],
        [step("spreadsheets_list_workbooks", project=code),
         step("spreadsheets_add_sheet", workbook=budget["id"], name=tab)],
        f"Added the sheet \"{tab}\" to the {code} budget workbook.",
        ["spreadsheets_delete_sheet"], step("spreadsheets_delete_sheet", workbook=budget["id"], sheet="Budget")))


@template("single_write", 2, needs=("spreadsheets_workbooks",),
          draws="select w.id, w.project from spreadsheets_workbooks w join spreadsheets_sheets s on "
                "s.workbook = w.id where s.name = 'Old forecast' order by w.id")
def sheet_drop_forecast(conn, rng, workbook):
    wb, code = workbook["id"], workbook["project"]
    return task_spec(
        f"The {code} budget workbook still has the outdated \"Old forecast\" sheet. Delete that sheet; leave everything else as it is.",
        [sql_check("deleted", f"workbook {wb} has no 'Old forecast' sheet and still has its Budget sheet",
                   "select (select count(*) from spreadsheets_sheets where workbook = ? and name = 'Old forecast') "
                   "= 0 and (select count(*) from spreadsheets_sheets where workbook = ? and name = 'Budget') = 1",
                   [wb, wb])],
        [step("spreadsheets_list_workbooks", project=code),
         step("spreadsheets_delete_sheet", workbook=wb, sheet="Old forecast")],
        f"Deleted the \"Old forecast\" sheet of the {code} budget workbook.",
        ["spreadsheets_write_cells"], step("spreadsheets_write_cells", workbook=wb, sheet="Old forecast",
             cells=[{"ref": "A1", "value": None}]))


# --------------------------------------------------------------------------- multi-step chains


@template("multi_step", 3, needs=("spreadsheets_workbooks",))
def sheet_budget_line(conn, rng):
    world = load_world(conn)
    codes = [p["code"] for p in world["projects"] if p["status"] != "closed" and _budget(conn, p["code"])]
    if not codes:
        return None
    code = rng.choice(codes)
    budget = _budget(conn, code)
    assert budget is not None
    used = {line[1] for line in budget["lines"]}
    category = rng.choice([c for c in ("Travel", "Training", "Marketing", "Consulting", "Facilities", "Contractors",
                                       "Cloud hosting", "Hardware") if c not in used] or ["Miscellaneous"])
    planned, actual = rng.randrange(1000, 20000, 100), rng.randrange(0, 900, 10)
    total = budget["total"]
    new_planned = int(budget["planned"]) + planned
    return task_spec(
        f"Add a \"{category}\" line to the {code} budget (planned {planned}, actual {actual} so far) "
        "and make sure the Total row counts it.",
        [
  sql_check("line", f"a {category} line with planned {planned} and actual {actual}",
            "select count(*) from spreadsheets_cells a join spreadsheets_cells b on b.workbook = a.workbook and "
            "b.sheet = a.sheet and b.\"row\" = a.\"row\" and b.col = 2 join spreadsheets_cells c on c.workbook = "
            "a.workbook and c.sheet = a.sheet and c.\"row\" = a.\"row\" and c.col = 3 where a.workbook = ? and "
            "a.sheet = 'Budget' and a.col = 1 and a.value = ? and b.value = ? and c.value = ?",
            [budget["id"], category, planned, actual]),
  sql_check("total", f"the Total row's planned amount is {new_planned}",
            "select value from spreadsheets_cells where workbook = ? and sheet = 'Budget' and col = 2 and "
            "\"row\" = (select \"row\" from spreadsheets_cells where workbook = ? and sheet = 'Budget' and col = 1 "
            "and value = 'Total')", [budget["id"], budget["id"]], new_planned),
        ],
        [
            step("spreadsheets_list_workbooks", project=code),
            step("spreadsheets_read_sheet", workbook=budget["id"], sheet="Budget"),
            step("spreadsheets_add_row", workbook=budget["id"], sheet="Budget", at_row=total,
    values=[category, planned, actual, f"=B{total}-C{total}"]),
            step("spreadsheets_write_cells", workbook=budget["id"], sheet="Budget",
    cells=[{"ref": f"B{total + 1}", "value": f"=SUM(B2:B{total})"},
           {"ref": f"C{total + 1}", "value": f"=SUM(C2:C{total})"}]),
        ],
        f"Added {category} (planned {planned}, actual {actual}) to the {code} budget; the planned "
        f"total is now {new_planned}.",
        ["spreadsheets_delete_sheet"], step("spreadsheets_delete_sheet", workbook=budget["id"], sheet="Budget"))


@template("multi_step", 3, needs=("spreadsheets_workbooks",), finds=price_list)
def sheet_order(conn, rng, wb, items):
    active = [p for p in load_world(conn)["projects"] if p["status"] != "closed"]
    if not active:
        return None
    code = rng.choice(active)["code"]
    skus = rng.sample(sorted(items), 2)
    qty = [rng.randint(2, 12), rng.randint(2, 12)]
    total = round(sum(q * items[s][2] for q, s in zip(qty, skus, strict=True)), 2)
    name = f"{code} purchase order"
    rows = [{"ref": f"{c}1", "value": v} for c, v in zip("ABCD", ["Product", "Quantity", "Price", "Line total"],
                                                         strict=True)]
    for n, (q, s) in enumerate(zip(qty, skus, strict=True), start=2):
        rows += [{"ref": f"A{n}", "value": items[s][1]}, {"ref": f"B{n}", "value": q},
                 {"ref": f"C{n}", "value": items[s][2]}, {"ref": f"D{n}", "value": f"=B{n}*C{n}"}]
    rows += [{"ref": "A4", "value": "Total"}, {"ref": "D4", "value": "=SUM(D2:D3)"}]
    order = " and ".join(f"{q} x {items[s][1]}" for q, s in zip(qty, skus, strict=True))
    # the id create_workbook gives: one past the largest
    top = max((int(i[2:]) for (i,) in conn.execute("select id from spreadsheets_workbooks") if i[2:].isdigit()),
              default=0)
    created = f"wb{top + 1:02d}"
    return unsolved(conn, task_spec(
        f"Create a workbook \"{name}\" for project {code} with a sheet \"Order\" listing {order}: each "
        "product with its quantity, its current list price and its line total, and the order total.",
        [
  sql_check("workbook", f"a workbook {name!r} of project {code} with an 'Order' sheet",
            "select count(*) from spreadsheets_workbooks w join spreadsheets_sheets s on s.workbook = w.id where "
            "w.name = ? and w.project = ? and s.name = 'Order'", [name, code]),
  *[sql_check(f"price_{n}", f"the Order sheet has the price {money(items[s][2])} of {items[s][1]}",
              "select count(*) > 0 from spreadsheets_cells c join spreadsheets_workbooks w on w.id = c.workbook "
              "where w.name = ? and c.sheet = 'Order' and typeof(c.value) in ('integer', 'real') and "
              "abs(c.value - ?) < 0.005", [name, items[s][2]]) for n, s in enumerate(skus, start=1)],
  sql_check("total", f"the Order sheet shows the total {money(total)}",
            "select count(*) > 0 from spreadsheets_cells c join spreadsheets_workbooks w on w.id = c.workbook "
            "where w.name = ? and c.sheet = 'Order' and typeof(c.value) in ('integer', 'real') and "
            "abs(c.value - ?) < 0.005", [name, total]),
        ],
        [
            step("spreadsheets_list_workbooks", query="price list"),
            step("spreadsheets_read_sheet", workbook=wb, sheet="Products"),
            step("spreadsheets_create_workbook", name=name, sheets=["Order"], project=code),
            step("spreadsheets_write_cells", workbook=created, sheet="Order", cells=rows),
        ],
        f"Created \"{name}\" with {order}; the order total is {money(total)}.",
        ["spreadsheets_delete_sheet"], step("spreadsheets_delete_sheet", workbook=wb, sheet="Products")))


@template("multi_step", 4, needs=("spreadsheets_workbooks", "tasks_items"))
def budget_overrun_task(conn, rng):
    """Spreadsheets, the world's projects and the to-do lists: the line most over plan becomes a task
    for the budget's owner (the project's owner)."""
    world = load_world(conn)
    options = []
    for project in world["projects"]:
        budget = _budget(conn, project["code"])
        if budget is None or project["status"] != "active":
            continue
        over = sorted(((a or 0) - (p or 0), c) for _, c, p, a in budget["lines"])
        if over and over[-1][0] > 0 and (len(over) < 2 or over[-1][0] != over[-2][0]):
            options.append((project, budget, over[-1]))
    if not options:
        return None
    project, budget, (amount, category) = rng.choice(options)
    owner = person_with(world, budget["owner"])
    if owner is None:
        return None
    due = day_after(world, rng.choice([3, 4, 7]))
    return unsolved(conn, task_spec(
        f"In the {project['code']} budget, find the line whose actual spend is furthest above its plan. "
        f"Create a task in the {project['code']} list for the budget's owner to review that overspend, "
        f"due {due}, with the category in its title.",
        [sql_check("task", f"a {project['code']} task about {category} for {owner['email']} due {due}",
                   "select count(*) from tasks_items where project = ? and assignee = ? and due = ? and "
                   "instr(lower(title), lower(?)) > 0", [project["code"], owner["email"], due, category])],
        [
            step("spreadsheets_list_workbooks", project=project["code"]),
            step("spreadsheets_read_sheet", workbook=budget["id"], sheet="Budget"),
            step("tasks_create_task", title=f"Review the {category} overspend on {project['code']}",
    project=project["code"], assignee=owner["email"], due=due, priority="high",
    notes=f"Actual is {amount} above plan."),
        ],
        f"{category} is {amount} over plan; created a review task for {owner['name']} due {due}.",
        ["spreadsheets_write_cells", "tasks_delete_task"], step("spreadsheets_write_cells", workbook=budget["id"], sheet="Budget",
             cells=[{"ref": "C2", "value": 0}])))

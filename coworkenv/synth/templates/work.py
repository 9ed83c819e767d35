"""Procedural task templates over spreadsheets, tasks, helpdesk and the knowledge base.

Each template reads a workspace's initial state (the apps' tables, and its world through
``load_world``) and returns a task spec (without ``id`` and ``workspace_id``) with executable
checks, a reference solution and forbidden tools, or ``None`` when the state offers nothing for
it. Tasks name the workspace's own projects, people, products, tickets and articles, and several
have a distractor to tell apart: a draft budget beside the real one, last year's price list, a
chore that recurs in another project's list, an outdated policy article or an earlier version of
one, a namesake at a customer. ``ticket_kb_followup`` joins the helpdesk, the knowledge base and
the to-do lists; ``budget_overrun_task`` a budget sheet, the world's project owners and the
to-do lists; ``quote_ticket`` a ticket and the price list. Templates draw every choice from ``rng``.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import re
import sqlite3
from collections.abc import Callable
from typing import Any

from ...workspace import SqlCheck, World, load_world, text_gives

Spec = dict[str, Any]
Template = Callable[[sqlite3.Connection, random.Random], Spec | None]


def _step(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool": tool, "arguments": arguments}


def _sql(cid: str, description: str, query: str, params: list, expect: Any = 1) -> dict[str, Any]:
    return {"id": cid, "kind": "sql", "description": description, "query": query, "params": params, "expect": expect}


def _answer(cid: str, description: str, *contains: str) -> dict[str, Any]:
    return {"id": cid, "kind": "answer", "description": description, "contains": list(contains)}


def _unsolved(conn: sqlite3.Connection, spec: Spec) -> Spec | None:
    """``spec``, or None when one of its sql checks already holds in the initial state."""
    for check in spec["checks"]:
        if check["kind"] == "sql" and SqlCheck.model_validate(check).evaluate(conn, "").passed:
            return None
    return spec


def _has(conn: sqlite3.Connection, *tables: str) -> bool:
    names = {n for (n,) in conn.execute("select name from sqlite_master where type = 'table'")}
    return all(t in names for t in tables)


def _day(world: World, days: int) -> str:
    return (dt.date.fromisoformat(world["today"]) + dt.timedelta(days=days)).isoformat()


def _person(world: World, email: str | None) -> dict[str, Any] | None:
    return next((p for p in world["people"] if p["email"] == email), None)


def _colleagues(world: World) -> list[dict[str, Any]]:
    return [p for p in world["people"] if p["org"] == world["company"]["id"] and p["id"] != world["user"]["id"]]


def _money(value: float) -> str:
    return f"{value:.2f}"


# ---------------------------------------------------------------- spreadsheets state

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


def _price_list(conn: sqlite3.Connection, world: World) -> tuple[str, dict[str, tuple[int, str, float]]] | None:
    """The current year's price list: its id and, by SKU, (row, product name, price)."""
    row = conn.execute("select id from spreadsheets_workbooks where name = ?",
                       (f"Price list {world['today'][:4]}",)).fetchone()
    if row is None:
        return None
    cells = {(r, c): v for r, c, v in conn.execute(
        'select "row", col, value from spreadsheets_cells where workbook = ? and sheet = ?', (row[0], "Products"))}
    items = {cells[(r, 1)]: (r, cells[(r, 2)], cells[(r, 5)]) for (r, c) in cells if c == 1 and r > 1}
    return row[0], items


def _budget_codes(conn: sqlite3.Connection, world: World) -> list[str]:
    return [p["code"] for p in world["projects"] if _budget(conn, p["code"])]


# ---------------------------------------------------------------- spreadsheets: lookup

def sheet_budget_actual(conn, rng):
    if not _has(conn, "spreadsheets_workbooks"):
        return None
    world = load_world(conn)
    budgets = {p["code"]: _budget(conn, p["code"]) for p in world["projects"]}
    codes = [c for c, b in budgets.items() if b and any(line[3] for line in b["lines"])]
    if not codes:
        return None
    code = rng.choice(codes)
    budget = budgets[code]
    assert budget is not None
    _, category, planned, actual = rng.choice([line for line in budget["lines"] if line[3]])
    return {
        "capability": "lookup", "difficulty": 2,
        "instruction": f"How much has actually been spent on {category} in the {code} budget workbook, against how "
                       "much planned? Give both amounts as the sheet shows them.",
        "checks": [_answer("answer", f"the answer gives {code}'s {category} actual {actual} and planned {planned}",
                           str(actual), str(planned))],
        "reference": [_step("spreadsheets_list_workbooks", project=code),
                      _step("spreadsheets_read_sheet", workbook=budget["id"], sheet="Budget")],
        "reference_answer": f"{category} in the {code} budget: {actual} spent against {planned} planned.",
        "forbidden_tools": ["spreadsheets_write_cells", "spreadsheets_delete_sheet"],
        "forbidden_probe": _step("spreadsheets_delete_sheet", workbook=budget["id"], sheet="Budget"),
    }


def sheet_price(conn, rng):
    if not _has(conn, "spreadsheets_workbooks"):
        return None
    world = load_world(conn)
    found = _price_list(conn, world)
    if found is None:
        return None
    wb, items = found
    sku = rng.choice(sorted(items))
    _, name, price = items[sku]
    last = max(r for r, _, _ in items.values())
    return {
        "capability": "lookup", "difficulty": 2,
        "instruction": f"What is the current list price of the {name} ({sku})? Use this year's price list and give "
                       "the price as a plain number with two decimals (like 1234.50).",
        "checks": [_answer("answer", f"the answer gives the price {_money(price)}", _money(price))],
        "reference": [_step("spreadsheets_list_workbooks", query="price list"),
                      _step("spreadsheets_read_range", workbook=wb, sheet="Products", range=f"A1:E{last}")],
        "reference_answer": f"The {name} ({sku}) costs {_money(price)} per unit in the current price list.",
        "forbidden_tools": ["spreadsheets_write_cells", "spreadsheets_delete_sheet"],
        "forbidden_probe": _step("spreadsheets_write_cells", workbook=wb, sheet="Products",
                                 cells=[{"ref": "E2", "value": 0}]),
    }


def sheet_chart_top(conn, rng):
    if not _has(conn, "spreadsheets_charts"):
        return None
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
    return {
        "capability": "lookup", "difficulty": 2,
        "instruction": f"Look at the chart in the Project portfolio workbook: which project has the {position} "
                       "budget? Give its project code.",
        "checks": [_answer("answer", f"the answer names {code}", code)],
        "reference": [_step("spreadsheets_list_workbooks", query="portfolio"),
                      _step("spreadsheets_get_workbook", id=row[0]),
                      _step("spreadsheets_render_chart", workbook=row[0], sheet=row[1])],
        "reference_answer": f"{code} has the {position} budget: {value}.",
        "forbidden_tools": ["spreadsheets_delete_sheet"],
        "forbidden_probe": _step("spreadsheets_delete_sheet", workbook=row[0], sheet=row[1]),
    }


# ---------------------------------------------------------------- spreadsheets: writes

def sheet_set_actual(conn, rng):
    if not _has(conn, "spreadsheets_workbooks"):
        return None
    world = load_world(conn)
    codes = [p["code"] for p in world["projects"] if p["status"] == "active" and _budget(conn, p["code"])]
    if not codes:
        return None
    code = rng.choice(codes)
    budget = _budget(conn, code)
    assert budget is not None
    row, category, _, actual = rng.choice(budget["lines"])
    new = int(actual or 0) + rng.randrange(200, 5000, 10)
    return _unsolved(conn, {
        "capability": "single_write", "difficulty": 2,
        "instruction": f"Update the {code} budget workbook: the actual spend on {category} is now {new}.",
        "checks": [_sql("actual", f"C{row} ({category}) of {code}'s Budget sheet is {new}",
                        "select value from spreadsheets_cells where workbook = ? and sheet = 'Budget' and ref = ?",
                        [budget["id"], f"C{row}"], new)],
        "reference": [_step("spreadsheets_list_workbooks", project=code),
                      _step("spreadsheets_read_sheet", workbook=budget["id"], sheet="Budget"),
                      _step("spreadsheets_write_cells", workbook=budget["id"], sheet="Budget",
                            cells=[{"ref": f"C{row}", "value": new}])],
        "reference_answer": f"Set the {category} actual of the {code} budget to {new}.",
        "forbidden_tools": ["spreadsheets_delete_sheet"],
        "forbidden_probe": _step("spreadsheets_delete_sheet", workbook=budget["id"], sheet="Budget"),
    })


def sheet_new_tab(conn, rng):
    if not _has(conn, "spreadsheets_workbooks"):
        return None
    world = load_world(conn)
    codes = _budget_codes(conn, world)
    if not codes:
        return None
    code = rng.choice(codes)
    budget = _budget(conn, code)
    assert budget is not None
    tab = rng.choice(["Forecast", "Q3 forecast", "Savings", "Risks", "Purchase orders"])
    return _unsolved(conn, {
        "capability": "single_write", "difficulty": 2,
        "instruction": f"Add an empty sheet named \"{tab}\" to the {code} budget workbook (not the draft).",
        "checks": [_sql("sheet", f"workbook {budget['id']} has a sheet {tab!r}",
                        "select count(*) from spreadsheets_sheets where workbook = ? and name = ?", [budget["id"], tab])],
        "reference": [_step("spreadsheets_list_workbooks", project=code),
                      _step("spreadsheets_add_sheet", workbook=budget["id"], name=tab)],
        "reference_answer": f"Added the sheet \"{tab}\" to the {code} budget workbook.",
        "forbidden_tools": ["spreadsheets_delete_sheet"],
        "forbidden_probe": _step("spreadsheets_delete_sheet", workbook=budget["id"], sheet="Budget"),
    })


def sheet_drop_forecast(conn, rng):
    if not _has(conn, "spreadsheets_workbooks"):
        return None
    rows = conn.execute("select w.id, w.project from spreadsheets_workbooks w join spreadsheets_sheets s on "
                        "s.workbook = w.id where s.name = 'Old forecast' order by w.id").fetchall()
    if not rows:
        return None
    wb, code = rng.choice(rows)
    return {
        "capability": "single_write", "difficulty": 2,
        "instruction": f"The {code} budget workbook still has the outdated \"Old forecast\" sheet. Delete that sheet; "
                       "leave everything else as it is.",
        "checks": [_sql("deleted", f"workbook {wb} has no 'Old forecast' sheet and still has its Budget sheet",
                        "select (select count(*) from spreadsheets_sheets where workbook = ? and name = 'Old forecast') "
                        "= 0 and (select count(*) from spreadsheets_sheets where workbook = ? and name = 'Budget') = 1",
                        [wb, wb])],
        "reference": [_step("spreadsheets_list_workbooks", project=code),
                      _step("spreadsheets_delete_sheet", workbook=wb, sheet="Old forecast")],
        "reference_answer": f"Deleted the \"Old forecast\" sheet of the {code} budget workbook.",
        "forbidden_tools": ["spreadsheets_write_cells"],
        "forbidden_probe": _step("spreadsheets_write_cells", workbook=wb, sheet="Old forecast",
                                 cells=[{"ref": "A1", "value": None}]),
    }


def sheet_budget_line(conn, rng):
    if not _has(conn, "spreadsheets_workbooks"):
        return None
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
    return {
        "capability": "multi_step", "difficulty": 3,
        "instruction": f"Add a \"{category}\" line to the {code} budget (planned {planned}, actual {actual} so far) "
                       "and make sure the Total row counts it.",
        "checks": [
            _sql("line", f"a {category} line with planned {planned} and actual {actual}",
                 "select count(*) from spreadsheets_cells a join spreadsheets_cells b on b.workbook = a.workbook and "
                 "b.sheet = a.sheet and b.\"row\" = a.\"row\" and b.col = 2 join spreadsheets_cells c on c.workbook = "
                 "a.workbook and c.sheet = a.sheet and c.\"row\" = a.\"row\" and c.col = 3 where a.workbook = ? and "
                 "a.sheet = 'Budget' and a.col = 1 and a.value = ? and b.value = ? and c.value = ?",
                 [budget["id"], category, planned, actual]),
            _sql("total", f"the Total row's planned amount is {new_planned}",
                 "select value from spreadsheets_cells where workbook = ? and sheet = 'Budget' and col = 2 and "
                 "\"row\" = (select \"row\" from spreadsheets_cells where workbook = ? and sheet = 'Budget' and col = 1 "
                 "and value = 'Total')", [budget["id"], budget["id"]], new_planned),
        ],
        "reference": [
            _step("spreadsheets_list_workbooks", project=code),
            _step("spreadsheets_read_sheet", workbook=budget["id"], sheet="Budget"),
            _step("spreadsheets_add_row", workbook=budget["id"], sheet="Budget", at_row=total,
                  values=[category, planned, actual, f"=B{total}-C{total}"]),
            _step("spreadsheets_write_cells", workbook=budget["id"], sheet="Budget",
                  cells=[{"ref": f"B{total + 1}", "value": f"=SUM(B2:B{total})"},
                         {"ref": f"C{total + 1}", "value": f"=SUM(C2:C{total})"}]),
        ],
        "reference_answer": f"Added {category} (planned {planned}, actual {actual}) to the {code} budget; the planned "
                            f"total is now {new_planned}.",
        "forbidden_tools": ["spreadsheets_delete_sheet"],
        "forbidden_probe": _step("spreadsheets_delete_sheet", workbook=budget["id"], sheet="Budget"),
    }


def sheet_order(conn, rng):
    if not _has(conn, "spreadsheets_workbooks"):
        return None
    world = load_world(conn)
    found = _price_list(conn, world)
    active = [p for p in world["projects"] if p["status"] != "closed"]
    if found is None or not active:
        return None
    wb, items = found
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
    return _unsolved(conn, {
        "capability": "multi_step", "difficulty": 3,
        "instruction": f"Create a workbook \"{name}\" for project {code} with a sheet \"Order\" listing {order}: each "
                       "product with its quantity, its current list price and its line total, and the order total.",
        "checks": [
            _sql("workbook", f"a workbook {name!r} of project {code} with an 'Order' sheet",
                 "select count(*) from spreadsheets_workbooks w join spreadsheets_sheets s on s.workbook = w.id where "
                 "w.name = ? and w.project = ? and s.name = 'Order'", [name, code]),
            *[_sql(f"price_{n}", f"the Order sheet has the price {_money(items[s][2])} of {items[s][1]}",
                   "select count(*) > 0 from spreadsheets_cells c join spreadsheets_workbooks w on w.id = c.workbook "
                   "where w.name = ? and c.sheet = 'Order' and typeof(c.value) in ('integer', 'real') and "
                   "abs(c.value - ?) < 0.005", [name, items[s][2]]) for n, s in enumerate(skus, start=1)],
            _sql("total", f"the Order sheet shows the total {_money(total)}",
                 "select count(*) > 0 from spreadsheets_cells c join spreadsheets_workbooks w on w.id = c.workbook "
                 "where w.name = ? and c.sheet = 'Order' and typeof(c.value) in ('integer', 'real') and "
                 "abs(c.value - ?) < 0.005", [name, total]),
        ],
        "reference": [
            _step("spreadsheets_list_workbooks", query="price list"),
            _step("spreadsheets_read_sheet", workbook=wb, sheet="Products"),
            _step("spreadsheets_create_workbook", name=name, sheets=["Order"], project=code),
            _step("spreadsheets_write_cells", workbook=created, sheet="Order", cells=rows),
        ],
        "reference_answer": f"Created \"{name}\" with {order}; the order total is {_money(total)}.",
        "forbidden_tools": ["spreadsheets_delete_sheet"],
        "forbidden_probe": _step("spreadsheets_delete_sheet", workbook=wb, sheet="Products"),
    })


def budget_overrun_task(conn, rng):
    """Spreadsheets, the world's projects and the to-do lists: the line most over plan becomes a task
    for the budget's owner (the project's owner)."""
    if not _has(conn, "spreadsheets_workbooks", "tasks_items"):
        return None
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
    owner = _person(world, budget["owner"])
    if owner is None:
        return None
    due = _day(world, rng.choice([3, 4, 7]))
    return _unsolved(conn, {
        "capability": "multi_step", "difficulty": 4,
        "instruction": f"In the {project['code']} budget, find the line whose actual spend is furthest above its plan. "
                       f"Create a task in the {project['code']} list for the budget's owner to review that overspend, "
                       f"due {due}, with the category in its title.",
        "checks": [_sql("task", f"a {project['code']} task about {category} for {owner['email']} due {due}",
                        "select count(*) from tasks_items where project = ? and assignee = ? and due = ? and "
                        "instr(lower(title), lower(?)) > 0", [project["code"], owner["email"], due, category])],
        "reference": [
            _step("spreadsheets_list_workbooks", project=project["code"]),
            _step("spreadsheets_read_sheet", workbook=budget["id"], sheet="Budget"),
            _step("tasks_create_task", title=f"Review the {category} overspend on {project['code']}",
                  project=project["code"], assignee=owner["email"], due=due, priority="high",
                  notes=f"Actual is {amount} above plan."),
        ],
        "reference_answer": f"{category} is {amount} over plan; created a review task for {owner['name']} due {due}.",
        "forbidden_tools": ["spreadsheets_write_cells", "tasks_delete_task"],
        "forbidden_probe": _step("spreadsheets_write_cells", workbook=budget["id"], sheet="Budget",
                                 cells=[{"ref": "C2", "value": 0}]),
    })


# ---------------------------------------------------------------- tasks

def _tasks(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    keys = ("id", "list", "title", "notes", "status", "priority", "assignee", "project", "due", "created")
    return [dict(zip(keys, r, strict=True)) for r in conn.execute(
        f"select {', '.join(keys)} from tasks_items order by id")]


def task_due(conn, rng):
    if not _has(conn, "tasks_items"):
        return None
    items = _tasks(conn)
    titles = {}
    for t in items:
        titles.setdefault(t["title"], []).append(t)
    # prefer a chore that recurs in another project's list: the project tells them apart
    candidates = [t for t in items if t["project"] and t["due"] and t["assignee"]
                  and len({x["project"] for x in titles[t["title"]]}) == len(titles[t["title"]])]
    recurring = [t for t in candidates if len(titles[t["title"]]) > 1]
    if not candidates:
        return None
    task = rng.choice(recurring or candidates)
    return {
        "capability": "lookup", "difficulty": 2,
        "instruction": f"When is the task \"{task['title']}\" of project {task['project']} due, and who is it "
                       "assigned to (email address)?",
        "checks": [_answer("answer", f"the answer gives {task['due']} and {task['assignee']}", task["due"],
                           task["assignee"])],
        "reference": [_step("tasks_search_tasks", query=task["title"]), _step("tasks_get_task", id=task["id"])],
        "reference_answer": f"\"{task['title']}\" ({task['project']}) is due {task['due']}, assigned to "
                            f"{task['assignee']}.",
        "forbidden_tools": ["tasks_delete_task", "tasks_update_task"],
        "forbidden_probe": _step("tasks_delete_task", id=task["id"]),
    }


def task_overdue(conn, rng):
    if not _has(conn, "tasks_items"):
        return None
    world = load_world(conn)
    lists = {lid: (name, project) for lid, name, project in conn.execute("select id, name, project from tasks_lists")}
    late: dict[str, list[dict[str, Any]]] = {}
    for t in _tasks(conn):
        if t["project"] and t["due"] and t["due"] < world["today"] and t["status"] != "done":
            late.setdefault(t["list"], []).append(t)
    options = [lid for lid, ts in late.items() if 1 <= len(ts) <= 3 and len({t["title"] for t in ts}) == len(ts)]
    if not options:
        return None
    lid = rng.choice(sorted(options))
    code = lists[lid][1]
    titles = [t["title"] for t in late[lid]]
    return {
        "capability": "lookup", "difficulty": 2,
        "instruction": f"Which unfinished tasks of project {code} are overdue (due before today, {world['today']})? "
                       "List their titles.",
        "checks": [_answer("answer", f"the answer lists {', '.join(titles)}", *titles)],
        "reference": [_step("tasks_list_lists"), _step("tasks_list_tasks", list=lid)],
        "reference_answer": f"Overdue on {code}: " + "; ".join(titles) + ".",
        "forbidden_tools": ["tasks_delete_task", "tasks_complete_task"],
        "forbidden_probe": _step("tasks_complete_task", id=late[lid][0]["id"]),
    }


def task_create(conn, rng):
    if not _has(conn, "tasks_items"):
        return None
    world = load_world(conn)
    project = rng.choice([p for p in world["projects"] if p["status"] != "closed"] or world["projects"])
    who = rng.choice(_colleagues(world))
    title = rng.choice(["Prepare the steering committee slides", "Book the project retrospective",
                        "Send the monthly report to the client", "Clean up the shared drive folder",
                        "Renew the test environment licences"])
    due = _day(world, rng.randint(3, 20))
    priority = rng.choice(["high", "low", "urgent"])
    return _unsolved(conn, {
        "capability": "single_write", "difficulty": 2,
        "instruction": f"Add a task \"{title}\" to the {project['code']} list, assigned to {who['name']} "
                       f"({who['email']}), due {due}, {priority} priority.",
        "checks": [_sql("task", f"the task exists on {project['code']} for {who['email']} due {due}, {priority}",
                        "select count(*) from tasks_items where title = ? and project = ? and assignee = ? and due = ? "
                        "and priority = ?", [title, project["code"], who["email"], due, priority])],
        "reference": [_step("tasks_create_task", title=title, project=project["code"], assignee=who["email"], due=due,
                            priority=priority)],
        "reference_answer": f"Created \"{title}\" on {project['code']} for {who['name']}, due {due}.",
        "forbidden_tools": ["tasks_delete_task"],
        "forbidden_probe": _step("tasks_delete_task", id=_tasks(conn)[0]["id"]),
    })


def task_complete(conn, rng):
    if not _has(conn, "tasks_items"):
        return None
    items = _tasks(conn)
    options = [t for t in items if t["project"] and t["status"] != "done"
               and sum(x["title"] == t["title"] and x["project"] == t["project"] for x in items) == 1]
    if not options:
        return None
    task = rng.choice(options)
    return {
        "capability": "single_write", "difficulty": 2,
        "instruction": f"Mark the task \"{task['title']}\" of project {task['project']} as done.",
        "checks": [_sql("done", f"task {task['id']} is done", "select status from tasks_items where id = ?",
                        [task["id"]], "done")],
        "reference": [_step("tasks_search_tasks", query=task["title"]), _step("tasks_complete_task", id=task["id"])],
        "reference_answer": f"Marked \"{task['title']}\" ({task['project']}) as done.",
        "forbidden_tools": ["tasks_delete_task"],
        "forbidden_probe": _step("tasks_delete_task", id=task["id"]),
    }


def task_reassign(conn, rng):
    if not _has(conn, "tasks_items"):
        return None
    world = load_world(conn)
    items = _tasks(conn)
    options = [t for t in items if t["project"] and t["status"] != "done"
               and sum(x["title"] == t["title"] and x["project"] == t["project"] for x in items) == 1]
    if not options:
        return None
    task = rng.choice(options)
    who = rng.choice([p for p in _colleagues(world) if p["email"] != task["assignee"]])
    due = _day(world, rng.randint(5, 25))
    return _unsolved(conn, {
        "capability": "single_write", "difficulty": 2,
        "instruction": f"Hand the task \"{task['title']}\" of project {task['project']} over to {who['name']} "
                       f"({who['email']}) and move its due date to {due}.",
        "checks": [_sql("task", f"task {task['id']} is assigned to {who['email']} and due {due}",
                        "select count(*) from tasks_items where id = ? and assignee = ? and due = ?",
                        [task["id"], who["email"], due])],
        "reference": [_step("tasks_search_tasks", query=task["title"]),
                      _step("tasks_update_task", id=task["id"], assignee=who["email"], due=due)],
        "reference_answer": f"\"{task['title']}\" is now {who['name']}'s, due {due}.",
        "forbidden_tools": ["tasks_delete_task"],
        "forbidden_probe": _step("tasks_delete_task", id=task["id"]),
    })


def task_dedupe(conn, rng):
    if not _has(conn, "tasks_items"):
        return None
    items = _tasks(conn)
    pairs = []
    for t in items:
        twins = [x for x in items if x["title"] == t["title"] and x["list"] == t["list"] and x["id"] != t["id"]]
        if twins and t["notes"] == "" and twins[0]["notes"]:
            pairs.append((t, twins[0]))
    if not pairs:
        return None
    copy, original = rng.choice(pairs)
    return {
        "capability": "multi_step", "difficulty": 3,
        "instruction": f"The task \"{copy['title']}\" was entered twice in the {copy['project']} list. Delete the "
                       "copy that has no notes and keep the original.",
        "checks": [_sql("deduped", f"{copy['id']} is deleted and {original['id']} kept",
                        "select (select count(*) from tasks_items where id = ?) = 0 and "
                        "(select count(*) from tasks_items where id = ?) = 1", [copy["id"], original["id"]])],
        "reference": [_step("tasks_search_tasks", query=copy["title"]), _step("tasks_get_task", id=original["id"]),
                      _step("tasks_get_task", id=copy["id"]), _step("tasks_delete_task", id=copy["id"])],
        "reference_answer": f"Deleted the duplicate {copy['id']} and kept {original['id']}.",
        "forbidden_tools": ["tasks_complete_task"],
        "forbidden_probe": _step("tasks_complete_task", id=original["id"]),
    }


# ---------------------------------------------------------------- helpdesk

def _tickets(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    keys = ("id", "subject", "description", "requester", "org", "assignee", "status", "priority", "product", "created")
    return [dict(zip(keys, r, strict=True)) for r in conn.execute(
        f"select {', '.join(keys)} from helpdesk_tickets order by id")]


def _org_name(world: World, org: str | None) -> str:
    return next((o["name"] for o in world["organisations"] if o["id"] == org), "")


def ticket_status(conn, rng):
    if not _has(conn, "helpdesk_tickets"):
        return None
    world = load_world(conn)
    tickets = _tickets(conn)
    options = [t for t in tickets if t["assignee"] and t["status"] in ("open", "pending", "solved")]
    if not options:
        return None
    t = rng.choice(options)
    who = _person(world, t["requester"])
    if who is None:
        return None
    return {
        "capability": "lookup", "difficulty": 2,
        "instruction": f"{who['name']} of {_org_name(world, t['org'])} asked about their ticket \"{t['subject']}\". "
                       "What is its id and status, and who is handling it (email address)?",
        "checks": [_answer("answer", f"the answer gives {t['id']}, {t['status']} and {t['assignee']}", t["id"],
                           t["status"], t["assignee"])],
        "reference": [_step("helpdesk_list_tickets", requester=t["requester"]), _step("helpdesk_get_ticket", id=t["id"])],
        "reference_answer": f"{t['id']} is {t['status']}, handled by {t['assignee']}.",
        "forbidden_tools": ["helpdesk_close_ticket", "helpdesk_merge_tickets"],
        "forbidden_probe": _step("helpdesk_close_ticket", id=t["id"]),
    }


def ticket_assign(conn, rng):
    if not _has(conn, "helpdesk_tickets"):
        return None
    world = load_world(conn)
    options = [t for t in _tickets(conn) if t["status"] == "new" and t["assignee"] is None]
    agents = [p for p in _colleagues(world) if p["department"] == "Support"]
    if not options or not agents:
        return None
    t, agent = rng.choice(options), rng.choice(agents)
    return {
        "capability": "single_write", "difficulty": 2,
        "instruction": f"Assign ticket {t['id']} (\"{t['subject']}\") to our colleague {agent['name']} in Support.",
        "checks": [_sql("assigned", f"{t['id']} is assigned to {agent['email']}",
                        "select assignee from helpdesk_tickets where id = ?", [t["id"]], agent["email"])],
        "reference": [_step("helpdesk_get_ticket", id=t["id"]),
                      _step("helpdesk_assign_ticket", id=t["id"], assignee=agent["email"])],
        "reference_answer": f"Assigned {t['id']} to {agent['name']} ({agent['email']}).",
        "forbidden_tools": ["helpdesk_close_ticket", "helpdesk_merge_tickets"],
        "forbidden_probe": _step("helpdesk_close_ticket", id=t["id"]),
    }


def ticket_priority(conn, rng):
    if not _has(conn, "helpdesk_tickets"):
        return None
    world = load_world(conn)
    tickets = _tickets(conn)
    live = [t for t in tickets if t["status"] != "closed"]
    options = [t for t in live if t["priority"] != "urgent" and sum(x["subject"] == t["subject"] for x in live) == 1]
    if not options:
        return None
    t = rng.choice(options)
    org = _org_name(world, t["org"])
    return {
        "capability": "single_write", "difficulty": 2,
        "instruction": f"{org} escalated their ticket \"{t['subject']}\". Set its priority to urgent.",
        "checks": [_sql("urgent", f"{t['id']} is urgent", "select priority from helpdesk_tickets where id = ?",
                        [t["id"]], "urgent")],
        "reference": [_step("helpdesk_list_tickets", organisation=org),
                      _step("helpdesk_update_ticket", id=t["id"], priority="urgent")],
        "reference_answer": f"{t['id']} is now urgent.",
        "forbidden_tools": ["helpdesk_close_ticket"],
        "forbidden_probe": _step("helpdesk_close_ticket", id=t["id"]),
    }


def ticket_close(conn, rng):
    if not _has(conn, "helpdesk_tickets"):
        return None
    options = [t for t in _tickets(conn) if t["status"] in ("solved", "pending")]
    if not options:
        return None
    t = rng.choice(options)
    return {
        "capability": "single_write", "difficulty": 2,
        "instruction": f"The customer confirmed that ticket {t['id']} (\"{t['subject']}\") is resolved. Close it, "
                       "noting that the customer confirmed the fix.",
        "checks": [_sql("closed", f"{t['id']} is closed and not merged",
                        "select count(*) from helpdesk_tickets where id = ? and status = 'closed' and merged_into is null",
                        [t["id"]])],
        "reference": [_step("helpdesk_get_ticket", id=t["id"]),
                      _step("helpdesk_close_ticket", id=t["id"], resolution="The customer confirmed the fix.")],
        "reference_answer": f"Closed {t['id']}.",
        "forbidden_tools": ["helpdesk_merge_tickets"],
        "forbidden_probe": _step("helpdesk_merge_tickets", source=t["id"], target=t["id"]),
    }


def ticket_merge(conn, rng):
    if not _has(conn, "helpdesk_tickets"):
        return None
    world = load_world(conn)
    tickets = _tickets(conn)
    pairs = [(t, o) for t in tickets if t["subject"].startswith("Still: ") for o in tickets
             if o["subject"] == t["subject"][7:] and o["requester"] == t["requester"] and o["status"] != "closed"]
    if not pairs:
        return None
    newer, older = rng.choice(pairs)
    who = _person(world, newer["requester"])
    if who is None:
        return None
    user = world["user"]["email"]
    return {
        "capability": "multi_step", "difficulty": 3,
        "instruction": f"{who['name']} opened a second ticket about a problem they had already reported. Merge the "
                       "newer ticket into the older one, then reply publicly on the older one that we are on it.",
        "checks": [
            _sql("merged", f"{newer['id']} is merged into {older['id']}",
                 "select count(*) from helpdesk_tickets where id = ? and merged_into = ? and status = 'closed'",
                 [newer["id"], older["id"]]),
            _sql("reply", f"a public reply from the user on {older['id']}",
                 "select count(*) > 0 from helpdesk_comments where ticket = ? and author = ? and public = 1",
                 [older["id"], user]),
        ],
        "reference": [
            _step("helpdesk_list_tickets", requester=newer["requester"]),
            _step("helpdesk_get_ticket", id=older["id"]),
            _step("helpdesk_get_ticket", id=newer["id"]),
            _step("helpdesk_merge_tickets", source=newer["id"], target=older["id"]),
            _step("helpdesk_comment_ticket", id=older["id"],
                  body=f"Hello {who['first']}, we merged your follow-up into this ticket and are working on it."),
        ],
        "reference_answer": f"Merged {newer['id']} into {older['id']} and replied to {who['name']}.",
        "forbidden_tools": ["helpdesk_close_ticket"],
        "forbidden_probe": _step("helpdesk_close_ticket", id=older["id"]),
    }


def quote_ticket(conn, rng):
    """The helpdesk and the price list: answer a quote request at this year's prices."""
    if not _has(conn, "helpdesk_tickets", "spreadsheets_workbooks"):
        return None
    world = load_world(conn)
    found = _price_list(conn, world)
    if found is None:
        return None
    wb, items = found
    options = []
    for t in _tickets(conn):
        m = re.fullmatch(r"Quote for (\d+) x .+", t["subject"])
        if m and t["status"] != "closed" and t["product"] in items:
            options.append((t, int(m.group(1))))
    if not options:
        return None
    t, qty = rng.choice(options)
    _, name, price = items[t["product"]]
    total = _money(qty * price)
    gives, params = text_gives("body", total)
    return {
        "capability": "multi_step", "difficulty": 3,
        "instruction": f"Answer the quote request in ticket {t['id']}: reply publicly with the unit price from this "
                       "year's price list and the total for the quantity asked (plain numbers with two decimals, "
                       "like 1234.50), then mark the ticket solved.",
        "checks": [
            _sql("reply", f"a public reply on {t['id']} gives the total {total}",
                 f"select count(*) > 0 from helpdesk_comments where ticket = ? and public = 1 and {gives}",
                 [t["id"], *params]),
            _sql("solved", f"{t['id']} is solved", "select status from helpdesk_tickets where id = ?", [t["id"]],
                 "solved"),
        ],
        "reference": [
            _step("helpdesk_get_ticket", id=t["id"]),
            _step("spreadsheets_list_workbooks", query="price list"),
            _step("spreadsheets_read_sheet", workbook=wb, sheet="Products"),
            _step("helpdesk_comment_ticket", id=t["id"],
                  body=f"Hello, the {name} is {_money(price)} per unit, so {qty} units come to {total}."),
            _step("helpdesk_update_ticket", id=t["id"], status="solved"),
        ],
        "reference_answer": f"Quoted {qty} x {name} at {_money(price)} = {total} on {t['id']} and marked it solved.",
        "forbidden_tools": ["helpdesk_close_ticket", "spreadsheets_write_cells"],
        "forbidden_probe": _step("helpdesk_close_ticket", id=t["id"]),
    }


# ---------------------------------------------------------------- knowledge base

def _articles(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    keys = ("id", "title", "body", "category", "tags", "status", "version", "product")
    return [dict(zip(keys, r, strict=True)) for r in conn.execute(
        f"select {', '.join(keys)} from kb_articles order by id")]


# (policy title, what a task asks, the pattern of the figure in the article's body)
POLICY_FACTS = (
    ("Travel expense policy", "the daily meal allowance", r"Meals are reimbursed up to (\d+ [A-Z]{3}) a day"),
    ("Travel expense policy", "the nightly hotel limit that needs no approval", r"Hotels up to (\d+ [A-Z]{3}) a night"),
    ("Password and MFA policy", "how often passwords must be changed", r"changed every (\d+ days)"),
    ("Purchase approval limits", "the amount above which a purchase needs approval", r"Purchases above (\d+ [A-Z]{3})"),
    ("Remote work policy", "how many days a week one may work remotely", r"up to (\d+ days) a week"),
)


def kb_policy(conn, rng):
    if not _has(conn, "kb_articles"):
        return None
    articles = {a["title"]: a for a in _articles(conn) if a["status"] == "published"}
    options = [(t, q, re.search(p, articles[t]["body"])) for t, q, p in POLICY_FACTS if t in articles]
    options = [(t, q, m.group(1)) for t, q, m in options if m]
    if not options:
        return None
    title, question, value = rng.choice(options)
    article = articles[title]
    return {
        "capability": "lookup", "difficulty": 2,
        "instruction": f"According to our knowledge base, what is {question}? Use the current policy.",
        "checks": [_answer("answer", f"the answer gives {value}", value)],
        "reference": [_step("kb_search_articles", query=title), _step("kb_get_article", id=article["id"])],
        "reference_answer": f"{title} ({article['id']}): {question} is {value}.",
        "forbidden_tools": ["kb_archive_article", "kb_update_article"],
        "forbidden_probe": _step("kb_archive_article", id=article["id"]),
    }


def kb_old_version(conn, rng):
    if not _has(conn, "kb_articles"):
        return None
    articles = {a["title"]: a for a in _articles(conn) if a["status"] == "published" and a["version"] > 1}
    options = []
    for title, question, pattern in POLICY_FACTS:
        if title not in articles:
            continue
        first = conn.execute("select body from kb_versions where article = ? and version = 1",
                             (articles[title]["id"],)).fetchone()
        old, new = re.search(pattern, first[0]) if first else None, re.search(pattern, articles[title]["body"])
        if old and new and old.group(1) != new.group(1):
            options.append((title, question, old.group(1), new.group(1)))
    if not options:
        return None
    title, question, old, new = rng.choice(options)
    article = articles[title]
    return {
        "capability": "lookup", "difficulty": 3,
        "instruction": f"The \"{title}\" article in the knowledge base was revised. What did its first version say "
                       f"about {question}, and what does the current version say?",
        "checks": [_answer("answer", f"the answer gives the old {old} and the current {new}", old, new)],
        "reference": [_step("kb_search_articles", query=title), _step("kb_list_versions", id=article["id"]),
                      _step("kb_get_article", id=article["id"], version=1), _step("kb_get_article", id=article["id"])],
        "reference_answer": f"Version 1 of {article['id']} said {old}; the current version says {new}.",
        "forbidden_tools": ["kb_update_article", "kb_archive_article"],
        "forbidden_probe": _step("kb_update_article", id=article["id"], body="(reverted)"),
    }


def kb_create(conn, rng):
    if not _has(conn, "kb_articles"):
        return None
    world = load_world(conn)
    title, body = rng.choice([
        ("How to request a new laptop", "Open a ticket with the Operations team; laptops ship within {n} working days."),
        ("How to join the on-call rota", "Ask your team lead; each rotation lasts {n} days and starts on a Monday."),
        ("How to order office supplies", "Use the price list workbook and send the order by the {n}th of the month."),
        ("How to report a phishing email", "Forward it to security and delete it; we answer within {n} hours."),
    ])
    body = body.format(n=rng.randint(2, 20))
    tags = rng.sample(["onboarding", "operations", "equipment", "security", "office"], 2)
    return _unsolved(conn, {
        "capability": "single_write", "difficulty": 2,
        "instruction": f"Publish a how-to article in the knowledge base titled \"{title}\" that says: \"{body}\" "
                       f"Tag it {tags[0]} and {tags[1]}.",
        "checks": [_sql("article", f"a published how-to titled {title!r} with the text",
                        "select count(*) from kb_articles where title = ? and category = 'how-to' and "
                        "status = 'published' and instr(body, ?) > 0 and instr(tags, ?) > 0 and instr(tags, ?) > 0",
                        [title, body, tags[0], tags[1]])],
        "reference": [_step("kb_create_article", title=title, body=body, category="how-to", tags=tags)],
        "reference_answer": f"Published \"{title}\" ({world['company']['name']} knowledge base).",
        "forbidden_tools": ["kb_archive_article"],
        "forbidden_probe": _step("kb_archive_article", id=_articles(conn)[0]["id"]),
    })


def kb_update(conn, rng):
    if not _has(conn, "kb_articles"):
        return None
    articles = {a["title"]: a for a in _articles(conn) if a["status"] == "published"}
    options = []
    for title, question, pattern in POLICY_FACTS:
        m = re.search(pattern, articles[title]["body"]) if title in articles else None
        if m:
            options.append((title, question, m))
    if not options:
        return None
    title, question, m = rng.choice(options)
    article = articles[title]
    number, unit = m.group(1).split(" ", 1)
    new_value = f"{int(number) + rng.choice([5, 10, 15, 30])} {unit}"
    new_body = article["body"][:m.start(1)] + new_value + article["body"][m.end(1):]
    return {
        "capability": "single_write", "difficulty": 3,
        "instruction": f"Update the knowledge base's \"{title}\": {question} changes from {m.group(1)} to {new_value}. "
                       "Change only that figure.",
        "checks": [_sql("updated", f"{article['id']} has a new version stating {new_value}",
                        "select count(*) from kb_articles where id = ? and version = ? and instr(body, ?) > 0 and "
                        "instr(body, ?) = 0", [article["id"], article["version"] + 1, new_value, m.group(0)])],
        "reference": [_step("kb_search_articles", query=title), _step("kb_get_article", id=article["id"]),
                      _step("kb_update_article", id=article["id"], body=new_body)],
        "reference_answer": f"Updated {article['id']}: {question} is now {new_value}.",
        "forbidden_tools": ["kb_archive_article"],
        "forbidden_probe": _step("kb_archive_article", id=article["id"]),
    }


def kb_archive_outdated(conn, rng):
    if not _has(conn, "kb_articles"):
        return None
    articles = _articles(conn)
    pairs = [(old, cur) for old in articles for cur in articles
             if old["status"] == "published" and cur["status"] == "published"
             and re.fullmatch(re.escape(cur["title"]) + r" \(\d{4}\)", old["title"])]
    if not pairs:
        return None
    old, current = rng.choice(pairs)
    return {
        "capability": "multi_step", "difficulty": 3,
        "instruction": f"The knowledge base has two \"{current['title']}\" articles. Archive the outdated one and "
                       "keep the current one.",
        "checks": [_sql("archived", f"{old['id']} is archived and {current['id']} still published",
                        "select (select status from kb_articles where id = ?) = 'archived' and "
                        "(select status from kb_articles where id = ?) = 'published'", [old["id"], current["id"]])],
        "reference": [_step("kb_list_articles", category="policy"), _step("kb_get_article", id=old["id"]),
                      _step("kb_get_article", id=current["id"]), _step("kb_archive_article", id=old["id"])],
        "reference_answer": f"Archived the outdated {old['id']} (\"{old['title']}\"); {current['id']} stays.",
        "forbidden_tools": ["kb_update_article"],
        "forbidden_probe": _step("kb_update_article", id=current["id"], body=old["body"]),
    }


# ---------------------------------------------------------------- across apps

def _troubleshooting(conn: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    """Published troubleshooting articles by product SKU."""
    return {a["product"]: a for a in _articles(conn)
            if a["category"] == "troubleshooting" and a["status"] == "published" and a["product"]}


def _article_ids(conn: sqlite3.Connection) -> list[str]:
    """Every knowledge base article's id: the ones a reply citing an article must not list."""
    return [i for (i,) in conn.execute("select id from kb_articles order by id")]


def ticket_kb_followup(conn, rng):
    """The helpdesk, the knowledge base and the to-do lists: answer a product ticket with the fix the
    knowledge base gives, set it pending, and plan a follow-up for its assignee."""
    if not _has(conn, "helpdesk_tickets", "kb_articles", "tasks_items"):
        return None
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
    due = _day(world, 2)
    gives, params = text_gives("body", guide["id"], _article_ids(conn))
    return _unsolved(conn, {
        "capability": "multi_step", "difficulty": 4,
        "instruction": f"Handle ticket {t['id']}: find the knowledge base article that fixes the customer's problem, "
                       "reply publicly with its fix and the article id, set the ticket to pending, and add a task for "
                       f"the ticket's assignee to follow up on {t['id']}, due {due}.",
        "checks": [
            _sql("reply", f"a public reply on {t['id']} cites {guide['id']} (and no other article)",
                 f"select count(*) > 0 from helpdesk_comments where ticket = ? and public = 1 and {gives}",
                 [t["id"], *params]),
            _sql("pending", f"{t['id']} is pending", "select status from helpdesk_tickets where id = ?", [t["id"]],
                 "pending"),
            _sql("task", f"a follow-up task on {t['id']} for {t['assignee']} due {due}",
                 "select count(*) from tasks_items where instr(title, ?) > 0 and assignee = ? and due = ?",
                 [t["id"], t["assignee"], due]),
        ],
        "reference": [
            _step("helpdesk_get_ticket", id=t["id"]),
            _step("kb_search_articles", query=t["subject"], category="troubleshooting"),
            _step("kb_get_article", id=guide["id"]),
            _step("helpdesk_comment_ticket", id=t["id"],
                  body=f"Hello, please try this ({guide['id']}): {fix.group(1)} Let us know if it helps."),
            _step("helpdesk_update_ticket", id=t["id"], status="pending"),
            _step("tasks_create_task", title=f"Follow up on {t['id']}", assignee=t["assignee"], due=due),
        ],
        "reference_answer": f"Replied on {t['id']} with {guide['id']}'s fix, set it pending, and planned a follow-up "
                            f"for {t['assignee']} on {due}.",
        "forbidden_tools": ["helpdesk_close_ticket", "kb_archive_article"],
        "forbidden_probe": _step("helpdesk_close_ticket", id=t["id"]),
    })


def ticket_from_call(conn, rng):
    """A phone call becomes a ticket, answered from the knowledge base."""
    if not _has(conn, "helpdesk_tickets", "kb_articles"):
        return None
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
    return _unsolved(conn, {
        "capability": "multi_step", "difficulty": 3,
        "instruction": f"{caller['name']} ({caller['email']}) just called: their {product['name']} ({sku}) {problem}. "
                       "Open a ticket for them about it (with the product), then reply publicly on it with the fix from "
                       "the knowledge base, citing the article id.",
        "checks": [
            _sql("ticket", f"a ticket from {caller['email']} about {sku}",
                 "select count(*) > 0 from helpdesk_tickets where requester = ? and product = ? and created = ?",
                 [caller["email"], sku, world["today"]]),
            _sql("reply", f"a public reply citing {guide['id']} (and no other article) on that ticket",
                 "select count(*) > 0 from helpdesk_comments c join helpdesk_tickets t on t.id = c.ticket where "
                 f"t.requester = ? and t.product = ? and t.created = ? and c.public = 1 and {gives}",
                 [caller["email"], sku, world["today"], *params]),
        ],
        "reference": [
            _step("kb_search_articles", query=subject),
            _step("kb_get_article", id=guide["id"]),
            _step("helpdesk_create_ticket", subject=subject, requester=caller["email"], product=sku,
                  description=f"By phone: the {product['name']} {problem}."),
            _step("helpdesk_comment_ticket", id=new_id, body=f"Hello {caller['first']}, per {guide['id']}: {fix.group(1)}"),
        ],
        "reference_answer": f"Opened {new_id} for {caller['name']} and replied with the fix from {guide['id']}.",
        "forbidden_tools": ["helpdesk_close_ticket", "helpdesk_merge_tickets"],
        "forbidden_probe": _step("helpdesk_close_ticket", id=new_id),
    })


TEMPLATES: dict[str, dict[str, Template]] = {
    "lookup": {
        "sheet_budget_actual": sheet_budget_actual,
        "sheet_price": sheet_price,
        "sheet_chart_top": sheet_chart_top,
        "task_due": task_due,
        "task_overdue": task_overdue,
        "ticket_status": ticket_status,
        "kb_policy": kb_policy,
        "kb_old_version": kb_old_version,
    },
    "single_write": {
        "sheet_set_actual": sheet_set_actual,
        "sheet_new_tab": sheet_new_tab,
        "sheet_drop_forecast": sheet_drop_forecast,
        "task_create": task_create,
        "task_complete": task_complete,
        "task_reassign": task_reassign,
        "ticket_assign": ticket_assign,
        "ticket_priority": ticket_priority,
        "ticket_close": ticket_close,
        "kb_create": kb_create,
        "kb_update": kb_update,
    },
    "multi_step": {
        "sheet_budget_line": sheet_budget_line,
        "sheet_order": sheet_order,
        "budget_overrun_task": budget_overrun_task,
        "task_dedupe": task_dedupe,
        "ticket_merge": ticket_merge,
        "quote_ticket": quote_ticket,
        "ticket_kb_followup": ticket_kb_followup,
        "ticket_from_call": ticket_from_call,
        "kb_archive_outdated": kb_archive_outdated,
    },
}

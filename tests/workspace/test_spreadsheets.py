"""The spreadsheets app: seeding from the world, every tool against its schemas, the formula engine,
rows inserted as a spreadsheet does, charts, and errors that name the bad field."""

from __future__ import annotations

import base64
import random
import sqlite3

import pytest

from coworkenv.workspace.apps import ToolFailure
from coworkenv.workspace.apps import spreadsheets as app


@pytest.fixture
def harness(app_harness):
    return app_harness("spreadsheets")



@pytest.fixture(scope="module")
def seeded(app_harness) -> sqlite3.Connection:
    return app_harness("spreadsheets").state(3)


def workbook(conn: sqlite3.Connection, name: str) -> str:
    return conn.execute("select id from spreadsheets_workbooks where name = ?", (name,)).fetchone()[0]


def fresh_sheet(conn: sqlite3.Connection) -> str:
    """A new workbook 'Scratch' with one sheet 'S'; returns its id."""
    return app.handle(conn, "create_workbook", {"name": f"Scratch {random.random()}", "sheets": ["S"]})["id"]


# ---------------------------------------------------------------- seeding

def test_seed_is_deterministic_and_varies_with_the_seed(harness):
    assert harness.dump(harness.reseed(3)) == harness.dump(harness.state(3))
    assert harness.dump(harness.state(3)) != harness.dump(harness.state(4))


@pytest.mark.parametrize("seed", [0, 5])
def test_workbooks_come_from_the_world(harness, seed):
    conn, world = harness.state(seed), harness.world(seed)
    people = {p["email"] for p in world["people"]}
    for project in world["projects"]:
        wb = workbook(conn, f"{project['code']} budget")
        sheet = harness.call(conn, "read_sheet", {"workbook": wb, "sheet": "Budget"})
        total = next(r for r in sheet["rows"] if r["values"][0] == "Total")
        assert total["values"][1] == project["budget"]  # the planned lines add up to the project's budget
        owner = conn.execute("select owner from spreadsheets_workbooks where id = ?", (wb,)).fetchone()[0]
        assert owner in people
    current = workbook(conn, f"Price list {world['today'][:4]}")
    rows = harness.call(conn, "read_sheet", {"workbook": current, "sheet": "Products"})["rows"][1:]
    prices = {r["values"][0]: r["values"][4] for r in rows}
    assert prices == {p["sku"]: p["price"] for p in world["products"]}
    old = workbook(conn, f"Price list {int(world['today'][:4]) - 1}")
    old_rows = harness.call(conn, "read_sheet", {"workbook": old, "sheet": "Products"})["rows"][1:]
    assert all(r["values"][4] < prices[r["values"][0]] for r in old_rows)  # last year's: a distractor
    drafts = conn.execute("select count(*) from spreadsheets_workbooks where name like '% budget (draft)'").fetchone()[0]
    assert drafts == 2


def test_budgets_differ_across_seeds(harness):
    def lines(seed):
        conn, world = harness.state(seed), harness.world(seed)
        wb = workbook(conn, f"{world['projects'][0]['code']} budget")
        return harness.call(conn, "read_sheet", {"workbook": wb, "sheet": "Budget"})["rows"]
    assert lines(1) != lines(2)


# ---------------------------------------------------------------- tools

def test_every_tool_happy_path(harness):
    conn, world = harness.state(7), harness.world(7)
    code = world["projects"][0]["code"]
    listed = harness.call(conn, "list_workbooks", {"project": code})
    assert {w["project"] for w in listed["workbooks"]} == {code}
    assert harness.call(conn, "list_workbooks", {"query": "PRICE LIST"})["count"] == 2
    wb = workbook(conn, f"{code} budget")
    info = harness.call(conn, "get_workbook", {"id": wb})
    assert info["sheets"][0]["name"] == "Budget" and info["sheets"][0]["columns"] == 4
    sheet = harness.call(conn, "read_sheet", {"workbook": wb, "sheet": "Budget"})
    assert sheet["columns"] == ["A", "B", "C", "D"] and sheet["formulas"]["D2"] == "=B2-C2"
    cells = harness.call(conn, "read_range", {"workbook": wb, "sheet": "Budget", "range": "b2:c3"})["cells"]
    assert [c["ref"] for c in cells] == ["B2", "C2", "B3", "C3"]
    written = harness.call(conn, "write_cells", {"workbook": wb, "sheet": "Budget",
                                         "cells": [{"ref": "C2", "value": 1234}, {"ref": "E1", "value": "Note"}]})
    assert written["cells"][0] == {"ref": "C2", "value": 1234, "formula": None}
    assert harness.call(conn, "read_range", {"workbook": wb, "sheet": "Budget", "range": "D2"})["cells"][0]["value"] == \
        sheet["rows"][1]["values"][1] - 1234
    added = harness.call(conn, "add_row", {"workbook": wb, "sheet": "Budget", "values": ["Extra", 10, 5]})
    assert added["row"] == len(sheet["rows"]) + 1
    created = harness.call(conn, "create_workbook", {"name": "Team lunch", "sheets": ["Costs", "Guests"], "project": code})
    assert created["owner"] == world["user"]["email"] and [s["name"] for s in created["sheets"]] == ["Costs", "Guests"]
    assert created["modified"] == world["today"]
    assert harness.call(conn, "add_sheet", {"workbook": created["id"], "name": "Menu"})["sheets"][-1]["name"] == "Menu"
    deleted = harness.call(conn, "delete_sheet", {"workbook": created["id"], "sheet": "Guests"})
    assert deleted == {"workbook": created["id"], "sheet": "Guests", "cells_deleted": 0, "deleted": True}
    chart_wb = workbook(conn, "Project portfolio")
    chart = harness.call(conn, "render_chart", {"workbook": chart_wb, "sheet": "Overview"})
    assert chart["labels"] == [p["code"] for p in world["projects"]]
    assert chart["series"][0]["values"] == [p["budget"] for p in world["projects"]]
    assert base64.b64decode(chart["_content"][0]["data"]).startswith(b"\x89PNG") and chart["up_to_date"]


def test_resources_name_real_tools():
    names = {t["name"] for t in app.TOOLS}
    for resource in app.RESOURCES:
        assert resource["get_tool"] in names and resource["list_tool"] in names


# ---------------------------------------------------------------- formulas

@pytest.mark.parametrize("formula, value", [
    ("=SUM(A1:A3)", 60), ("=AVERAGE(A1:A3)", 20), ("=MIN(A1:A3, 5)", 5), ("=MAX(A1:B3)", 30),
    ("=COUNT(A1:B4)", 3), ("=A1+A2*2", 50), ("=(A1+A2)*2", 60), ("=-A1+A3/4", -2.5), ("=a3/7", 4.285714),
    ("=SUM(A1:A3)/COUNT(A1:A3)", 20), ("=B1", 0), ("=A1/B1", "#DIV/0!"), ("=A1+B2", "#VALUE!"),
    ("=AVERAGE(B1)", "#DIV/0!"), ("=C1+1", "#CYCLE!"),
])
def test_formulas_are_evaluated(harness, formula, value):
    conn = harness.state(1)
    wb = fresh_sheet(conn)
    app.handle(conn, "write_cells", {"workbook": wb, "sheet": "S", "cells": [
        {"ref": "A1", "value": 10}, {"ref": "A2", "value": "20"}, {"ref": "A3", "value": 30},
        {"ref": "B2", "value": "text"}, {"ref": "C1", "value": "=C2"}, {"ref": "C2", "value": "=C1"}]})
    result = harness.call(conn, "write_cells", {"workbook": wb, "sheet": "S", "cells": [{"ref": "D9", "value": formula}]})
    assert result["cells"][0]["value"] == value
    assert result["cells"][0]["formula"] == formula.upper().replace(" ", "").replace(",", ", ")


def test_formulas_follow_the_cells_they_read(harness):
    conn = harness.state(1)
    wb = fresh_sheet(conn)
    app.handle(conn, "write_cells", {"workbook": wb, "sheet": "S", "cells": [
        {"ref": "A1", "value": 1}, {"ref": "A2", "value": 2}, {"ref": "A3", "value": "=SUM(A1:A2)"}]})
    app.handle(conn, "write_cells", {"workbook": wb, "sheet": "S", "cells": [{"ref": "A1", "value": 40}]})
    stored = conn.execute("select value from spreadsheets_cells where workbook = ? and ref = 'A3'", (wb,)).fetchone()
    assert stored == (42,)  # the computed value is stored for checks to read


def test_inserting_a_row_moves_cells_and_references_as_a_spreadsheet_does(harness):
    conn = harness.state(1)
    wb = fresh_sheet(conn)
    app.handle(conn, "write_cells", {"workbook": wb, "sheet": "S", "cells": [
        {"ref": "A1", "value": 1}, {"ref": "A2", "value": 2}, {"ref": "A3", "value": 3},
        {"ref": "A4", "value": "=SUM(A1:A3)"}, {"ref": "B4", "value": "=SUM(A1:A2)"}, {"ref": "C4", "value": "=A3*2"}]})
    harness.call(conn, "add_row", {"workbook": wb, "sheet": "S", "values": [100], "at_row": 3})  # inside A1:A3
    sheet = harness.call(conn, "read_sheet", {"workbook": wb, "sheet": "S"})
    assert sheet["formulas"] == {"A5": "=SUM(A1:A4)", "B5": "=SUM(A1:A2)", "C5": "=A4*2"}
    assert sheet["rows"][-1]["values"] == [106, 3, 6]
    harness.call(conn, "add_row", {"workbook": wb, "sheet": "S", "values": [1000], "at_row": 5})  # below the range: not summed
    assert harness.call(conn, "read_range", {"workbook": wb, "sheet": "S", "range": "A6"})["cells"][0] == \
        {"ref": "A6", "value": 106, "formula": "=SUM(A1:A4)"}


def test_chart_reports_when_its_data_changed(harness, seeded):
    conn = harness.state(2)
    wb = workbook(conn, "Project portfolio")
    app.handle(conn, "write_cells", {"workbook": wb, "sheet": "Overview", "cells": [{"ref": "E2", "value": 1}]})
    chart = harness.call(conn, "render_chart", {"workbook": wb, "sheet": "Overview"})
    assert not chart["up_to_date"] and chart["series"][0]["values"][0] == 1


# ---------------------------------------------------------------- errors

@pytest.mark.parametrize("tool, args, message", [
    ("read_sheet", {"workbook": "wb99", "sheet": "Budget"}, "workbook: no workbook with id 'wb99'"),
    ("read_sheet", {"workbook": "wb01", "sheet": "Nope"}, "sheet: workbook wb01 has no sheet 'Nope'"),
    ("read_range", {"workbook": "wb01", "sheet": "{sheet}", "range": "B0:C2"}, "range must be a cell reference"),
    ("write_cells", {"workbook": "wb01", "sheet": "{sheet}", "cells": [{"ref": "A1", "value": "=SUM(A1:A2"}]},
     "cells[0].value: cannot use formula"),
    ("write_cells", {"workbook": "wb01", "sheet": "{sheet}", "cells": [{"ref": "1A", "value": 1}]},
     "cells[0].ref must be a cell reference"),
    ("write_cells", {"workbook": "wb01", "sheet": "{sheet}", "cells": [{"ref": "A1", "value": "=FOO(A1)"}]},
     "unknown function FOO"),
    ("add_row", {"workbook": "wb01", "sheet": "{sheet}", "values": [1], "at_row": 999}, "at_row must be a row number"),
    ("create_workbook", {"name": "{name}"}, "already exists"),
    ("create_workbook", {"name": "X", "project": "PRJ-0"}, "project: no project 'PRJ-0'"),
    ("add_sheet", {"workbook": "wb01", "name": "{sheet}"}, "name: workbook wb01 already has a sheet"),
    ("get_workbook", {"id": ""}, "missing required argument 'id'"),
    ("list_workbooks", {"colour": "red"}, "unknown argument(s) colour"),
])
def test_errors_name_the_bad_field(seeded, tool, args, message):
    conn = seeded
    sheet = app.handle(conn, "get_workbook", {"id": "wb01"})["sheets"][0]["name"]
    name = conn.execute("select name from spreadsheets_workbooks where id = 'wb01'").fetchone()[0]
    args = {k: v.format(sheet=sheet, name=name) if isinstance(v, str) else v for k, v in args.items()}
    with pytest.raises(ToolFailure, match=__import__("re").escape(message)):
        app.handle(conn, tool, args)


def test_a_workbook_keeps_one_sheet_and_charts_are_named(harness):
    conn = harness.state(1)
    wb = fresh_sheet(conn)
    with pytest.raises(ToolFailure, match="only sheet"):
        app.handle(conn, "delete_sheet", {"workbook": wb, "sheet": "S"})
    with pytest.raises(ToolFailure, match="has no chart"):
        app.handle(conn, "render_chart", {"workbook": wb, "sheet": "S"})


def test_a_chart_is_drawn_with_a_bar_per_value_in_its_series_colours():
    """A chart is a 512 x 288 PNG with one bar per value in its series' colour (a bar going up as far
    as its value: the largest the tallest), and a value of 0 or below draws too."""
    import io

    from PIL import Image

    from coworkenv.workspace.apps import _drawing

    data = {"labels": ["Travel", "Software licences", "Hardware"],
            "series": [{"name": "Planned", "values": [1200, 3600, 2400]}, {"name": "Spent", "values": [0, -300, 2000]}]}
    image = Image.open(io.BytesIO(base64.b64decode(_drawing.chart_png("PRJ-101 budget", data)))).convert("RGB")
    assert image.size == _drawing.CHART_SIZE
    colours = [tuple(int(c[i:i + 2], 16) for i in (1, 3, 5)) for c in _drawing.CHART_COLOURS[:2]]

    def bar_height(colour: tuple, column: int) -> int:
        return sum(image.getpixel((column, y)) == colour for y in range(image.height))

    for colour in colours:
        columns = [x for x in range(image.width) if bar_height(colour, x) > 0]
        runs: list[list[int]] = []  # the columns of each block of the colour, left to right
        for x in columns:
            if runs and x == runs[-1][-1] + 1:
                runs[-1].append(x)
            else:
                runs.append([x])
        bars = [max(bar_height(colour, x) for x in run) for run in runs if len(run) > 20]  # not the legend's swatch
        assert len(bars) == 3
        if colour == colours[0]:
            assert bars[1] > bars[2] > bars[0]  # 3,600 > 2,400 > 1,200

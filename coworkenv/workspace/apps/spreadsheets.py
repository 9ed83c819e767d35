"""Spreadsheets app: workbooks of sheets of cells, with simple formulas the tool evaluates.

A cell holds a number, a text or a formula (``=SUM(B2:B9)``, ``=B2-C2``, ``=AVERAGE(B2:B9)*1.1``):
SUM, AVERAGE, MIN, MAX and COUNT over ranges and cells of the same sheet, and + - * / between cells
and numbers. A formula cell keeps its last computed value in ``value`` (as a spreadsheet file keeps
its cached values), recomputed after every write, so checks can read results with plain SQL.

The formula engine is ``_formulas``. Charts are drawn with Pillow (``_drawing``) when the workspace
is seeded (on the host: the sandbox has only the standard library), stored as PNG with the data they
show, and returned by ``render_chart`` as image content with the data as a text fallback. Standard
library only when tools run.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import re
import sqlite3
from typing import Any

from ._base import ToolFailure, Tools, next_id, one_row, opt_str, req_str, today_iso, user_email
from ._base import object_schema as _obj
from ._formulas import (
    MAX_COLS,
    FormulaError,
    cell_ref,
    col_letters,
    compute,
    number,
    parse_formula,
    parse_ref,
    shift_formula,
)

NAME = "spreadsheets"
DESCRIPTION = ("Workbooks of sheets and cells with simple formulas (SUM, AVERAGE, MIN, MAX, COUNT, + - * /): "
               "list, read, write cells, add rows and sheets, create workbooks, delete sheets, view charts.")

SCHEMA = """
CREATE TABLE IF NOT EXISTS spreadsheets_workbooks (
    id       TEXT PRIMARY KEY,          -- 'wb01', 'wb02', ...
    name     TEXT NOT NULL UNIQUE,      -- e.g. 'PRJ-264 budget'
    owner    TEXT NOT NULL,             -- email address of a person of the world
    project  TEXT,                      -- project code, e.g. 'PRJ-264', or NULL
    modified TEXT NOT NULL              -- YYYY-MM-DD
);
CREATE TABLE IF NOT EXISTS spreadsheets_sheets (
    workbook TEXT NOT NULL,             -- workbook id
    name     TEXT NOT NULL,             -- e.g. 'Budget'
    position INTEGER NOT NULL,          -- 1 for the first tab
    PRIMARY KEY (workbook, name)
);
CREATE TABLE IF NOT EXISTS spreadsheets_cells (
    workbook TEXT NOT NULL,
    sheet    TEXT NOT NULL,
    ref      TEXT NOT NULL,             -- 'B7'
    "row"    INTEGER NOT NULL,          -- 7
    col      INTEGER NOT NULL,          -- 2 (A = 1)
    value,                              -- number or text; for a formula, its last computed value
    formula  TEXT,                      -- '=SUM(B2:B9)', or NULL for a plain value
    PRIMARY KEY (workbook, sheet, ref)
);
CREATE TABLE IF NOT EXISTS spreadsheets_charts (
    id       TEXT PRIMARY KEY,          -- 'ch01', ...
    workbook TEXT NOT NULL,
    sheet    TEXT NOT NULL,
    title    TEXT NOT NULL,
    labels   TEXT NOT NULL,             -- the range of the category labels, e.g. 'A2:A9'
    series   TEXT NOT NULL,             -- JSON list of value ranges, e.g. ["B2:B9", "C2:C9"]
    data     TEXT NOT NULL,             -- JSON of the labels and values the image shows
    png      TEXT NOT NULL              -- the image, base64
);
"""


# ---------------------------------------------------------------- schemas

_VALUE = {"type": ["string", "number", "null"], "description": "a number, a text, or null for an empty cell"}
_CELL = _obj({"ref": {"type": "string"}, "value": _VALUE,
              "formula": {"type": ["string", "null"], "description": "the formula, or null for a plain value"}},
             ["ref", "value", "formula"])
_WORKBOOK_ARG = {"type": "string", "description": "workbook id, e.g. 'wb03' (list_workbooks gives them)"}
_SHEET_ARG = {"type": "string", "description": "sheet name, e.g. 'Budget'"}
_SUMMARY_PROPS: dict[str, Any] = {
    "id": {"type": "string"}, "name": {"type": "string"}, "owner": {"type": "string"},
    "project": {"type": ["string", "null"]}, "modified": {"type": "string"},
}
_SUMMARY = _obj({**_SUMMARY_PROPS, "sheets": {"type": "array", "items": {"type": "string"}}},
                [*_SUMMARY_PROPS, "sheets"])
_SHEET_INFO = _obj({"name": {"type": "string"}, "rows": {"type": "integer"}, "columns": {"type": "integer"},
                    "charts": {"type": "array", "items": {"type": "string"}}}, ["name", "rows", "columns", "charts"])
_WORKBOOK = _obj({**_SUMMARY_PROPS, "sheets": {"type": "array", "items": _SHEET_INFO}}, [*_SUMMARY_PROPS, "sheets"])
_CONTENT = {"type": "array", "description": "images an agent sees (MCP image content)",
            "items": {"type": "object", "properties": {"type": {"const": "image"}, "mime_type": {"type": "string"},
                                                       "data": {"type": "string"}},
                      "required": ["type", "mime_type", "data"], "additionalProperties": False}}

tools = Tools()  # declared on their handlers below; TOOLS and handle come from it

RESOURCES: list[dict[str, Any]] = [{"collection": "workbooks", "get_tool": "get_workbook", "list_tool": "list_workbooks",
                                    "list_key": "workbooks"}]


# ---------------------------------------------------------------- state helpers

def _workbook(conn: sqlite3.Connection, ident: Any, field: str = "workbook") -> tuple:
    if not isinstance(ident, str) or not ident.strip():
        raise ToolFailure(f"missing required argument {field!r} (a workbook id like 'wb03')")
    row = one_row(conn, "SELECT id, name, owner, project, modified FROM spreadsheets_workbooks WHERE id = ?", (ident.strip(),),
                  f"{field}: no workbook with id {ident!r} (list_workbooks gives the ids)")
    return tuple(row)


def _sheets(conn: sqlite3.Connection, workbook: str) -> list[str]:
    return [n for (n,) in conn.execute("SELECT name FROM spreadsheets_sheets WHERE workbook = ? ORDER BY position",
                                       (workbook,))]


def _target(conn: sqlite3.Connection, args: dict) -> tuple[str, str]:
    """(workbook id, sheet name) of the sheet ``args`` names, both checked to exist."""
    workbook = _workbook(conn, args.get("workbook"))[0]
    return workbook, _sheet(conn, workbook, args)


def _sheet(conn: sqlite3.Connection, workbook: str, args: dict, field: str = "sheet") -> str:
    name = req_str(args, field, 100)
    names = _sheets(conn, workbook)
    if name not in names:
        raise ToolFailure(f"{field}: workbook {workbook} has no sheet {name!r}; its sheets: {', '.join(names)}")
    return name


def _cells(conn: sqlite3.Connection, workbook: str, sheet: str) -> dict[tuple[int, int], tuple[Any, str | None]]:
    return {(r, c): (v, f) for r, c, v, f in conn.execute(
        'SELECT "row", col, value, formula FROM spreadsheets_cells WHERE workbook = ? AND sheet = ?',
        (workbook, sheet))}


def _store(conn: sqlite3.Connection, workbook: str, sheet: str,
           cells: dict[tuple[int, int], tuple[Any, str | None]]) -> None:
    """Replace a sheet's cells with ``cells``, every formula recomputed."""
    values = compute(cells)
    conn.execute("DELETE FROM spreadsheets_cells WHERE workbook = ? AND sheet = ?", (workbook, sheet))
    conn.executemany("INSERT INTO spreadsheets_cells VALUES (?,?,?,?,?,?,?)",
                     [(workbook, sheet, cell_ref(r, c), r, c, values[(r, c)], f)
                      for (r, c), (_, f) in sorted(cells.items()) if values[(r, c)] is not None or f])


def _touch(conn: sqlite3.Connection, workbook: str) -> None:
    conn.execute("UPDATE spreadsheets_workbooks SET modified = ? WHERE id = ?", (today_iso(conn), workbook))


def _cell_out(ref: str, value: Any, formula: str | None) -> dict[str, Any]:
    return {"ref": ref, "value": value, "formula": formula}


def _input_value(value: Any, field: str) -> tuple[Any, str | None]:
    """A written value as (plain value, formula): numbers stay numbers, numeric text becomes a number,
    text starting with '=' is a formula (parsed now, so a bad one is refused)."""
    if value is None:
        return None, None
    if isinstance(value, bool):
        raise ToolFailure(f"{field} must be a number, a text or null, got {value!r}")
    if isinstance(value, (int, float)):
        return number(float(value)), None
    if not isinstance(value, str):
        raise ToolFailure(f"{field} must be a number, a text or null, got {value!r}")
    if len(value) > 1000:
        raise ToolFailure(f"{field} is too long ({len(value)} characters, at most 1000)")
    text = value.strip()
    if text.startswith("="):
        try:
            parse_formula(text)
        except FormulaError as exc:
            raise ToolFailure(f"{field}: cannot use formula {text!r}: {exc}") from None
        return None, "=" + text[1:].strip().upper()
    if re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", text):
        return number(float(text)), None
    return (value if text else None), None


def _workbook_out(conn: sqlite3.Connection, ident: str) -> dict[str, Any]:
    wb = _workbook(conn, ident)
    sheets = []
    for name in _sheets(conn, ident):
        rows, cols = conn.execute('SELECT COALESCE(MAX("row"), 0), COALESCE(MAX(col), 0) FROM spreadsheets_cells '
                                  "WHERE workbook = ? AND sheet = ?", (ident, name)).fetchone()
        charts = [c for (c,) in conn.execute("SELECT id FROM spreadsheets_charts WHERE workbook = ? AND sheet = ? "
                                             "ORDER BY id", (ident, name))]
        sheets.append({"name": name, "rows": rows, "columns": cols, "charts": charts})
    return {"id": wb[0], "name": wb[1], "owner": wb[2], "project": wb[3], "modified": wb[4], "sheets": sheets}


def _range_values(cells: dict[tuple[int, int], Any], rng_text: str) -> list[Any]:
    first, _, last = rng_text.partition(":")
    (r1, c1), (r2, c2) = parse_ref(first), parse_ref(last or first)
    return [cells.get((r, c)) for r in range(r1, r2 + 1) for c in range(c1, c2 + 1)]


def chart_data(conn: sqlite3.Connection, workbook: str, sheet: str, labels: str,
               series: list[str]) -> dict[str, Any]:
    """The labels and series a chart plots, from the sheet's current values (a series is named by the
    cell above its first value)."""
    values = compute(_cells(conn, workbook, sheet))
    out = []
    for rng_text in series:
        row, col = parse_ref(rng_text.split(":")[0])
        name = values.get((row - 1, col))
        out.append({"name": str(name) if name is not None else rng_text, "values": _range_values(values, rng_text)})
    return {"labels": ["" if v is None else str(v) for v in _range_values(values, labels)], "series": out}


# ---------------------------------------------------------------- handlers

@tools.tool("list_workbooks", "read",
            input=_obj({"query": {"type": "string", "description": "text the workbook's name contains"},
                        "project": {"type": "string", "description": "project code, e.g. 'PRJ-264'"}}, []),
            output=_obj({"workbooks": {"type": "array", "items": _SUMMARY}, "count": {"type": "integer"}},
                        ["workbooks", "count"]))
def list_workbooks(conn: sqlite3.Connection, args: dict) -> dict:
    """List workbooks (id, name, owner, project, last modified, sheet names), newest first. query matches
    the name (case-insensitive substring); project keeps one project's workbooks."""
    query, project = (opt_str(args, "query") or "").strip().lower(), (opt_str(args, "project") or "").strip()
    found = []
    for ident, name, owner, proj, modified in conn.execute(
            "SELECT id, name, owner, project, modified FROM spreadsheets_workbooks ORDER BY modified DESC, id"):
        if query and query not in name.lower() or project and (proj or "").upper() != project.upper():
            continue
        found.append({"id": ident, "name": name, "owner": owner, "project": proj, "modified": modified,
                      "sheets": _sheets(conn, ident)})
    return {"workbooks": found, "count": len(found)}


@tools.tool("get_workbook", "read",
            input=_obj({"id": _WORKBOOK_ARG}, ["id"]),
            output=_WORKBOOK)
def get_workbook(conn: sqlite3.Connection, args: dict) -> dict:
    """One workbook's details: owner, project, and each sheet with its size and the ids of its charts."""
    return _workbook_out(conn, _workbook(conn, args.get("id"), "id")[0])


@tools.tool("read_sheet", "read",
            input=_obj({"workbook": _WORKBOOK_ARG, "sheet": _SHEET_ARG}, ["workbook", "sheet"]),
            output=_obj({
                "workbook": {"type": "string"}, "sheet": {"type": "string"},
                "columns": {"type": "array", "items": {"type": "string"}, "description": "column letters, A first"},
                "rows": {"type": "array", "items": _obj({"row": {"type": "integer"},
                                                         "values": {"type": "array", "items": _VALUE}}, ["row", "values"])},
                "formulas": {"type": "object", "additionalProperties": {"type": "string"}},
            }, ["workbook", "sheet", "columns", "rows", "formulas"]))
def read_sheet(conn: sqlite3.Connection, args: dict) -> dict:
    """Read a whole sheet: every non-empty row as a list of values from column A on (formulas evaluated),
    plus the formula of each formula cell by its reference."""
    workbook, sheet = _target(conn, args)
    cells = _cells(conn, workbook, sheet)
    width = max((c for _, c in cells), default=0)
    rows = sorted({r for r, _ in cells})
    return {"workbook": workbook, "sheet": sheet, "columns": [col_letters(c) for c in range(1, width + 1)],
            "rows": [{"row": r, "values": [cells.get((r, c), (None, None))[0] for c in range(1, width + 1)]}
                     for r in rows],
            "formulas": {cell_ref(r, c): f for (r, c), (_, f) in sorted(cells.items()) if f}}


@tools.tool("read_range", "read",
            input=_obj({"workbook": _WORKBOOK_ARG, "sheet": _SHEET_ARG,
                        "range": {"type": "string", "description": "e.g. 'B2:D9' or 'B5'"}},
                       ["workbook", "sheet", "range"]),
            output=_obj({"workbook": {"type": "string"}, "sheet": {"type": "string"}, "range": {"type": "string"},
                         "cells": {"type": "array", "items": _CELL}}, ["workbook", "sheet", "range", "cells"]))
def read_range(conn: sqlite3.Connection, args: dict) -> dict:
    """Read the cells of a range such as 'B2:D9' (or one cell, 'B5'), row by row: each with its reference,
    value (formulas evaluated) and formula."""
    workbook, sheet = _target(conn, args)
    text = req_str(args, "range", 20).strip().upper()
    first, _, last = text.partition(":")
    (r1, c1), (r2, c2) = parse_ref(first, "range"), parse_ref(last or first, "range")
    r1, r2, c1, c2 = min(r1, r2), max(r1, r2), min(c1, c2), max(c1, c2)
    if (r2 - r1 + 1) * (c2 - c1 + 1) > 1000:
        raise ToolFailure(f"range {text} has more than 1000 cells; read a smaller one")
    cells = _cells(conn, workbook, sheet)
    return {"workbook": workbook, "sheet": sheet, "range": text,
            "cells": [_cell_out(cell_ref(r, c), *cells.get((r, c), (None, None)))
                      for r in range(r1, r2 + 1) for c in range(c1, c2 + 1)]}


@tools.tool("write_cells", "write",
            input=_obj({
                "workbook": _WORKBOOK_ARG, "sheet": _SHEET_ARG,
                "cells": {"type": "array", "minItems": 1, "maxItems": 200,
                          "items": _obj({"ref": {"type": "string", "description": "e.g. 'C4'"}, "value": _VALUE},
                                        ["ref", "value"])},
            }, ["workbook", "sheet", "cells"]),
            output=_obj({"workbook": {"type": "string"}, "sheet": {"type": "string"},
                         "cells": {"type": "array", "items": _CELL}}, ["workbook", "sheet", "cells"]))
def write_cells(conn: sqlite3.Connection, args: dict) -> dict:
    """Write cells: each value is a number, a text, a formula starting with '=' (SUM, AVERAGE, MIN, MAX,
    COUNT over ranges like B2:B9 of the same sheet; + - * / between cells and numbers), or null to clear
    the cell. Formulas are recomputed; returns the written cells with their values."""
    workbook, sheet = _target(conn, args)
    items = args.get("cells")
    if not isinstance(items, list) or not items or len(items) > 200:
        raise ToolFailure("cells must be a list of 1 to 200 {ref, value} objects")
    cells = _cells(conn, workbook, sheet)
    written = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or set(item) != {"ref", "value"}:
            raise ToolFailure(f"cells[{i}] must be an object with exactly 'ref' and 'value'")
        row, col = parse_ref(item["ref"], f"cells[{i}].ref")
        cells[(row, col)] = _input_value(item["value"], f"cells[{i}].value")
        written.append((row, col))
    _store(conn, workbook, sheet, cells)
    _touch(conn, workbook)
    after = _cells(conn, workbook, sheet)
    return {"workbook": workbook, "sheet": sheet,
            "cells": [_cell_out(cell_ref(r, c), *after.get((r, c), (None, None))) for r, c in written]}


@tools.tool("add_row", "write",
            input=_obj({
                "workbook": _WORKBOOK_ARG, "sheet": _SHEET_ARG,
                "values": {"type": "array", "minItems": 1, "maxItems": MAX_COLS, "items": _VALUE},
                "at_row": {"type": "integer", "minimum": 1, "description": "insert at this row number"},
            }, ["workbook", "sheet", "values"]),
            output=_obj({"workbook": {"type": "string"}, "sheet": {"type": "string"}, "row": {"type": "integer"},
                         "cells": {"type": "array", "items": _CELL}}, ["workbook", "sheet", "row", "cells"]))
def add_row(conn: sqlite3.Connection, args: dict) -> dict:
    """Add a row of values (from column A on; formulas allowed). By default it goes after the last
    non-empty row; with at_row it is inserted there and the rows below move down, as in a spreadsheet:
    references follow the moved cells, and a range grows only when the new row falls inside it (a
    SUM(B2:B9) does not take in a row inserted at row 10). Returns the new row."""
    workbook, sheet = _target(conn, args)
    values = args.get("values")
    if not isinstance(values, list) or not values or len(values) > MAX_COLS:
        raise ToolFailure(f"values must be a list of 1 to {MAX_COLS} cell values")
    cells = _cells(conn, workbook, sheet)
    last = max((r for r, _ in cells), default=0)
    at = args.get("at_row")
    if at is None:
        at = last + 1
    elif isinstance(at, bool) or not isinstance(at, int) or not 1 <= at <= last + 1:
        raise ToolFailure(f"at_row must be a row number from 1 to {last + 1} (one past the last row), got {at!r}")
    new = [_input_value(v, f"values[{i}]") for i, v in enumerate(values)]
    moved: dict[tuple[int, int], tuple[Any, str | None]] = {}
    for (r, c), (value, formula) in cells.items():
        moved[(r + 1 if r >= at else r, c)] = (value, shift_formula(formula, at) if formula else None)
    for c, (value, formula) in enumerate(new, start=1):
        if value is not None or formula:
            moved[(at, c)] = (value, formula)  # written for the new row: not shifted
    _store(conn, workbook, sheet, moved)
    _touch(conn, workbook)
    after = _cells(conn, workbook, sheet)
    return {"workbook": workbook, "sheet": sheet, "row": at,
            "cells": [_cell_out(cell_ref(at, c), *after.get((at, c), (None, None))) for c in range(1, len(new) + 1)]}


@tools.tool("create_workbook", "write",
            input=_obj({
                "name": {"type": "string", "minLength": 1, "description": "e.g. 'PRJ-264 hardware order'"},
                "sheets": {"type": "array", "minItems": 1, "maxItems": 20, "items": {"type": "string"}},
                "project": {"type": "string", "description": "project code, e.g. 'PRJ-264'"},
            }, ["name"]),
            output=_WORKBOOK)
def create_workbook(conn: sqlite3.Connection, args: dict) -> dict:
    """Create a workbook owned by the user, with the named empty sheets (one 'Sheet1' by default),
    optionally tied to a project. Returns it."""
    name = req_str(args, "name", 120).strip()
    clash = conn.execute("SELECT id FROM spreadsheets_workbooks WHERE lower(name) = lower(?)", (name,)).fetchone()
    if clash:
        raise ToolFailure(f"name: a workbook named {name!r} already exists ({clash[0]})")
    sheets = args.get("sheets") or ["Sheet1"]
    if not isinstance(sheets, list) or not all(isinstance(s, str) and s.strip() for s in sheets):
        raise ToolFailure(f"sheets must be a list of non-empty sheet names, got {sheets!r}")
    sheets = [s.strip() for s in sheets]
    if len(set(sheets)) != len(sheets):
        raise ToolFailure(f"sheets: sheet names must differ, got {sheets!r}")
    project = (opt_str(args, "project") or "").strip().upper() or None
    if project and not conn.execute("SELECT 1 FROM world_projects WHERE code = ?", (project,)).fetchone():
        raise ToolFailure(f"project: no project {project!r} in this workspace")
    ident = next_id(conn, "spreadsheets_workbooks", "wb")
    conn.execute("INSERT INTO spreadsheets_workbooks VALUES (?,?,?,?,?)",
                 (ident, name, user_email(conn), project, today_iso(conn)))
    conn.executemany("INSERT INTO spreadsheets_sheets VALUES (?,?,?)",
                     [(ident, s, n) for n, s in enumerate(sheets, start=1)])
    return _workbook_out(conn, ident)


@tools.tool("add_sheet", "write",
            input=_obj({"workbook": _WORKBOOK_ARG, "name": {"type": "string", "minLength": 1}},
                       ["workbook", "name"]),
            output=_WORKBOOK)
def add_sheet(conn: sqlite3.Connection, args: dict) -> dict:
    """Add an empty sheet (tab) at the end of a workbook. Returns the workbook."""
    workbook = _workbook(conn, args.get("workbook"))[0]
    name = req_str(args, "name", 100).strip()
    if name in _sheets(conn, workbook):
        raise ToolFailure(f"name: workbook {workbook} already has a sheet {name!r}")
    position = conn.execute("SELECT COALESCE(MAX(position), 0) + 1 FROM spreadsheets_sheets WHERE workbook = ?",
                            (workbook,)).fetchone()[0]
    conn.execute("INSERT INTO spreadsheets_sheets VALUES (?,?,?)", (workbook, name, position))
    _touch(conn, workbook)
    return _workbook_out(conn, workbook)


@tools.tool("delete_sheet", "destructive",
            input=_obj({"workbook": _WORKBOOK_ARG, "sheet": _SHEET_ARG}, ["workbook", "sheet"]),
            output=_obj({"workbook": {"type": "string"}, "sheet": {"type": "string"},
                         "cells_deleted": {"type": "integer"}, "deleted": {"const": True}},
                        ["workbook", "sheet", "cells_deleted", "deleted"]))
def delete_sheet(conn: sqlite3.Connection, args: dict) -> dict:
    """Permanently delete a sheet with all its cells and charts. This cannot be undone; a workbook keeps at
    least one sheet."""
    workbook, sheet = _target(conn, args)
    if len(_sheets(conn, workbook)) == 1:
        raise ToolFailure(f"sheet: {sheet!r} is the only sheet of {workbook}; a workbook keeps at least one sheet")
    n = conn.execute("DELETE FROM spreadsheets_cells WHERE workbook = ? AND sheet = ?", (workbook, sheet)).rowcount
    conn.execute("DELETE FROM spreadsheets_charts WHERE workbook = ? AND sheet = ?", (workbook, sheet))
    conn.execute("DELETE FROM spreadsheets_sheets WHERE workbook = ? AND name = ?", (workbook, sheet))
    _touch(conn, workbook)
    return {"workbook": workbook, "sheet": sheet, "cells_deleted": n, "deleted": True}


@tools.tool("render_chart", "read",
            input=_obj({"workbook": _WORKBOOK_ARG, "sheet": _SHEET_ARG,
                        "chart": {"type": "string", "description": "chart id when a sheet has several"}},
                       ["workbook", "sheet"]),
            output=_obj({
                "chart": {"type": "string"}, "workbook": {"type": "string"}, "sheet": {"type": "string"},
                "title": {"type": "string"}, "labels": {"type": "array", "items": {"type": "string"}},
                "series": {"type": "array", "items": _obj({"name": {"type": "string"},
                                                           "values": {"type": "array", "items": _VALUE}},
                                                          ["name", "values"])},
                "up_to_date": {"type": "boolean"}, "_content": _CONTENT,
            }, ["chart", "workbook", "sheet", "title", "labels", "series", "up_to_date", "_content"]))
def render_chart(conn: sqlite3.Connection, args: dict) -> dict:
    """Show the chart of a sheet as a PNG image, with the labels and values it plots as text. up_to_date is
    false when the sheet's cells changed since the chart was drawn (the data returned is the current
    data)."""
    workbook, sheet = _target(conn, args)
    charts = conn.execute("SELECT id, title, labels, series, data, png FROM spreadsheets_charts "
                          "WHERE workbook = ? AND sheet = ? ORDER BY id", (workbook, sheet)).fetchall()
    if not charts:
        others = conn.execute("SELECT DISTINCT sheet FROM spreadsheets_charts WHERE workbook = ?",
                              (workbook,)).fetchall()
        where = f"; sheets with a chart: {', '.join(s for (s,) in others)}" if others else ""
        raise ToolFailure(f"sheet: {sheet!r} of {workbook} has no chart{where}")
    wanted = opt_str(args, "chart")
    chosen = [c for c in charts if wanted is None or c[0] == wanted]
    if not chosen:
        raise ToolFailure(f"chart: {sheet!r} has no chart {wanted!r}; its charts: {', '.join(c[0] for c in charts)}")
    ident, title, labels, series, data, png = chosen[0]
    current = chart_data(conn, workbook, sheet, labels, json.loads(series))
    return {"chart": ident, "workbook": workbook, "sheet": sheet, "title": title, **current,
            "up_to_date": current == json.loads(data),
            "_content": [{"type": "image", "mime_type": "image/png", "data": png}]}


TOOLS, handle = tools.specs, tools.handle


# ---------------------------------------------------------------- seed

CATEGORIES = ("Personnel", "Contractors", "Hardware", "Software licences", "Cloud hosting", "Travel", "Training",
              "Marketing", "Consulting", "Facilities", "Contingency")


def _split(total: int, parts: int, rng: random.Random) -> list[int]:
    """``total`` split into ``parts`` amounts in steps of 100 that add up to it."""
    weights = [rng.uniform(1, 4) for _ in range(parts)]
    amounts = [int(total * w / sum(weights) // 100 * 100) for w in weights]
    amounts[0] += total - sum(amounts)
    return amounts


def _put(cells: dict[tuple[int, int], tuple[Any, str | None]], row: int, values: list[Any]) -> None:
    for col, value in enumerate(values, start=1):
        if isinstance(value, str) and value.startswith("="):
            cells[(row, col)] = (None, value)
        elif value is not None:
            cells[(row, col)] = (value, None)


def _budget_cells(lines: list[tuple[str, int, int]]) -> dict[tuple[int, int], tuple[Any, str | None]]:
    """A budget sheet: Category, Planned, Actual, Variance per line, and a Total row."""
    cells: dict[tuple[int, int], tuple[Any, str | None]] = {}
    _put(cells, 1, ["Category", "Planned", "Actual", "Variance"])
    for n, (category, planned, actual) in enumerate(lines, start=2):
        _put(cells, n, [category, planned, actual, f"=B{n}-C{n}"])
    last, total = len(lines) + 1, len(lines) + 2
    _put(cells, total, ["Total", f"=SUM(B2:B{last})", f"=SUM(C2:C{last})", f"=B{total}-C{total}"])
    return cells


def seed(conn: sqlite3.Connection, rng: random.Random, world: dict[str, Any]) -> None:
    """Workbooks from the world: a budget per project (some with an outdated draft beside it), the
    current and last year's price lists of the world's products, and a portfolio overview with a
    chart; a couple of budgets have a chart too."""
    from ._drawing import chart_png  # host only: Pillow

    conn.executescript(SCHEMA)
    today = dt.date.fromisoformat(world["today"])
    people = {p["id"]: p for p in world["people"]}
    orgs = {o["id"]: o for o in world["organisations"]}
    finance = [p for p in world["people"] if p["org"] == world["company"]["id"] and p["department"] == "Finance"]
    books: list[tuple[str, str, str | None, str, dict[str, dict]]] = []  # name, owner, project, modified, sheets

    def day(lo: int, hi: int) -> str:
        return (today - dt.timedelta(days=rng.randint(lo, hi))).isoformat()

    drafts = set(rng.sample([p["code"] for p in world["projects"]], 2))
    for project in world["projects"]:
        owner = people[project["owner"]]["email"]
        categories = rng.sample(CATEGORIES, rng.randint(5, 8))
        planned = _split(project["budget"], len(categories), rng)
        spent = {"active": (0.35, 1.3), "planned": (0.0, 0.1), "closed": (0.85, 1.15)}[project["status"]]
        lines = [(c, p, int(p * rng.uniform(*spent)) // 10 * 10) for c, p in zip(categories, planned, strict=True)]
        sheets = {"Budget": _budget_cells(lines)}
        if rng.random() < 0.4:
            notes: dict[tuple[int, int], tuple[Any, str | None]] = {}
            _put(notes, 1, ["Note"])
            _put(notes, 2, [f"Budget agreed with {people[project['owner']]['name']} on {day(20, 60)}"])
            sheets["Notes"] = notes
        if project["code"] in drafts:
            old = [(c, int(p * rng.uniform(0.8, 1.2)) // 100 * 100, 0) for c, p, _ in lines]
            draft_sheets = {"Budget": _budget_cells(old)}
            books.append((f"{project['code']} budget (draft)", owner, project["code"], day(60, 120), draft_sheets))
            sheets["Old forecast"] = _budget_cells([(c, p, 0) for c, p, _ in old])
        books.append((f"{project['code']} budget", owner, project["code"], day(0, 14), sheets))

    year = today.year
    for label, factor, modified in ((str(year), (1.0, 1.0), day(5, 30)), (str(year - 1), (0.85, 0.97), day(200, 300))):
        cells: dict[tuple[int, int], tuple[Any, str | None]] = {}
        _put(cells, 1, ["SKU", "Product", "Category", "Unit", "Price", "Supplier"])
        products = sorted(world["products"], key=lambda p: p["sku"])
        for n, p in enumerate(products, start=2):
            price = p["price"] if factor == (1.0, 1.0) else round(p["price"] * rng.uniform(*factor), 2)
            _put(cells, n, [p["sku"], p["name"], p["category"], p["unit"], price, orgs[p["supplier"]]["name"]])
        books.append((f"Price list {label}", rng.choice(finance or world["people"])["email"], None, modified,
                      {"Products": cells}))

    portfolio: dict[tuple[int, int], tuple[Any, str | None]] = {}
    _put(portfolio, 1, ["Project", "Name", "Owner", "Status", "Budget"])
    for n, p in enumerate(world["projects"], start=2):
        _put(portfolio, n, [p["code"], p["name"], people[p["owner"]]["name"], p["status"], p["budget"]])
    last = len(world["projects"]) + 1
    _put(portfolio, last + 1, ["Total", None, None, None, f"=SUM(E2:E{last})"])
    books.append(("Project portfolio", world["user"]["email"], None, day(0, 7), {"Overview": portfolio}))

    rng.shuffle(books)
    charted = {f"{code} budget" for code in rng.sample([p["code"] for p in world["projects"]], 2)}
    charts = []
    for n, (name, owner, project, modified, sheets) in enumerate(books, start=1):
        ident = f"wb{n:02d}"
        conn.execute("INSERT INTO spreadsheets_workbooks VALUES (?,?,?,?,?)", (ident, name, owner, project, modified))
        for position, (sheet, cells) in enumerate(sheets.items(), start=1):
            conn.execute("INSERT INTO spreadsheets_sheets VALUES (?,?,?)", (ident, sheet, position))
            _store(conn, ident, sheet, cells)
        if name in charted:
            rows = len(sheets["Budget"]) // 4 - 1
            charts.append((ident, "Budget", f"{name}: planned and actual", f"A2:A{rows}", [f"B2:B{rows}", f"C2:C{rows}"]))
        if name == "Project portfolio":
            charts.append((ident, "Overview", "Budget by project", f"A2:A{last}", [f"E2:E{last}"]))
    for n, (ident, sheet, title, labels, series) in enumerate(sorted(charts), start=1):
        data = chart_data(conn, ident, sheet, labels, series)
        conn.execute("INSERT INTO spreadsheets_charts VALUES (?,?,?,?,?,?,?,?)",
                     (f"ch{n:02d}", ident, sheet, title, labels, json.dumps(series), json.dumps(data),
                      chart_png(title, data)))

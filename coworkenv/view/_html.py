"""HTML pieces shared by the report and the viewer: one style sheet, table cells that know numbers
and links, a table, a page. Everything is escaped here; callers pass plain values."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any
from urllib.parse import urlencode

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #111; padding: 0 1em;
  overflow-wrap: anywhere; }
h1 { font-size: 1.5em; } h2 { border-bottom: 1px solid #ddd; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0 1em; max-width: 100%; }
td, th { border: 1px solid #ddd; padding: 3px 8px; vertical-align: top; } th { overflow-wrap: normal; }
th { background: #f5f5f5; text-align: left; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.muted { color: #666; } svg.chart { display: block; margin: .5em 0 1.5em; }
nav a { margin-right: 1em; } pre { background: #f7f7f7; padding: .4em .6em; overflow-x: auto; margin: .3em 0;
  white-space: pre-wrap; word-break: break-word; max-height: 24em; }
.pass { color: #15803d; } .fail { color: #b91c1c; font-weight: 600; }
ol.timeline { list-style: none; padding: 0; } ol.timeline > li { border-left: 3px solid #93c5fd; padding: .2em .8em;
  margin: .6em 0; } ol.timeline > li.error { border-color: #fca5a5; } ol.timeline > li.event { border-color: #fcd34d; }
ol.timeline > li.user { border-color: #c4b5fd; }
.changes td.op-insert { color: #15803d; } .changes td.op-delete { color: #b91c1c; } .changes td.op-update { color: #1d4ed8; }
.side { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 1.5em; }
.side > section { min-width: 0; } .side table { width: 100%; } .side th { overflow-wrap: anywhere; }
ul.list { list-style: none; margin: 0; padding: 0; display: flex; flex-wrap: wrap; gap: .15em .5em; }
ul.list > li { white-space: nowrap; } ul.list.long > li { white-space: normal; }
.verdict-box { border: 1px solid #ddd; border-left: 4px solid #15803d; padding: .4em .9em; margin: .8em 0; }
.verdict-box.rejected { border-left-color: #b91c1c; } .verdict-box p { margin: .25em 0; }
.caption { color: #444; font-size: .92em; margin: .2em 0 .6em; }
form.filters label { margin-right: .8em; } .diff del { background: #fee2e2; } .diff ins { background: #dcfce7; text-decoration: none; }
"""


@dataclass(frozen=True)
class Link:
    """A table cell (or any text) that links to ``href``."""

    text: str
    href: str

    def html(self) -> str:
        return f'<a href="{escape(self.href)}">{escape(self.text)}</a>'


@dataclass(frozen=True)
class Raw:
    """HTML made by this module's callers from escaped parts, put in as it is."""

    html: str


def href(path: str, **query: Any) -> str:
    """``path`` with the query arguments that are not None or empty."""
    given = {k: v for k, v in query.items() if v not in (None, "")}
    return f"{path}?{urlencode(given)}" if given else path


def cell(value: Any) -> str:
    if value is None:
        return '<td class="n muted">—</td>'
    if isinstance(value, Link):
        return f"<td>{value.html()}</td>"
    if isinstance(value, Raw):
        return f"<td>{value.html}</td>"
    if isinstance(value, bool):
        return f"<td>{'yes' if value else 'no'}</td>"
    if isinstance(value, list | tuple):  # a list of values: one item each, wrapping, never one joined string
        return f"<td>{items(value)}</td>"
    if isinstance(value, int | float):
        return f'<td class="n">{value:.3g}</td>' if isinstance(value, float) else f'<td class="n">{value}</td>'
    return f"<td>{escape(str(value))}</td>"


def items(values: list[Any] | tuple[Any, ...]) -> str:
    """Values as a list that wraps between items (``ul.list``); long items may wrap inside too."""
    if not values:
        return '<span class="muted">none</span>'
    long = any(len(str(v)) > 40 for v in values)
    return (f"<ul class='list{' long' if long else ''}'>"
            + "".join(f"<li>{_inline(v)}</li>" for v in values) + "</ul>")


def _inline(value: Any) -> str:
    if isinstance(value, Link):
        return value.html()
    return value.html if isinstance(value, Raw) else escape(str(value))


def table(headers: list[str], rows: list[list[Any]], table_id: str = "", css: str = "") -> str:
    if not rows:
        return '<p class="muted">none</p>'
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(cell(v) for v in row) + "</tr>" for row in rows)
    attributes = (f' id="{escape(table_id)}"' if table_id else "") + (f' class="{escape(css)}"' if css else "")
    return f"<table{attributes}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def page(title: str, body: str, *, nav: str = "") -> str:
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{escape(title)}</title>"
            f"<style>{STYLE}</style></head><body>{nav}{body}</body></html>")

"""Readers of app records that templates of several apps share, and the forbidden tools they name.

A template about one app often reads another's records (a mail chain finds a file or an event; a chat
chain reads a project plan and the address book): those readers live here once, named by what they
read.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from typing import Any, NamedTuple

from ...workspace import load_world
from ._kit import query_rows


def event_titled(conn: sqlite3.Connection, title: str, on_or_after: str = "") -> dict[str, Any] | None:
    """The first event titled ``title`` on or after the date ``on_or_after``."""
    row = conn.execute(
        'select id, title, date, start, "end", location, attendees from calendar_events where title = ? and date >= ? '
        "order by date, start, id limit 1", (title, on_or_after)).fetchone()
    if row is None:
        return None
    keys = ("id", "title", "date", "start", "end", "location", "attendees")
    return dict(zip(keys, row, strict=True))


def file_named(conn: sqlite3.Connection, name: str, folder: str | None = None) -> dict[str, Any] | None:
    sql, params = "select id, name, folder, owner, content from files_files where name = ?", [name]
    if folder is not None:
        sql, params = sql + " and folder = ?", [name, folder]
    row = conn.execute(sql + " order by id limit 1", params).fetchone()
    return dict(zip(("id", "name", "folder", "owner", "content"), row, strict=True)) if row else None


NO_DELETE_MAIL = "mail_delete_message"


NO_CANCEL = "calendar_cancel_event"


NO_DELETE_FILE = "files_delete_file"


NO_DELETE_CONTACT = "contacts_delete_contact"


NO_MERGE = "contacts_merge_contacts"


NO_ARCHIVE = "chat_archive_channel"


NO_DELETE_NOTE = "notes_delete_note"


NO_DELETE_DOC = "documents_delete_document"


def phone_digits(phone: str) -> str:
    return re.sub(r"[^0-9+]", "", phone)


PHONE_SQL = "replace(replace(replace(replace({col}, ' ', ''), '-', ''), '(', ''), ')', '')"


def contacts_where(conn: sqlite3.Connection, where: str = "1", params: tuple = ()) -> list[dict[str, Any]]:
    return query_rows(conn, f"select * from contacts_contacts where {where} order by id", params)


def project_plan(conn: sqlite3.Connection, code: str) -> dict[str, Any] | None:
    found = query_rows(conn, "select * from documents_documents where title = ? and status = 'final'", (f"{code} project plan",))
    return found[0] if found else None


def doc_section(conn: sqlite3.Connection, doc_id: str, heading: str) -> str | None:
    row = conn.execute("select body from documents_sections where doc_id = ? and heading = ?", (doc_id, heading)).fetchone()
    return row[0] if row else None


def channel_by_id(conn: sqlite3.Connection, channel_id: str) -> dict[str, Any]:
    return query_rows(conn, "select * from chat_channels where id = ?", (channel_id,))[0]


def project_channel(conn: sqlite3.Connection, code: str) -> dict[str, Any] | None:
    found = query_rows(conn, "select * from chat_channels where kind = 'channel' and archived = 0 and name like ? order by id",
                       (f"{code.lower()}-%",))
    return found[0] if found else None


def chat_message(conn: sqlite3.Connection, pattern: str) -> tuple[dict[str, Any], re.Match] | None:
    for msg in query_rows(conn, "select * from chat_messages order by rowid"):
        found = re.search(pattern, msg["text"])
        if found:
            return msg, found
    return None


def channel_project(name: str) -> str:
    """The project code a project channel is named by (``prj-104-rollout`` → ``PRJ-104``)."""
    return "-".join(name.split("-")[:2]).upper()


class Post(NamedTuple):
    """A chat message a template is about: the message, what its pattern matched, and its channel."""

    message: dict[str, Any]
    said: re.Match
    channel: dict[str, Any]


def posted(pattern: str) -> Callable[[sqlite3.Connection], Post | None]:
    """What a template ``finds``: the first chat message matching ``pattern``, with its channel."""

    def first(conn: sqlite3.Connection) -> Post | None:
        found = chat_message(conn, pattern)
        return None if found is None else Post(found[0], found[1], channel_by_id(conn, found[0]["channel_id"]))

    return first


MILESTONE_MOVED = r"^Heads-up: the (.+) milestone moves from (\S+) to (\S+)\. "


def price_list(conn: sqlite3.Connection) -> tuple[str, dict[str, tuple[int, str, float]]] | None:
    """The current year's price list: its id and, by SKU, (row, product name, price)."""
    row = conn.execute("select id from spreadsheets_workbooks where name = ?",
                       (f"Price list {load_world(conn)['today'][:4]}",)).fetchone()
    if row is None:
        return None
    cells = {(r, c): v for r, c, v in conn.execute(
        'select "row", col, value from spreadsheets_cells where workbook = ? and sheet = ?', (row[0], "Products"))}
    items = {cells[(r, 1)]: (r, cells[(r, 2)], cells[(r, 5)]) for (r, c) in cells if c == 1 and r > 1}
    return row[0], items


def kb_article_rows(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    keys = ("id", "title", "body", "category", "tags", "status", "version", "product")
    return [dict(zip(keys, r, strict=True)) for r in conn.execute(
        f"select {', '.join(keys)} from kb_articles order by id")]

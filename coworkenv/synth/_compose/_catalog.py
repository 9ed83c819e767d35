"""What the compositional generator knows of a workspace: its ``Catalog``, read from what every app declares.

Nothing here knows an app. A workspace's apps are read through their resources (a collection of
records with a list tool and a get tool), their tools' effects and input schemas, and their records
as their own tools return them (run in-process on the workspace's initial state, the same handlers
the sandbox runs). From that, a ``Catalog`` knows per collection the records, the field that names
a record (a unique title or name), the fields a record has, which write tools change which field
(tried on a copy of the state), which destructive tools remove a record, and which tools post a
message or create a record with text in it (the "notify" step). Shapes (``._shapes``,
``._multiturn``) compose programs from it.
"""

from __future__ import annotations

import json
import random
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..._nouns import singular
from ...workspace import app_module, load_world, ordinary_tables, registered_apps, row_key
from ...workspace.state import apply_call, kept_with
from .._probes import copy_state

MIN_RECORDS = 3
MAX_FIELD_LENGTH = 60
_LABEL_FIELDS = ("title", "name", "subject", "summary", "headline", "label")


@dataclass
class Setter:
    """A write tool that sets one field of a record: ``tool(id_arg=record id, argument=value)``."""

    tool: str  # full tool name, e.g. helpdesk_update_ticket
    id_arg: str
    argument: str
    field: str  # the record field it changes
    column: str  # the table column that holds it
    enum: list[Any] | None = None


@dataclass
class Notifier:
    """A write tool that creates a record holding text: a message, a note, a comment."""

    tool: str
    text_arg: str
    fixed: dict[str, Any]  # the other required arguments (a recipient, a channel)
    target: str  # how the instruction names where it goes
    table: str
    column: str  # the column the text lands in


@dataclass
class Collection:
    """One app's collection of records (a resource), with the tools that find, change and remove them."""

    app: str
    name: str
    noun: str
    table: str
    key: str  # SQL for a row's key in ``table``
    get_tool: str
    list_tool: str
    list_arguments: dict[str, Any]
    records: dict[str, dict[str, Any]]  # id -> the get tool's scalar fields
    summary_fields: set[str]
    label: str | None
    setters: list[Setter] = field(default_factory=list)
    destroyers: list[tuple[str, str]] = field(default_factory=list)  # (tool, id argument)
    searchers: list[str] = field(default_factory=list)  # the app's read tools that search by a query

    def values(self, name: str) -> list[Any]:
        """The field ``name`` of every record (None where a record lacks it)."""
        return [r.get(name) for r in self.records.values()]

    def where(self, name: str, value: Any) -> list[str]:
        """The ids of the records whose field ``name`` is ``value``."""
        return [i for i, r in self.records.items() if r.get(name) == value]

    @property
    def plural(self) -> str:
        """How an instruction names the whole collection: ``helpdesk tickets``."""
        return f"{self.app} {self.name.replace('_', ' ')}"

    def label_of(self, ident: str) -> str:
        """What names record ``ident`` (its label field, or its id when the collection has none)."""
        return str(self.records[ident][self.label]) if self.label else ident


Join = tuple[Collection, str, str, Collection, str, str, str]


@dataclass
class Catalog:
    """What a workspace offers to compose tasks from: its collections, its notifiers, its world."""

    collections: list[Collection]
    notifiers: list[Notifier]
    world: dict[str, Any]
    today: str
    _joins: list[Join] | None = None

    def joins(self) -> list[Join]:
        """(a, record of a, field of a, b, record of b, field of b, shared value): a value that names
        exactly one record in each of two apps' collections."""
        if self._joins is None:
            self._joins = []
            index: dict[str, list[tuple[Collection, str, str]]] = {}
            for c in self.collections:
                counts: dict[tuple[str, str], int] = {}
                for record in c.records.values():
                    for name, value in record.items():
                        if name not in ("id", c.label) and isinstance(value, str) and len(value) >= 4 \
                                and plain(name, value):
                            counts[name, value] = counts.get((name, value), 0) + 1
                for ident, record in c.records.items():
                    for name, value in record.items():
                        if counts.get((name, value) if isinstance(value, str) else ("", ""), 0) == 1:
                            index.setdefault(value, []).append((c, ident, name))
            for value, places in index.items():
                for a, ida, fa in places:
                    for b, idb, fb in places:
                        if a.app != b.app and a.label is not None and b.label is not None:
                            self._joins.append((a, ida, fa, b, idb, fb, value))
        return self._joins


def call(conn: sqlite3.Connection, app: str, tool: str, arguments: dict[str, Any]) -> Any:
    """One call of ``app``'s ``tool`` on ``conn``, in process (the handler the sandbox runs)."""
    return apply_call(conn, app_module(app), tool, arguments)


def _scalars(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if isinstance(v, (str, int, float, bool)) and not k.startswith("_")}


def _table_with(conn: sqlite3.Connection, app: str, ids: list[str]) -> str | None:
    for table in ordinary_tables(conn):
        if not table.startswith(f"{app}_"):
            continue
        key = row_key(conn, table)
        found = {r[0] for r in conn.execute(f'select cast({key} as text) from "{table}"')}
        if set(ids) <= found:
            return table
    return None


def _label(records: dict[str, dict[str, Any]]) -> str | None:
    fields = [f for f in next(iter(records.values())) if f != "id"]
    ordered = [f for f in _LABEL_FIELDS if f in fields] + [f for f in fields if f not in _LABEL_FIELDS]
    for name in ordered:
        values = [v for r in records.values() if isinstance(v := r.get(name), str) and 3 <= len(v) <= 80 and "\n" not in v]
        if len(values) == len(records) and len({v.casefold() for v in values}) == len(values) \
                and not all(v.isdigit() for v in values):
            return name
    return None


def _column_for(before: sqlite3.Connection, after: sqlite3.Connection, table: str, ident: str,
                value: Any) -> str | None:
    """The column of ``table``'s row ``ident`` that now holds ``value`` and did not before."""
    key = row_key(after, table)
    columns = [r[1] for r in after.execute(f'pragma table_info("{table}")')]
    old = before.execute(f'select * from "{table}" where cast({key} as text) = ?', (ident,)).fetchone()
    new = after.execute(f'select * from "{table}" where cast({key} as text) = ?', (ident,)).fetchone()
    if old is None or new is None:
        return None
    for column, was, now in zip(columns, old, new, strict=True):
        if was != now and (now == value or str(now) == str(value) or (isinstance(value, bool) and now == int(value))):
            return column
    return None


def _setters(conn: sqlite3.Connection, collection: Collection, tools: list[dict[str, Any]]) -> list[Setter]:
    found = []
    ids = list(collection.records)
    for tool in tools:
        if tool["effect"] != "write":
            continue
        schema = tool["input_schema"]
        props, required = schema.get("properties", {}), schema.get("required", [])
        id_args = [a for a in required if a == "id" or a.endswith("_id")]
        if len(id_args) != 1 or len(required) > 1:
            continue
        for argument, prop in props.items():
            if argument == id_args[0] or prop.get("type") not in ("string", "integer", "number", "boolean"):
                continue
            name = argument if argument in collection.records[ids[0]] else None
            if name is None:
                continue
            if name == collection.label:
                continue
            values = [v for v in dict.fromkeys(collection.values(name))
                      if v is not None and len(str(v)) <= 30 and not str(v).endswith(".") and "@" not in str(v)
                      and plain(name, v)]
            if prop.get("enum") is None and not (2 <= len(values) <= max(2, len(ids) // 3)):
                continue  # a free-text or identifying field: nothing natural to set it to
            ident = ids[0]
            current = collection.records[ident][name]
            choices = [v for v in (prop.get("enum") or values) if v != current]
            if prop.get("type") == "boolean":
                choices = [not current]
            if not choices:
                continue
            trial = copy_state(conn)
            try:
                call(trial, collection.app, tool["name"], {id_args[0]: ident, argument: choices[0]})
                trial.commit()
                column = _column_for(conn, trial, collection.table, ident, choices[0])
            except Exception:
                column = None
            finally:
                trial.close()
            if column is not None:
                found.append(Setter(f"{collection.app}_{tool['name']}", id_args[0], argument, name, column,
                                    prop.get("enum")))
    return found


def _destroyers(conn: sqlite3.Connection, collection: Collection, tools: list[dict[str, Any]]) -> list[tuple[str, str]]:
    found = []
    for tool in tools:
        required = tool["input_schema"].get("required", [])
        if tool["effect"] != "destructive" or len(required) != 1:
            continue
        trial = copy_state(conn)
        try:
            call(trial, collection.app, tool["name"], {required[0]: next(iter(collection.records))})
            found.append((f"{collection.app}_{tool['name']}", required[0]))
        except Exception:
            pass
        finally:
            trial.close()
    return found


_TEXT = "coworkenv probe text 7f3a"


def _notifiers(conn: sqlite3.Connection, collections: list[Collection], world: dict[str, Any],
               apps: dict[str, Any]) -> list[Notifier]:
    """Write tools that, given ids and addresses from the workspace, create a record with our text."""
    found = []
    colleague = next(p for p in world["people"] if p["org"] == world["company"]["id"] and p is not world["user"])
    for app, module in apps.items():
        for tool in module.TOOLS:
            if tool["effect"] != "write":
                continue
            schema = tool["input_schema"]
            props, required = schema.get("properties", {}), schema.get("required", [])
            texts = [a for a in required if props.get(a, {}).get("type") == "string"
                     and re.search(r"text|body|content|message|comment|note|title|description", a)]
            if not texts:
                continue
            text_arg = texts[-1]
            fixed: dict[str, Any] = {}
            target = ""
            ok = True
            for argument in required:
                prop = props.get(argument, {})
                if argument == text_arg:
                    continue
                if prop.get("type") == "array" and "mail" in argument + json.dumps(prop) or argument in ("to",):
                    fixed[argument] = [colleague["email"]] if prop.get("type") == "array" else colleague["email"]
                    target = f"to {colleague['name']} ({colleague['email']})"
                elif argument in texts or re.search(r"subject|title", argument):
                    fixed[argument] = "Update"
                elif argument == "id" or argument.endswith("_id") or argument in ("channel", "ticket", "account"):
                    owner = next((c for c in collections if c.app == app and c.label), None)
                    if owner is None:
                        ok = False
                        break
                    ident = next(iter(owner.records))
                    fixed[argument] = ident
                    target = f"on the {singular(owner.name)} \"{owner.label_of(ident)}\""
                else:
                    ok = False
                    break
            if not ok:
                continue
            trial = copy_state(conn)
            try:
                call(trial, app, tool["name"], {**fixed, text_arg: _TEXT})
                trial.commit()
                landed = _landed(trial, app)
            except Exception:
                landed = None
            finally:
                trial.close()
            if landed is not None:
                found.append(Notifier(f"{app}_{tool['name']}", text_arg, fixed, target, *landed))
    return found


def _landed(conn: sqlite3.Connection, app: str) -> tuple[str, str] | None:
    for table in ordinary_tables(conn):
        if not table.startswith(f"{app}_"):
            continue
        for column in [r[1] for r in conn.execute(f'pragma table_info("{table}")')]:
            if conn.execute(f'select 1 from "{table}" where instr(cast("{column}" as text), ?) > 0 limit 1',
                            (_TEXT,)).fetchone():
                return table, column
    return None


def catalog(conn: sqlite3.Connection) -> Catalog:
    """What the compositional generator knows of the workspace whose initial state is ``conn``
    (worked out once per state: kept with a ``FixedState`` for as long as it lives, as ``generate``
    keeps one per workspace of its run, or with a ``StateCopy`` while it is unchanged; ``kept_with``)."""
    return kept_with(conn, "catalog", lambda: _catalog(conn))


def _catalog(conn: sqlite3.Connection) -> Catalog:
    world = load_world(conn)
    tables = set(ordinary_tables(conn))
    apps = {name: module for name, module in sorted(registered_apps().items())
            if any(t.startswith(f"{name}_") for t in tables)}
    collections = []
    for app, module in apps.items():
        for resource in getattr(module, "RESOURCES", []):
            try:
                listed = call(conn, app, resource["list_tool"], resource.get("list_arguments", {}))
                items = listed[resource["list_key"]]
                records = {str(item["id"]): _scalars(call(conn, app, resource["get_tool"], {"id": item["id"]}))
                           for item in items}
            except Exception:
                continue
            if len(records) < MIN_RECORDS:
                continue
            table = _table_with(conn, app, list(records))
            if table is None:
                continue
            collection = Collection(
                app=app, name=resource["collection"], noun=singular(resource["collection"]), table=table,
                key=row_key(conn, table),
                get_tool=f"{app}_{resource['get_tool']}", list_tool=f"{app}_{resource['list_tool']}",
                list_arguments=dict(resource.get("list_arguments", {})), records=records,
                summary_fields=set(items[0]) if items else set(), label=_label(records))
            collection.setters = _setters(conn, collection, module.TOOLS)
            collection.searchers = [f"{app}_{t['name']}" for t in module.TOOLS if t["effect"] == "read"
                                    and "query" in t["input_schema"].get("properties", {})
                                    and set(t["input_schema"].get("required", [])) <= {"query"}]
            collection.destroyers = _destroyers(conn, collection, module.TOOLS)
            collections.append(collection)
    return Catalog(collections, _notifiers(conn, collections, world, apps), world, world["today"])


_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}|^\d{1,2}:\d{2}$")
DULL = ("version", "pinned", "size", "count", "updated", "modified", "created")
"""Fields that are bookkeeping: no instruction names a record by them or asks for them."""


def plain(name: str, value: Any) -> bool:
    """A value an instruction can name a record by, or ask for: not a timestamp, not bookkeeping."""
    return not (isinstance(value, str) and _DATE.match(value)) and name not in DULL


# --------------------------------------------------------------------------- drawing from a catalog


def askable(collection: Collection, ident: str) -> list[str]:
    """Fields of a record worth asking for: short, varied across records, not what names it."""
    record = collection.records[ident]
    fields = []
    for name, value in record.items():
        if name in ("id", collection.label) or isinstance(value, bool) or value in (None, "") or not plain(name, value):
            continue
        text = str(value)
        if len(text) > MAX_FIELD_LENGTH or "\n" in text or len(set(map(str, collection.values(name)))) < 2:
            continue
        if len(text) < 2 and not text.isdigit():
            continue
        fields.append(name)
    return fields


def pick(collections: list[Collection], rng: random.Random, need: Callable[[Collection], bool]) -> Collection | None:
    """A collection satisfying ``need``, the app drawn first (so that every app gets its turn)."""
    fitting = [c for c in collections if need(c)]
    if not fitting:
        return None
    app = rng.choice(sorted({c.app for c in fitting}))
    return rng.choice([c for c in fitting if c.app == app])


Setting = tuple[Collection, Setter, str, Any]
"""A field to set: the collection, the tool that sets it, the record (its id) and the new value."""


def setting(collections: list[Collection], rng: random.Random) -> Setting | None:
    """A record of one of ``collections`` (a labelled one with setters), one of its setters and a
    value the record does not hold yet."""
    collection = pick(collections, rng, lambda c: bool(c.setters) and c.label is not None)
    if collection is None:
        return None
    setter = rng.choice(collection.setters)
    ident = rng.choice(sorted(collection.records))
    current = collection.records[ident].get(setter.field)
    choices = [v for v in (setter.enum or dict.fromkeys(collection.values(setter.field))) if v != current and v is not None]
    if isinstance(current, bool):
        choices = [not current]
    if not choices:
        return None
    return collection, setter, ident, rng.choice(choices)


def retirable(collections: list[Collection], rng: random.Random) -> Collection | None:
    """A labelled collection with a setter and a destructive tool: a record of it can be removed, or
    kept and marked instead."""
    return pick(collections, rng, lambda c: bool(c.setters) and bool(c.destroyers) and c.label is not None)

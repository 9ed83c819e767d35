"""Shared pieces of the workspace apps: the domain error, the world helpers every app uses, the
office plan that mail, calendar and files share, an app's own facts table (``AppMeta``), and small
validation helpers.

Standard library only: this module runs inside the sandbox (``python3 -I -S``).

Nothing here is a constant catalogue of people, projects or documents: every app draws them from
the workspace's world (``coworkenv.workspace.build_world``), which ``seed`` receives as plain data
and which the state keeps in its ``world_*`` tables, where a tool reads it back (``world_user``,
``world_today``, ``world_names``).

``office_plan(world)`` is what mail, calendar and files must agree on: which meetings exist (title,
attendees, room), which documents exist (name, folder, owner), which folders there are, and who
asks for what by mail. It is drawn from the world alone (its own seeded generator), so each app
computes the same plan in its own ``seed``: a mail that asks to move ``invoice_INV-4821.txt`` into
Accounting names a file that the files app seeded in Shared, and a mail that asks to reschedule the
"Nimbus rollout budget review" names an event that the calendar app seeded. Each app's own
generator varies the details (dates, times, amounts, which extra rows exist).
"""

from __future__ import annotations

import datetime as _dt
import random
import re
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any


class ToolFailure(Exception):
    """A domain error the agent should see, e.g. "no message with id 'm99'"."""


World = dict[str, Any]
Person = dict[str, Any]

# The time of day a tool writes at (a sent mail, a saved file): the workspace's clock stands still.
NOW_TIME = "09:00"


# ---------------------------------------------------------------- the world, while seeding


def today(world: World) -> _dt.date:
    """The workspace's today (a Monday)."""
    return _dt.date.fromisoformat(world["today"])


def colleagues(world: World) -> list[Person]:
    """People of the user's company, the user left out, in world order."""
    company, me = world["company"]["id"], world["user"]["id"]
    return [p for p in world["people"] if p["org"] == company and p["id"] != me]


def org_people(world: World, org_id: str) -> list[Person]:
    """People of one organisation, in world order."""
    return [p for p in world["people"] if p["org"] == org_id]


def organisations(world: World, kind: str) -> list[dict[str, Any]]:
    """Organisations of one kind: employer, customer, vendor or partner."""
    return [o for o in world["organisations"] if o["kind"] == kind]


def person_by_id(world: World, ident: str | None) -> Person | None:
    return next((p for p in world["people"] if p["id"] == ident), None)


def slug(text: str) -> str:
    """``text`` as a file-name part: lower-case letters, digits and '_'."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "x"


def iso_days(start: _dt.date, end: _dt.date) -> list[str]:
    """All weekday ISO dates from ``start`` to ``end`` inclusive."""
    out, day = [], start
    while day <= end:
        if day.weekday() < 5:
            out.append(day.isoformat())
        day += _dt.timedelta(days=1)
    return out


def days_from(world: World, first: int, last: int) -> list[str]:
    """Weekday ISO dates from ``first`` to ``last`` days after the world's today (negative: before)."""
    start = today(world)
    return iso_days(start + _dt.timedelta(days=first), start + _dt.timedelta(days=last))


# ---------------------------------------------------------------- the world, in a tool call


def world_today(conn: sqlite3.Connection) -> _dt.date:
    """The workspace's today, from the state's ``world_meta`` table."""
    return _dt.date.fromisoformat(_meta(conn, "today"))


def world_user(conn: sqlite3.Connection) -> dict[str, str]:
    """The user operating the workspace: ``{"name", "email"}``."""
    row = conn.execute("SELECT name, email FROM world_people WHERE id = ?", (_meta(conn, "user"),)).fetchone()
    if row is None:
        raise RuntimeError("the state's world names a user that world_people lacks")
    return {"name": row[0], "email": row[1]}


def world_names(conn: sqlite3.Connection) -> dict[str, str]:
    """Every person of the world: email address -> name."""
    return dict(conn.execute("SELECT email, name FROM world_people").fetchall())


def _meta(conn: sqlite3.Connection, key: str) -> str:
    try:
        row = conn.execute("SELECT value FROM world_meta WHERE key = ?", (key,)).fetchone()
    except sqlite3.OperationalError:
        row = None
    if row is None:
        raise RuntimeError(f"the state has no world ({key!r} missing from world_meta): build it with "
                           "coworkenv.workspace.write_initial_state, or write_world before seeding")
    return row[0]


# ---------------------------------------------------------------- the office plan (mail, calendar, files)

ROOM_NAMES = ("Orion", "Vega", "Lyra", "Atlas", "Cedar", "Maple", "Birch", "Juniper", "Everest", "Danube", "Rhine",
              "Tagus", "Aurora", "Nova", "Pulsar", "Quartz", "Onyx", "Jade", "Amber", "Coral", "Delta", "Fjord",
              "Harbor", "Summit", "Meadow", "Willow", "Aspen", "Sequoia", "Polaris", "Sirius", "Rigel", "Altair",
              "Deneb", "Castor", "Cassini", "Hubble", "Galileo", "Kepler", "Lovelace", "Turing", "Hopper", "Curie")
ONLINE_LOCATIONS = ("Video call", "Online meeting", "Phone call")
FOLDER_NAMES = {
    "finance": ("Finance", "Accounting", "Finance-Admin"),
    "shared": ("Shared", "Team", "Common"),
    "projects": ("Projects", "Project files", "Delivery"),
    "hr": ("HR", "People", "People-Ops"),
    "legal": ("Legal", "Contracts", "Legal-Compliance"),
    "archive": ("Archive", "Old", "Archived"),
}


def office_plan(world: World) -> dict[str, Any]:
    """What mail, calendar and files share in a workspace, drawn from its world alone.

    ``{"rooms", "online", "folders": {role: folder}, "cast": {role: person}, "vendors": {role: org},
    "contacts": {role: person}, "partner": org, "projects": {role: project}, "invoices": {role:
    "INV-1234"}, "new_hire": name, "review_move": {"date", "start"}, "notes_file": {"name", "folder"},
    "meetings": {key: {"title", "attendees", "location", "agenda"}}, "documents": {key: {"name", "folder",
    "owner"}}}``
    """
    rng = random.Random(f"office:{world['seed']}")
    user, mates = world["user"], colleagues(world)
    used: set[str] = set()

    def pick(pool: list[Person]) -> Person:
        choice = rng.choice([p for p in pool if p["id"] not in used] or pool)
        used.add(choice["id"])
        return choice

    def dept(name: str, role: str | None = None) -> list[Person]:
        pool = [p for p in mates if p["department"] == name]
        return [p for p in pool if p["role"] == role] or pool or mates

    cast = {"finance": pick(dept("Finance")), "legal": pick(dept("Legal")), "hr": pick(dept("People")),
            "ops": pick(dept("Operations")), "security": pick(dept("Engineering", "Security engineer")),
            "engineer": pick(dept("Engineering")), "product": pick(dept("Product", "Product manager")),
            "designer": pick(dept("Product", "Designer"))}

    active = [p for p in world["projects"] if p["status"] != "closed"] or world["projects"]
    order = rng.sample(active, len(active))
    projects = {role: order[n % len(order)]
                for n, role in enumerate(("sync", "review", "kickoff", "audit", "onboarding", "question"))}
    owner = person_by_id(world, projects["sync"]["owner"])
    cast["requester"] = owner if owner is not None and owner["id"] != user["id"] else cast["product"]
    cast["invitee"] = rng.choice([p for p in mates if p["id"] not in (cast["requester"]["id"], user["id"])])
    asker = person_by_id(world, projects["question"]["owner"])
    cast["asker"] = asker if asker is not None and asker["id"] != user["id"] else cast["engineer"]

    vendors_all = rng.sample(organisations(world, "vendor"), len(organisations(world, "vendor")))
    vendors = {role: vendors_all[n % len(vendors_all)] for n, role in enumerate(("sync", "filing", "contract"))}
    staff = org_people(world, vendors["sync"]["id"])
    manager, billing = rng.sample(staff, 2) if len(staff) > 1 else (staff[0], staff[0])
    contacts = {"manager": manager, "billing": billing,
                "filing": rng.choice(org_people(world, vendors["filing"]["id"]))}
    partner = rng.choice(organisations(world, "partner") or organisations(world, "customer"))
    contacts["partner"] = rng.choice(org_people(world, partner["id"]))

    rooms = [f"Room {name}" for name in rng.sample(ROOM_NAMES, 4)]
    online = rng.choice(ONLINE_LOCATIONS)
    folders = {role: rng.choice(names) for role, names in FOLDER_NAMES.items()}
    folders["invoices"] = f"{folders['finance']}/Invoices" if rng.random() < 0.4 else folders["finance"]

    total, filing = rng.sample(range(1100, 10_000), 2)
    old = total - rng.randint(12, 90)
    invoices = {"total": f"INV-{total}", "old": f"INV-{old if old != filing else old - 1}", "filing": f"INV-{filing}"}
    names = {p["name"] for p in world["people"]}
    externals = [p for p in world["people"] if p["org"] != world["company"]["id"]]
    new_hire = user["name"]
    while new_hire in names:
        new_hire = f"{rng.choice(externals)['first']} {rng.choice(externals)['last']}"

    sync, review, kickoff, audit = projects["sync"], projects["review"], projects["kickoff"], projects["audit"]
    day = today(world)
    # where a mail asks to move the budget review to: the calendar seeds it on another day
    review_move = {"date": rng.choice(days_from(world, 2, 11)),
                   "start": rng.choice(["10:00", "10:30", "11:00", "13:30", "14:00", "14:30", "15:00", "16:00"])}
    stem = f"budget_{day.year}_q{(day.month - 1) // 3 + 1}"
    documents = {
        "budget": {"name": f"{stem}.csv", "folder": folders["finance"], "owner": cast["finance"]["email"]},
        "budget_draft": {"name": f"{stem}_draft.csv", "folder": folders["archive"], "owner": cast["finance"]["email"]},
        "invoice_total": {"name": f"invoice_{invoices['total']}.txt", "folder": folders["invoices"],
                          "owner": billing["email"]},
        "invoice_old": {"name": f"invoice_{invoices['old']}.txt", "folder": folders["invoices"],
                        "owner": billing["email"]},
        "invoice_filing": {"name": f"invoice_{invoices['filing']}.txt", "folder": folders["shared"],
                           "owner": contacts["filing"]["email"]},
        "plan": {"name": f"{sync['code']}_{slug(sync['name'])}_plan.md", "folder": folders["projects"],
                 "owner": cast["requester"]["email"]},
        "brief": {"name": f"{kickoff['code']}_brief.md", "folder": folders["projects"],
                  "owner": cast["designer"]["email"]},
        "findings": {"name": f"{audit['code']}_audit_findings.md", "folder": folders["projects"],
                     "owner": cast["security"]["email"]},
        "contract": {"name": f"{slug(vendors['contract']['name'])}_vendor_contract.txt", "folder": folders["shared"],
                     "owner": cast["legal"]["email"]},
        "roster": {"name": f"{slug(user['department'] or 'team')}_team_roster.csv", "folder": folders["hr"],
                   "owner": cast["hr"]["email"]},
        "onboarding": {"name": f"onboarding_{slug(new_hire)}.md", "folder": folders["hr"],
                       "owner": cast["hr"]["email"]},
        "office_move": {"name": f"office_move_{slug(world['company']['city'])}.txt", "folder": folders["shared"],
                        "owner": cast["ops"]["email"]},
    }
    meetings = {
        "design_review": {"title": f"{sync['code']} design review", "location": rooms[0],
                          "attendees": [cast["requester"]["email"], cast["engineer"]["email"]],
                          "agenda": f"Walk through {documents['plan']['name']} before the cutover."},
        "budget_review": {"title": f"{review['name']} budget review", "location": rooms[1],
                          "attendees": [cast["finance"]["email"], cast["product"]["email"]],
                          "agenda": f"{review['code']}: go through {documents['budget']['name']} line by line."},
        "kickoff": {"title": f"{kickoff['name']} kickoff", "location": rooms[2],
                    "attendees": [cast["designer"]["email"], cast["product"]["email"]],
                    "agenda": f"{kickoff['code']} kickoff; brief in {documents['brief']['name']}."},
        "vendor_sync": {"title": f"Vendor sync with {vendors['sync']['name']}", "location": online,
                        "attendees": [manager["email"], cast["legal"]["email"]],
                        "agenda": f"{projects['onboarding']['code']} onboarding status and invoice "
                                  f"{invoices['total']}."},
        "readout": {"title": f"{audit['code']} audit readout", "location": rooms[3],
                    "attendees": [cast["security"]["email"], cast["engineer"]["email"]],
                    "agenda": f"{audit['code']} findings, see {documents['findings']['name']}."},
        "one_on_one": {"title": f"1:1 {user['first']} / {cast['hr']['first']}", "location": rng.choice(rooms),
                       "attendees": [cast["hr"]["email"]], "agenda": "Monthly 1:1."},
    }
    return {"rooms": rooms, "online": online, "folders": folders, "cast": cast, "vendors": vendors,
            "contacts": contacts, "partner": partner, "projects": projects, "invoices": invoices,
            "new_hire": new_hire, "review_move": review_move,
            "notes_file": {"name": f"{audit['code']}_followup.md", "folder": folders["projects"]},
            "meetings": meetings, "documents": documents}


# ---------------------------------------------------------------- schemas and validation


def object_schema(props: dict, required: list[str]) -> dict:
    """A JSON Schema object with exactly these properties."""
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TIME_RE = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$")
_EMAIL_RE = re.compile(r"^[a-z0-9._-]+@[a-z0-9-]+(\.[a-z0-9-]+)+$")


def check_date(value: Any, field: str) -> str:
    """Return ``value`` if it is a real date written YYYY-MM-DD, else raise ToolFailure."""
    if not isinstance(value, str) or not _DATE_RE.match(value):
        raise ToolFailure(f"{field} must be a date written YYYY-MM-DD, got {value!r}")
    try:
        _dt.date.fromisoformat(value)
    except ValueError:
        raise ToolFailure(f"{field} is not a real calendar date: {value!r}") from None
    return value


def check_time(value: Any, field: str) -> str:
    """Return ``value`` if it is a 24-hour time written HH:MM, else raise ToolFailure."""
    if not isinstance(value, str) or not _TIME_RE.match(value):
        raise ToolFailure(f"{field} must be a 24-hour time written HH:MM, got {value!r}")
    return value


def check_email(value: Any, field: str) -> str:
    """Return the lower-cased address if it looks like an email address."""
    if not isinstance(value, str) or not _EMAIL_RE.match(value.strip().lower()):
        raise ToolFailure(f"{field} must be an email address like first.last@company.example, got {value!r}")
    return value.strip().lower()


def check_emails(value: Any, field: str, allow_empty: bool = True) -> list[str]:
    """Validate a list of addresses (a comma-separated string is accepted too)."""
    if isinstance(value, str):
        value = [v for v in value.split(",") if v.strip()]
    if not isinstance(value, list):
        raise ToolFailure(f"{field} must be a list of email addresses, got {value!r}")
    out: list[str] = []
    for item in value:
        addr = check_email(item, field)
        if addr not in out:
            out.append(addr)
    if not out and not allow_empty:
        raise ToolFailure(f"{field} needs at least one email address")
    return out


def req_str(args: dict, key: str, max_len: int = 20000) -> str:
    """A required, non-blank string argument."""
    value = args.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ToolFailure(f"missing required argument {key!r} (a non-empty string)")
    if len(value) > max_len:
        raise ToolFailure(f"{key} is too long ({len(value)} characters, at most {max_len})")
    return value


def opt_str(args: dict, key: str) -> str | None:
    """An optional string argument; None when absent or null, ToolFailure when not a string."""
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ToolFailure(f"argument {key!r} must be a string, got {value!r}")
    return value


def opt_choice(args: dict, key: str, values: Sequence[str]) -> str | None:
    """An optional string argument that must be one of ``values``; None when absent or null."""
    value = opt_str(args, key)
    if value is not None and value not in values:
        raise ToolFailure(f"{key} must be one of {', '.join(values)}, got {value!r}")
    return value


def opt_int(args: dict, key: str, default: int, lo: int, hi: int) -> int:
    """An optional integer argument within [lo, hi]."""
    value = args.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ToolFailure(f"{key} must be an integer from {lo} to {hi}, got {value!r}")
    return value


def opt_bool(args: dict, key: str) -> bool:
    """An optional boolean argument, False when absent."""
    value = args.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ToolFailure(f"{key} must be true or false, got {value!r}")
    return value


def check_args(args: Any, allowed: list[str]) -> dict:
    """Reject non-dict arguments and unknown argument names."""
    if args is None:
        return {}
    if not isinstance(args, dict):
        raise ToolFailure(f"arguments must be an object, got {type(args).__name__}")
    unknown = sorted(k for k in args if k not in allowed)
    if unknown:
        raise ToolFailure(f"unknown argument(s) {', '.join(unknown)}; allowed: {', '.join(allowed) or 'none'}")
    return args


def next_id(conn: sqlite3.Connection, table: str, prefix: str, *, width: int = 2, start: int = 0) -> str:
    """Next readable id after the largest existing one with this prefix: 'm23' after 'm22' (digits
    zero-padded to ``width``); 'PO-1001' first, then 'PO-1002' (``prefix="PO-", width=1,
    start=1000``: the number before the first id). Ids of another prefix, or with more than digits
    after it, are ignored."""
    numbers = [int(ident[len(prefix):]) for (ident,) in
               conn.execute(f"SELECT id FROM {table} WHERE substr(id, 1, ?) = ?", (len(prefix), prefix))
               if ident[len(prefix):].isdigit()]
    return f"{prefix}{max(numbers, default=start) + 1:0{width}d}"


# ---------------------------------------------------------------- the workspace, in a tool call


def one_row(conn: sqlite3.Connection, sql: str, params: tuple, missing: str) -> Any:
    """The first row ``sql`` finds; ``ToolFailure(missing)`` when there is none (the record an argument
    names does not exist: ``missing`` says which, and where to find the right one)."""
    row = conn.execute(sql, params).fetchone()
    if row is None:
        raise ToolFailure(missing)
    return row


def today_iso(conn: sqlite3.Connection) -> str:
    """The workspace's today, YYYY-MM-DD, as the state's world holds it: the date a tool writes on.

    Never the wall clock: an episode replayed a year later must write the same dates, and a state
    without a world is an error that names the fix (``world_today``), not a silent today."""
    return world_today(conn).isoformat()


def user_email(conn: sqlite3.Connection) -> str:
    """The address of the user operating the workspace (the author of what a tool writes)."""
    return world_user(conn)["email"]


class AppMeta:
    """An app's own facts (its today, user, currency), seeded into its ``{app}_meta`` table (key,
    value): ``meta.write(conn, facts)`` in ``seed``, ``meta(conn, key)`` in a tool ("" when absent)."""

    def __init__(self, app: str) -> None:
        self.table = f"{app}_meta"

    def write(self, conn: sqlite3.Connection, facts: list[tuple[str, str]]) -> None:
        conn.executemany(f"INSERT INTO {self.table} VALUES (?, ?)", facts)

    def __call__(self, conn: sqlite3.Connection, key: str) -> str:
        row = conn.execute(f"SELECT value FROM {self.table} WHERE key = ?", (key,)).fetchone()
        return row[0] if row else ""


def currency(world: World) -> str:
    """The company's currency, from its country (while seeding: finance, CRM and inventory agree)."""
    country = world["company"]["country"]
    return {"United States": "USD", "United Kingdom": "GBP", "Sweden": "SEK", "Denmark": "DKK",
            "Poland": "PLN"}.get(country, "EUR")


def weekday(day: _dt.date) -> _dt.date:
    """``day``, or the Monday after it when it falls on a weekend."""
    while day.weekday() >= 5:
        day += _dt.timedelta(days=1)
    return day


# ---------------------------------------------------------------- tools, declared where they are handled

EFFECTS = ("read", "write", "destructive")
Handler = Callable[[sqlite3.Connection, dict], dict]


class Tools:
    """An app's tools and world events, each declared on the function that handles it.

    ::

        tools = Tools()

        @tools.tool("get_event", "read", input=object_schema({"id": _ID}, ["id"]), output=EVENT_SCHEMA)
        def get_event(conn, args):
            \"\"\"Get one event by id, with its time, attendees, location and description.\"\"\"
            return _get(conn, req_str(args, "id"))

        TOOLS, handle = tools.specs, tools.handle

    The handler's docstring is the description agents read (its whitespace collapsed to single
    spaces, so it may be wrapped freely); ``description=`` overrides it. A handler gets the
    connection and the arguments, already checked to be an object with no name outside ``input``'s
    properties. ``specs`` (the app's ``TOOLS``) and ``events`` (its ``EVENTS``) keep declaration order.
    """

    def __init__(self) -> None:
        self.specs: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self._handlers: dict[str, tuple[Handler, list[str]]] = {}

    def tool(self, name: str, effect: str, input: dict, output: dict, *,
             description: str | None = None) -> Callable[[Handler], Handler]:
        """Declare the decorated function as the handler of tool ``name``."""
        if effect not in EFFECTS:
            raise ValueError(f"tool {name!r}: effect must be one of {', '.join(EFFECTS)}, got {effect!r}")

        def declare(handler: Handler) -> Handler:
            self.specs.append({"name": name, "effect": effect, "description": self._described(name, handler, description),
                               "input_schema": input, "output_schema": output})
            self._register(name, handler, input)
            return handler
        return declare

    def event(self, name: str, input: dict, *, description: str | None = None) -> Callable[[Handler], Handler]:
        """Declare the decorated function as world event ``name`` (it starts with '_': run by
        ``handle`` like a tool, never offered to agents)."""
        if not name.startswith("_"):
            raise ValueError(f"world event {name!r}: its name must start with '_' (agents never see it)")

        def declare(handler: Handler) -> Handler:
            self.events.append({"name": name, "description": self._described(name, handler, description),
                                "input_schema": input})
            self._register(name, handler, input)
            return handler
        return declare

    def handle(self, conn: sqlite3.Connection, tool: str, args: Any) -> dict:
        """Run one tool (or world event) of this app; raises ToolFailure on a domain error."""
        found = self._handlers.get(tool)
        if found is None:
            names = ", ".join(spec["name"] for spec in self.specs)
            raise ToolFailure(f"unknown tool {tool!r}; this app has: {names}")
        handler, allowed = found
        return handler(conn, check_args(args, allowed))

    def _register(self, name: str, handler: Handler, input: dict) -> None:
        if name in self._handlers:
            raise ValueError(f"{name!r} is declared twice")
        self._handlers[name] = (handler, list(input["properties"]))

    @staticmethod
    def _described(name: str, handler: Handler, description: str | None) -> str:
        text = description if description is not None else " ".join((handler.__doc__ or "").split())
        if not text:
            raise ValueError(f"{name!r} needs a description: its handler's docstring, or description=")
        return text

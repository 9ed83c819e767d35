"""Shared pieces of the workspace apps: the domain error, a fixed cast of people,
projects, documents and meetings that all three apps refer to, and small
validation helpers.

Standard library only: this module runs inside the sandbox (``python3 -I -S``).

The catalogues below are constants, so facts that cross apps stay consistent
whatever random generator each app's ``seed`` receives: a mail that asks to move
``invoice_INV-3071.txt`` always names a file that the files app seeded, and a
mail that asks to reschedule the "Q2 budget review" always names an event that
the calendar app seeded. The random generator only varies the details (dates,
times, amounts, which extra rows exist).
"""

from __future__ import annotations

import datetime as _dt
import re
import sqlite3
from typing import Any


class ToolFailure(Exception):
    """A domain error the agent should see, e.g. "no message with id 'm99'"."""


# The person operating the workspace: owner of the mailbox, calendar and drive.
USER: dict[str, str] = {"name": "Sam Taylor", "email": "sam.taylor@acme.example", "company": "Acme"}

_PEOPLE_RAW = [
    ("Alice", "Nguyen", "acme.example", "Acme", "Engineering lead"),
    ("Bruno", "Costa", "acme.example", "Acme", "Finance analyst"),
    ("Chloe", "Martin", "acme.example", "Acme", "Product manager"),
    ("Daniel", "Okafor", "acme.example", "Acme", "Security engineer"),
    ("Elena", "Rossi", "acme.example", "Acme", "Designer"),
    ("Farid", "Haddad", "acme.example", "Acme", "Legal counsel"),
    ("Grace", "Kim", "acme.example", "Acme", "HR partner"),
    ("Hugo", "Schmidt", "acme.example", "Acme", "Backend engineer"),
    ("Ines", "Duarte", "acme.example", "Acme", "Office manager"),
    ("Jonas", "Berg", "globex.example", "Globex", "Account manager"),
    ("Keiko", "Tanaka", "globex.example", "Globex", "Billing"),
    ("Liam", "Walsh", "initech.example", "Initech", "Consultant"),
]

# Colleagues and external contacts: mail senders, meeting attendees, file owners.
PEOPLE: list[dict[str, str]] = [
    {"name": f"{first} {last}", "first": first, "email": f"{first.lower()}.{last.lower()}@{domain}",
     "company": company, "role": role}
    for first, last, domain, company, role in _PEOPLE_RAW
]
COLLEAGUES = [p for p in PEOPLE if p["company"] == "Acme"]


def person(first: str) -> dict[str, str]:
    """The person whose first name is ``first`` (e.g. ``person("Bruno")``)."""
    for p in PEOPLE:
        if p["first"] == first:
            return p
    raise KeyError(first)


PROJECTS: dict[str, str] = {
    "PRJ-204": "Atlas migration",
    "PRJ-311": "Q2 budget",
    "PRJ-118": "Website redesign",
    "PRJ-427": "Globex vendor onboarding",
    "PRJ-530": "Security audit",
}

ROOMS = ["Room Orion", "Room Vega", "Room Lyra", "Video call"]

# Documents always present in the files app: (name, folder, owner first name).
DOCUMENTS = [
    ("budget_q2.csv", "Finance", "Bruno"),
    ("invoice_INV-3071.txt", "Finance", "Keiko"),
    ("invoice_INV-3088.txt", "Shared", "Liam"),
    ("PRJ-204_migration_plan.md", "Projects", "Alice"),
    ("PRJ-118_redesign_brief.md", "Projects", "Elena"),
    ("PRJ-530_audit_findings.md", "Projects", "Daniel"),
    ("globex_vendor_contract.txt", "Shared", "Farid"),
    ("team_roster.csv", "HR", "Grace"),
    ("onboarding_checklist.md", "HR", "Grace"),
    ("office_move_notes.txt", "Shared", "Ines"),
]

# Meetings always present (once each) in the calendar: (title, attendee first names, room).
MEETINGS = [
    ("PRJ-204 design review", ["Alice", "Hugo"], "Room Orion"),
    ("Q2 budget review", ["Bruno", "Chloe"], "Room Vega"),
    ("Website redesign kickoff", ["Elena", "Chloe"], "Room Lyra"),
    ("Vendor sync with Globex", ["Jonas", "Farid"], "Video call"),
    ("Security audit readout", ["Daniel", "Alice"], "Room Orion"),
    ("1:1 Sam / Grace", ["Grace"], "Room Lyra"),
]

# The workspace clock: fixed, never the wall clock. Mail before it, events around it.
TODAY = _dt.date(2026, 3, 16)  # a Monday
NOW_TIME = "09:00"


def iso_days(start: _dt.date, end: _dt.date) -> list[str]:
    """All weekday ISO dates from ``start`` to ``end`` inclusive."""
    out, day = [], start
    while day <= end:
        if day.weekday() < 5:
            out.append(day.isoformat())
        day += _dt.timedelta(days=1)
    return out


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
        raise ToolFailure(f"{field} must be an email address like first.last@acme.example, got {value!r}")
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


def tool_args(tools: list[dict], tool: str, args: Any) -> dict:
    """Look up ``tool`` in an app's TOOLS and check ``args`` against its property names."""
    for spec in tools:
        if spec["name"] == tool:
            return check_args(args, list(spec["input_schema"]["properties"]))
    names = ", ".join(spec["name"] for spec in tools)
    raise ToolFailure(f"unknown tool {tool!r}; this app has: {names}")


def next_id(conn: sqlite3.Connection, table: str, prefix: str) -> str:
    """Next readable id after the largest existing one, e.g. 'm23' after 'm22'."""
    top = 0
    for (ident,) in conn.execute(f"SELECT id FROM {table}"):
        digits = ident[len(prefix):]
        if ident.startswith(prefix) and digits.isdigit():
            top = max(top, int(digits))
    return f"{prefix}{top + 1:02d}"

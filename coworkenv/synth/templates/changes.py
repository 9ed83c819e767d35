"""Tasks where the world moves during the episode (scheduled events), and the agent must notice.

The change comes after the agent's first call, so an episode that looks once and answers from
what it saw first fails, and an empty episode sees nothing move.
"""

from __future__ import annotations

import random
import sqlite3
from typing import Any

from ...workspace import load_world

NOTICING = "noticing_change"


def _answer(cid: str, description: str, *contains: str) -> dict[str, Any]:
    return {"id": cid, "kind": "answer", "description": description, "contains": list(contains)}


def meeting_moved(conn: sqlite3.Connection, rng: random.Random) -> dict[str, Any] | None:
    """A meeting the user asks about is moved by its organiser after the agent's first look."""
    rows = conn.execute("select id, title, date, start, \"end\" from calendar_events where attendees != '[]' "
                        "order by date, start").fetchall()
    if not rows:
        return None
    ident, title, date, start, end = rng.choice(rows)
    world = load_world(conn)
    mover = rng.choice([p for p in world["people"] if p["org"] == world["company"]["id"] and p is not world["user"]])
    slots = [s for s in ("08:00", "13:30", "16:00", "17:30") if s != start]
    new_start = rng.choice(slots)
    hours, minutes = map(int, new_start.split(":"))
    new_end = f"{hours + 1:02d}:{minutes:02d}"
    return {
        "capability": NOTICING, "difficulty": 2,
        "instruction": f"{mover['first']} may be moving \"{title}\" on {date} right now. Check it, check it once "
                       "more, and tell me when it starts.",
        "checks": [_answer("start", "the answer gives the meeting's new start time", new_start)],
        "reference": [{"tool": "calendar_get_event", "arguments": {"id": ident}},
                      {"tool": "calendar_get_event", "arguments": {"id": ident}}],
        "reference_answer": f"\"{title}\" now starts at {new_start} (it was {start}).",
        "forbidden_tools": ["calendar_cancel_event", "mail_delete_message"],
        "forbidden_probe": {"tool": "calendar_cancel_event", "arguments": {"id": ident}},
        "events": [{"after_calls": 1, "app": "calendar", "action": "update_event",
                    "arguments": {"id": ident, "start": new_start, "end": new_end},
                    "description": f"{mover['name']} moves \"{title}\" to {new_start}"}],
    }


TEMPLATES = {NOTICING: {"meeting_moved": meeting_moved}}

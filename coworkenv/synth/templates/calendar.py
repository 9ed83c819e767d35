"""Templates about the calendar: when and where a meeting is, adding an event, and a meeting that moves
while the agent looks (``noticing_change``: the organiser moves it after the agent's first call, so an
episode that looks once and answers from what it saw first fails, and an empty episode sees nothing move).

Nothing is constant: what a task names is read from its workspace's initial state, and every choice is drawn from ``rng``.
"""

from __future__ import annotations

import random
import sqlite3
from typing import Any

from ...workspace import WorldEvent, load_world
from ._kit import answer_check, colleagues, future_days, plus_minutes, sql_check, step, task_spec, template, unsolved
from ._records import NO_CANCEL, NO_DELETE_MAIL, event_titled

START_TIMES = ["09:00", "10:00", "11:30", "13:00", "15:00", "16:30"]


# --------------------------------------------------------------------------- lookup


@template("lookup", 1, name="meeting",
          draws="select title from calendar_events where location != '' and attendees != '[]' "
                "group by title having count(*) = 1 order by min(id)")
def lookup_meeting(conn, rng, meeting):
    ev = event_titled(conn, meeting["title"])
    if ev is None:
        return None
    return task_spec(
        f"When is the \"{ev['title']}\" meeting, and where? Tell me the date, start time and location.",
        [answer_check("answer", f"the answer gives the date, start time and location of {ev['title']}",
                      ev["date"], ev["start"], ev["location"])],
        [step("calendar_list_events", query=ev["title"]), step("calendar_get_event", id=ev["id"])],
        f"\"{ev['title']}\" is on {ev['date']} from {ev['start']} to {ev['end']} in {ev['location']}.",
        [NO_CANCEL, NO_DELETE_MAIL], step(NO_CANCEL, id=ev["id"]))


# --------------------------------------------------------------------------- single write


@template("single_write", 2, name="event")
def write_event(conn, rng):
    world = load_world(conn)
    first_event = conn.execute("select min(id) from calendar_events").fetchone()[0]
    mates = colleagues(world)
    if first_event is None or not mates:
        return None
    for _ in range(20):  # redraw the rare event that the calendar already holds
        who = rng.choice(mates)["first"]
        title = rng.choice([f"Lunch with {who}", f"Catch-up with {who}", f"Coffee with {who}", "Focus time",
                            "Planning block"])
        date = rng.choice(future_days(world))
        start = rng.choice(START_TIMES)
        end = plus_minutes(start, rng.choice([30, 45, 60]))
        spec = unsolved(conn, task_spec(
            f"Add an event \"{title}\" to my calendar on {date} from {start} to {end}.",
            [sql_check("event", f"an event \"{title}\" exists on {date} {start}-{end}",
                       'select count(*) from calendar_events where title = ? and date = ? and start = ? '
                       'and "end" = ?', [title, date, start, end])],
            [step("calendar_create_event", title=title, date=date, start=start, end=end)],
            f"Added \"{title}\" on {date} from {start} to {end}.",
            [NO_CANCEL], step(NO_CANCEL, id=first_event)))
        if spec is not None:
            return spec
    return None


# --------------------------------------------------------------------------- noticing a change


@template("noticing_change", 2,
          draws="select id, title, date, start from calendar_events where attendees != '[]' order by date, start")
def meeting_moved(conn: sqlite3.Connection, rng: random.Random, meeting: dict[str, Any]) -> dict[str, Any] | None:
    """A meeting the user asks about is moved by its organiser after the agent's first look."""
    ident, title, date, start = meeting["id"], meeting["title"], meeting["date"], meeting["start"]
    world = load_world(conn)
    mover = rng.choice([p for p in world["people"] if p["org"] == world["company"]["id"] and p is not world["user"]])
    slots = [s for s in ("08:00", "13:30", "16:00", "17:30") if s != start]
    new_start = rng.choice(slots)
    hours, minutes = map(int, new_start.split(":"))
    new_end = f"{hours + 1:02d}:{minutes:02d}"
    return task_spec(
        f"{mover['first']} may be moving \"{title}\" on {date} right now. Check it, check it once "
        "more, and tell me when it starts.",
        [answer_check("start", "the answer gives the meeting's new start time", new_start)],
        [step("calendar_get_event", id=ident), step("calendar_get_event", id=ident)],
        f"\"{title}\" now starts at {new_start} (it was {start}).",
        [NO_CANCEL, NO_DELETE_MAIL], step(NO_CANCEL, id=ident),
        events=[WorldEvent(after_calls=1, app="calendar", action="update_event",
                           arguments={"id": ident, "start": new_start, "end": new_end},
                           description=f"{mover['name']} moves \"{title}\" to {new_start}")])

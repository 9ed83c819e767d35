"""Templates about the HR directory: managers, departments, titles and leave requests (a namesake who left
the company sits beside the person a task names).

Nothing is constant: what a task names is read from its workspace's initial state, and every choice is drawn from ``rng``.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ...workspace import text_gives
from ._kit import Spec, answer_check, column_check, first_id, query_rows, sql_check, step, task_spec, template, unsolved, world_today


def _near(a: str, b: str) -> bool:
    """Two names one letter apart (the world's near-namesakes)."""
    return len(a) == len(b) and sum(x != y for x, y in zip(a, b, strict=True)) == 1


def _staff(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    return query_rows(conn, "select * from hr_people where status = 'active' order by id")


def _leave_requests(conn: sqlite3.Connection, status: str) -> list[dict[str, Any]]:
    return query_rows(conn, "select l.*, p.name, p.department from hr_leave l join hr_people p on p.id = l.employee "
                            "where l.status = ? order by l.id", (status,))


def _pending(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Leave requests waiting for a decision."""
    return _leave_requests(conn, "pending")


def _conflicts(conn: sqlite3.Connection, request: dict[str, Any]) -> list[dict[str, Any]]:
    """Approved leave of other people of the request's department overlapping it."""
    return [r for r in _leave_requests(conn, "approved") if r["department"] == request["department"]
            and r["employee"] != request["employee"] and r["start_date"] <= request["end_date"]
            and r["end_date"] >= request["start_date"]]


def _unopposed(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Pending requests that no approved leave in the same department overlaps."""
    return [r for r in _pending(conn) if not _conflicts(conn, r)]


def _decided(request: dict[str, Any], reason: str | None) -> Spec:
    """Approve a pending leave request (no ``reason``) or reject it for ``reason``: the agent finds it
    among its person's pending requests; deciding the other way is forbidden, and so is withdrawing it."""
    rid, period = request["id"], f"{request['kind']} request from {request['start_date']} to {request['end_date']}"
    if reason is None:
        instruction, answer, status = f"Approve {request['name']}'s pending {period}.", f"Approved {rid}.", "approved"
        decide, other = step("hr_approve_leave", id=rid), step("hr_reject_leave", id=rid, reason="No")
        probe = other
    else:
        instruction = f"Reject {request['name']}'s {period}, with the reason \"{reason}\""
        answer, status = f"Rejected {rid}: {reason}", "rejected"
        decide, other = step("hr_reject_leave", id=rid, reason=reason), step("hr_approve_leave", id=rid)
        probe = step("hr_cancel_leave", id=rid)
    return task_spec(
        instruction, [column_check(status, f"{rid} is {status}", "hr_leave", "status", rid, status)],
        [step("hr_search_people", query=request["name"]),
         step("hr_list_leave", employee_id=request["employee"], status="pending"), decide],
        answer, [other.tool, "hr_cancel_leave"], probe)


# --------------------------------------------------------------------------- lookup


@template("lookup", 1, needs=("hr_people",))
def hr_manager(conn, rng):
    staff = _staff(conn)
    by_id = {p["id"]: p for p in staff}
    managed = [p for p in staff if p["manager"] in by_id]
    if not managed:
        return None
    # the near-namesakes (names one letter apart) make the better question
    twins = [p for p in managed if any(_near(p["name"], q["name"]) for q in staff)]
    person = rng.choice(twins if twins and rng.random() < 0.5 else managed)
    boss = by_id[person["manager"]]
    return task_spec(
        f"Who is {person['name']}'s manager ({person['name']} works in {person['department']} as "
        f"{person['title']}), and what is the manager's job title?",
        [answer_check("answer", f"the answer names {boss['name']}, {boss['title']}", boss["name"], boss["title"])],
        [step("hr_search_people", query=person["name"]), step("hr_get_person", id=person["id"])],
        f"{person['name']} reports to {boss['name']}, {boss['title']}.",
        ["hr_update_title", "hr_cancel_leave"], step("hr_update_title", id=person["id"], title="Manager"))


@template("lookup", 1, needs=("hr_people",))
def hr_department(conn, rng):
    departments = sorted({p["department"] for p in _staff(conn)})
    department = rng.choice(departments)
    members = [p for p in _staff(conn) if p["department"] == department]
    ids = {p["id"] for p in members}
    head = next((p for p in sorted(members, key=lambda p: p["name"]) if p["manager"] not in ids), members[0])
    return task_spec(
        f"Who is in the {department} department, and who heads it?",
        [answer_check("answer", f"the answer names every member of {department} and its head {head['name']}",
                      *sorted({p["name"] for p in members}))],
        [step("hr_list_department", department=department)],
        f"{department} ({len(members)} people): " + ", ".join(f"{p['name']} ({p['title']})" for p in members)
        + f"; {head['name']} heads it.",
        ["hr_update_title"], step("hr_update_title", id=head["id"], title="Director"))


# --------------------------------------------------------------------------- single write


@template("single_write", 2, needs=("hr_people",))
def hr_retitle(conn, rng):
    person = rng.choice(_staff(conn))
    title = rng.choice([f"Senior {person['title'][0].lower()}{person['title'][1:]}", f"Lead {person['title'].lower()}",
                        f"{person['title']} II", f"Principal {person['title'].lower()}"])
    return unsolved(conn, task_spec(
        f"{person['name']} of {person['department']} has been promoted: change their job title in the HR directory "
        f"to \"{title}\".",
        [column_check("title", f"{person['id']} has the title {title}", "hr_people", "title", person["id"], title)],
        [step("hr_search_people", query=person["name"], department=person["department"]),
         step("hr_update_title", id=person["id"], title=title)],
        f"{person['name']} ({person['id']}) is now \"{title}\".",
        ["hr_cancel_leave"],
        step("hr_cancel_leave", id=first_id(conn, "hr_leave"))))


@template("single_write", 2, needs=("hr_leave",), draws=_unopposed)
def hr_approve_leave(conn, rng, request):
    return _decided(request, None)


@template("single_write", 2, needs=("hr_leave",), draws=_pending)
def hr_reject_leave(conn, rng, request):
    return _decided(request, rng.choice(["Quarter-end close needs everyone that week.", "The team is at minimum staffing then.",
                                         "Please split it into two shorter periods."]))


@template("single_write", 2, needs=("hr_leave",))
def hr_withdraw_leave(conn, rng):
    today = world_today(conn)
    requests = [r for status in ("pending", "approved") for r in _leave_requests(conn, status)
                if r["start_date"] > today]
    if not requests:
        return None
    request = rng.choice(requests)
    return task_spec(
        f"{request['name']} no longer needs their {request['kind']} leave from {request['start_date']} to "
        f"{request['end_date']} and asked me to withdraw the request. Remove it.",
        [sql_check("gone", f"{request['id']} is withdrawn", "select count(*) from hr_leave where id = ?", [request["id"]], 0)],
        [step("hr_search_people", query=request["name"]), step("hr_list_leave", employee_id=request["employee"]),
         step("hr_cancel_leave", id=request["id"])],
        f"Withdrew {request['id']} ({request['name']}, {request['start_date']} to {request['end_date']}).",
        ["hr_reject_leave", "hr_update_title"], step("hr_reject_leave", id=request["id"], reason="Withdrawn"))


# --------------------------------------------------------------------------- multi-step chains


@template("multi_step", 3, needs=("hr_leave", "hr_people"))
def hr_leave_coverage(conn, rng):
    pending = _pending(conn)
    crowded = [r for r in pending if _conflicts(conn, r)]
    request = rng.choice(crowded if crowded and rng.random() < 0.5 else pending) if pending else None
    if request is None:
        return None
    conflicts = _conflicts(conn, request)
    reference = [step("hr_search_people", query=request["name"]),
                 step("hr_list_leave", employee_id=request["employee"], status="pending"),
                 step("hr_list_leave", department=request["department"], status="approved",
                      from_date=request["start_date"], to_date=request["end_date"])]
    if conflicts:
        away = conflicts[0]["name"]
        gives, params = text_gives("decision_note", away)
        check = sql_check("decision", f"{request['id']} is rejected naming {away}", "select count(*) from hr_leave where "
                     f"id = ? and status = 'rejected' and {gives}", [request["id"], *params])
        reference.append(step("hr_reject_leave", id=request["id"], reason=f"{away} is already away then."))
        answer = f"Rejected {request['id']}: {away} has approved leave over the same days."
        other = step("hr_approve_leave", id=request["id"])
    else:
        check = column_check("decision", f"{request['id']} is approved", "hr_leave", "status", request["id"], "approved")
        reference.append(step("hr_approve_leave", id=request["id"]))
        answer = f"Approved {request['id']}: nobody else in {request['department']} is away then."
        other = step("hr_reject_leave", id=request["id"], reason="Overlap")
    return task_spec(
        f"Decide {request['name']}'s pending {request['kind']} request ({request['start_date']} to "
        f"{request['end_date']}). Approve it unless someone else in {request['department']} already has approved "
        "leave overlapping those days; in that case reject it and name that colleague in the reason.",
        [check], reference, answer, [other.tool, "hr_cancel_leave"], other)

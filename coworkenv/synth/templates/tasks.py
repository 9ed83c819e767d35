"""Templates about the to-do lists: due and overdue tasks, creating, completing, reassigning and
de-duplicating them (a chore that recurs in another project's list is a distractor).

Nothing is constant: what a task names is read from its workspace's initial state, and every choice is drawn from ``rng``.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ...workspace import load_world
from ._kit import answer_check, colleagues, column_check, day_after, first_id, sql_check, step, task_spec, template, unsolved


def _tasks(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    keys = ("id", "list", "title", "notes", "status", "priority", "assignee", "project", "due", "created")
    return [dict(zip(keys, r, strict=True)) for r in conn.execute(
        f"select {', '.join(keys)} from tasks_items order by id")]


def _open_named_once(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Open tasks of a project whose title no other task of that project has (the one a title names)."""
    items = _tasks(conn)
    return [t for t in items if t["project"] and t["status"] != "done"
            and sum(x["title"] == t["title"] and x["project"] == t["project"] for x in items) == 1]


# --------------------------------------------------------------------------- lookup


@template("lookup", 2, needs=("tasks_items",))
def task_due(conn, rng):
    items = _tasks(conn)
    titles = {}
    for t in items:
        titles.setdefault(t["title"], []).append(t)
    # prefer a chore that recurs in another project's list: the project tells them apart
    candidates = [t for t in items if t["project"] and t["due"] and t["assignee"]
                  and len({x["project"] for x in titles[t["title"]]}) == len(titles[t["title"]])]
    recurring = [t for t in candidates if len(titles[t["title"]]) > 1]
    if not candidates:
        return None
    task = rng.choice(recurring or candidates)
    return task_spec(
        f"When is the task \"{task['title']}\" of project {task['project']} due, and who is it "
        "assigned to (email address)?",
        [answer_check("answer", f"the answer gives {task['due']} and {task['assignee']}", task["due"],
                      task["assignee"])],
        [step("tasks_search_tasks", query=task["title"]), step("tasks_get_task", id=task["id"])],
        f"\"{task['title']}\" ({task['project']}) is due {task['due']}, assigned to "
        f"{task['assignee']}.",
        ["tasks_delete_task", "tasks_update_task"], step("tasks_delete_task", id=task["id"]))


@template("lookup", 2, needs=("tasks_items",))
def task_overdue(conn, rng):
    world = load_world(conn)
    lists = {lid: (name, project) for lid, name, project in conn.execute("select id, name, project from tasks_lists")}
    late: dict[str, list[dict[str, Any]]] = {}
    for t in _tasks(conn):
        if t["project"] and t["due"] and t["due"] < world["today"] and t["status"] != "done":
            late.setdefault(t["list"], []).append(t)
    options = [lid for lid, ts in late.items() if 1 <= len(ts) <= 3 and len({t["title"] for t in ts}) == len(ts)]
    if not options:
        return None
    lid = rng.choice(sorted(options))
    code = lists[lid][1]
    titles = [t["title"] for t in late[lid]]
    return task_spec(
        f"Which unfinished tasks of project {code} are overdue (due before today, {world['today']})? "
        "List their titles.",
        [answer_check("answer", f"the answer lists {', '.join(titles)}", *titles)],
        [step("tasks_list_lists"), step("tasks_list_tasks", list=lid)],
        f"Overdue on {code}: " + "; ".join(titles) + ".",
        ["tasks_delete_task", "tasks_complete_task"], step("tasks_complete_task", id=late[lid][0]["id"]))


# --------------------------------------------------------------------------- single write


@template("single_write", 2, needs=("tasks_items",))
def task_create(conn, rng):
    world = load_world(conn)
    project = rng.choice([p for p in world["projects"] if p["status"] != "closed"] or world["projects"])
    who = rng.choice(colleagues(world))
    title = rng.choice(["Prepare the steering committee slides", "Book the project retrospective",
                        "Send the monthly report to the client", "Clean up the shared drive folder",
                        "Renew the test environment licences"])
    due = day_after(world, rng.randint(3, 20))
    priority = rng.choice(["high", "low", "urgent"])
    return unsolved(conn, task_spec(
        f"Add a task \"{title}\" to the {project['code']} list, assigned to {who['name']} "
        f"({who['email']}), due {due}, {priority} priority.",
        [sql_check("task", f"the task exists on {project['code']} for {who['email']} due {due}, {priority}",
                   "select count(*) from tasks_items where title = ? and project = ? and assignee = ? and due = ? "
                   "and priority = ?", [title, project["code"], who["email"], due, priority])],
        [step("tasks_create_task", title=title, project=project["code"], assignee=who["email"], due=due,
              priority=priority)],
        f"Created \"{title}\" on {project['code']} for {who['name']}, due {due}.",
        ["tasks_delete_task"], step("tasks_delete_task", id=first_id(conn, "tasks_items"))))


@template("single_write", 2, needs=("tasks_items",), draws=_open_named_once)
def task_complete(conn, rng, task):
    return task_spec(
        f"Mark the task \"{task['title']}\" of project {task['project']} as done.",
        [column_check("done", f"task {task['id']} is done", "tasks_items", "status", task["id"], "done")],
        [step("tasks_search_tasks", query=task["title"]), step("tasks_complete_task", id=task["id"])],
        f"Marked \"{task['title']}\" ({task['project']}) as done.",
        ["tasks_delete_task"], step("tasks_delete_task", id=task["id"]))


@template("single_write", 2, needs=("tasks_items",), draws=_open_named_once)
def task_reassign(conn, rng, task):
    world = load_world(conn)
    who = rng.choice([p for p in colleagues(world) if p["email"] != task["assignee"]])
    due = day_after(world, rng.randint(5, 25))
    return unsolved(conn, task_spec(
        f"Hand the task \"{task['title']}\" of project {task['project']} over to {who['name']} "
        f"({who['email']}) and move its due date to {due}.",
        [sql_check("task", f"task {task['id']} is assigned to {who['email']} and due {due}",
                   "select count(*) from tasks_items where id = ? and assignee = ? and due = ?",
                   [task["id"], who["email"], due])],
        [step("tasks_search_tasks", query=task["title"]),
         step("tasks_update_task", id=task["id"], assignee=who["email"], due=due)],
        f"\"{task['title']}\" is now {who['name']}'s, due {due}.",
        ["tasks_delete_task"], step("tasks_delete_task", id=task["id"])))


# --------------------------------------------------------------------------- multi-step chains


def _entered_twice(conn: sqlite3.Connection) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Tasks entered twice in a list, the second time without the notes: (copy, original)."""
    items = _tasks(conn)
    pairs = []
    for t in items:
        twins = [x for x in items if x["title"] == t["title"] and x["list"] == t["list"] and x["id"] != t["id"]]
        if twins and t["notes"] == "" and twins[0]["notes"]:
            pairs.append((t, twins[0]))
    return pairs


@template("multi_step", 3, needs=("tasks_items",), draws=_entered_twice)
def task_dedupe(conn, rng, copy, original):
    return task_spec(
        f"The task \"{copy['title']}\" was entered twice in the {copy['project']} list. Delete the "
        "copy that has no notes and keep the original.",
        [sql_check("deduped", f"{copy['id']} is deleted and {original['id']} kept",
                   "select (select count(*) from tasks_items where id = ?) = 0 and "
                   "(select count(*) from tasks_items where id = ?) = 1", [copy["id"], original["id"]])],
        [step("tasks_search_tasks", query=copy["title"]), step("tasks_get_task", id=original["id"]),
         step("tasks_get_task", id=copy["id"]), step("tasks_delete_task", id=copy["id"])],
        f"Deleted the duplicate {copy['id']} and kept {original['id']}.",
        ["tasks_complete_task"], step("tasks_complete_task", id=original["id"]))

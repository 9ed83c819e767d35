"""Templates about files: what a budget sheet says, where a file is and who owns it, moving a file.

Nothing is constant: what a task names is read from its workspace's initial state, and every choice is drawn from ``rng``.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from ._kit import answer_check, column_check, step, task_spec, template
from ._records import NO_DELETE_FILE, file_named


def _budget_file(conn: sqlite3.Connection) -> dict[str, Any] | None:
    """The current budget sheet (budget_<year>_q<n>.csv; its outdated draft has another name)."""
    for (name,) in conn.execute("select name from files_files order by id"):
        if re.fullmatch(r"budget_\d{4}_q\d\.csv", name):
            return file_named(conn, name)
    return None


_UNIQUE_NAMES = "select min(id) as id, name, folder, owner from files_files group by name having count(*) = 1 order by min(id)"
"""Files whose name no other file has (the one a name names)."""


# --------------------------------------------------------------------------- lookup


@template("lookup", 1, name="budget")
def lookup_budget(conn, rng):
    budget = _budget_file(conn)
    if budget is None:
        return None
    rows = [line.split(",") for line in budget["content"].splitlines()[1:] if line.startswith("PRJ-")]
    if not rows:
        return None
    code, name, amount = rng.choice(rows)
    return task_spec(
        f"How much is budgeted for {code} in {budget['name']}?",
        [answer_check("answer", f"the answer gives the {code} budget of {amount} EUR", amount)],
        [step("files_read_file", name=budget["name"])],
        f"{code} ({name}) has {amount} EUR budgeted in {budget['name']}.",
        [NO_DELETE_FILE, "files_write_file"], step(NO_DELETE_FILE, id=budget["id"]))


@template("lookup", 1, name="file_location", draws=_UNIQUE_NAMES)
def lookup_file_location(conn, rng, doc):
    return task_spec(
        f"Which folder is {doc['name']} in, and who owns it? Give the owner's email address.",
        [answer_check("answer", f"the answer names folder {doc['folder']} and owner {doc['owner']}",
                      doc["folder"], doc["owner"])],
        [step("files_list_files")],
        f"{doc['name']} is in the {doc['folder']} folder and is owned by {doc['owner']}.",
        [NO_DELETE_FILE, "files_move_file"], step(NO_DELETE_FILE, id=doc["id"]))


# --------------------------------------------------------------------------- single write


@template("single_write", 2, name="move_file", draws=_UNIQUE_NAMES)
def write_move_file(conn, rng, doc):
    fid, name, folder = doc["id"], doc["name"], doc["folder"]
    folders = sorted({f.split("/")[0] for (f,) in conn.execute("select folder from files_files")})
    targets = [f for f in folders if f != folder]
    if not targets:
        return None
    target = rng.choice(targets)
    return task_spec(
        f"Move the file {name} from {folder} to the {target} folder.",
        [column_check("moved", f"{name} is in {target}", "files_files", "folder", fid, target)],
        [step("files_search_files", query=name), step("files_move_file", id=fid, folder=target)],
        f"Moved {name} to {target}.",
        [NO_DELETE_FILE], step(NO_DELETE_FILE, id=fid))

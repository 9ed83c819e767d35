"""Validation that catches reward hacks: hardening a task's checks, and the probes that attack it.

A task's reference solution, played in-process on a copy of its workspace's initial state (the
apps' own handlers, the same code the sandbox runs), tells which records the task is about. From
that, ``harden`` adds to a task:

- a guard check that nothing else changed (``unchanged``: every other record hashes as the
  reference leaves it), against writes sprayed over other records and extra deletions;
- to every answer check, the values it must not mention: the other values of the field it asks
  for (the columns where the expected value is found), so an answer listing every candidate fails;
- to a multi-turn task's user, the cues of what they do not hold (``unheld_cues``), so that one
  question fishing for every fact at once is about none (``User.fishes``).

``probes`` builds the attacks calibration plays against a task, each a list of calls and an
answer; a task is admitted only if none of them is admitted by the gate:

- ``candidates``: no call, an answer listing every candidate value of the fields asked for;
- ``claim``: no call, an answer claiming success;
- ``spray``: the reference plus the same writes on other records of the same kind;
- ``destructive``: the reference plus a destructive call on another record of an app it used;
- ``partial``: the reference without its last write (or, for a lookup, an answer with one of
  several facts left out);
- ``silent``: for a multi-turn task, the reference without its messages to the user (every hidden
  fact guessed right);
- ``digits``: no call, an answer of 10,003 digits holding every number of up to four digits (for
  a task that asks for a number);
- ``glued``: no call, every value the task's apps' list and search tools return, glued into one
  word by a letter (so that no excluded value stands as a word of its own);
- ``all_values``: no call, those values and every round number (0 to 1,000, and multiples of 500
  up to 500,000), as a list;
- ``message_spray``: the reference with that list written in place of the text of its messages,
  notes and comments (where what the text says is checked);
- ``catch_all``: for a multi-turn task, one question naming every cue there is (the user's, and the
  words of every other kind of record and field of the workspace), then the reference's calls; where
  those other words are no more than ``FISHING_SLACK``, a catch-all reads as an honest question with
  context and the probe does not apply.

All of them are made from what any agent could see without doing the task (no value the task asks
for), so a task they beat admits work that did not find its answer.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..workspace import (
    ASK_TOOL,
    FISHING_SLACK,
    AnswerCheck,
    Faults,
    ReferenceStep,
    StateImage,
    Task,
    UnchangedCheck,
    Workspace,
    app_module,
    changed_tables,
    mentions,
    ordinary_tables,
    row_key,
    state_digest,
    task_apps,
)
from ..workspace.state import apply_call, copy_state, kept_with

PROBES: dict[str, str] = {
    "candidates": "an answer listing every candidate value, with no tool call",
    "claim": "a claim of success with no action",
    "spray": "the reference plus the same writes on other records of the same kind",
    "destructive": "the reference plus an extra destructive call",
    "partial": "a partial solution",
    "silent": "the reference without asking the user (the hidden facts guessed right)",
    "digits": "a long string of digits as the answer, with no tool call",
    "glued": "every value the list and search tools return, glued by a letter, as the answer, with no tool call",
    "all_values": "every value the list and search tools return and every round number, with no tool call",
    "message_spray": "the reference writing every value and round number in place of its messages' text",
    "catch_all": "one question about every fact there is, then the reference's calls",
}
CLAIM = "Done: I have taken care of everything you asked."
MAX_EXCLUDES = 40
MAX_CANDIDATE_VALUES = 400  # a column with more distinct values than this is free text, not a field
MAX_CANDIDATE_LENGTH = 120
SPRAY_RECORDS = 2


@dataclass
class Probe:
    name: str
    steps: list[ReferenceStep]
    answer: str | None


def dry_run(initial: sqlite3.Connection, workspace: Workspace, task: Task,
            steps: list[ReferenceStep]) -> sqlite3.Connection:
    """The state after ``steps`` (with the world's events and the task's injected faults, as an
    episode would have them), computed in-process on a copy of ``initial``."""
    conn = copy_state(initial)
    events = sorted([*workspace.events, *task.events], key=lambda e: e.after_calls)
    steps = [step for step in steps if step.tool != ASK_TOOL.name]  # a message to the user changes nothing
    for number, step in enumerate(steps, 1):
        spec = workspace.tool(step.tool)
        if spec is not None and not (task.faults is not None and task.faults.fails(number, step.tool)):
            _apply(conn, spec.app, spec.tool, step.arguments)
        while events and events[0].after_calls <= number:
            event = events.pop(0)
            _apply(conn, event.app, event.action, event.arguments)
    return conn


def _apply(conn: sqlite3.Connection, app: str, tool: str, arguments: dict[str, Any]) -> bool:
    """Whether the call succeeded (``apply_call``: a failing call changes nothing, as in the sandbox)."""
    try:
        apply_call(conn, app_module(app), tool, arguments)
    except Exception:
        return False
    return True


def _rows(conn: sqlite3.Connection, table: str) -> dict[str, tuple]:
    return {row[0]: row[1:] for row in conn.execute(f'select cast({row_key(conn, table)} as text), * from "{table}"')}


def changed_records(before: sqlite3.Connection, after: sqlite3.Connection) -> dict[str, list[str]]:
    """Table → keys of the rows that differ between two states (changed, created or deleted). Only
    the tables whose pages differ are read (``changed_tables``; ``before``'s image is kept with it,
    for the next comparison with it)."""
    image = kept_with(before, "image", lambda: StateImage.of(before))
    return _records_in(before, after, changed_tables(image, after))


def _changed_against(initial: sqlite3.Connection, state: sqlite3.Connection) -> tuple[StateImage, set[str] | None]:
    """``initial``'s image and the ``changed_tables`` of ``state`` (made from it) against it, each kept
    with its state (hardening and the probes of a task compare the same reference's final state)."""
    base = kept_with(initial, "image", lambda: StateImage.of(initial))
    return base, kept_with(state, "changed tables", lambda: changed_tables(base, state))


def _records_between(base: StateImage, before: sqlite3.Connection, before_tables: set[str] | None,
                     after: sqlite3.Connection) -> dict[str, list[str]]:
    """``changed_records(before, after)`` for two states made from one initial state, whose image is
    ``base`` and against which ``before``'s ``changed_tables`` are ``before_tables``: a table whose
    records differ between them differs from the initial state in one of them at least, so only the
    tables either changed are read (and no image of ``before`` is made: ~1.4 ms each)."""
    after_tables = changed_tables(base, after)
    candidates = None if before_tables is None or after_tables is None else before_tables | after_tables
    return _records_in(before, after, candidates)


def _records_in(before: sqlite3.Connection, after: sqlite3.Connection, candidates: set[str] | None) -> dict[str, list[str]]:
    """``changed_records`` among the tables ``candidates`` (``changed_tables``' answer; None: every table)."""
    changed = {}
    for table in ordinary_tables(after):
        if table.startswith("world_") or (candidates is not None and table not in candidates):
            continue
        old, new = _rows(before, table), _rows(after, table)
        keys = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
        if keys:
            changed[table] = keys
    return changed


class _Fields:
    """Where each value of a state is found: its text as SQL's ``lower`` gives it → the app columns
    holding it; and each column's distinct values, read once. Built once for a state compared with
    many tasks (a workspace's initial state): a lookup then reads nothing."""

    def __init__(self, conn: sqlite3.Connection, tables: list[str]) -> None:
        self.conn = conn
        self.where: dict[str, dict[tuple[int, int], tuple[str, str]]] = {}
        self._distinct: dict[tuple[str, str], list[str] | None] = {}
        for t, table in enumerate(tables):
            columns = [r[1] for r in conn.execute(f'pragma table_info("{table}")')]
            if not columns:
                continue
            lowered = ", ".join(f"""case when typeof("{c}") = 'blob' then null else lower(cast("{c}" as text)) end"""
                                for c in columns)
            for row in conn.execute(f'select distinct {lowered} from "{table}"'):
                for c, cell in enumerate(row):
                    if cell is not None:
                        self.where.setdefault(cell, {})[(t, c)] = (table, columns[c])

    def columns(self, wanted: str) -> list[tuple[str, str]]:
        found = self.where.get(wanted, {})
        return [found[k] for k in sorted(found)]

    def distinct(self, table: str, column: str) -> list[str] | None:
        if (table, column) not in self._distinct:
            self._distinct[(table, column)] = _distinct(self.conn, table, column)
        return self._distinct[(table, column)]


def _fields(conn: sqlite3.Connection) -> _Fields:
    """The state's ``_Fields``, kept while it has not changed."""
    return kept_with(conn, "fields", lambda: _Fields(conn, [t for t in ordinary_tables(conn) if not t.startswith("world_")]))


def _columns_holding(conn: sqlite3.Connection, tables: list[str], wanted: str) -> list[tuple[str, str]]:
    """The app columns of ``tables`` in which ``wanted`` is found (as ``_Fields.columns`` finds them),
    by one scan of each table: for a state looked at once (a reference's final state), cheaper than
    indexing every value."""
    found = []
    for table in tables:
        columns = [r[1] for r in conn.execute(f'pragma table_info("{table}")')]
        if not columns:
            continue
        holds = ", ".join(f"""max(typeof("{c}") != 'blob' and lower(cast("{c}" as text)) = :v)""" for c in columns)
        row = conn.execute(f'select {holds} from "{table}"', {"v": wanted}).fetchone()
        found += [(table, column) for column, held in zip(columns, row, strict=True) if held]
    return found


def _distinct(conn: sqlite3.Connection, table: str, column: str) -> list[str] | None:
    """The column's distinct values as text; None when there are more than a field has."""
    values = [str(r[0]) for r in conn.execute(
        f'select distinct cast("{column}" as text) from "{table}" where "{column}" is not null '
        f"limit {MAX_CANDIDATE_VALUES + 1}")]
    return values if len(values) <= MAX_CANDIDATE_VALUES else None


def _field_values(conn: sqlite3.Connection, value: str, only: set[str] | None = None) -> list[str]:
    """Every distinct value of the app columns in which ``value`` is found (a field's candidates);
    of the tables ``only``, when given (a state looked at once: its tables are scanned, not indexed)."""
    found: list[str] = []
    wanted = value.strip().casefold()
    if only is None:
        fields = _fields(conn)
        holding, distinct = fields.columns(wanted), fields.distinct
    else:
        tables = [t for t in ordinary_tables(conn) if not t.startswith("world_") and t in only]
        holding, distinct = _columns_holding(conn, tables, wanted), lambda t, c: _distinct(conn, t, c)
    for table, column in holding:
        values = distinct(table, column)
        if values is not None:
            found += [v for v in values if 0 < len(v.strip()) <= MAX_CANDIDATE_LENGTH and v not in found]
    return found


def candidate_values(conn: sqlite3.Connection, check: AnswerCheck, only: set[str] | None = None) -> list[str]:
    """What an answer listing every candidate of ``check``'s fields would name (found in the
    tables ``only``, when given)."""
    values: list[str] = []
    for expected in check.contains:
        values += [v for v in _field_values(conn, expected, only) if v not in values]
    return values


def harden(task: Task, workspace: Workspace, initial: sqlite3.Connection,
           final: sqlite3.Connection | None = None) -> Task:
    """``task`` with a guard that nothing else changed and, on its answer checks, the other
    candidates they must not mention (see the module's doc). ``final``: the reference's final state
    (``dry_run``), where the caller has it (left open); worked out here otherwise."""
    with _reference_final(initial, workspace, task, final) as final:
        _, tables = _changed_against(initial, final)
        allowed = _records_in(initial, final, tables)
        checks: list[Any] = []
        for check in task.checks:
            if isinstance(check, AnswerCheck) and not check.excludes:
                said = f"{task.reference_answer}\n{task.instruction}"
                # the final state's other candidates are the initial state's but in the tables the reference changed
                others = candidate_values(initial, check) + candidate_values(final, check, only=set(allowed))
                excludes = []
                for value in others:
                    if (value not in excludes and not mentions(said, value)
                            and not any(mentions(value, c) or mentions(c, value) for c in check.contains)):
                        excludes.append(value)
                check = check.model_copy(update={"excludes": excludes[:MAX_EXCLUDES]})
            checks.append(check)
        if not any(isinstance(c, UnchangedCheck) for c in checks):
            checks.append(UnchangedCheck(
                id="nothing_else", description="nothing but the records the task is about was changed",
                allowed=allowed, digest=_digest(initial, final, tables, allowed)))
        return _with_unheld_cues(task.model_copy(update={"checks": checks}), initial)


def hardened(task: Task) -> bool:
    """Whether ``task`` has what ``harden`` adds: a guard check, and for a multi-turn task whose user
    holds facts or confirmations, the cues of what they do not hold."""
    user = task.user
    return (any(isinstance(c, UnchangedCheck) for c in task.checks)
            and (user is None or not (user.facts or user.confirmations) or bool(user.unheld_cues)))


def _with_unheld_cues(task: Task, initial: sqlite3.Connection) -> Task:
    """``task`` with its user's ``unheld_cues`` worked out, where it has a user holding facts or
    confirmations and none are given."""
    user = task.user
    if user is None or not (user.facts or user.confirmations) or user.unheld_cues:
        return task
    cues = _unheld_cues(initial, task)
    return task.model_copy(update={"user": user.model_copy(update={"unheld_cues": cues})}) if cues else task


def _unheld_cues(initial: sqlite3.Connection, task: Task) -> list[str]:
    from ._compose import unheld_cues  # the compositional generator's catalog knows the workspace's fields

    return unheld_cues(initial, task)


@contextlib.contextmanager
def _reference_final(initial: sqlite3.Connection, workspace: Workspace, task: Task,
                     final: sqlite3.Connection | None) -> Iterator[sqlite3.Connection]:
    """``final`` as it is, or the reference's final state worked out (and closed after)."""
    if final is not None:
        yield final
        return
    made = dry_run(initial, workspace, task, task.reference)
    try:
        yield made
    finally:
        made.close()


def _digest(initial: sqlite3.Connection, final: sqlite3.Connection, changed: set[str] | None,
            allowed: dict[str, list[str]]) -> str:
    """``state_digest`` of ``final``, a state made from ``initial`` whose ``changed_tables`` are
    ``changed``: the parts of the other tables are ``initial``'s, worked out once for every task over it."""
    same = set() if changed is None else set(ordinary_tables(final)) - changed
    return state_digest(final, allowed, parts=kept_with(initial, "digest parts", dict), same=same)


def reference_holds(task: Task, workspace: Workspace, initial: sqlite3.Connection,
                    final: sqlite3.Connection | None = None) -> bool:
    """Whether the reference solution, played in-process, passes every check of ``task`` (what
    calibration will demand of it in a sandbox): a generator drops a task whose does not.
    ``final``: the reference's final state, where the caller has it."""
    with _reference_final(initial, workspace, task, final) as final:
        return all(check.evaluate(final, task.reference_answer).passed for check in task.checks)


def _write_steps(workspace: Workspace, steps: list[ReferenceStep]) -> list[int]:
    return [i for i, s in enumerate(steps) if (spec := workspace.tool(s.tool)) is not None and spec.effect != "read"]


def _table_of(conn: sqlite3.Connection, app: str, key: str) -> str | None:
    for table in ordinary_tables(conn):
        if table.startswith(f"{app}_") and conn.execute(
                f'select 1 from "{table}" where cast({row_key(conn, table)} as text) = ? limit 1', (key,)).fetchone():
            return table
    return None


def _other_keys(conn: sqlite3.Connection, table: str, not_these: set[str], n: int) -> list[str]:
    rows = conn.execute(f'select cast({row_key(conn, table)} as text) from "{table}" order by 1').fetchall()
    return [r[0] for r in rows if r[0] not in not_these][:n]


def _spray(task: Task, workspace: Workspace, initial: sqlite3.Connection, final: sqlite3.Connection,
           base: StateImage, final_tables: set[str] | None) -> list[ReferenceStep]:
    """The reference's writes repeated on other records of the same kind (their ``id`` argument
    swapped), those that change something after the reference (``final``, whose ``changed_tables``
    against the initial state's image ``base`` are ``final_tables``)."""
    candidates: list[ReferenceStep] = []
    used = {str(v) for s in task.reference for v in s.arguments.values() if isinstance(v, str)}
    for i in _write_steps(workspace, task.reference):
        step = task.reference[i]
        spec = workspace.tool(step.tool)
        assert spec is not None
        if spec.effect != "write":
            continue
        for name, value in step.arguments.items():
            if not isinstance(value, str) or not name.endswith("id"):
                continue
            table = _table_of(initial, spec.app, value)
            if table is None:
                continue
            for other in _other_keys(initial, table, used, SPRAY_RECORDS * 3):
                candidates.append(ReferenceStep(tool=step.tool, arguments={**step.arguments, name: other}))
            break
    extra: list[ReferenceStep] = []
    if not candidates:
        return extra
    state = copy_state(final)  # the candidates that change something pile up on it
    state_tables = final_tables
    try:
        for step in candidates:
            spec = workspace.tool(step.tool)
            assert spec is not None
            before = copy_state(state)
            try:
                # ``state_tables`` stay the state's until a candidate changes a record: a call that changed
                # nothing (or failed, rolled back) leaves every record as it was
                if (_apply(state, spec.app, spec.tool, step.arguments)
                        and _records_between(base, before, state_tables, state)):
                    extra.append(step)
                    if len(extra) == SPRAY_RECORDS:
                        break
                    state_tables = changed_tables(base, state)
            finally:
                before.close()
    finally:
        state.close()
    return extra


def _destructive(task: Task, workspace: Workspace, final: sqlite3.Connection, base: StateImage,
                 final_tables: set[str] | None) -> ReferenceStep | None:
    """A destructive call the task does not forbid, on a record of an app the reference used (of
    another app when those have none left unforbidden), that changes the reference's final state
    (``final``, whose ``changed_tables`` against the initial state's image ``base`` are ``final_tables``)."""
    used_apps = [spec.app for s in task.reference if (spec := workspace.tool(s.tool)) is not None]
    apps = list(dict.fromkeys([*used_apps, *(app.name for app in workspace.apps)]))
    touched = {str(v) for s in task.reference for v in s.arguments.values() if isinstance(v, str)}
    for app in apps:
        spec_app = next(a for a in workspace.apps if a.name == app)
        for tool in spec_app.tools:
            if tool.effect != "destructive" or tool.name in task.forbidden_tools:
                continue
            required = tool.input_schema.get("required", [])
            if len(required) != 1 or not required[0].endswith("id"):
                continue
            for table in [t for t in ordinary_tables(final) if t.startswith(f"{app}_")]:
                for key in _other_keys(final, table, touched, 3):
                    trial = copy_state(final)
                    try:
                        if (_apply(trial, app, tool.tool, {required[0]: key})
                                and _records_between(base, final, final_tables, trial)):
                            return ReferenceStep(tool=tool.name, arguments={required[0]: key})
                    finally:
                        trial.close()
    return None


def probes(task: Task, workspace: Workspace, initial: sqlite3.Connection,
           final: sqlite3.Connection | None = None) -> dict[str, Probe | None]:
    """The hack probes of ``task`` (None where one does not apply: no write to spray, no
    destructive tool left unforbidden, nothing to leave out). ``final``: the reference's final
    state, where the caller has it."""
    answer_checks = [c for c in task.checks if isinstance(c, AnswerCheck)]
    found: dict[str, Probe | None] = dict.fromkeys(PROBES)
    if answer_checks:
        listed: list[str] = []
        for state in (initial,):
            for check in answer_checks:
                listed += [v for v in candidate_values(state, check) if v not in listed]
        found["candidates"] = Probe("candidates", [], "; ".join(listed)) if listed else None
    found["claim"] = Probe("claim", [], CLAIM)
    with _reference_final(initial, workspace, task, final) as final:  # for both below
        base, final_tables = _changed_against(initial, final)
        destructive = _destructive(task, workspace, final, base, final_tables)
        spray = _spray(task, workspace, initial, final, base, final_tables)
    if spray:
        found["spray"] = Probe("spray", [*task.reference, *spray], task.reference_answer)
    if destructive is not None:
        found["destructive"] = Probe("destructive", [*task.reference, destructive], task.reference_answer)
    writes = _write_steps(workspace, task.reference)
    if writes:
        last = task.reference[writes[-1]]  # every try of it, when the task injects faults
        partial = [s for s in task.reference if s != last]
        found["partial"] = Probe("partial", partial, task.reference_answer)
    else:
        facts = [s for c in answer_checks for s in c.contains]
        if len(facts) > 1:
            answer = task.reference_answer
            for fact in facts[-1:]:
                answer = _without(answer, fact)
            found["partial"] = Probe("partial", list(task.reference), answer)
    if task.user is not None:
        found["silent"] = Probe("silent", [s for s in task.reference if s.tool != ASK_TOOL.name],
                                task.reference_answer)
    found.update(_blind_probes(task, workspace, initial, answer_checks))
    for name, probe in found.items():
        if probe is not None and probe.steps:
            found[name] = Probe(probe.name, with_retries(task.faults, probe.steps), probe.answer)
    return found


def _de_bruijn(order: int) -> str:
    """The shortest string of decimal digits holding every string of ``order`` digits (de Bruijn's
    sequence, wrapped around: ``10**order + order - 1`` digits)."""
    digits: list[int] = []
    a = [0] * 10 * order

    def extend(t: int, p: int) -> None:
        if t > order:
            if order % p == 0:
                digits.extend(a[1:p + 1])
            return
        a[t] = a[t - p]
        extend(t + 1, p)
        for j in range(a[t - p] + 1, 10):
            a[t] = j
            extend(t + 1, t)

    extend(1, 1)
    text = "".join(map(str, digits))
    return text + text[:order - 1]


DIGITS = _de_bruijn(4)
"""The ``digits`` probe's answer: 10,003 digits holding every number of up to four digits."""
ROUND_NUMBERS = ", ".join(map(str, [*range(1001), *range(1500, 500_001, 500)]))
"""Every number an all-values reply lists besides the apps' values: 0 to 1,000 and the multiples of 500
up to 500,000 (budgets, totals and counts of a workspace are among them)."""
GLUE = "x"
_NUMERIC = re.compile(r"[\d.,]*\d[\d.,]*")
_TEXT_ARGUMENT = re.compile(r"text|body|content|message|comment|note|reason|description")


def listed_values(workspace: Workspace, initial: sqlite3.Connection, apps: set[str]) -> list[str]:
    """Every value (as text, each once, of at most ``MAX_CANDIDATE_LENGTH`` characters) that the list
    and search tools of ``apps`` return on the initial state when called without a query (a
    resource's list with its arguments; others with their largest ``limit``): what any agent sees of
    the apps before it looks anything up. Kept with the initial state, per app."""
    found: dict[str, None] = {}
    for app in workspace.apps:
        if app.name in apps:
            found.update(dict.fromkeys(kept_with(initial, f"listed {app.name}", lambda app=app: _listed(app, initial))))
    return list(found)


def _listed(app: Any, initial: sqlite3.Connection) -> list[str]:
    arguments_of = {r.list_tool: r.list_arguments for r in app.resources}
    found: dict[str, None] = {}
    for tool in app.tools:
        if tool.effect != "read" or not tool.tool.startswith(("list", "search")) or tool.input_schema.get("required"):
            continue
        arguments = dict(arguments_of.get(tool.tool, {}))
        limit = tool.input_schema.get("properties", {}).get("limit", {})
        if "limit" not in arguments and isinstance(limit.get("maximum"), int):
            arguments["limit"] = limit["maximum"]
        try:
            _scalars(app_module(app.name).handle(initial, tool.tool, arguments), found)
        except Exception:  # a tool this state cannot answer lists nothing
            continue
    return list(found)


def _scalars(value: Any, found: dict[str, None]) -> None:
    if isinstance(value, dict):
        for item in value.values():
            _scalars(item, found)
    elif isinstance(value, list):
        for item in value:
            _scalars(item, found)
    elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
        text = str(value).strip()
        if 0 < len(text) <= MAX_CANDIDATE_LENGTH:
            found[text] = None


def _blind_probes(task: Task, workspace: Workspace, initial: sqlite3.Connection,
                  answer_checks: list[AnswerCheck]) -> dict[str, Probe | None]:
    """The probes made from what an agent sees without doing the task (see the module): ``digits``,
    ``glued``, ``all_values`` (tasks that check an answer), ``message_spray`` (tasks whose checks read
    what the reference writes), ``catch_all`` (multi-turn tasks in a workspace with things to fish for)."""
    found: dict[str, Probe | None] = {}
    listed = listed_values(workspace, initial, task_apps(task))
    everything = ", ".join([*listed, ROUND_NUMBERS])
    if answer_checks:  # a string of digits gives nothing but numbers: it tries the tasks that ask for one
        numeric = any(all(_NUMERIC.fullmatch(value.strip()) for value in c.contains) for c in answer_checks)
        found["digits"] = Probe("digits", [], DIGITS) if numeric else None
        found["glued"] = Probe("glued", [], GLUE.join(listed)) if listed else None
        found["all_values"] = Probe("all_values", [], everything)
    sprayed = _message_spray(task, workspace, initial, everything)
    found["message_spray"] = Probe("message_spray", sprayed, task.reference_answer) if sprayed is not None else None
    user = task.user
    others = _unheld_cues(initial, task) if user is not None and (user.facts or user.confirmations) else []
    if user is not None and len(others) > FISHING_SLACK:  # fewer: a catch-all reads as a question with context
        cues = [cue for item in [*user.facts, *user.confirmations] for cue in item.cues] + others
        question = f"Before I start, tell me all I may need: which {', '.join(dict.fromkeys(cues))}? Do you confirm?"
        found["catch_all"] = Probe("catch_all", [ReferenceStep(tool=ASK_TOOL.name, arguments={"message": question}),
                                                 *(s for s in task.reference if s.tool != ASK_TOOL.name)],
                                   task.reference_answer)
    return found


def _message_spray(task: Task, workspace: Workspace, initial: sqlite3.Connection,
                   spray: str) -> list[ReferenceStep] | None:
    """The reference with ``spray`` as the text its write calls write (their string arguments named
    like a text, a body, a note…), where a check reads that text: None where the reference writes no
    text, or where it passes every check with a bare "Done." written instead (nothing reads it)."""
    def written(text: str) -> list[ReferenceStep] | None:
        steps, changed = [], False
        for step in task.reference:
            spec = workspace.tool(step.tool)
            if spec is not None and spec.effect == "write":
                arguments = {name: text if isinstance(value, str) and _TEXT_ARGUMENT.search(name) else value
                             for name, value in step.arguments.items()}
                changed = changed or arguments != step.arguments
                step = ReferenceStep(tool=step.tool, arguments=arguments)
            steps.append(step)
        return steps if changed else None

    bare = written("Done.")
    if bare is None:
        return None
    with contextlib.closing(dry_run(initial, workspace, task, bare)) as final:
        if all(check.evaluate(final, task.reference_answer).passed for check in task.checks):
            return None
    return written(spray)


def with_retries(faults: Faults | None, steps: list[ReferenceStep]) -> list[ReferenceStep]:
    """``steps`` as an agent that retries would play them under a task's injected ``faults``: each
    call repeated until it goes through (a step already repeated is taken as its retry)."""
    if faults is None:
        return steps
    intended = [s for i, s in enumerate(steps) if i == 0 or s != steps[i - 1]]
    played: list[ReferenceStep] = []
    calls = 0  # messages to the user are not calls: faults are drawn by the number of the call
    for step in intended:
        played.append(step)
        if step.tool == ASK_TOOL.name:
            continue
        calls += 1
        while faults.fails(calls, step.tool) and len(played) < 10 * len(intended):
            played.append(step)
            calls += 1
    return played


def _without(text: str, phrase: str) -> str:
    import re

    return re.sub(re.escape(phrase), "", text, flags=re.IGNORECASE)

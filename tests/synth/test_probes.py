"""Validation that catches reward hacks: tasks as the templates write them are beaten by the probes,
hardened ones are not; and injected faults that an agent must retry through."""

from __future__ import annotations

import sqlite3

import pytest

from coworkenv.gate import GRADER_VERSION
from coworkenv.store import Provenance
from coworkenv.synth import PROBES, calibrate_task, generate, generate_tasks, harden, probes
from coworkenv.workspace import SUBMIT_TOOL, write_initial_state

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]


def _store(host, workspaces, tasks):
    for workspace in workspaces:
        host.store.put_workspace(workspace)
    for task in tasks:
        host.store.put_task(task)


async def test_unhardened_tasks_are_beaten_by_the_probes_and_quarantined_naming_the_probe(host):
    workspaces, tasks = generate_tasks(24, seed=0, capabilities=("lookup", "single_write"), hardened=False)
    _store(host, workspaces, tasks)
    beaten: dict[str, int] = {}
    for task in tasks:
        result = await calibrate_task(host, task, as_written=True)
        for name, outcome in result.probes.items():
            if outcome == "beaten":
                beaten[name] = beaten.get(name, 0) + 1
                assert f"hack probe {name!r}" in result.reason
                assert host.store.task(task.id).status == "quarantined"
    assert beaten.get("candidates") and beaten.get("spray"), beaten


async def test_the_same_tasks_hardened_hold_against_every_probe(host, tmp_path):
    workspaces, raw = generate_tasks(24, seed=0, capabilities=("lookup", "single_write"), hardened=False)
    conn = sqlite3.connect(write_initial_state(workspaces[0], tmp_path / "s.db"))
    try:
        tasks = [harden(task, workspaces[0], conn) for task in raw if task.workspace_id == workspaces[0].id]
        found = {name for task in tasks for name, probe in probes(task, workspaces[0], conn).items() if probe}
    finally:
        conn.close()
    # every probe applies to some of them (silent, catch_all: to multi-turn tasks only; message_spray applies to a
    # task whose checks read the text it writes, which seed 0 makes since templates take turns by name)
    assert found == set(PROBES) - {"silent", "catch_all"}
    _store(host, workspaces, tasks)
    for task in tasks:
        result = await calibrate_task(host, task)
        assert result.admitted, (task.id, result.reason)
        assert set(result.probes) == set(PROBES) and "beaten" not in result.probes.values()


async def test_injected_faults_fail_calls_before_the_sandbox_and_an_agent_that_retries_passes(host):
    workspaces, tasks = generate_tasks(4, seed=3, capabilities=("error_recovery",))
    _store(host, workspaces, tasks)
    task = tasks[0]
    assert task.faults is not None and len(task.reference) > len({(s.tool, str(s.arguments)) for s in task.reference})
    assert (await calibrate_task(host, task)).admitted

    # an agent that gives up at the first failure
    episode = await host.open(task, Provenance("live"))
    for step in task.reference:
        outcome = await episode.call(step.tool, step.arguments)
        if not outcome.ok:
            assert outcome.error_kind == "transient" and "try again" in outcome.error
            break
    await episode.call(SUBMIT_TOOL.name, {"answer": "The service failed, so I stopped there."})
    calls = [c for c in host.store.tool_calls(episode.id) if c.tool != SUBMIT_TOOL.name]
    assert calls[-1].is_error and calls[-1].error_kind == "transient"
    assert not host.store.verdict(episode.id, GRADER_VERSION).admitted

    # the reference retries: every failure recovered, robustness 1
    reference = host.store.episodes(source="calibration", task_id=task.id)[0]
    recorded = host.store.tool_calls(reference.id)
    assert any(c.error_kind == "transient" for c in recorded)
    grade = host.store.verdict(reference.id, GRADER_VERSION)
    assert grade.admitted


def _every_row(conn: sqlite3.Connection, table: str) -> dict[str, tuple]:
    from coworkenv.workspace import row_key

    return {r[0]: r[1:] for r in conn.execute(f'select cast({row_key(conn, table)} as text), * from "{table}"')}


def test_hardening_finds_what_reading_every_record_finds(tmp_path):
    """The changed records (found from the pages that differ) and an answer's candidates (from a
    value index kept per state) are those that reading every table and column gives."""
    from coworkenv.synth._probes import MAX_CANDIDATE_VALUES, candidate_values, changed_records, dry_run
    from coworkenv.workspace import AnswerCheck, ordinary_tables

    workspaces, tasks = generate_tasks(30, seed=4, hardened=False)
    checked = 0
    for workspace in workspaces:
        initial = sqlite3.connect(write_initial_state(workspace, tmp_path / f"{workspace.id}.db"))
        tables = [t for t in ordinary_tables(initial) if not t.startswith("world_")]
        for task in (t for t in tasks if t.workspace_id == workspace.id):
            final = dry_run(initial, workspace, task, task.reference)
            expected_changes = {}
            for table in tables:
                old, new = _every_row(initial, table), _every_row(final, table)
                keys = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
                if keys:
                    expected_changes[table] = keys
            assert changed_records(initial, final) == expected_changes, task.id
            for check in (c for c in task.checks if isinstance(c, AnswerCheck)):
                expected: list[str] = []
                for value in check.contains:
                    for table in tables:
                        for column in [r[1] for r in initial.execute(f'pragma table_info("{table}")')]:
                            if initial.execute(f'select 1 from "{table}" where lower(cast("{column}" as text)) = ?',
                                               (value.strip().casefold(),)).fetchone() is None:
                                continue
                            values = [str(r[0]) for r in initial.execute(
                                f'select distinct cast("{column}" as text) from "{table}" where "{column}" is not null')]
                            if len(values) <= MAX_CANDIDATE_VALUES:
                                expected += [v for v in values if 0 < len(v.strip()) <= 120 and v not in expected]
                assert candidate_values(initial, check) == expected, task.id
                checked += 1
            final.close()
        initial.close()
    assert checked >= 10


def test_generation_finds_each_tasks_probes_as_calibration_would(tmp_path):
    """The probes generation hands over (from the run of the reference it hardened the task with) are
    those calibration finds for the stored task on a fresh copy of its workspace's initial state."""
    found: dict = {}
    made = generate(40, seed=4, probes=found)
    workspaces, tasks = made.workspaces, made.tasks
    assert set(found) == {task.id for task in tasks}
    for workspace in workspaces:
        conn = sqlite3.connect(write_initial_state(workspace, tmp_path / f"{workspace.id}.db"))
        try:
            for task in (t for t in tasks if t.workspace_id == workspace.id):
                assert probes(task, workspace, conn) == found[task.id], task.id
        finally:
            conn.close()
    assert any(probe is not None and probe.steps for by_name in found.values() for probe in by_name.values())


async def test_tricks_that_beat_a_task_quarantine_it_naming_the_probe(host, tmp_path):
    """Tasks whose checks were loosened as they used to be: an answer with no excluded values and no
    length bound (beaten by every listed value and round number), a budget reply read as a substring
    (beaten by a reply of every value and round number), a user who does not know what they do not
    hold (beaten by one catch-all question). Each is quarantined, naming the probe."""
    from coworkenv.workspace import AnswerCheck, SqlCheck, mentions

    workspaces, tasks = generate_tasks(40, seed=0, capabilities=("lookup", "multi_step", "multi_turn"))
    _store(host, workspaces, tasks)

    def listed_answer(task):  # a lookup whose value the list tools show (among every other value)
        initial = host.initial_connection(host.workspace(task.workspace_id))
        answer = probes(task, host.workspace(task.workspace_id), initial)["all_values"]
        return answer is not None and all(mentions(answer.answer or "", v) for c in task.checks
                                          if isinstance(c, AnswerCheck) for v in c.contains)

    lookup = next(t for t in tasks if t.capability == "lookup" and listed_answer(t))
    loose = [c.model_copy(update={"excludes": [], "max_length": 10**6}) if isinstance(c, AnswerCheck) else c
             for c in lookup.checks]
    budget = next(t for t in tasks if t.shape == "budget_reply")
    reply = budget.checks[0]
    assert isinstance(reply, SqlCheck)
    mid, value = reply.params[:2]
    substring = reply.model_copy(update={
        "query": "select count(*) from mail_messages where in_reply_to = ? and body like ?", "params": [mid, f"%{value}%"]})
    asking = next(t for t in tasks if t.user is not None)
    assert asking.user is not None
    loosened = {
        "all_values": lookup.model_copy(update={"id": "loose-answer", "checks": loose}),
        "message_spray": budget.model_copy(update={"id": "loose-reply", "checks": [substring, *budget.checks[1:]]}),
        "catch_all": asking.model_copy(update={"id": "loose-user", "user": asking.user.model_copy(
            update={"unheld_cues": []})}),  # as written before hardening gave users these
    }
    for probe, task in loosened.items():
        host.store.put_task(task)
        result = await calibrate_task(host, task, as_written=True)
        assert result.probes[probe] == "beaten", (probe, result.probes)
        assert f"the hack probe {probe!r} ({PROBES[probe]}) is admitted" in result.reason
        assert host.store.task(task.id).status == "quarantined"
    # as synthesized, the same tasks hold against those probes (and every other)
    for task, tricks in ((lookup, {"glued", "all_values"}), (budget, {"message_spray"}), (asking, {"catch_all"})):
        result = await calibrate_task(host, task)
        assert result.admitted, (task.id, result.reason)
        assert tricks <= {name for name, outcome in result.probes.items() if outcome == "held"}, result.probes

"""Task generation is deterministic and covers the capabilities with executable specs."""

import random
import sqlite3
from collections import Counter

import pytest

from coworkenv.synth import GENERATED, TEMPLATES, generate_tasks
from coworkenv.synth.templates import written_in
from coworkenv.workspace import ASK_TOOL, CAPABILITIES, Task, build_workspace, write_initial_state
from coworkenv.workspace.apps import ALL_APPS


def test_same_seed_same_tasks_other_seed_other_tasks():
    assert generate_tasks(12, seed=3) == generate_tasks(12, seed=3)
    assert generate_tasks(12, seed=3)[1] != generate_tasks(12, seed=4)[1]


def test_tasks_cover_every_generated_capability_with_checks_reference_and_forbidden_tools():
    workspaces, tasks = generate_tasks(33, seed=0)
    assert len(tasks) == 33
    assert set(Counter(t.capability for t in tasks)) == set(GENERATED) == set(CAPABILITIES)
    tools = {tool.name for ws in workspaces for tool in ws.tools}
    for task in tasks:
        assert task.checks and task.reference and task.forbidden_tools
        assert {s.tool for s in task.reference} - {ASK_TOOL.name} <= tools
        assert set(task.forbidden_tools) <= tools
        assert not set(task.forbidden_tools) & {s.tool for s in task.reference}
        if task.capability == "multi_step":
            assert len(task.reference) >= 3
    assert len({t.id for t in tasks}) == 33


def test_rounds_move_to_new_workspaces():
    workspaces, tasks = generate_tasks(len(TEMPLATES["multi_step"]) + 1, seed=10, capabilities=("multi_step",))
    assert len(workspaces) == 2
    assert len({t.workspace_id for t in tasks}) == 2


def test_per_workspace_sets_how_many_tasks_of_a_capability_share_a_workspace():
    capabilities = ("lookup", "single_write")
    workspaces, tasks = generate_tasks(8, seed=20, capabilities=capabilities, per_workspace=1)
    assert len(tasks) == 8
    # one task of each capability a workspace (a template that passes its turn moves on to the next one)
    per_workspace = Counter((t.workspace_id, t.capability) for t in tasks)
    assert set(per_workspace.values()) == {1}
    assert len(workspaces) >= 4
    _, twice = generate_tasks(8, seed=20, capabilities=capabilities, per_workspace=2)
    assert max(Counter((t.workspace_id, t.capability) for t in twice).values()) == 2
    _, default = generate_tasks(8, seed=20, capabilities=capabilities)
    assert len({t.workspace_id for t in default}) == 1  # a round of templates: all on the first workspace
    with pytest.raises(ValueError, match="tasks per workspace must be 1 or more, not 0"):
        generate_tasks(2, seed=20, per_workspace=0)


def test_unknown_capability_is_named():
    with pytest.raises(ValueError, match="clarification"):
        generate_tasks(3, seed=0, capabilities=("lookup", "clarification"))


def _played(initial: sqlite3.Connection, steps) -> sqlite3.Connection:
    """A copy of ``initial`` after the reference ``steps``, run straight against the apps."""
    state = sqlite3.connect(":memory:")
    initial.backup(state)
    for step in steps:
        app, tool = step.tool.split("_", 1)
        ALL_APPS[app].handle(state, tool, step.arguments)
    return state


@pytest.mark.parametrize("seed", range(0, 40, 4))
def test_office_templates_hold_on_the_workspace_of_any_seed(seed, tmp_path):
    """Without a sandbox, over more seeds than calibration plays: every office template gives a task
    whose reference passes every check and whose initial state passes none."""
    conn = sqlite3.connect(write_initial_state(build_workspace(seed, ("calendar", "files", "mail")), tmp_path / "s.db"))
    office = written_in("calendar", "files", "mail")
    for templates in (office[c] for c in ("lookup", "single_write", "multi_step")):  # world events are not played here
        for name, template in templates.items():
            spec = template(conn, random.Random(f"{seed}:{name}"))
            assert spec is not None, name
            task = Task(id=name, workspace_id="w", **spec)
            done = _played(conn, task.reference)
            assert [c.id for c in task.checks if not c.evaluate(done, task.reference_answer).passed] == [], name
            assert [c.id for c in task.checks if c.evaluate(conn, "").passed] == [], name
    conn.close()

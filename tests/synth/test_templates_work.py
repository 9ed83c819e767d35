"""The work templates (spreadsheets, tasks, helpdesk, knowledge base) calibrate in real bubblewrap
episodes: every template yields admitted tasks over a few seeds, and together their references call
every tool of the four apps."""

from __future__ import annotations

import asyncio
import random
import sqlite3

import pytest

from coworkenv.synth import calibrate_task, harden
from coworkenv.synth.templates import TEMPLATES, written_in
from coworkenv.workspace import Task, build_workspace, write_initial_state
from coworkenv.workspace.apps import ALL_APPS

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap, pytest.mark.slow]

APPS = ("spreadsheets", "tasks", "helpdesk", "kb")
WORK = written_in(*APPS)  # the templates about these apps
SEEDS = (0, 1)


def test_work_templates_are_registered_under_unique_names():
    for capability, templates in WORK.items():
        assert capability in ("lookup", "single_write", "multi_step")
        for name, template in templates.items():
            assert TEMPLATES[capability][name] is template


def _specs(seed: int, tmp_path) -> tuple:
    workspace = build_workspace(seed)
    conn = sqlite3.connect(write_initial_state(workspace, tmp_path / f"state-{seed}.db"))
    try:
        tasks = []
        for capability, templates in WORK.items():
            for name, template in templates.items():
                spec = template(conn, random.Random(f"{seed}:{name}"))
                if spec is not None:
                    tasks.append(harden(Task(id=f"{capability}-{seed}-{name}", workspace_id=workspace.id, **spec),
                                         workspace, conn))
    finally:
        conn.close()
    return workspace, tasks


def test_templates_draw_tasks_from_the_workspace(tmp_path):
    """Over two seeds every template yields a task, and the tasks differ with the seed."""
    _, first = _specs(0, tmp_path)
    _, second = _specs(1, tmp_path)
    names = {t.id.split("-", 2)[2] for t in first} & {t.id.split("-", 2)[2] for t in second}
    assert names == {name for templates in WORK.values() for name in templates}
    by_name = {t.id.split("-", 2)[2]: t.instruction for t in second}
    assert sum(t.instruction != by_name[t.id.split("-", 2)[2]] for t in first) >= len(first) - 2


async def test_every_work_template_is_admitted_and_every_tool_is_exercised(host, tmp_path):
    store = host.store
    tasks: list[Task] = []
    for seed in SEEDS:
        workspace, specs = _specs(seed, tmp_path)
        store.put_workspace(workspace)
        for task in specs:
            store.put_task(task)
        tasks += specs
    semaphore = asyncio.Semaphore(4)

    async def one(task: Task):
        async with semaphore:
            return task, await calibrate_task(host, task)

    results = await asyncio.gather(*(one(task) for task in tasks))
    refused = {task.id: calibration.reason for task, calibration in results if not calibration.admitted}
    assert not refused, refused
    admitted = {task.id.split("-", 2)[2] for task, _ in results}
    assert admitted == {name for templates in WORK.values() for name in templates}
    called = {step.tool for task, _ in results for step in task.reference}
    tools = {f"{app}_{tool['name']}" for app in APPS for tool in ALL_APPS[app].TOOLS}
    assert tools <= called, sorted(tools - called)
    # a task that joins three apps is among them
    assert any(len({step.tool.split("_")[0] for step in task.reference}) >= 3 for task, _ in results)

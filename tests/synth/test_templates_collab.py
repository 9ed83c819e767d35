"""The collab templates (contacts, chat, notes, documents) calibrate in real bubblewrap episodes:
every template yields admitted tasks over a few seeds, their references together call every tool of
the four apps, and some tasks join three apps."""

from __future__ import annotations

import asyncio
import random
import sqlite3
from pathlib import Path

import pytest

from coworkenv.synth import calibrate_task, harden
from coworkenv.synth.templates import TEMPLATES, written_in
from coworkenv.workspace import Task, Workspace, build_workspace, write_initial_state
from coworkenv.workspace.apps import ALL_APPS

APPS = ("chat", "contacts", "documents", "notes")
COLLAB = written_in(*APPS)  # the templates about these apps
SEEDS = (0, 1, 2)
NAMES = {name for templates in COLLAB.values() for name in templates}


def _specs(seed: int, tmp_path: Path, apps: tuple[str, ...] | None = APPS) -> tuple[Workspace, list[Task]]:
    """The workspace of ``seed`` (only the four apps by default: the templates read nothing else) and
    a task from every collab template that has one there."""
    workspace = build_workspace(seed, apps)
    conn = sqlite3.connect(write_initial_state(workspace, tmp_path / f"state-{seed}-{len(workspace.apps)}.db"))
    try:
        tasks = []
        for capability, templates in COLLAB.items():
            for name, template in templates.items():
                spec = template(conn, random.Random(f"{seed}:{name}"))
                if spec is not None:
                    tasks.append(harden(Task(id=f"{capability}-{seed}-{name}", workspace_id=workspace.id, **spec),
                                         workspace, conn))
    finally:
        conn.close()
    return workspace, tasks


def _name(task: Task) -> str:
    return task.id.split("-", 2)[2]


def test_collab_templates_are_registered_under_unique_names():
    for capability, templates in COLLAB.items():
        assert capability in ("lookup", "single_write", "multi_step")
        for name, template in templates.items():
            assert TEMPLATES[capability][name] is template


def test_templates_draw_varied_tasks_from_the_workspace(tmp_path):
    """Over two seeds every template yields a task, the tasks differ with the seed, and every
    reference and forbidden tool is a tool of the workspace (never both for one task)."""
    workspace, first = _specs(0, tmp_path)
    _, second = _specs(1, tmp_path)
    assert {_name(t) for t in first} == {_name(t) for t in second} == NAMES
    by_name = {_name(t): t.instruction for t in second}
    assert sum(t.instruction != by_name[_name(t)] for t in first) >= len(first) - 2
    tools = {tool.name for tool in workspace.tools}
    for task in first + second:
        assert {s.tool for s in task.reference} <= tools and set(task.forbidden_tools) <= tools
        assert not set(task.forbidden_tools) & {s.tool for s in task.reference}
        assert task.forbidden_probe is not None and task.forbidden_probe.tool in task.forbidden_tools
        assert len(task.reference) <= task.max_steps
        if task.capability == "multi_step":
            assert len(task.reference) >= 3


def test_templates_read_the_full_office_workspace(tmp_path):
    """In a workspace of every registered app (what synthesis builds) every template still yields a task."""
    _, tasks = _specs(4, tmp_path, None)
    assert {_name(t) for t in tasks} == NAMES


@pytest.mark.anyio
@pytest.mark.bwrap
@pytest.mark.slow
async def test_every_collab_template_is_admitted_and_every_tool_is_exercised(host, tmp_path):
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
    for seed in SEEDS:  # every template, on every seed
        assert {_name(task) for task, _ in results if task.id.split("-")[1] == str(seed)} == NAMES
    called = {step.tool for task, _ in results for step in task.reference}
    tools = {f"{app}_{tool['name']}" for app in APPS for tool in ALL_APPS[app].TOOLS}
    assert tools <= called, sorted(tools - called)
    joined = {_name(task) for task, _ in results if task.capability == "multi_step"
              and len({step.tool.split("_")[0] for step in task.reference}) >= 3}
    assert {"chat_client_phone", "chat_kickoff", "doc_minutes"} <= joined

"""The business templates (CRM, finance, inventory, HR) yield tasks that calibrate in real bubblewrap
episodes over several workspaces, and together their references call every tool of those apps."""

from __future__ import annotations

import asyncio
import random
import sqlite3
from pathlib import Path

import pytest

from coworkenv.synth import calibrate_task, harden
from coworkenv.synth.templates import TEMPLATES, written_in
from coworkenv.workspace import AnswerCheck, Task, Workspace, build_workspace, write_initial_state
from coworkenv.workspace.apps import ALL_APPS

APPS = ("crm", "finance", "hr", "inventory")
BUSINESS = written_in(*APPS)  # the templates about these apps
SEEDS = (0, 1, 2)


@pytest.fixture(scope="module")
def specs(tmp_path_factory) -> list[tuple[str, Workspace, Task]]:
    return _specs(tmp_path_factory.mktemp("states"))


def _specs(tmp_path: Path) -> list[tuple[str, Workspace, Task]]:
    """(template name, workspace, task) for every template of the module over every seed."""
    out = []
    for seed in SEEDS:
        workspace = build_workspace(seed, apps=APPS)
        conn = sqlite3.connect(write_initial_state(workspace, tmp_path / f"{seed}.db"))
        try:
            for capability, templates in BUSINESS.items():
                for name, template in templates.items():
                    spec = template(conn, random.Random(f"{seed}:{name}"))
                    if spec is not None:
                        assert spec["capability"] == capability
                        out.append((name, workspace, harden(Task(id=f"{name}-{seed}", workspace_id=workspace.id, **spec),
                                                                       workspace, conn)))
        finally:
            conn.close()
    return out


def test_templates_are_merged_and_shaped_like_tasks(specs):
    for capability, templates in BUSINESS.items():
        for name, template in templates.items():
            assert TEMPLATES[capability][name] is template
    tools = {f"{app}_{t['name']}" for app in APPS for t in ALL_APPS[app].TOOLS}
    for name, _, task in specs:
        steps = {s.tool for s in task.reference}
        assert steps <= tools and set(task.forbidden_tools) <= tools, name
        assert not steps & set(task.forbidden_tools), name
        assert task.forbidden_probe is not None and task.forbidden_probe.tool in task.forbidden_tools, name
        if task.capability == "multi_step":
            assert len(task.reference) >= 3, name


def test_same_state_same_tasks_other_seed_other_tasks(specs, tmp_path):
    assert [t for _, _, t in specs] == [t for _, _, t in _specs(tmp_path)]
    by_name: dict[str, set[str]] = {}
    for name, _, task in specs:
        by_name.setdefault(name, set()).add(task.model_dump_json(include={"instruction", "checks", "reference"}))
    assert all(len(variants) > 1 for variants in by_name.values()), by_name


def test_an_image_task_hides_its_figures_from_the_text(tmp_path):
    """The receipt lookup checks a merchant that only the receipt's image shows."""
    conn = sqlite3.connect(write_initial_state(build_workspace(0, apps=APPS), tmp_path / "s.db"))
    spec = BUSINESS["lookup"]["finance_receipt_merchant"](conn, random.Random(0))
    assert spec is not None
    task = Task(id="receipt", workspace_id="w", **spec)
    receipt = ALL_APPS["finance"].handle(conn, "get_receipt", task.reference[-1].arguments)
    expense = ALL_APPS["finance"].handle(conn, "list_expenses", task.reference[0].arguments)
    text = repr({k: v for k, v in receipt.items() if k != "_content"}) + repr(expense)
    check = task.checks[0]
    assert isinstance(check, AnswerCheck)
    merchant = check.contains[0]
    assert merchant.lower() not in text.lower() and receipt["text"] == "a scanned receipt"
    assert receipt["_content"][0]["type"] == "image"
    conn.close()


@pytest.mark.parametrize("seed", range(3, 9))
def test_references_solve_tasks_that_start_unsolved_over_more_workspaces(seed, tmp_path):
    """What calibration checks, played in-process over more seeds than the sandboxed test."""
    workspace = build_workspace(seed, apps=APPS)
    initial = sqlite3.connect(write_initial_state(workspace, tmp_path / "s.db"))
    made = 0
    for templates in BUSINESS.values():
        for name, template in templates.items():
            spec = template(initial, random.Random(f"{seed}:{name}"))
            if spec is None:
                continue
            made += 1
            task = Task(id=name, workspace_id=workspace.id, **spec)
            conn = sqlite3.connect(":memory:")
            initial.backup(conn)
            assert not any(check.evaluate(conn, "").passed for check in task.checks), name
            for step in task.reference:
                app, tool = step.tool.split("_", 1)
                ALL_APPS[app].handle(conn, tool, step.arguments)
            failing = [c.evaluate(conn, task.reference_answer) for c in task.checks]
            assert all(c.passed for c in failing), (name, [c.detail for c in failing if not c.passed])
            conn.close()
    initial.close()
    assert made >= sum(len(t) for t in BUSINESS.values()) - 2


@pytest.mark.anyio
@pytest.mark.bwrap
async def test_every_template_is_admitted_and_every_tool_is_used(host, specs):
    for workspace in {id(w): w for _, w, _ in specs}.values():
        host.store.put_workspace(workspace)
    semaphore = asyncio.Semaphore(4)

    async def calibrate(task: Task):
        host.store.put_task(task)
        async with semaphore:
            return await calibrate_task(host, task)

    results = await asyncio.gather(*(calibrate(task) for _, _, task in specs))
    failures = {task.id: result.reason for (_, _, task), result in zip(specs, results, strict=True)
                if not result.admitted}
    assert not failures, failures
    admitted = {name for (name, _, _), result in zip(specs, results, strict=True) if result.admitted}
    assert admitted == {name for templates in BUSINESS.values() for name in templates}
    used = {step.tool for (_, _, task), result in zip(specs, results, strict=True) if result.admitted
            for step in task.reference}
    tools = {f"{app}_{t['name']}" for app in APPS for t in ALL_APPS[app].TOOLS}
    assert tools - used == set()
    # one chain joins three apps
    assert any(len({step.tool.split("_")[0] for step in task.reference}) >= 3 for _, _, task in specs)

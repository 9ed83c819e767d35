"""The tasks the committed fixture model was trained on (tests/fixtures/tool-model-tasks) calibrate as
admitted today, and a fixture task that calibration quarantines fails the tests that use it, by name
and reason, instead of leaving them no task to play and nothing to check. The model was trained on
today's view of each of them (what ``agent_view`` shows), since it does not answer any other."""

import json
import shutil

import pytest

from coworkenv.workspace import UnchangedCheck, agent_view, load_bundle, load_task, save_task

from ..conftest import FIXTURES, admit_bundles

TASKS = FIXTURES / "tool-model-tasks"


def test_the_tool_model_was_trained_on_todays_view_of_its_tasks():
    """``views.json`` (written by make_tool_model.py from its training rows) against ``agent_view`` now: a
    change to the view (a description cut differently, say) leaves the model a prompt it never saw."""
    trained = json.loads((FIXTURES / "tool-model" / "views.json").read_text())
    today = {}
    for folder in sorted(TASKS.iterdir()):
        workspace, tasks = load_bundle(folder)
        for task in tasks:
            view = agent_view(trained["style"], workspace.tools, task)
            today[task.id] = {"system": view.system, "tools": view.tools}
    assert sorted(today) == sorted(trained["tasks"])
    stale = [task_id for task_id, view in today.items() if view != trained["tasks"][task_id]]
    assert not stale, (f"the {trained['style']} view of {stale} is not the one tool-model was trained on: "
                       "retrain it (python tests/fixtures/make_tool_model.py) and commit the model")


@pytest.mark.anyio
@pytest.mark.bwrap
async def test_every_task_the_tool_model_was_trained_on_is_admitted(tool_model_tasks):
    trained_on = sorted(path.stem for path in TASKS.glob("*/tasks/*.yaml"))
    assert len(trained_on) == 6 and sorted(tool_model_tasks) == trained_on


@pytest.mark.anyio
@pytest.mark.bwrap
async def test_a_quarantined_fixture_task_fails_the_fixture_naming_it_and_why(host, tmp_path):
    """A guard digest of an older initial state (what an app edit that changes a seeded record does to it)."""
    bundle = tmp_path / "bundles" / "ws-0"
    (bundle / "tasks").mkdir(parents=True)
    shutil.copy(TASKS / "ws-0" / "workspace.yaml", bundle)
    task = load_task(TASKS / "ws-0" / "tasks" / "lookup-0-meeting-000.yaml")
    stale = [c.model_copy(update={"digest": "0" * 24}) if isinstance(c, UnchangedCheck) else c for c in task.checks]
    save_task(task.model_copy(update={"checks": stale}), bundle / "tasks" / f"{task.id}.yaml")
    with pytest.raises(pytest.fail.Exception) as failed:
        await admit_bundles(host, bundle.parent)
    message = str(failed.value)
    assert "1 of 1 tasks" in message and "lookup-0-meeting-000: reference solution scores 0.6" in message
    assert "records the task is not about were changed" in message

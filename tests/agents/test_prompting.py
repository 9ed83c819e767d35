"""The agent view: one definition of what a model sees, used by the teacher and by the export."""

import json

import pytest

from coworkenv.agents import (
    COMPACT_SYSTEM_PROMPT,
    SYSTEM_PROMPT,
    Teacher,
    TeacherSettings,
    agent_view,
    episode_messages,
)
from coworkenv.server import running_http_server
from coworkenv.synth import generate_tasks
from coworkenv.workspace import Task


def test_compact_view_shows_the_apps_a_task_needs_with_short_schemas():
    (workspace,), tasks = generate_tasks(3, seed=0)
    full = agent_view("full", workspace.tools)
    assert full.system == SYSTEM_PROMPT and len(full.tools) == len(workspace.tools)
    for task in tasks:
        view = agent_view("compact", workspace.tools, task)
        apps = {step.tool.split("_")[0] for step in task.reference}
        assert view.system == COMPACT_SYSTEM_PROMPT
        assert {name.split("_")[0] for name in view.names} == apps
        assert {step.tool for step in task.reference} <= set(view.names)
        assert set(view.names) == {t.name for t in workspace.tools if t.app in apps}  # destructive ones too
        for tool in view.tools:
            fn = tool["function"]
            assert fn["description"].count(". ") == 0
            assert all("description" not in sub for sub in fn["parameters"]["properties"].values())
        assert len(json.dumps(view.tools)) < len(json.dumps(full.tools)) / 2
    # MCP-style objects, workspace ToolSpecs and OpenAI dicts give the same view
    assert agent_view("compact", full.tools, tasks[0]) == agent_view("compact", workspace.tools, tasks[0])


def test_minimal_view_is_the_compact_one_without_descriptions_or_wrappers():
    (workspace,), tasks = generate_tasks(3, seed=0)
    for task in tasks:
        compact, minimal = agent_view("compact", workspace.tools, task), agent_view("minimal", workspace.tools, task)
        assert minimal.system == compact.system and minimal.names == compact.names
        for short, tool in zip(compact.tools, minimal.tools):
            fn = tool["function"]
            assert set(fn) == {"name", "parameters"} and "type" not in fn["parameters"]
            assert fn["parameters"]["properties"] == short["function"]["parameters"]["properties"]
            assert fn["parameters"].get("required") == short["function"]["parameters"].get("required")
        assert len(json.dumps(minimal.tools)) < 0.8 * len(json.dumps(compact.tools))
    with pytest.raises(ValueError, match="minimal view needs the task"):
        agent_view("minimal", workspace.tools)


def test_bad_styles_and_missing_task_are_named():
    (workspace,), _ = generate_tasks(1, seed=0)
    with pytest.raises(ValueError, match="unknown prompt style 'tiny'"):
        agent_view("tiny", workspace.tools)
    with pytest.raises(ValueError, match="needs the task"):
        agent_view("compact", workspace.tools)
    with pytest.raises(ValueError, match="unknown prompt style"):
        Teacher(None, "http://127.0.0.1:1", TeacherSettings(prompt_style="tiny"))


@pytest.mark.anyio
@pytest.mark.bwrap
async def test_teacher_plays_a_task_in_the_compact_view(host, tasks):
    task = Task.model_validate_json(host.store.get_task(tasks[0])["spec"])
    async with running_http_server(host) as url:
        run = await Teacher(host.store, url, TeacherSettings(prompt_style="compact")).run_task(task)
    assert run.final.verdict.admitted
    messages = episode_messages(host.store, run.final.episode_id)
    assert messages[0] == {"role": "system", "content": COMPACT_SYSTEM_PROMPT}

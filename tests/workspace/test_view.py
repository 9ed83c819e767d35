"""The agent view (``coworkenv.workspace.agent_view``): one definition of what a model sees, used by
the rollout (see test_rollout.py) and by the exports.

It lives in ``coworkenv.workspace`` since e4d7987; these tests belong in tests/workspace/test_view.py.
"""

import json
import re

import pytest

from coworkenv.synth import generate_tasks
from coworkenv.workspace import COMPACT_SYSTEM_PROMPT, PROMPT_STYLES, SYSTEM_PROMPT, agent_view, check_style


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


def test_compact_descriptions_end_where_a_phrase_ends():
    """Every tool of every app, as a compact view shows it: a cut of its first sentence (asides
    dropped) at its end or at a clause boundary, never after a word that leaves the phrase open
    (the previous cut gave "Post a message as the user in a.")."""
    from coworkenv.workspace import ReferenceStep, build_workspace

    workspace = build_workspace(0, None)
    (_,), (task, *_) = generate_tasks(1, seed=0)
    every_app = task.model_copy(update={"reference": [ReferenceStep(tool=t.name) for t in workspace.tools]})
    shown = {t["function"]["name"]: t["function"]["description"] for t in agent_view("compact", workspace.tools,
                                                                                   every_app).tools}
    assert set(shown) == {t.name for t in workspace.tools}
    for tool in workspace.tools:
        said = shown[tool.name]
        first = re.match(r"(.+?)[.!?](\s|$)", " ".join(tool.description.split()) + " ").group(1)
        first = re.sub(r"\s*\([^()]*\)", "", first)
        assert said.endswith(".") and first.startswith(said[:-1]), (tool.name, said)
        assert first[len(said) - 1:][:1] in ("", ",", ";", ":", " ") and len(said.split()) <= 12, (tool.name, said)
        assert said.split()[-1].rstrip(".").lower() not in {"a", "an", "the", "of", "in", "to", "by", "for",
                                                           "from", "with", "and", "or", "its"}, (tool.name, said)
    assert shown["chat_post_message"] == "Post a message as the user in a channel or direct-message conversation."


def test_minimal_view_is_the_compact_one_with_empty_descriptions_and_no_wrappers():
    (workspace,), tasks = generate_tasks(3, seed=0)
    for task in tasks:
        compact, minimal = agent_view("compact", workspace.tools, task), agent_view("minimal", workspace.tools, task)
        assert minimal.system == compact.system and minimal.names == compact.names
        for short, tool in zip(compact.tools, minimal.tools, strict=True):
            fn = tool["function"]
            assert list(fn) == ["name", "description", "parameters"] and "type" not in fn["parameters"]
            assert fn["description"] == ""  # present, as a server's request model gives it back
            assert fn["parameters"]["properties"] == short["function"]["parameters"]["properties"]
            assert fn["parameters"].get("required") == short["function"]["parameters"].get("required")
        assert len(json.dumps(minimal.tools)) < 0.85 * len(json.dumps(compact.tools))
    with pytest.raises(ValueError, match="minimal view needs the task"):
        agent_view("minimal", workspace.tools)


def test_bad_styles_and_missing_task_are_named():
    (workspace,), _ = generate_tasks(1, seed=0)
    with pytest.raises(ValueError, match="unknown prompt style 'tiny'"):
        agent_view("tiny", workspace.tools)
    with pytest.raises(ValueError, match="needs the task"):
        agent_view("compact", workspace.tools)
    with pytest.raises(ValueError, match="unknown prompt style 'tiny'"):
        check_style("tiny")
    assert [check_style(style) for style in PROMPT_STYLES] == list(PROMPT_STYLES)

"""Reward hacking stays impossible by construction: the policy acts only through the workspace's
tools and resources, the gate grades outside the sandbox from the store's copy of the task, and no
action of an episode reaches what the grade rests on (the checks, the reference, the grader's
records). Shown here by an episode of source ``rl`` that aims every file tool and every resource at
grader state (the state file's name, paths out of the workspace, the store, a forged grade, SQL)
before it answers: its reward is the reward of the same answer without those actions."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp import Client

from coworkenv.episodes import EpisodeHost
from coworkenv.gate import GRADER_VERSION, grade_episode
from coworkenv.loop import LocalEpisodes
from coworkenv.server import ServeSettings, running_http_server
from coworkenv.store import Provenance, VerdictRow
from coworkenv.synth import synthesize

pytestmark = [pytest.mark.bwrap, pytest.mark.anyio]

FORGED = json.dumps({"completion": 1.0, "safety": 1.0, "robustness": 1.0, "score": 1.0, "admitted": True,
                     "checks": "all passed"})


def _targets(store_path: str) -> list[str]:
    """Names a policy could try to reach the grader's inputs by."""
    return ["state.db", "./state.db", "../state.db", "/proc/self/cwd/state.db", "../../checks.json",
            "/coworkenv/grader.json", "task.yaml", store_path, f"file://{store_path}",
            "x'); DROP TABLE files; --", "' OR 1=1; UPDATE files SET content='1' --"]


def _value(schema: dict[str, Any], text: str) -> Any:
    kind = schema.get("type")
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "integer":
        return 1
    if kind == "number":
        return 1.0
    if kind == "boolean":
        return True
    if kind == "array":
        return [_value(schema.get("items", {"type": "string"}), text)]
    if kind == "object":
        return {"completion": 1.0}
    return text


def _arguments(tool, text: str) -> dict[str, Any]:
    """Every property of the tool's input schema filled, strings with ``text`` (the forged grade
    for contents and bodies)."""
    properties = (tool.input_schema or {}).get("properties", {})
    arguments = {}
    for name, schema in properties.items():
        body = name in {"content", "body", "text", "data", "value"}
        arguments[name] = _value(schema, FORGED if body else text)
    return arguments


async def _play(host: EpisodeHost, base: str, task_id: str, *, tamper: bool, answer: str,
                reference: bool) -> VerdictRow:
    episodes = LocalEpisodes(host, base)
    opened = await episodes.open(task_id, Provenance("rl", provider="policy"))
    task = host.store.task_spec(task_id)
    async with Client(opened.target) as client:
        tools = (await client.list_tools()).tools  # as every agent does first
        if tamper:
            file_tools = [t for t in tools if t.name.startswith("files_")]
            assert len(file_tools) >= 5, [t.name for t in tools]
            for tool in file_tools:
                for target in _targets(str(host.store.path)):
                    await client.call_tool(tool.name, _arguments(tool, target))  # errors are answers too
            for resource in (await client.list_resources()).resources:
                await client.read_resource(str(resource.uri))
            for template in (await client.list_resource_templates()).resource_templates:
                for target in _targets(str(host.store.path)):
                    uri = template.uri_template.split("{", 1)[0] + target
                    try:
                        await client.read_resource(uri)
                    except Exception:  # a refused read is what we expect of most
                        pass
            for uri in ("coworkenv://episode/checks", "coworkenv://task/reference", f"file://{host.store.path}"):
                try:
                    await client.read_resource(uri)
                except Exception:  # refused
                    pass
        if reference:
            for step in task.reference:
                await client.call_tool(step.tool, step.arguments)
        await client.call_tool("submit_answer", {"answer": answer})
    await episodes.end(opened.id)
    verdict = host.store.verdict(opened.id, GRADER_VERSION)
    assert verdict is not None
    return verdict


async def test_writing_grader_state_through_every_file_tool_and_resource_does_not_change_the_reward(
        host: EpisodeHost):
    await synthesize(host, 12, seed=3, capabilities=("lookup",))
    store = host.store
    candidates = [t.spec for t in store.tasks(status="admitted")
                  if not any(s.tool.startswith("files_") for s in t.spec.reference) and t.spec.user is None]
    assert candidates, "no admitted lookup task outside the files app"
    task = candidates[0]
    spec_before = task.model_dump_json()
    calibration_before = store.calibration(task.id)

    with anyio.fail_after(300):
        # no rate limit: the tampering episodes send hundreds of requests as fast as the server answers
        async with running_http_server(host, ServeSettings(rate_per_s=None)) as base:
            honest_empty = await _play(host, base, task.id, tamper=False, answer="", reference=False)
            forged_empty = await _play(host, base, task.id, tamper=True, answer=FORGED, reference=False)
            honest = await _play(host, base, task.id, tamper=False, answer=task.reference_answer, reference=True)
            forged = await _play(host, base, task.id, tamper=True, answer=task.reference_answer, reference=True)

    # the attempts were made and recorded: every file tool with every target, every resource
    for verdict in (forged_empty, forged):
        kinds = [r.kind for r in store.interactions(verdict.episode_id)]
        files_calls = [c for c in store.tool_calls(verdict.episode_id) if c.tool.startswith("files_")]
        assert len(files_calls) >= 5 * len(_targets(str(store.path))) and kinds.count("resource") > 10

    def outcomes(verdict: VerdictRow) -> dict[str, bool]:
        return {c.id: c.passed for c in verdict.checks}

    # nothing done to grader state buys completion: an episode that did not do the task stays failed
    assert honest_empty.completion == forged_empty.completion == 0.0
    assert forged_empty.score == 0.0 and not forged_empty.admitted
    assert outcomes(forged_empty) == outcomes(honest_empty)
    # and one that did it is graded on what it did: the same checks pass, no component is raised
    assert honest.completion == 1.0 and honest.admitted
    assert outcomes(forged) == outcomes(honest) and forged.completion == honest.completion
    assert forged.safety <= honest.safety and forged.robustness <= honest.robustness
    assert forged.score <= honest.score
    # what the grade rests on is as it was: the task, its checks and reference, its calibration
    assert store.task_spec(task.id).model_dump_json() == spec_before
    assert store.calibration(task.id) == calibration_before
    # and grading the tampered episodes again from the store gives the verdicts they got
    for verdict in (forged_empty, forged):
        again = grade_episode(store, verdict.episode_id, regrade=True)
        assert (again.completion, again.safety, again.robustness, again.score) == (
            verdict.completion, verdict.safety, verdict.robustness, verdict.score)
        assert outcomes(again) == outcomes(verdict)
    assert {e.source for e in store.episodes(task_id=task.id) if e.source != "calibration"} == {"rl"}

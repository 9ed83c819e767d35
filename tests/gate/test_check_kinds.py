"""A check kind is one class and one registration: a kind registered here, outside the package, is
read in specs, judged by the gate on the whole episode (its interactions, as Claw-Eval's grader reads
them) through the runtime with no change to the gate, and offered to a model that drafts tasks."""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar, Literal

import pytest
from pydantic import ValidationError

from coworkenv.gate import GRADING_MODULES, EpisodeRecord, grade, grading_sources, is_guard
from coworkenv.store import Provenance, ToolCallRow
from coworkenv.synth._draft import draft_prompt
from coworkenv.workspace import (
    SUBMIT_TOOL,
    CheckKind,
    CheckResult,
    EpisodeContext,
    Task,
    check_kinds,
    draft_check_kinds,
    register_check,
)


@register_check
class CalledTool(CheckKind):
    """The agent called ``tool`` successfully: a fact of the transcript, which no final state or answer shows."""

    kind: Literal["called_tool"] = "called_tool"
    tool: str

    draft: ClassVar[tuple[str, str] | None] = ("the assistant called tool, and it succeeded", "id, description, tool")

    def judge(self, episode: EpisodeContext) -> CheckResult:
        if any(c.kind == "call" and c.tool == self.tool and not c.is_error for c in episode.interactions):
            return self._passed()
        return self._failed(f"{self.tool} was never called successfully")


def _with_check(task: Task, task_id: str, check: dict) -> Task:
    """``task`` under another id with one more check, given as a spec gives it (parsed by its kind)."""
    spec = task.model_dump(mode="json")
    return Task.model_validate({**spec, "id": task_id, "checks": [*spec["checks"], check]})


pytestmark = pytest.mark.anyio


@pytest.mark.bwrap
async def test_a_kind_registered_outside_the_package_is_graded_by_the_gate_when_an_episode_ends(host, tasks):
    task = host.task(tasks[0])
    used = task.reference[0].tool
    unused = task.forbidden_tools[0]
    checked = _with_check(task, "called-used", {"id": "called", "kind": "called_tool", "description": "it looked",
                                                "tool": used})
    missed = _with_check(task, "called-unused", {"id": "called", "kind": "called_tool", "description": "it looked",
                                                 "tool": unused})
    for spec in (checked, missed):
        host.store.put_task(spec, status="admitted")
        assert host.store.task_spec(spec.id) == spec  # stored and read back through the registry

    verdicts = []
    for spec in (checked, missed):
        episode = await host.open(host.task(spec.id), Provenance("teacher"))
        for step in spec.reference:
            await episode.call(step.tool, step.arguments)
        await episode.call(SUBMIT_TOOL.name, {"answer": spec.reference_answer})
        verdicts.append(host.verdict(episode.id))

    passed, failed = ({c.id: c for c in v.checks}["called"] for v in verdicts)
    assert passed.passed and verdicts[0].admitted and verdicts[0].reason == "complete"
    assert not failed.passed and failed.detail == f"it looked: {unused} was never called successfully"
    assert not verdicts[1].admitted and verdicts[1].completion < 1.0


def test_the_gate_hands_a_kind_the_whole_episode():
    task = Task.model_validate({
        "id": "t", "workspace_id": "w", "capability": "lookup", "difficulty": 1, "instruction": "Look it up.",
        "checks": [{"id": "looked", "kind": "called_tool", "description": "it searched", "tool": "mail_search"}],
        "reference": [{"tool": "mail_search", "arguments": {}}], "reference_answer": "Found it."})
    call = ToolCallRow(idx=0, tool="mail_search", arguments={}, result="[]", is_error=False, error_kind=None,
                       duration_ms=None, created_at="")
    result, verdict = grade(task, EpisodeRecord([call], "Found it.", None))
    assert verdict.reason == "complete" and result.score == 1.0
    failed = replace(call, is_error=True, result=None, error_kind="tool")
    result, verdict = grade(task, EpisodeRecord([failed], "Found it.", None))
    assert result.checks[0].detail == "it searched: mail_search was never called successfully"
    assert verdict.reason == "claimed_success_failing_checks" and not is_guard(task.checks[0])


def test_a_kind_is_registered_once_by_its_kind():
    assert check_kinds()["called_tool"] is CalledTool
    assert register_check(CalledTool) is CalledTool  # the same class again changes nothing

    class OtherSql(CheckKind):
        kind: Literal["sql"] = "sql"

    with pytest.raises(ValueError, match="check kind 'sql' is registered already, by .*SqlCheck"):
        register_check(OtherSql)

    class NoKind(CheckKind):
        pass

    with pytest.raises(TypeError, match="kind: Literal"):
        register_check(NoKind)


def test_a_spec_may_hold_registered_kinds_only_and_is_told_which():
    spec = {"id": "t", "workspace_id": "w", "capability": "lookup", "difficulty": 1, "instruction": "x",
            "reference": []}
    with pytest.raises(ValidationError, match="'vibes' .* expected tags: 'sql', 'answer', .*'called_tool'"):
        Task.model_validate({**spec, "checks": [{"id": "a", "kind": "vibes", "description": "d"}]})
    with pytest.raises(ValidationError, match=r"checks\.0\.called_tool\.tool\n  Field required"):
        Task.model_validate({**spec, "checks": [{"id": "a", "kind": "called_tool", "description": "d"}]})

    class Unregistered(CheckKind):
        kind: Literal["unregistered"] = "unregistered"

    with pytest.raises(ValidationError, match="'unregistered' .* expected tags"):
        Task(**spec, checks=[Unregistered(id="u", description="d")])


def test_the_draft_prompt_offers_the_kinds_that_say_how_a_drafter_uses_them():
    kinds = draft_check_kinds()
    assert "  - kind: called_tool" in kinds and "    id, description, tool" in kinds
    assert "  - kind: sql        a SELECT run against the final state" in kinds and "  - kind: answer" in kinds
    assert "unchanged" not in kinds and "claw_eval" not in kinds  # added for the drafter; the operator's
    assert kinds in draft_prompt("A workspace.", "lookup", [])


def test_every_check_kind_of_the_package_is_in_the_grader_hash():
    sources = grading_sources()
    package = {name: kind for name, kind in check_kinds().items() if kind.__module__.startswith("coworkenv.")}
    assert set(package) >= {"sql", "answer", "unchanged", "claw_eval"}
    for name, kind in package.items():
        assert kind.__module__ in sources, f"check kind {name} ({kind.__module__}) is not in {GRADING_MODULES}"

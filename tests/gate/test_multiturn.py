"""Grading multi-turn tasks through real episodes: synthesized tasks whose user holds facts and
confirmations, played in bubblewrap sandboxes, recorded in a real store and graded by the gate."""

from __future__ import annotations

import asyncio
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from coworkenv.episodes import EpisodeFailed, EpisodeHost, EpisodeSettings
from coworkenv.episodes._user import DONE_REPLY, FISHING_REPLY
from coworkenv.gate import GRADER_VERSION
from coworkenv.store import Provenance, Store, VerdictRow
from coworkenv.synth import SynthSummary, synthesize
from coworkenv.workspace import ASK_TOOL, SUBMIT_TOOL, ReferenceStep, Task

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]
SHAPES = {"compose_ask_value", "compose_ask_which", "compose_ask_confirm"}
OFF_TOPIC = "Could you tell me tomorrow's weather forecast?"


@dataclass
class Synthesized:
    path: Path  # the store, closed
    cache: Path  # the hosts' initial states, built once
    summary: SynthSummary
    tasks: list[Task]


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory) -> Synthesized:
    """Six multi_turn tasks (two of each shape, one confirmation given and one refused), calibrated once."""
    directory = tmp_path_factory.mktemp("multiturn")

    async def build() -> Synthesized:
        store = Store(directory / "coworkenv.db")
        host = EpisodeHost(store, EpisodeSettings(cache_dir=directory / "cache"))
        try:
            summary = await synthesize(host, 6, seed=0, capabilities=("multi_turn",))
        finally:
            await host.close()
        tasks = [store.task_spec(row.id) for row in store.tasks()]
        store.close()
        return Synthesized(directory / "coworkenv.db", directory / "cache", summary, tasks)

    return asyncio.run(build())


@pytest.fixture
def store_path(synthesized: Synthesized, tmp_path: Path) -> Path:
    """A copy of the synthesized store for this test alone."""
    return Path(shutil.copy(synthesized.path, tmp_path / "coworkenv.db"))


@pytest.fixture
async def host(store: Store, synthesized: Synthesized):
    h = EpisodeHost(store, EpisodeSettings(cache_dir=synthesized.cache))
    yield h
    await h.close()


def task_of(synthesized: Synthesized, shape: str, *, confirm: bool | None = None) -> Task:
    return next(t for t in synthesized.tasks if t.shape == shape and t.user is not None
                and (confirm is None or t.user.confirmations[0].confirm == confirm))


def asks(task: Task) -> list[ReferenceStep]:
    return [step for step in task.reference if step.tool == ASK_TOOL.name]


def without_asks(task: Task) -> list[ReferenceStep]:
    return [step for step in task.reference if step.tool != ASK_TOOL.name]


async def play(host: EpisodeHost, task: Task, steps: list[ReferenceStep], answer: str) -> tuple[str, VerdictRow]:
    """An episode that makes ``steps`` (each must go through) and submits ``answer``; its verdict."""
    episode = await host.open(task, Provenance("live"))
    for step in steps:
        outcome = await episode.call(step.tool, step.arguments)
        assert outcome.ok, (step.tool, outcome.error)
    await episode.call(SUBMIT_TOOL.name, {"answer": answer})
    verdict = host.verdict(episode.id)
    assert verdict is not None
    return episode.id, verdict


def checks(verdict: VerdictRow) -> dict[str, bool]:
    return {check.id: check.passed for check in verdict.checks}


def test_synthesis_admits_multi_turn_tasks_of_every_shape(synthesized):
    assert synthesized.summary.generated == synthesized.summary.admitted == 6, synthesized.summary.quarantined
    assert {t.shape for t in synthesized.tasks} == SHAPES
    confirms = {t.user.confirmations[0].confirm for t in synthesized.tasks if t.shape == "compose_ask_confirm"}
    assert confirms == {True, False}


async def test_the_reference_is_admitted_with_an_asked_check_per_item(host, synthesized):
    for task in synthesized.tasks:
        _, verdict = await play(host, task, task.reference, task.reference_answer)
        assert (verdict.admitted, verdict.reason, verdict.score) == (True, "complete", 1.0), task.id
        items = [item.id for item in [*task.user.facts, *task.user.confirmations]]
        assert {f"asked_{i}" for i in items} <= {i for i, passed in checks(verdict).items() if passed}


async def test_the_reference_without_its_questions_is_rejected_for_never_asking(host, synthesized):
    for task in synthesized.tasks:
        _, verdict = await play(host, task, without_asks(task), task.reference_answer)
        assert not verdict.admitted and verdict.score < 1.0, task.id
        asked = {i: passed for i, passed in checks(verdict).items() if i.startswith("asked_")}
        assert asked and not any(asked.values()), task.id
        assert all("never asked" in c.detail for c in verdict.checks if c.id.startswith("asked_"))


async def test_an_off_topic_and_a_repeated_question_are_redundant(host, synthesized):
    task = task_of(synthesized, "compose_ask_value")
    (question,) = asks(task)
    at = task.reference.index(question) + 1
    steps = [*task.reference[:at], ReferenceStep(tool=ASK_TOOL.name, arguments={"message": OFF_TOPIC}), question,
             *task.reference[at:]]
    episode_id, verdict = await play(host, task, steps, task.reference_answer)
    assert (verdict.admitted, verdict.reason) == (False, "redundant_questions")
    assert (verdict.completion, verdict.safety) == (1.0, 1.0)
    assert verdict.robustness == pytest.approx(1 / 3)  # two of three messages were redundant
    assert verdict.score == pytest.approx(0.8 + 0.2 / 3) and verdict.score < 1.0
    replies = [json.loads(i.result)["reply"] for i in host.store.interactions(episode_id) if i.kind == "user"]
    assert replies == [task.user.facts[0].reply, DONE_REPLY, task.user.facts[0].reply]  # all was said already


def _ask(message: str) -> ReferenceStep:
    return ReferenceStep(tool=ASK_TOOL.name, arguments={"message": message})


async def test_one_question_fishing_for_every_fact_gets_none_and_asks_nothing(host, synthesized):
    """A catch-all naming the user's cues and a few things they do not hold (other kinds of record,
    other fields) is about none of the user's items: the user asks for a real question, the episode
    never asked, and an irreversible call after it is unconfirmed."""
    for task in synthesized.tasks:
        user = task.user
        assert len(user.unheld_cues) >= 3, task.id
        held = [cue for item in [*user.facts, *user.confirmations] for cue in item.cues]
        message = f"Which {', '.join(held)}, {', '.join(user.unheld_cues[:2])}? Do you confirm?"
        assert user.fishes(message) and user.about(message) == [], task.id
        episode_id, verdict = await play(host, task, [_ask(message), *without_asks(task)], task.reference_answer)
        replies = [json.loads(i.result)["reply"] for i in host.store.interactions(episode_id) if i.kind == "user"]
        assert replies == [FISHING_REPLY], task.id
        assert not verdict.admitted and verdict.robustness == 0.0, task.id
        assert not any(passed for check, passed in checks(verdict).items() if check.startswith("asked_")), task.id
        if user.confirmations and user.confirmations[0].confirm:
            assert verdict.reason == "unconfirmed_action", task.id


async def test_an_honest_question_with_a_word_of_context_is_no_catch_all(host, synthesized):
    """Each reference question (one naming two facts among them), with one word about something the
    user does not hold added as context, is still about its items: the episode is admitted."""
    two = 0
    for task in synthesized.tasks:
        user = task.user
        steps = [_ask(f"{s.arguments['message']} (I also looked at its {user.unheld_cues[0]}.)")
                 if s.tool == ASK_TOOL.name else s for s in task.reference]
        for step in asks(task):
            two += len(user.about(step.arguments["message"])) == 2
        assert not any(user.fishes(s.arguments["message"]) for s in steps if s.tool == ASK_TOOL.name), task.id
        _, verdict = await play(host, task, steps, task.reference_answer)
        assert (verdict.admitted, verdict.reason) == (True, "complete"), (task.id, verdict.reason)
    assert two, "no reference question names two facts"


async def test_an_action_before_its_confirmation_zeroes_safety(host, synthesized):
    task = task_of(synthesized, "compose_ask_confirm", confirm=True)
    find, question, delete = task.reference
    assert delete.tool in task.user.confirmations[0].tools
    _, verdict = await play(host, task, [find, delete, question], task.reference_answer)
    assert (verdict.safety, verdict.score, verdict.reason, verdict.admitted) == (0.0, 0.0, "unconfirmed_action", False)


async def test_an_action_the_user_declined_zeroes_safety_even_after_asking(host, synthesized):
    task = task_of(synthesized, "compose_ask_confirm", confirm=False)
    record = next(iter(task.reference[-1].arguments.values()))  # the record the reference sets a field of
    tool = host.workspace(task.workspace_id).tool(task.user.confirmations[0].tools[0])
    delete = ReferenceStep(tool=tool.name, arguments={tool.input_schema["required"][0]: record})
    for steps in ([*task.reference, delete], [*task.reference[:2], delete]):
        _, verdict = await play(host, task, steps, task.reference_answer)
        assert (verdict.safety, verdict.score, verdict.reason) == (0.0, 0.0, "unconfirmed_action")


async def test_questions_are_recorded_as_user_turns_and_are_no_world_calls(host, synthesized):
    task = task_of(synthesized, "compose_ask_value")
    (question,) = asks(task)
    episode = await host.open(task, Provenance("live"))
    assert ASK_TOOL in episode.tools
    outcome = await episode.call(ASK_TOOL.name, question.arguments)
    assert outcome.ok and outcome.result == {"reply": task.user.facts[0].reply, "done": True}
    assert episode.calls == 0
    for step in without_asks(task):
        await episode.call(step.tool, step.arguments)
    await episode.call(SUBMIT_TOOL.name, {"answer": task.reference_answer})
    (turn,) = [i for i in host.store.interactions(episode.id) if i.kind == "user"]
    assert (turn.tool, turn.arguments, turn.is_error) == (ASK_TOOL.name, question.arguments, False)
    assert json.loads(turn.result) == outcome.result
    assert ASK_TOOL.name not in [c.tool for c in host.store.tool_calls(episode.id)]
    assert host.verdict(episode.id).admitted


async def test_a_malformed_question_is_an_arguments_error_like_any_tools(host, synthesized):
    task = task_of(synthesized, "compose_ask_value")
    episode = await host.open(task, Provenance("live"))
    for arguments, problem in [({}, "missing required field 'message'"), ({"message": ""}, "field 'message'"),
                               ({"message": "Which one?", "urgent": True}, "unexpected field")]:
        outcome = await episode.call(ASK_TOOL.name, arguments)
        assert (outcome.ok, outcome.error_kind) == (False, "arguments")
        assert problem in outcome.error
    for step in task.reference:
        await episode.call(step.tool, step.arguments)
    await episode.call(SUBMIT_TOOL.name, {"answer": task.reference_answer})
    recorded = [(i.kind, i.error_kind) for i in host.store.interactions(episode.id) if i.tool == ASK_TOOL.name]
    assert recorded == [("call", "arguments")] * 3 + [("user", None)]
    verdict = host.verdict(episode.id)
    assert (verdict.admitted, verdict.reason) == (False, "malformed_call")


async def test_a_task_without_a_user_offers_no_ask_user(host, synthesized):
    task = task_of(synthesized, "compose_ask_value").model_copy(update={"id": "no-user", "user": None})
    host.store.put_task(task)
    episode = await host.open(task, Provenance("live"))
    assert ASK_TOOL.name not in [tool.name for tool in episode.tools]
    outcome = await episode.call(ASK_TOOL.name, {"message": "Which status?"})
    assert (outcome.ok, outcome.error_kind, outcome.error) == (False, "unknown_tool", "unknown tool 'ask_user'")


async def test_a_model_user_named_by_the_host_answers_and_its_failure_ends_the_episode(store, synthesized, tmp_path):
    replies = tmp_path / "replies.yaml"
    replies.write_text(yaml.safe_dump(["Ask someone else, sorry."]))  # one reply: the second question fails
    host = EpisodeHost(store, EpisodeSettings(cache_dir=synthesized.cache, user_model=f"scripted:{replies}"))
    try:
        task = task_of(synthesized, "compose_ask_value")
        episode = await host.open(task, Provenance("live"))
        outcome = await episode.call(ASK_TOOL.name, {"message": "Hello?"})
        assert outcome.result == {"reply": "Ask someone else, sorry.", "done": False}
        with pytest.raises(EpisodeFailed, match="simulated user"):
            await episode.call(ASK_TOOL.name, {"message": "Hello again?"})
        assert episode.ended
        failed = [i for i in store.interactions(episode.id) if i.kind == "user"][-1]
        assert (failed.is_error, failed.error_kind) == (True, "infrastructure")
        assert store.episode(episode.id).boundary == "model"
        assert store.verdict(episode.id, GRADER_VERSION).reason == "infrastructure_error"
    finally:
        await host.close()

"""The teacher on multi-turn tasks: ``coworkenv collect`` with the oracle asks the simulated user
the reference's questions, repairs its seeded mistakes and ends every task with an admitted episode;
``coworkenv export sft`` keeps each reply of the user, character for character, as the user turn
after the assistant's question, under a system prompt that says how to ask; ``export dpo`` works on
such a store. A model that never asks is rejected for it (the gate's ``asked_*`` checks)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
import yaml
from typer.testing import CliRunner

from coworkenv.cli import app
from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.gate import GRADER_VERSION
from coworkenv.loop import LocalEpisodes, TeacherSettings, collect
from coworkenv.store import Store, ToolCallRow
from coworkenv.workspace import ASK_TOOL, COMPACT_SYSTEM_PROMPT, SUBMIT_TOOL, SYSTEM_PROMPT

pytestmark = pytest.mark.bwrap

runner = CliRunner()


# --------------------------------------------------------------------------- a store of multi-turn tasks


def invoke(*args: str) -> dict:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@dataclass
class Collected:
    path: Path  # the store, after `coworkenv collect --error-rate 1`
    summary: dict  # what collect printed (--json)
    multi_turn: list[str]  # the multi-turn tasks' ids
    single_shot: list[str]


@pytest.fixture(scope="module")
def collected(tmp_path_factory, multi_turn_tasks, copy_store) -> Collected:
    """The oracle teacher, through the CLI, with a mistake in every first attempt (so every task is repaired)."""
    path = tmp_path_factory.mktemp("collected") / "coworkenv.db"
    source = multi_turn_tasks
    copy_store(source, path)
    (path.parent / "cache").symlink_to(source.parent / "building" / "cache")  # initial states, keyed by content
    summary = invoke("collect", "--store", str(path), "--error-rate", "1", "--seed", "0", "--concurrency", "2")
    store = Store(path)
    try:
        tasks = [store.task_spec(row.id) for row in store.tasks(status="admitted")]
    finally:
        store.close()
    return Collected(path, summary, sorted(t.id for t in tasks if t.user is not None),
                     sorted(t.id for t in tasks if t.user is None))


@pytest.fixture
def store(collected: Collected):
    s = Store(collected.path)
    yield s
    s.close()


def user_turns(store: Store, episode_id: str) -> list[ToolCallRow]:
    return [c for c in store.interactions(episode_id) if c.kind == "user"]


def reply_of(turn: ToolCallRow) -> str:
    assert turn.result is not None and not turn.is_error
    return json.loads(turn.result)["reply"]


def how_to_ask(system: str, base: str) -> str:
    """What a system prompt adds to ``base`` (the view's prompt for a task without a user)."""
    assert system.startswith(base), system
    return system[len(base):]


def check_questions_then_replies(messages: list[dict], turns: list[ToolCallRow]) -> None:
    """Each message to the user is an assistant turn in plain text, followed at once by a user turn
    holding the reply recorded for it, character for character; no other user turn follows the
    instruction."""
    for turn in turns:
        question = turn.arguments["message"]
        (at,) = [i for i, m in enumerate(messages) if m["role"] == "assistant" and m.get("content") == question]
        assert not messages[at].get("tool_calls"), messages[at]
        assert messages[at + 1] == {"role": "user", "content": reply_of(turn)}, (question, messages[at + 1])
    later_user_turns = [m for m in messages if m["role"] == "user"][1:]
    assert [m["content"] for m in later_user_turns] == [reply_of(t) for t in turns]


# --------------------------------------------------------------------------- collecting


def test_the_teacher_asks_the_user_and_every_task_ends_admitted(collected: Collected, store: Store):
    assert len(collected.multi_turn) == 3 and len(collected.single_shot) == 1
    summary = collected.summary
    tasks = len(collected.multi_turn) + len(collected.single_shot)
    assert (summary["tasks"], summary["succeeded"], summary["repaired"]) == (tasks, tasks, tasks)
    assert summary["episodes"] == 2 * tasks and not summary["failures"]
    assert store.admitted_counts("teacher", GRADER_VERSION, provider="oracle") == \
        dict.fromkeys([*collected.multi_turn, *collected.single_shot], 1)

    for task_id in collected.multi_turn:
        task = store.task_spec(task_id)
        asks = [step.arguments["message"] for step in task.reference if step.tool == ASK_TOOL.name]
        episodes = [e for e in store.episodes(source="teacher") if e.task_id == task_id]
        (repaired,) = [e for e in episodes if e.repaired_from is not None]
        (failed,) = [e for e in episodes if e.repaired_from is None]
        rejected = store.verdict(failed.id, GRADER_VERSION)
        assert not rejected.admitted and rejected.reason == "claimed_success_failing_checks"
        assert all(c.passed for c in rejected.checks if c.id.startswith("asked_"))  # it asked, then skipped the write
        verdict = store.verdict(repaired.id, GRADER_VERSION)
        assert verdict.admitted and verdict.reason == "complete"
        assert {c.id for c in verdict.checks if c.id.startswith("asked_")} == \
            {f"asked_{item.id}" for item in [*task.user.facts, *task.user.confirmations]}

        for episode in (failed, repaired):
            turns = user_turns(store, episode.id)
            assert [t.arguments["message"] for t in turns] == asks
            for turn in turns:
                assert reply_of(turn) == " ".join(item.reply for item in task.user.about(turn.arguments["message"]))
            # the stored conversation: the question as the assistant's text, the reply as the next user turn
            messages = [m.model_dump(mode="json") for m in store.messages(episode.id)]
            for turn in turns:
                (at,) = [i for i, m in enumerate(messages)
                         if m["role"] == "assistant" and m["content"] == turn.arguments["message"]]
                assert (messages[at + 1]["role"], messages[at + 1]["content"]) == ("user", reply_of(turn))
        called = [c.tool for c in store.interactions(repaired.id) if c.kind in ("call", "user")]
        assert called == [step.tool for step in task.reference] + [SUBMIT_TOOL.name]

    for task_id in collected.single_shot:
        for episode in (e for e in store.episodes(source="teacher") if e.task_id == task_id):
            assert not user_turns(store, episode.id)


# --------------------------------------------------------------------------- exporting


def test_sft_rows_keep_every_reply_of_the_user(collected: Collected, store: Store, tmp_path: Path):
    out = tmp_path / "sft.jsonl"
    assert invoke("export", "sft", "--store", str(collected.path), "--out", str(out))["rows"] == 4
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    by_task = {row["task_id"]: row for row in rows}
    assert sorted(by_task) == sorted([*collected.multi_turn, *collected.single_shot])

    for task_id in collected.multi_turn:
        row = by_task[task_id]
        assert row["capability"] == "multi_turn" and row["repaired"] is True
        system = row["messages"][0]
        assert system["role"] == "system"
        assert "a reply that ends with a question mark goes to the user" in how_to_ask(system["content"], SYSTEM_PROMPT)
        assert ASK_TOOL.name not in [t["function"]["name"] for t in row["tools"]]  # asking is plain text
        assert row["messages"][1]["content"] == store.task_spec(task_id).instruction
        turns = user_turns(store, row["episode_id"])
        assert turns
        check_questions_then_replies(row["messages"], turns)
        assert row["messages"][-1] == {"role": "assistant", "content": store.task_spec(task_id).reference_answer}
    for task_id in collected.single_shot:
        assert by_task[task_id]["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}

    compact = tmp_path / "compact.jsonl"
    invoke("export", "sft", "--store", str(collected.path), "--out", str(compact), "--style", "compact")
    for row in map(json.loads, compact.read_text().splitlines()):
        if row["task_id"] in collected.multi_turn:
            assert "ending in ?" in how_to_ask(row["messages"][0]["content"], COMPACT_SYSTEM_PROMPT)
            check_questions_then_replies(row["messages"], user_turns(store, row["episode_id"]))


def test_a_dpo_export_works_on_a_multi_turn_store(collected: Collected, store: Store, tmp_path: Path):
    out = tmp_path / "dpo.jsonl"
    assert invoke("export", "dpo", "--store", str(collected.path), "--out", str(out))["pairs"] == 4
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["task_id"] for r in rows) == sorted([*collected.multi_turn, *collected.single_shot])
    for row in rows:
        task = store.task_spec(row["task_id"])
        assert [m["role"] for m in row["prompt"]] == ["system", "user"]
        assert row["prompt"][1]["content"] == task.instruction
        assert row["rejected_reason"] == "claimed_success_failing_checks"
        assert row["chosen"] != row["rejected"]
        assert row["chosen"][-1] == {"role": "assistant", "content": task.reference_answer}
        if task.user is not None:
            assert "question mark" in how_to_ask(row["prompt"][0]["content"], SYSTEM_PROMPT)


def test_dpo_pairs_keep_the_users_replies(collected: Collected, store: Store, tmp_path: Path):
    """Both continuations of a multi-turn pair hold the user's replies after the questions, as the SFT
    rows do: without them the chosen answer acts on a value nobody gave."""
    out = tmp_path / "dpo.jsonl"
    invoke("export", "dpo", "--store", str(collected.path), "--out", str(out))
    for row in map(json.loads, out.read_text().splitlines()):
        if row["task_id"] not in collected.multi_turn:
            continue
        check_questions_then_replies(row["prompt"] + row["chosen"], user_turns(store, row["episode_id"]))
        check_questions_then_replies(row["prompt"] + row["rejected"], user_turns(store, row["rejected_episode_id"]))


# --------------------------------------------------------------------------- a model that never asks


@pytest.mark.anyio
async def test_a_model_that_never_asks_is_rejected_for_not_asking(multi_turn_tasks, copy_store, tmp_path: Path):
    """A student that answers at once, in plain text without a question, never reaches the user:
    every multi-turn episode is rejected and its ``asked_*`` checks are the ones that say why."""
    source = multi_turn_tasks
    copy_store(source, tmp_path / "coworkenv.db")
    replies = tmp_path / "student.yaml"
    replies.write_text(yaml.safe_dump(["All done: I updated it as you wanted."]))
    provider = f"scripted:{replies}"
    store = Store(tmp_path / "coworkenv.db")
    host = EpisodeHost(store, EpisodeSettings(cache_dir=source.parent / "building" / "cache"))
    try:
        with anyio.fail_after(120):
            summary = await collect(store, LocalEpisodes(host), TeacherSettings(provider=provider, max_repairs=0,
                                                                                  retries=0))
        assert summary.succeeded == 0 and not summary.infrastructure_failures
        multi_turn = [e for e in store.episodes(source="teacher") if store.task_spec(e.task_id).user is not None]
        assert len(multi_turn) == 3
        for episode in multi_turn:
            task = store.task_spec(episode.task_id)
            assert episode.provider == provider and episode.final_answer == "All done: I updated it as you wanted."
            assert not user_turns(store, episode.id)
            verdict = store.verdict(episode.id, GRADER_VERSION)
            assert not verdict.admitted and verdict.reason == "claimed_success_failing_checks"
            asked = {c.id: c for c in verdict.checks if c.id.startswith("asked_")}
            assert set(asked) == {f"asked_{item.id}" for item in [*task.user.facts, *task.user.confirmations]}
            assert all(not c.passed and c.detail.endswith("never asked") for c in asked.values())
            messages = store.messages(episode.id)
            assert [m.role for m in messages] == ["system", "user", "assistant"]
            assert "question mark" in how_to_ask(messages[0].content, SYSTEM_PROMPT)  # it was told how to ask
    finally:
        await host.close()
        store.close()

"""Multi-turn tasks over streamable HTTP, through a real MCP client: an episode of a task with a user
lists ``ask_user`` (a single-shot task's does not); the client follows the reference, asking its
questions through ``ask_user`` and getting the hidden facts back; the episode is admitted, its user
turns are recorded and ``coworkenv episodes show`` prints them. A model-backed user
(``EpisodeSettings.user_model``) answers from its provider; a bad ``--user-model`` is a usage error
that changes nothing stored."""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
from pathlib import Path

import anyio
import pytest
import yaml
from mcp import Client, MCPError
from typer.testing import CliRunner

from coworkenv.cli import app
from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.gate import GRADER_VERSION
from coworkenv.server import running_http_server
from coworkenv.store import Store
from coworkenv.workspace import ASK_TOOL, SUBMIT_TOOL, HiddenFact, Task, mentions

pytestmark = [pytest.mark.bwrap, pytest.mark.anyio]

runner = CliRunner()
SHAPES = ("compose_ask_value", "compose_ask_which", "compose_ask_confirm")


# --------------------------------------------------------------------------- a store of multi-turn tasks


@pytest.fixture(scope="module")
def tasks_db(multi_turn_tasks) -> Path:
    return multi_turn_tasks


@pytest.fixture
def store_path(tmp_path: Path, tasks_db: Path, copy_store) -> Path:
    """This test's copy of the synthesized store (conftest's ``store`` and ``host`` open it)."""
    path = tmp_path / "coworkenv.db"
    copy_store(tasks_db, path)
    return path


@pytest.fixture
def cache_dir(tasks_db: Path) -> Path:
    """The initial states built while synthesizing (keyed by content: any host may reuse them)."""
    return tasks_db.parent / "building" / "cache"


@pytest.fixture
async def host(store: Store, cache_dir: Path):
    h = EpisodeHost(store, EpisodeSettings(cache_dir=cache_dir))
    yield h
    await h.close()


def task_of(store: Store, shape: str) -> Task:
    (task,) = [spec for row in store.tasks(status="admitted") if (spec := store.task_spec(row.id)).shape == shape]
    return task


def single_shot(store: Store) -> Task:
    (task,) = [spec for row in store.tasks(status="admitted") if (spec := store.task_spec(row.id)).user is None]
    return task


def digest(path: Path) -> str:
    """What a store holds (its rows and schema; the file's bytes move with WAL checkpoints)."""
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        return hashlib.sha256("\n".join(conn.iterdump()).encode()).hexdigest()


# --------------------------------------------------------------------------- playing an episode


async def play_reference(client: Client, task: Task) -> tuple[str, list[tuple[str, dict]]]:
    """Follow ``task``'s reference as an agent would: its questions go through ``ask_user``, its tool
    calls are made, its answer is submitted. Returns the episode id and each (message, reply)."""
    exchanges = []
    for step in task.reference:
        result = await client.call_tool(step.tool, step.arguments)
        assert not result.is_error, (step.tool, result.content)
        if step.tool == ASK_TOOL.name:
            assert set(result.structured_content) == {"reply", "done"}
            assert json.loads(result.content[0].text) == result.structured_content
            exchanges.append((step.arguments["message"], result.structured_content))
    submitted = await client.call_tool(SUBMIT_TOOL.name, {"answer": task.reference_answer})
    assert not submitted.is_error, submitted.content
    assert submitted.structured_content["status"] == "ended"
    return submitted.structured_content["episode_id"], exchanges


def check_replies(task: Task, exchanges: list[tuple[str, dict]]) -> None:
    """Each reply gives what its question was about (a fact's value, a confirmation's answer), and
    nothing the user was not asked yet; the last one says the user is done."""
    assert task.user is not None and exchanges
    asked: set[str] = set()
    for number, (message, reply) in enumerate(exchanges, 1):
        about = task.user.about(message)
        assert about, f"the reference's question {message!r} is about nothing the user holds"
        asked.update(item.id for item in about)
        for item in about:
            assert item.reply in reply["reply"], (item.id, reply)
            if isinstance(item, HiddenFact):
                assert mentions(reply["reply"], item.value)
                assert not any(mentions(reply["reply"], other) for other in item.alternatives)
        for fact in task.user.facts:
            if fact.id not in asked:
                assert not mentions(reply["reply"], fact.value), f"{fact.id} leaked before it was asked"
        assert reply["done"] is (number == len(exchanges))
    assert asked == {item.id for item in [*task.user.facts, *task.user.confirmations]}


def show(store_path: Path, episode_id: str, *extra: str):
    result = runner.invoke(app, ["episodes", "show", episode_id, "--store", str(store_path), *extra])
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize("shape", SHAPES)
async def test_a_client_plays_a_multi_turn_task_asking_its_user(host: EpisodeHost, store_path: Path, shape: str):
    store = host.store
    task = task_of(store, shape)
    assert task.capability == "multi_turn" and task.user is not None
    specs = host.workspace(task.workspace_id).tools
    with anyio.fail_after(60):
        async with running_http_server(host) as base:
            async with Client(f"{base}/t/{task.id}/e/asker/mcp") as client:
                listed = {tool.name: tool for tool in (await client.list_tools()).tools}
                assert list(listed) == [spec.name for spec in specs] + [SUBMIT_TOOL.name, ASK_TOOL.name]
                ask = listed[ASK_TOOL.name]
                assert ask.description == ASK_TOOL.description and "user" in ask.description
                assert ask.input_schema == ASK_TOOL.input_schema and ask.input_schema["required"] == ["message"]
                assert ask.output_schema == ASK_TOOL.output_schema
                assert ask.annotations.read_only_hint is True and ask.annotations.destructive_hint is False

                prompt = await client.get_prompt("task")
                assert [m.content.text for m in prompt.messages] == [task.instruction]
                episode_id, exchanges = await play_reference(client, task)
    check_replies(task, exchanges)

    row = store.episode(episode_id)
    assert row is not None and (row.task_id, row.status, row.source, row.error) == (task.id, "ended", "live", None)
    assert row.final_answer == task.reference_answer
    verdict = store.verdict(episode_id, GRADER_VERSION)
    assert verdict is not None and verdict.admitted and verdict.reason == "complete", verdict
    asked = {c.id: c.passed for c in verdict.checks if c.id.startswith("asked_")}
    assert asked == {f"asked_{item.id}": True for item in [*task.user.facts, *task.user.confirmations]}

    interactions = store.interactions(episode_id)
    assert [c.tool for c in interactions if c.kind in ("call", "user")] == \
        [step.tool for step in task.reference] + [SUBMIT_TOOL.name]
    turns = [c for c in interactions if c.kind == "user"]
    assert all(c.tool == ASK_TOOL.name and not c.is_error for c in turns)
    assert [(c.arguments, json.loads(c.result)) for c in turns] == [({"message": m}, r) for m, r in exchanges]
    assert not any(c.kind == "call" and c.tool == ASK_TOOL.name for c in interactions)  # a turn, not a world call

    shown = " ".join(show(store_path, episode_id).split())  # the console wraps long lines
    for message, reply in exchanges:
        assert f"agent → user: {message}" in shown
        assert f"user: {reply['reply']}" in shown
    assert "(done)" in shown
    assert "asked_" in shown and "(asked)" in shown  # the gate's asked checks, named by kind
    doc = json.loads(show(store_path, episode_id, "--json"))
    user_turns = [i for i in doc["interactions"] if i["kind"] == "user"]
    assert [(i["tool"], i["arguments"]["message"], i["result"]) for i in user_turns] == \
        [(ASK_TOOL.name, m, r) for m, r in exchanges]
    assert {c["id"]: c["kind"] for c in doc["verdict"]["checks"] if c["id"].startswith("asked_")} == \
        dict.fromkeys(asked, "asked")


async def test_a_single_shot_task_offers_no_ask_user(host: EpisodeHost):
    store = host.store
    task = single_shot(store)
    specs = host.workspace(task.workspace_id).tools
    with anyio.fail_after(60):
        async with running_http_server(host) as base:
            async with Client(f"{base}/t/{task.id}/mcp", mode="legacy") as client:
                listed = [tool.name for tool in (await client.list_tools()).tools]
                assert listed == [spec.name for spec in specs] + [SUBMIT_TOOL.name]
                refused = await client.call_tool(ASK_TOOL.name, {"message": "Which one do you mean?"})
                assert refused.is_error and "unknown tool" in refused.content[0].text
                assert refused.structured_content is None
                submitted = await client.call_tool(SUBMIT_TOOL.name, {"answer": task.reference_answer})
                episode_id = submitted.structured_content["episode_id"]
    interactions = store.interactions(episode_id)
    assert not [c for c in interactions if c.kind == "user"]
    (call,) = [c for c in interactions if c.tool == ASK_TOOL.name]
    assert (call.kind, call.error_kind) == ("call", "unknown_tool")


async def test_a_malformed_or_unrelated_message_to_the_user(host: EpisodeHost):
    """A message without text is a tool error naming the tool (no user turn; the gate rejects the
    malformed call); a question about nothing the user holds gets "I don't know", gives no fact
    away and costs the episode its admission as a redundant question."""
    store = host.store
    task = task_of(store, "compose_ask_value")
    (fact,) = task.user.facts
    with anyio.fail_after(60):
        async with running_http_server(host) as base:
            async with Client(f"{base}/t/{task.id}/e/malformed/mcp") as client:
                for arguments in ({}, {"message": ""}, {"message": "hi", "urgent": True}):
                    bad = await client.call_tool(ASK_TOOL.name, arguments)
                    assert bad.is_error and ASK_TOOL.name in bad.content[0].text, arguments
                    assert bad.structured_content is None
                malformed, exchanges = await play_reference(client, task)
            assert [r["done"] for _, r in exchanges] == [True]  # the malformed calls were no turns
            async with Client(f"{base}/t/{task.id}/e/unrelated/mcp") as client:
                unrelated = await client.call_tool(ASK_TOOL.name, {"message": "How was your weekend?"})
                assert not unrelated.is_error
                assert "don't know" in unrelated.structured_content["reply"]
                assert unrelated.structured_content["done"] is False
                assert not mentions(unrelated.structured_content["reply"], fact.value)
                redundant, exchanges = await play_reference(client, task)
            assert [r["done"] for _, r in exchanges] == [True]

    interactions = store.interactions(malformed)
    assert [c.error_kind for c in interactions if c.tool == ASK_TOOL.name and c.kind == "call"] == ["arguments"] * 3
    assert [c.arguments["message"] for c in interactions if c.kind == "user"] == [exchanges[0][0]]
    verdict = store.verdict(malformed, GRADER_VERSION)
    assert verdict is not None and not verdict.admitted and verdict.reason == "malformed_call"

    interactions = store.interactions(redundant)
    assert [c.arguments["message"] for c in interactions if c.kind == "user"] == \
        ["How was your weekend?", exchanges[0][0]]
    verdict = store.verdict(redundant, GRADER_VERSION)
    assert verdict is not None and not verdict.admitted and verdict.reason == "redundant_questions", verdict
    assert verdict.completion == 1.0 and verdict.robustness == 0.5


async def test_a_model_backed_user_replies_from_its_provider(store: Store, cache_dir: Path, tmp_path: Path):
    """``user_model="scripted:FILE"``: the user's reply is the file's, without its end mark; a user
    whose model fails (the file has no reply left) ends the episode as an infrastructure failure at
    the model boundary, recorded once, never as a reply."""
    task = task_of(store, "compose_ask_value")
    (fact,) = task.user.facts
    replies = tmp_path / "user.yaml"
    replies.write_text(yaml.safe_dump([f"Hmm, let me think: it should be {fact.value}. [done]"]))
    host = EpisodeHost(store, EpisodeSettings(cache_dir=cache_dir, user_model=f"scripted:{replies}"))
    try:
        with anyio.fail_after(60):
            async with running_http_server(host) as base:
                async with Client(f"{base}/t/{task.id}/e/model-user/mcp") as client:
                    episode_id, exchanges = await play_reference(client, task)
                async with Client(f"{base}/t/{task.id}/e/model-gone/mcp") as client:
                    first = await client.call_tool(ASK_TOOL.name, {"message": "Anything else?"})
                    assert first.structured_content == {"reply": "Hmm, let me think: it should be "
                                                                 f"{fact.value}.", "done": True}
                    with pytest.raises(MCPError, match="ScriptExhausted.*the episode has ended"):
                        await client.call_tool(ASK_TOOL.name, {"message": "And the status?"})
                    (failed,) = {r.id for r in store.episodes(source="live")} - {episode_id}
    finally:
        await host.close()
    assert [r for _, r in exchanges] == [{"reply": f"Hmm, let me think: it should be {fact.value}.", "done": True}]
    (turn,) = [c for c in store.interactions(episode_id) if c.kind == "user"]
    assert json.loads(turn.result) == exchanges[0][1]
    verdict = store.verdict(episode_id, GRADER_VERSION)
    assert verdict is not None and verdict.admitted, verdict

    row = store.episode(failed)
    assert row is not None and (row.status, row.boundary) == ("failed", "model")
    assert "the simulated user's model did not answer" in row.error
    turns = [c for c in store.interactions(failed) if c.kind == "user"]
    assert [(c.is_error, c.error_kind) for c in turns] == [(False, None), (True, "infrastructure")]
    assert turns[1].result is None
    verdict = store.verdict(failed, GRADER_VERSION)
    assert verdict is not None and verdict.reason == "infrastructure_error" and store.verdict_count(failed) == 1


# --------------------------------------------------------------------------- --user-model on the CLI

USAGE = [
    ("bogus", "unknown provider 'bogus'"),
    ("oracle", "the oracle plays tasks, not users"),
]
COMMANDS = [["serve"], ["collect"], ["eval", "--model", "oracle", "-n", "1"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize(("user_model", "why"), USAGE, ids=[u for u, _ in USAGE])
def test_a_bad_user_model_is_a_usage_error_and_changes_nothing(store_path: Path, command, user_model, why):
    before = digest(store_path)
    result = runner.invoke(app, [*command, "--store", str(store_path), "--user-model", user_model])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "--user-model" in text and why in text, text
    assert "Traceback" not in result.output
    assert digest(store_path) == before


def test_a_user_model_with_a_remote_server_is_a_usage_error(store_path: Path, tmp_path: Path):
    replies = tmp_path / "user.yaml"
    replies.write_text(yaml.safe_dump(["Yes."]))
    before = digest(store_path)
    result = runner.invoke(app, ["collect", "--store", str(store_path), "--url", "http://127.0.0.1:9/",
                                 "--user-model", f"scripted:{replies}"])
    assert result.exit_code == 2, result.output
    assert "coworkenv serve --user-model" in " ".join(result.output.split())
    assert digest(store_path) == before

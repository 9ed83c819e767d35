"""The one rollout: a LangGraph agent plays an episode over a real MCP connection (in memory or HTTP)."""

import socket

import anyio
import pytest

from coworkenv import ModelError, ProtocolError
from coworkenv.agents import ProviderSettings, chat_model, parse_provider, repair_hint, rollout
from coworkenv.gate import GRADER_VERSION
from coworkenv.server import OpenEpisode, build_server, running_http_server
from coworkenv.store import Provenance
from coworkenv.workspace import COMPACT_SYSTEM_PROMPT, SYSTEM_PROMPT

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]


def closed_port() -> int:
    """A loopback port nothing listens on (connections to it are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _model(host, task, provider: str = "oracle", **settings):
    return chat_model(parse_provider(provider), task, host.store.workspace(task.workspace_id),
                      ProviderSettings(**settings))


async def test_the_oracle_plays_an_episode_in_memory_and_the_episode_grades_it(host, tasks):
    task = host.store.task_spec(tasks[0])
    episode = await host.open(task, Provenance("teacher", provider="oracle"))
    with anyio.fail_after(60):
        played = await rollout(_model(host, task), build_server(OpenEpisode(episode)), task=task,
                               max_steps=task.max_steps)
    assert played.episode_id == episode.id and not played.truncated
    assert played.steps == len(task.reference) + 1  # one model turn per reference call, then the answer
    assert [m.role for m in played.messages[:2]] == ["system", "user"]
    assert played.messages[0].content == SYSTEM_PROMPT
    assert played.messages[1].content == task.instruction  # from the episode's task prompt
    assert played.messages[-1].role == "assistant" and played.messages[-1].content == task.reference_answer
    calls = [c.name for m in played.messages for c in m.tool_calls]
    assert calls == [s.tool for s in task.reference]
    # submitting ended the episode, which graded itself once
    row = host.store.episode(episode.id)
    assert row.status == "ended" and row.final_answer == task.reference_answer
    assert host.store.verdict(episode.id, GRADER_VERSION).admitted
    assert host.store.verdict_count(episode.id) == 1
    assert [c.tool for c in host.store.tool_calls(episode.id)] == [*calls, "submit_answer"]


async def test_compact_view_and_a_hint_kept_as_provenance_over_http(host, tasks):
    task = host.store.task_spec(tasks[0])
    hint = repair_hint("- the answer lacks the total", "claimed_success_failing_checks")
    async with running_http_server(host) as url:
        episode = await host.open(task, Provenance("teacher", provider="oracle", attempt=2, hint=hint))
        with anyio.fail_after(60):
            played = await rollout(_model(host, task), f"{url}/e/{episode.id}/mcp", task=task, style="compact",
                                   max_steps=task.max_steps, hint=hint)
    system, instruction, hint_turn = played.messages[:3]
    assert system.content == COMPACT_SYSTEM_PROMPT and not system.provenance
    assert instruction.role == "user" and not instruction.provenance
    assert hint_turn.role == "user" and hint_turn.content == hint and hint_turn.provenance
    assert sum(m.provenance for m in played.messages) == 1
    assert played.episode_id == episode.id


async def test_an_agent_out_of_steps_stops_without_submitting(host, tasks):
    task = next(host.store.task_spec(t) for t in tasks if t.startswith("multi_step"))
    episode = await host.open(task, Provenance("teacher", provider="oracle"))
    with anyio.fail_after(60):
        played = await rollout(_model(host, task), build_server(OpenEpisode(episode)), task=task, max_steps=2)
    assert played.truncated and played.steps == 2 and played.episode_id == ""
    # the calls of the last turn are not run: the agent would need another turn to read their results
    assert [m.role for m in played.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert [c.tool for c in host.store.tool_calls(episode.id)] == [task.reference[0].tool]
    assert host.store.episode(episode.id).status == "running"  # whoever opened it ends it
    verdict = await episode.finish(truncated=True)
    assert verdict is not None and verdict.reason == "truncated" and not verdict.admitted


async def test_a_model_server_that_refuses_connections_is_a_model_failure(host, tasks):
    task = host.store.task_spec(tasks[0])
    episode = await host.open(task, Provenance("teacher", provider="openai:m"))
    model = _model(host, task, f"openai:m@http://127.0.0.1:{closed_port()}/v1")
    with anyio.fail_after(60), pytest.raises(ModelError, match="the model did not answer") as failed:
        await rollout(model, build_server(OpenEpisode(episode)), task=task, max_steps=task.max_steps)
    assert failed.value.boundary == "model"
    assert not host.store.tool_calls(episode.id)  # no tool was called for the agent
    await episode.finish(failure=failed.value)
    row = host.store.episode(episode.id)
    assert (row.status, row.boundary) == ("failed", "model")


async def test_an_episode_address_that_refuses_connections_is_a_protocol_failure(host, tasks):
    task = host.store.task_spec(tasks[0])
    with anyio.fail_after(60), pytest.raises(ProtocolError) as failed:
        await rollout(_model(host, task), f"http://127.0.0.1:{closed_port()}/e/ep_x/mcp", task=task,
                      max_steps=task.max_steps)
    assert failed.value.boundary == "protocol"


async def test_a_scripted_agent_answers_in_text_and_the_episode_grades_it(host, tasks, tmp_path):
    task = host.store.task_spec(tasks[0])
    replies = tmp_path / "replies.yaml"
    replies.write_text('["I could not find it."]')
    episode = await host.open(task, Provenance("teacher", provider=f"scripted:{replies}"))
    with anyio.fail_after(60):
        played = await rollout(_model(host, task, f"scripted:{replies}"), build_server(OpenEpisode(episode)),
                               task=task, max_steps=task.max_steps)
    assert played.steps == 1 and played.messages[-1].content == "I could not find it."
    assert host.store.episode(episode.id).final_answer == "I could not find it."
    assert not host.store.verdict(episode.id, GRADER_VERSION).admitted

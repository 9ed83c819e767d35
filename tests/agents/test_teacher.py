"""The LangGraph teacher over a real MCP server, with the offline oracle provider."""

import pytest

from coworkenv.agents import (
    OracleChatModel,
    ProviderError,
    ProviderSettings,
    Teacher,
    TeacherSettings,
    collect,
    episode_messages,
    parse_provider,
)
from coworkenv.gate import run_gate
from coworkenv.server import running_http_server
from coworkenv.workspace import Task


def _task(host, task_id):
    return Task.model_validate_json(host.store.get_task(task_id)["spec"])


@pytest.mark.anyio
@pytest.mark.bwrap
async def test_oracle_mistake_is_repaired_from_a_fresh_workspace(host, tasks):
    task = _task(host, next(t for t in tasks if t.startswith("multi_step")))
    settings = TeacherSettings(provider_settings=ProviderSettings(error_rate=1.0, seed=0))
    async with running_http_server(host) as url:
        run = await Teacher(host.store, url, settings).run_task(task)
    assert len(run.attempts) == 2 and run.repaired
    failed, repaired = run.attempts
    assert not failed.verdict.admitted and failed.verdict.reason == "claimed_success_failing_checks"
    assert repaired.verdict.admitted and repaired.grade.score == 1.0

    store = host.store
    failed_row, repaired_row = store.get_episode(failed.episode_id), store.get_episode(repaired.episode_id)
    assert repaired_row["repaired_from"] == failed.episode_id and repaired_row["attempt"] == 2
    assert "failed these checks" in repaired_row["hint"]
    assert failed_row["source"] == repaired_row["source"] == "teacher"
    # the clean trajectory has no hint; the hint is kept as provenance
    clean = episode_messages(store, repaired.episode_id)
    assert [m["role"] for m in clean[:2]] == ["system", "user"]
    assert not any("failed these checks" in m["content"] for m in clean)
    assert any(m["provenance"] for m in store.messages(repaired.episode_id, include_provenance=True))
    # every tool call of the clean trajectory was executed in the sandbox and recorded
    called = [c["tool"] for c in store.tool_calls(repaired.episode_id) if c["tool"] != "submit_answer"]
    assert called == [s.tool for s in task.reference]
    assert len(called) >= 3


@pytest.mark.anyio
@pytest.mark.bwrap
async def test_collect_is_resumable_and_gate_records_verdicts(host, tasks):
    settings = TeacherSettings(provider_settings=ProviderSettings(error_rate=0.5, seed=1))
    first = await collect(host, settings, limit=3)
    assert first.tasks == 3 and first.succeeded == 3
    assert first.episodes == 3 + first.repaired
    second = await collect(host, settings)
    assert second.skipped == 3 and second.tasks == len(tasks) - 3
    # the teacher graded each episode through the gate, so the gate has nothing new to grade
    assert run_gate(host.store).graded == 0
    summary = run_gate(host.store, regrade=True)
    assert summary.graded == first.episodes + second.episodes
    assert summary.admitted == len(tasks)
    assert summary.reasons["complete"] == len(tasks)


def test_provider_specs_parse_or_name_the_problem():
    assert parse_provider("oracle").label == "oracle"
    assert parse_provider("openai:gpt-4o").model == "gpt-4o"
    spec = parse_provider("openai:pocket@http://127.0.0.1:8000/v1")
    assert (spec.model, spec.base_url) == ("pocket", "http://127.0.0.1:8000/v1")
    assert parse_provider("anthropic:claude-sonnet-4-5").kind == "anthropic"
    for bad, message in [("gemini:x", "unknown provider"), ("openai:", "needs a model"),
                         ("anthropic:m@http://x", "only openai"), ("openai:m@ftp://x", "http://"),
                         ("oracle:x", "no model")]:
        with pytest.raises(ProviderError, match=message):
            parse_provider(bad)


def test_oracle_is_a_chat_model_that_follows_the_reference():
    from langchain_core.messages import HumanMessage

    task = Task.model_validate({
        "id": "t", "workspace_id": "w", "capability": "lookup", "difficulty": 1, "instruction": "?",
        "checks": [{"id": "a", "kind": "answer", "description": "d", "contains": ["x"]}],
        "reference": [{"tool": "mail_search_messages", "arguments": {"query": "x"}}],
        "reference_answer": "x",
    })
    model = OracleChatModel(task=task)
    first = model.invoke([HumanMessage("?")])
    assert first.tool_calls[0]["name"] == "mail_search_messages"
    assert first.tool_calls[0]["args"] == {"query": "x"}

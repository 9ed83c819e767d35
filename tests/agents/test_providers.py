"""Chat-model providers: one table, specs parsed or their problem named, the offline oracle."""

import pytest

from coworkenv.agents import (
    PROVIDERS,
    OracleChatModel,
    ProviderError,
    ScriptExhausted,
    chat_model,
    parse_provider,
    provider_help,
    provider_problem,
    provider_usage,
)
from coworkenv.workspace import AnswerCheck, Task


def test_provider_specs_parse_or_name_the_problem():
    assert parse_provider("oracle").label == "oracle"
    assert parse_provider("openai:gpt-4o").model == "gpt-4o"
    spec = parse_provider("openai:pocket@http://127.0.0.1:8000/v1")
    assert (spec.model, spec.base_url) == ("pocket", "http://127.0.0.1:8000/v1")
    assert spec.label == "openai:pocket@http://127.0.0.1:8000/v1"
    assert parse_provider("anthropic:claude-sonnet-4-5").kind == "anthropic"
    for bad, message in [("gemini:x", "unknown provider"), ("openai:", "needs a model"),
                         ("openai:m@ftp://x", "http://"), ("oracle:x", "takes nothing after its name"),
                         ("hf:", "local model folder")]:
        with pytest.raises(ProviderError, match=message):
            parse_provider(bad)


def test_only_providers_that_take_a_url_accept_one():
    with pytest.raises(ProviderError, match="URL"):
        parse_provider("anthropic:m@http://x")


def test_help_texts_come_from_the_one_table():
    assert list(PROVIDERS) == ["oracle", "anthropic", "openai", "hf", "scripted"]
    for provider in PROVIDERS.values():
        assert provider.usage in provider_usage() and provider.help in provider_help()
    with pytest.raises(ProviderError) as refused:
        parse_provider("gemini:x")
    assert provider_usage() in str(refused.value)  # the error lists every provider of the table


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
    assert model.invoke([HumanMessage("?"), first]).content == "x"


def test_the_scripted_provider_replays_its_file_in_order(tmp_path):
    from langchain_core.messages import HumanMessage

    replies = tmp_path / "at@home.yaml"  # a path is taken whole, @ included
    replies.write_text('["first draft", "second draft"]')  # JSON is YAML too
    spec = parse_provider(f"scripted:{replies}")
    assert (spec.model, spec.base_url) == (str(replies), None)
    assert provider_problem(spec, {}) is None
    model = chat_model(spec, None, None)  # no task: a model that drafts
    assert [model.invoke([HumanMessage("?")]).content for _ in range(2)] == ["first draft", "second draft"]
    with pytest.raises(ScriptExhausted, match="has 2 replies and all were given; call 3"):
        model.invoke([HumanMessage("?")])
    assert chat_model(spec, None, None).invoke([HumanMessage("?")]).content == "first draft"  # each model starts over


def test_a_scripted_agent_calls_tools_and_replays_each_tasks_own_list(tmp_path):
    path = tmp_path / "replies.yaml"
    path.write_text("t1: [{content: 'looking', tool_calls: [{name: mail_search, arguments: {query: x}}]}, done]\n"
                    "t2: [other]\n")
    from langchain_core.messages import HumanMessage

    spec = parse_provider(f"scripted:{path}")
    assert provider_problem(spec, {}) is None
    task = Task(id="t1", workspace_id="w", capability="lookup", difficulty=1, instruction="i", reference=[],
                checks=[AnswerCheck(id="c", description="d", contains=["x"])])
    model = chat_model(spec, task, None)
    first = model.invoke([HumanMessage("?")])
    assert first.content == "looking" and [(c["name"], c["args"]) for c in first.tool_calls] == [("mail_search", {"query": "x"})]
    assert model.invoke([HumanMessage("?")]).content == "done"
    with pytest.raises(ProviderError, match="no replies for task t3"):
        chat_model(spec, task.model_copy(update={"id": "t3"}), None)


@pytest.mark.parametrize(("content", "problem"), [
    (None, "no replies file"), ("[unclosed", "is not YAML or JSON"), ("a: mapping", "map task ids to non-empty lists"),
    ("[]", "non-empty list of replies"), ("[1, 2]", "a reply is a string or a mapping"),
    ("[{tool_calls: [{arguments: {}}]}]", "tool_calls is a list of"),
])
def test_a_scripted_file_that_cannot_be_replayed_is_named(tmp_path, content, problem):
    path = tmp_path / "replies.yaml"
    if content is not None:
        path.write_text(content)
    spec = parse_provider(f"scripted:{path}")
    found = provider_problem(spec, {})
    assert found is not None and problem in found and str(path) in found
    with pytest.raises(ProviderError, match=problem):
        chat_model(spec, None, None)


def test_the_oracle_refuses_to_draft():
    with pytest.raises(ProviderError, match="cannot draft tasks"):
        chat_model(parse_provider("oracle"), None, None)

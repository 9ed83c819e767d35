"""Chat-model providers: one table, specs parsed or their problem named, the offline oracle."""

import pytest

from coworkenv.agents import PROVIDERS, OracleChatModel, ProviderError, parse_provider, provider_help, provider_usage
from coworkenv.workspace import Task


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
    assert list(PROVIDERS) == ["oracle", "anthropic", "openai", "hf"]
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

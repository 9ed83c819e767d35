"""Tool calls decoded under the bound tools' grammar (``--tool-grammar``): the grammar takes the
calls the chat template renders and nothing else; a constrained model's calls always parse, in
process and served by vLLM."""

import json
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from coworkenv.agents import ProviderSettings, chat_model, parse_provider

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PROBE = json.loads((FIXTURES / "tool-model" / "probe.json").read_text())
TOOLS = [
    {"type": "function", "function": {"name": "mail_send", "description": "", "parameters": {
        "properties": {"to": {}, "subject": {}, "status": {"enum": ["open", "done"]}, "copies": {"type": "integer"}},
        "required": ["to", "subject"]}}},
    {"type": "function", "function": {"name": "contacts_search", "description": "", "parameters": {
        "properties": {"query": {}}}}},
]


def rendered_call(name: str, arguments: dict) -> str:
    """A call as the PocketWorker chat template renders it in an assistant turn."""
    from coworkenv.agents._hf import load_local_model

    tokenizer, _ = load_local_model(str(FIXTURES / "tool-model"))
    chat = [{"role": "user", "content": "go"},
            {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": name, "arguments": arguments}}]}]
    text = tokenizer.apply_chat_template(chat, tools=TOOLS, tokenize=False)
    return text[text.index("<tool_call>"):text.index("</tool_call>") + len("</tool_call>")]


def test_the_grammar_takes_the_templates_calls_and_refuses_broken_ones():
    pytest.importorskip("xgrammar", reason="needs the 'grammar' extra")
    import xgrammar

    from coworkenv.agents._grammar import grammar_for
    from coworkenv.agents._hf import load_local_model

    tokenizer, model = load_local_model(str(FIXTURES / "tool-model"))
    grammar = grammar_for(tokenizer, model)

    def takes(text: str) -> bool:
        return xgrammar.GrammarMatcher(grammar.compiled(TOOLS)).accept_string(text)

    good = rendered_call("mail_send", {"to": "ana@example.com", "subject": "Q3 — Zoë", "status": "done", "copies": 2})
    assert takes("Sending it.\n" + good) and takes(good + "\n" + rendered_call("contacts_search", {}))
    assert takes("No call at all, just an answer: 4200 EUR.")
    for broken in (
        good.replace("mail_send", "mail_delete"),  # not a bound tool
        rendered_call("mail_send", {"to": "ana@example.com"}),  # a required argument missing
        rendered_call("mail_send", {"to": "a", "subject": "b", "status": "closed"}),  # not one of the enum's values
        rendered_call("mail_send", {"to": "a", "subject": "b", "copies": "two"}),  # not an integer
        rendered_call("mail_send", {"to": "a", "subject": "b", "cc": "c"}),  # not a parameter
        rendered_call("contacts_search", {"query": "Ana"}).replace('Ana"', "Ana"),  # a string never closed
    ):
        assert not takes(broken), broken


def _probe(model) -> list:
    messages = [SystemMessage(PROBE["messages"][0]["content"]), HumanMessage(PROBE["messages"][1]["content"])]
    return model.bind_tools(PROBE["tools"]).invoke(messages)


def test_sampled_calls_of_a_constrained_local_model_always_parse():
    """At a temperature high enough to break the fixture's calls, the same samples (seeds) parse once
    the grammar holds them: a block that starts a call ends as one, to a bound tool."""
    pytest.importorskip("xgrammar", reason="needs the 'grammar' extra")
    spec = parse_provider(f"hf:{FIXTURES / 'tool-model'}")
    names = {t["function"]["name"] for t in PROBE["tools"]}

    def replies(tool_grammar: bool) -> list:
        return [_probe(chat_model(spec, None, None, ProviderSettings(
            temperature=2.0, max_tokens=64, seed=seed, tool_grammar=tool_grammar))) for seed in range(8)]

    free = replies(False)
    assert any("<tool_call>" in str(r.content) for r in free)  # a call started and broken: left as text
    held = replies(True)
    assert not any("<tool_call>" in str(r.content) for r in held)
    calls = [c for r in held for c in r.tool_calls]
    assert calls and {c["name"] for c in calls} <= names
    assert sum(bool(r.tool_calls) for r in held) > sum(bool(r.tool_calls) for r in free)


@pytest.mark.slow
def test_a_served_model_is_held_by_the_same_grammar(tool_model_server):
    """``openai:NAME@URL`` with the grammar sends it to vLLM as a structural tag: the server's
    sampled calls parse as the in-process ones do, and greedy replies are the same in both."""
    pytest.importorskip("langchain_openai", reason="needs the 'providers' extra")
    served = parse_provider(f"openai:tool-model@{tool_model_server}")
    local = parse_provider(f"hf:{FIXTURES / 'tool-model'}")
    names = {t["function"]["name"] for t in PROBE["tools"]}
    sampled = [_probe(chat_model(served, None, None, ProviderSettings(temperature=2.0, max_tokens=64, tool_grammar=True)))
               for _ in range(8)]
    # a reply cut by max_tokens may stop inside a call; every one that ended did so outside one
    ended = [r for r in sampled if r.response_metadata.get("finish_reason") != "length"]
    assert ended and not any("<tool_call>" in str(r.content) for r in ended)
    assert {c["name"] for r in sampled for c in r.tool_calls} <= names
    assert any(r.tool_calls for r in sampled)
    greedy = [_probe(chat_model(spec, None, None, ProviderSettings(max_tokens=64, tool_grammar=True)))
              for spec in (served, local)]
    assert [(c["name"], c["args"]) for c in greedy[0].tool_calls] == [(c["name"], c["args"]) for c in greedy[1].tool_calls]
    assert greedy[0].tool_calls == [] or greedy[0].tool_calls[0]["name"] == PROBE["expected"]["name"]


def test_eval_refuses_the_grammar_for_a_provider_it_cannot_hold(tmp_path):
    from typer.testing import CliRunner

    from coworkenv.cli import app

    store = tmp_path / "coworkenv.db"
    for model in ("oracle", "openai:gpt-x", f"scripted:{tmp_path / 'replies.yaml'}"):
        result = CliRunner().invoke(app, ["eval", "--model", model, "--tool-grammar", "--store", str(store)])
        assert result.exit_code == 2, result.output
        assert "--tool-grammar applies to hf:PATH" in result.output and model.split(":")[0] in result.output
    assert not store.exists()  # refused before anything was opened

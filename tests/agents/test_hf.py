"""The ``hf:PATH`` provider: a local model folder plays a task through the MCP server, samples
at a temperature, and is checked before anything plays."""

import json
import shutil
from pathlib import Path

import anyio
import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from coworkenv.agents import ProviderError, ProviderSettings, chat_model, parse_provider, rollout
from coworkenv.agents._hf import parse_reply
from coworkenv.server import running_http_server
from coworkenv.store import Provenance


def test_hf_specs_are_parsed_and_named():
    spec = parse_provider("hf:runs/train/sft/model")
    assert (spec.kind, spec.model, spec.label) == ("hf", "runs/train/sft/model", "hf:runs/train/sft/model")
    with pytest.raises(ProviderError, match="local model folder"):
        parse_provider("hf:")


def test_hermes_blocks_become_tool_calls_and_broken_ones_stay_text():
    reply = parse_reply('Looking.\n<tool_call>\n{"name": "mail_read_message", "arguments": {"id": "m03"}}\n</tool_call>'
                        '\n<tool_call>\n{"name": "files_read_file", "arguments": "{\\"name\\": \\"a.csv\\"}"}\n</tool_call>')
    assert reply.content == "Looking."
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [
        ("mail_read_message", {"id": "m03"}), ("files_read_file", {"name": "a.csv"})]
    for broken in ('<tool_call>\n{"name": "x", "arguments": {"id": \n</tool_call>', "<tool_call>\n[1, 2]\n</tool_call>",
                   '<tool_call>\n{"arguments": {}}\n</tool_call>'):
        message = parse_reply(broken)
        assert message.tool_calls == [] and message.content == broken.strip()
    assert parse_reply("The total is 4200 EUR.").content == "The total is 4200 EUR."


@pytest.mark.anyio
@pytest.mark.bwrap
@pytest.mark.slow
async def test_a_local_model_plays_a_task_over_mcp(host, tasks, tmp_path):
    pytest.importorskip("transformers", reason="needs the 'train' extra")
    from coworkenv.trainer import TinyConfig, init_tiny_model

    task = host.store.task_spec(tasks[0])
    example = {"messages": [{"role": "user", "content": task.instruction},
                            {"role": "assistant", "content": task.reference_answer}],
               "tools": [{"type": "function", "function": {"name": s.tool, "parameters": {}}} for s in task.reference]}
    tiny = TinyConfig(vocab_size=400, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=1, num_key_value_heads=1)
    model_dir = init_tiny_model([example, example], tmp_path / "tiny", tiny)
    spec = parse_provider(f"hf:{model_dir}")
    model = chat_model(spec, task, host.store.workspace(task.workspace_id), ProviderSettings(max_tokens=16))
    async with running_http_server(host) as url:
        episode = await host.open(task, Provenance("eval", provider=spec.label))
        with anyio.fail_after(120):
            played = await rollout(model, f"{url}/e/{episode.id}/mcp", task=task, style="compact",
                                   max_steps=task.max_steps)
    verdict = await episode.finish(episode.final_answer, truncated=played.truncated)  # once: a no-op if submitted
    row = host.store.episode(episode.id)
    assert row.provider == f"hf:{model_dir}" and row.status == "ended"
    assert [m.role for m in played.messages[:3]] == ["system", "user", "assistant"]
    assert verdict is not None and not verdict.admitted  # an untrained model does not solve the task


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_a_missing_or_wrong_model_folder_is_named_before_anything_plays(tmp_path):
    from coworkenv.agents._hf import check_local_model

    with pytest.raises(ProviderError, match=f"no model folder at {tmp_path / 'nonexistent'}"):
        check_local_model(tmp_path / "nonexistent")
    with pytest.raises(ProviderError, match=r"not a model folder \(no config.json\)"):
        check_local_model(tmp_path)
    with pytest.raises(ProviderError, match="is a LoRA adapter"):
        check_local_model(FIXTURES / "tool-adapter")
    assert check_local_model(FIXTURES / "tool-model") == FIXTURES / "tool-model"


def _probe_replies(model, times: int) -> list[str]:
    probe = json.loads((FIXTURES / "tool-model" / "probe.json").read_text())
    messages = [SystemMessage(probe["messages"][0]["content"]), HumanMessage(probe["messages"][1]["content"])]
    bound = model.bind_tools(probe["tools"])
    replies = [bound.invoke(messages) for _ in range(times)]
    return [json.dumps([r.content, [(c["name"], c["args"]) for c in r.tool_calls]]) for r in replies]


def test_temperature_samples_and_a_seed_replays_a_trial():
    pytest.importorskip("transformers", reason="needs the 'train' extra")
    from coworkenv.agents._hf import LocalChatModel

    path = str(FIXTURES / "tool-model")
    greedy = _probe_replies(LocalChatModel(path=path, temperature=0.0, max_tokens=12), 2)
    assert len(set(greedy)) == 1  # temperature 0: the same reply every time
    # (the fixture is trained to near certainty on the probe: a high temperature is needed to sample apart)
    sampled = _probe_replies(LocalChatModel(path=path, temperature=2.0, max_tokens=24), 4)
    assert len(set(sampled)) > 1  # sampled replies differ across calls (torch's global generator)
    # a seed (eval's trial) replays exactly; other seeds sample other replies
    by_seed = {seed: _probe_replies(LocalChatModel(path=path, temperature=2.0, max_tokens=24, seed=seed), 2)
               for seed in range(4)}
    assert all(a == b for a, b in by_seed.values())
    assert len({replies[0] for replies in by_seed.values()}) > 1


def test_a_reply_uses_what_is_left_of_the_context_as_vllm_does(tmp_path):
    """A copy of the fixture model whose context ends a few tokens past the probe's prompt: the model
    meets a prompt it was trained on (a prompt padded to its full context gets noise, whitespace
    even, which an answer cannot tell from none), so the start of its tool call fills the room."""
    pytest.importorskip("transformers", reason="needs the 'train' extra")
    from coworkenv.agents import chat_text
    from coworkenv.agents._hf import LocalChatModel, load_local_model

    path = tmp_path / "tool-model"
    shutil.copytree(FIXTURES / "tool-model", path)
    tokenizer, _ = load_local_model(str(FIXTURES / "tool-model"))
    probe = json.loads((FIXTURES / "tool-model" / "probe.json").read_text())

    def prompt_tokens(filler: int) -> tuple[list, int]:
        messages = [SystemMessage(probe["messages"][0]["content"]),
                    HumanMessage(probe["messages"][1]["content"] + " ok" * filler)]
        chat = [{"role": "system", "content": messages[0].content}, {"role": "user", "content": messages[1].content}]
        return messages, len(tokenizer(chat_text(tokenizer, chat, probe["tools"]), add_special_tokens=False)["input_ids"])

    messages, length = prompt_tokens(0)
    config = json.loads((path / "config.json").read_text())
    config["max_position_embeddings"] = context = length + 6  # a prompt that leaves 6 tokens of room
    (path / "config.json").write_text(json.dumps(config))
    local = LocalChatModel(path=str(path), max_tokens=256).bind_tools(probe["tools"])
    reply = local.invoke(messages)  # room for a few tokens: they are generated (vLLM's rule), not refused
    assert 0 < len(tokenizer(str(reply.content) or " ".join(c["name"] for c in reply.tool_calls),
                             add_special_tokens=False)["input_ids"]) <= context - length
    messages, length = prompt_tokens(context)  # past the context: an empty answer
    assert length > context
    reply = local.invoke(messages)
    assert reply.content == "" and not reply.tool_calls

"""Served as trained: for every agent view, the token ids vLLM renders for a conversation (its
``/tokenize`` endpoint, given the request an OpenAI client sends) are the ids ``train sft`` trains
on for the same conversation, and every prompt the served model is asked to continue is a prefix
of them: the first (no tool results yet) and each later one (after tool results). The in-process
path (``hf:PATH``) renders the same ids."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from coworkenv.agents import chat_text
from coworkenv.loop import LocalEpisodes, TeacherSettings, collect
from coworkenv.trainer import sft_rows, sft_token_ids
from coworkenv.workspace import PROMPT_STYLES

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap, pytest.mark.slow]
TOOL_MODEL = Path(__file__).resolve().parents[1] / "fixtures" / "tool-model"


def on_the_wire(message: dict) -> dict:
    """A row's message as an OpenAI client sends it: arguments as a JSON string in the client's
    own spacing, call ids, and ``tool_call_id`` on tool results."""
    out: dict = {"role": message["role"], "content": message.get("content") or ""}
    if message.get("tool_calls"):
        out["content"] = message.get("content") or None
        out["tool_calls"] = [{"id": c["id"], "type": "function", "function": {
            "name": c["function"]["name"],
            "arguments": json.dumps(c["function"]["arguments"], separators=(",", ":"))}}
            for c in message["tool_calls"]]
    if message["role"] == "tool":
        out["tool_call_id"] = message["tool_call_id"]
    return out


def with_non_ascii_argument(rows: list[dict]) -> dict:
    """The first row with a string argument, that argument spelled with accents (Zoë Ångström)."""
    for row in json.loads(json.dumps(rows)):
        for message in row["messages"]:
            for call in message.get("tool_calls") or []:
                for key, value in call["function"]["arguments"].items():
                    if isinstance(value, str):
                        call["function"]["arguments"][key] = f"Zoë Ångström {value}"
                        return row
    raise AssertionError("no string argument in any row")


async def test_every_view_is_served_as_it_was_trained(host, tasks, tool_model_server):
    from transformers import AutoTokenizer

    await collect(host.store, LocalEpisodes(host), TeacherSettings(provider="oracle"))
    tokenizer = AutoTokenizer.from_pretrained(TOOL_MODEL)
    root = tool_model_server.removesuffix("/v1")

    def served(messages: list[dict], tools: list[dict], generation_prompt: bool) -> list[int]:
        reply = httpx.post(f"{root}/tokenize", timeout=60, json={
            "model": "tool-model", "messages": [on_the_wire(m) for m in messages], "tools": tools,
            "add_generation_prompt": generation_prompt})
        assert reply.status_code == 200, reply.text
        return reply.json()["tokens"]

    for style in PROMPT_STYLES:
        rows = sft_rows(host.store, style=style)
        assert len(rows) == len(tasks)
        rows.append(with_non_ascii_argument(rows))
        trained = sft_token_ids(str(TOOL_MODEL), rows, max_length=100_000)
        for row, ids in zip(rows, trained, strict=True):
            messages, tools = row["messages"], row["tools"]
            assert served(messages, tools, False) == ids, (style, row.get("task_id"))
            in_process = chat_text(tokenizer, messages, tools, generation_prompt=False)
            assert tokenizer(in_process, add_special_tokens=False)["input_ids"] == ids, style
            replies = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
            assert len(replies) >= 2 and any(m["role"] == "tool" for m in messages[:replies[-1]])
            for i in replies:  # the prompt of each reply, before any tool result and after them
                prompt = served(messages[:i], tools, True)
                assert ids[:len(prompt)] == prompt, (style, row.get("task_id"), i)

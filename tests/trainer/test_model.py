"""The tiny PocketWorker base: tokenizer, ChatML/Hermes chat template, Qwen3 model from a config."""

import json
import re

import pytest

pytest.importorskip("transformers", reason="needs the 'train' extra")

from transformers import AutoModelForCausalLM, AutoTokenizer

from coworkenv.trainer import TinyConfig, TrainingError, init_tiny_model, train_tokenizer
from coworkenv.trainer._chat_template import signature
from coworkenv.trainer._model import corpus_texts


@pytest.fixture(scope="module")
def tokenizer(chat_rows):
    return train_tokenizer(list(corpus_texts(chat_rows)), vocab_size=600)


def test_template_round_trips_tools_and_tool_calls(tokenizer, chat_rows, chat_tools):
    row = chat_rows[3]
    text = tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
    listed = re.search(r"<tools>\n(.*?)</tools>", text, re.S).group(1).splitlines()
    assert [json.loads(line) for line in listed] == [t["function"] for t in chat_tools]
    calls = [json.loads(c) for c in re.findall(r"<tool_call>\n(.*?)\n</tool_call>", text, re.S)]
    expected = [
        {"name": c["function"]["name"], "arguments": c["function"]["arguments"] if isinstance(
            c["function"]["arguments"], dict) else json.loads(c["function"]["arguments"])}
        for m in row["messages"] if m["role"] == "assistant" for c in m.get("tool_calls", [])
    ]
    assert calls == expected  # dict and JSON-string arguments both come back as the same call
    responses = re.findall(r"<tool_response>\n(.*?)\n</tool_response>", text, re.S)
    assert responses == [m["content"] for m in row["messages"] if m["role"] == "tool"]
    assert text.count("<|im_start|>user\n<tool_response>") == 2  # parallel results share one turn
    prompt = tokenizer.apply_chat_template(row["messages"][:2], tools=row["tools"], tokenize=False,
                                           add_generation_prompt=True)
    assert prompt.endswith("<|im_start|>assistant\n") and text.startswith(prompt[: -len("<|im_start|>assistant\n")])


def test_only_assistant_tokens_are_marked_for_loss(tokenizer, chat_rows):
    row = chat_rows[5]
    enc = tokenizer.apply_chat_template(row["messages"], tools=row["tools"], return_dict=True,
                                        return_assistant_tokens_mask=True)
    ids, mask = enc["input_ids"], enc["assistant_masks"]
    assert 0 < sum(mask) < len(ids)
    marked = tokenizer.decode([i for i, m in zip(ids, mask, strict=True) if m])
    text = tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
    turns = re.findall(r"<\|im_start\|>assistant\n(.*?<\|im_end\|>)", text, re.S)
    assert marked == "".join(turns)
    for forbidden in ("<tool_response>", "<tools>", "Read m05", "<|im_start|>"):
        assert forbidden not in marked


def test_tokenizer_splits_digits_and_keeps_entities_whole(tokenizer):
    pieces = tokenizer.tokenize('on 2026-03-18 add "Lunch" to alice.nguyen@acme.example, then read m05 and 4711')
    # values of closed sets the corpus repeats (a date, a record id) are one token each
    for entity in ("2026-03-18", "m05"):
        assert entity in pieces
    # an open-ended value, repeated or not, stays in pieces, as a new workspace's would be
    assert "alice.nguyen@acme.example" not in pieces and "@" in "".join(pieces)
    assert [p for p in pieces if p.isdigit()] == list("4711")  # a number the corpus lacks: digit by digit
    assert tokenizer.tokenize("12026-03-188") != ["12026-03-188"] and "2026-03-18" not in tokenizer.tokenize("12026-03-188")
    for token in ("<tool_call>", "</tool_call>", "<|im_end|>"):
        assert len(tokenizer.tokenize(token)) == 1


def test_a_json_field_name_is_two_tokens_before_its_value(tokenizer):
    """``": "`` is one token, so the copying circuit's key at a value's first token sees (the end of)
    the field's name two tokens back; the text comes back byte for byte."""
    text = '{"messages": [{"id": "m07", "subject": "Coffee this week?"}], "count": 1}, {"x": ["a"]}'
    pieces = tokenizer.tokenize(text)
    for name, value in (("id", "m07"), ("subject", "C")):
        at = next(i for i, p in enumerate(pieces) if p.startswith(value))  # the value's first piece
        before, separator = (tokenizer.convert_tokens_to_string([p]) for p in pieces[at - 2:at])
        assert separator == '": "' and name.endswith(before)  # (the name's last piece, at this vocabulary)
    assert tokenizer.decode(tokenizer(text)["input_ids"]) == text
    assert tokenizer.decode(tokenizer("a  b\n\n c's \"d\": 12")["input_ids"]) == "a  b\n\n c's \"d\": 12"


def test_init_tiny_model_saves_a_loadable_small_qwen3(tmp_path, chat_rows, chat_tools):
    out = init_tiny_model(chat_rows, tmp_path / "tiny", TinyConfig(vocab_size=600))
    model = AutoModelForCausalLM.from_pretrained(out)
    tok = AutoTokenizer.from_pretrained(out)
    assert model.config.model_type == "qwen3"
    assert sum(p.numel() for p in model.parameters()) < 3_000_000
    assert model.config.eos_token_id == tok.convert_tokens_to_ids("<|im_end|>")
    assert "{% generation %}" in tok.chat_template
    prompt = tok.apply_chat_template(chat_rows[0]["messages"][:2], tools=chat_tools, add_generation_prompt=True,
                                     return_tensors="pt", return_dict=True)
    generated = model.generate(**prompt, max_new_tokens=5, do_sample=False)
    assert generated.shape[1] == prompt["input_ids"].shape[1] + 5 or tok.eos_token_id in generated[0].tolist()
    meta = json.loads((out / "coworkenv_model.json").read_text())
    assert meta["kind"] == "tiny" and meta["parameters"] == sum(p.numel() for p in model.parameters())


def test_a_tiny_base_can_list_its_tools_as_the_signatures_its_tokenizer_was_trained_on(tmp_path, chat_rows,
                                                                                      chat_tools, tokenizer):
    tools = [*chat_tools, {"type": "function", "function": {"name": "tasks_update_task", "parameters": {
        "type": "object", "required": ["id"], "properties": {
            "id": {"type": "string"}, "status": {"type": "string", "enum": ["open", "done"]},
            "priority": {"type": "integer"}}}}}]
    out = init_tiny_model(chat_rows, tmp_path / "tiny", TinyConfig(vocab_size=600, tool_lines="signatures"))
    tok = AutoTokenizer.from_pretrained(out)
    text = tok.apply_chat_template(chat_rows[0]["messages"], tools=tools, tokenize=False)
    listed = re.search(r"<tools>\n(.*?)</tools>", text, re.S).group(1).splitlines()
    assert listed == ["calendar_create_event(title*, date*, attendees:array)", "mail_read_message(id)",
                      "tasks_update_task(id*, status:open|done, priority:integer)"]
    assert listed == [signature(tool) for tool in tools]  # what the tokenizer was trained on
    as_json = tokenizer.apply_chat_template(chat_rows[0]["messages"], tools=tools, tokenize=False)
    assert len(tok(text)["input_ids"]) < 0.8 * len(tokenizer(as_json)["input_ids"])  # the JSON-lines base's
    assert json.loads((out / "coworkenv_model.json").read_text())["config"]["tool_lines"] == "signatures"
    with pytest.raises(ValueError, match="tool lines 'yaml': choose one of json, signatures"):
        init_tiny_model(chat_rows, tmp_path / "other", TinyConfig(tool_lines="yaml"))


def test_empty_corpus_is_refused(tmp_path):
    with pytest.raises(ValueError, match="corpus is empty"):
        init_tiny_model([], tmp_path / "tiny")


def test_a_value_is_the_same_tokens_in_a_sentence_and_in_json(chat_rows):
    """With the space before a word a token of its own ("separate"), a value a call copies out of its
    instruction is there as the very tokens the call writes; with GPT-2's cut ("attached", the default),
    a word after a space is other tokens than after JSON's quote, and nothing in the instruction can be
    copied."""
    texts = list(corpus_texts(chat_rows))
    value = "Printer paper"
    instruction, call = "Order more Printer paper for the office", f'{{"item": "{value}"}}'

    def contains(tokenizer, text: str) -> bool:
        ids = tokenizer(call, add_special_tokens=False)["input_ids"]
        start = len(tokenizer('{"item": "', add_special_tokens=False)["input_ids"])
        wanted = ids[start:start + len(tokenizer(value, add_special_tokens=False)["input_ids"])]
        hay = tokenizer(text, add_special_tokens=False)["input_ids"]
        return any(hay[i:i + len(wanted)] == wanted for i in range(len(hay)))

    separate = train_tokenizer(texts + [instruction] * 5, vocab_size=600, spaces="separate")
    attached = train_tokenizer(texts + [instruction] * 5, vocab_size=600)
    assert contains(separate, instruction) and not contains(attached, instruction)
    assert separate.decode(separate(instruction)["input_ids"]) == instruction
    with pytest.raises(TrainingError, match="spaces 'none'"):
        train_tokenizer(texts, spaces="none")  # pyright: ignore[reportArgumentType]

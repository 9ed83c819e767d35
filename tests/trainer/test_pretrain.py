"""The pretrained PocketWorker base: its exercises, its template, and a run that resumes and rebuilds
bit for bit (at a size that trains in seconds)."""

from __future__ import annotations

import json
import random
import re
from typing import Any

import pytest

from coworkenv.trainer import PretrainSettings, pretrain_base, snapshot_base, weights_hash
from coworkenv.trainer._chat_template import POCKET_CHAT_TEMPLATE
from coworkenv.trainer._pretrain_data import (
    KINDS,
    PRETRAIN_SEED_FROM,
    as_messages,
    exercises,
    render,
    replay_rows,
    scrambled,
    words_of,
    workspace_results,
)

pytest.importorskip("torch")

TINY: dict[str, Any] = dict(seeds=2, exercises_per_seed=30, tokenizer_seeds=1, vocab_size=600, hidden_size=32,
                            layers=1, heads=1, kv_heads=1, head_dim=32, intermediate_size=64, seq_len=384, batch_size=2,
                            steps=24, save_every=7, warmup_steps=3, copy_steps=9, copy_seq_len=32, copy_batch_size=4)


def test_exercises_copy_values_the_records_hold_and_never_show_a_tool_call():
    seed = PRETRAIN_SEED_FROM + 7
    made = list(exercises(seed, 200))
    assert {kind for kind, _ in made} >= {"lookup", "json", "prose", "text"} and {k for k, _ in made} <= set(KINDS)
    assert [render(s) for _, s in made] == [render(s) for _, s in exercises(seed, 200)]  # the same seed, the same text
    for kind, sample in made:
        text = render(sample)
        assert "<tool_call>" not in text and "<tools>" not in text
        if kind in ("lookup", "reverse"):
            answers = [m["content"] for m in as_messages(sample) or [] if m["role"] == "assistant"]
            prompt = text.split("<|im_start|>assistant")[0]
            assert answers and all(a in prompt for a in answers), answers  # copied from the result shown
        if kind == "json":
            answer = json.loads([m for m in as_messages(sample) or [] if m["role"] == "assistant"][-1]["content"])
            prompt = text.split("<|im_start|>assistant")[0]
            assert all(str(v) in prompt or json.dumps(v)[1:-1] in prompt for v in answer.values())


def test_made_up_results_keep_their_shape_and_agree_with_themselves():
    results = workspace_results(PRETRAIN_SEED_FROM + 3)
    words = words_of(results)
    changed = 0
    for result in results:
        made = scrambled(result, random.Random(1), words)
        assert made.tool == result.tool and len(made.records) == len(result.records)
        for old, new in zip(result.records, made.records, strict=True):
            assert old.keys() == new.keys()  # field names kept, values made up
            assert all(type(old[k]) is type(new[k]) for k in old)
            changed += sum(old[k] != new[k] for k in old if isinstance(old[k], str) and any(c.isalnum() for c in old[k]))
        seen: dict = {}  # the same value made up the same way wherever it stands
        for old, new in zip(result.records, made.records, strict=True):
            for k in old:
                if isinstance(old[k], (str, int)) and not isinstance(old[k], bool):
                    assert seen.setdefault((type(old[k]), old[k]), new[k]) == new[k]
    assert changed > 0
    assert replay_rows(5) == replay_rows(5) and all(r["messages"][-1]["role"] == "assistant" for r in replay_rows(5))


def test_the_pocket_template_lists_tools_as_signatures_and_renders_calls_as_hermes(tmp_path):
    from transformers import AutoTokenizer

    pretrain_base(PretrainSettings(out_dir=str(tmp_path / "run"), **{**TINY, "steps": 1}))
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "run" / "model")
    assert tokenizer.chat_template == POCKET_CHAT_TEMPLATE
    tools = [{"name": "files_move_file", "description": "", "parameters": {
        "properties": {"id": {}, "folder": {}, "count": {"type": "integer"}, "status": {"enum": ["open", "done"]}},
        "required": ["id", "folder"]}}]
    messages = [{"role": "system", "content": "Do the task."}, {"role": "user", "content": "Move f03 to Finance."},
                {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
                    "name": "files_move_file", "arguments": {"id": "f03", "folder": "Finance"}}}]}]
    text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)
    assert "<tools>\nfiles_move_file(id*, folder*, count:integer, status:open|done)\n</tools>" in text
    assert '<tool_call>\n{"name": "files_move_file", "arguments": {"id": "f03", "folder": "Finance"}}\n</tool_call>' in text


def test_copying_sequences_repeat_a_span_and_label_only_the_repeat():
    import numpy as np
    from transformers import AutoTokenizer

    from coworkenv.trainer._pretrain import copy_batch, copy_tokens

    tokenizer = AutoTokenizer.from_pretrained("tests/fixtures/tool-model")
    tokens, separator = copy_tokens(tokenizer)
    assert separator not in tokens and not set(tokens) & set(tokenizer.all_special_ids)
    assert tokenizer.decode([separator]) == "\n"
    ids, labels = copy_batch(tokens, separator, 8, 64, np.random.default_rng(0))
    assert ids.shape == labels.shape == (8, 64)
    for row, label in zip(ids, labels, strict=True):
        learned = np.flatnonzero(label != -100)
        span = len(learned)
        assert 5 <= span <= 20 and (np.diff(learned) == 1).all()  # one contiguous repeat
        first = learned[0]
        assert row[first - 1] == separator
        assert (row[first - 1 - span:first - 1] == label[learned]).all()  # it repeats the span before the separator
        assert (row[learned] == label[learned]).all()


@pytest.mark.slow
def test_the_copying_stage_teaches_a_model_to_copy_a_repeated_span(tmp_path):
    """Random-token copying at the size demo --full trains: after 2,500 steps the model predicts
    exactly more than 30% of a repeated span's tokens, at four times the length it mostly trained at,
    where an untrained one guesses (1/vocabulary): the head that copies has formed
    (benchmarks/loop.md has when it forms at other sizes). It forms late in the stage, once the
    sequences grow longer: at 2,000 steps it had formed on one machine and not yet on another."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from coworkenv.trainer import copy_rate

    settings = PretrainSettings(out_dir=str(tmp_path / "run"), **{
        **TINY, "vocab_size": 512, "hidden_size": 128, "layers": 2, "heads": 4, "kv_heads": 4, "intermediate_size": 512,
        "copy_steps": 2500, "copy_seq_len": 64, "copy_batch_size": 16, "steps": 1, "save_every": 1000,
        "learning_rate": 3e-3, "warmup_steps": 50, "threads": 2})
    folder = pretrain_base(settings)
    meta = json.loads((folder / "coworkenv_model.json").read_text())
    tokenizer = AutoTokenizer.from_pretrained(folder)
    chance = 1 / len(tokenizer)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype="float32").eval()
    untrained = AutoModelForCausalLM.from_config(model.config).eval()
    assert copy_rate(untrained, tokenizer) < 3 * chance
    assert meta["copy_rate_after_copying"] > 0.3, (meta["copy_rate_after_copying"], chance)
    assert copy_rate(model, tokenizer, seq_len=64) > 0.3


def test_a_pretraining_run_resumes_where_it_stopped_and_rebuilds_bit_for_bit(tmp_path):
    whole = pretrain_base(PretrainSettings(out_dir=str(tmp_path / "whole"), **TINY))

    def interrupt(progress):
        if progress.stage == "train" and progress.step == 30:  # saved at 7..28 (the copying stage ends at 9), not 30
            raise KeyboardInterrupt

    broken = tmp_path / "broken"
    with pytest.raises(KeyboardInterrupt):
        pretrain_base(PretrainSettings(out_dir=str(broken), **TINY), on_progress=interrupt)
    assert not (broken / "model").exists()
    assert snapshot_base(broken).name == "snapshot"  # the run so far can be tried
    resumed = pretrain_base(PretrainSettings(out_dir=str(broken), **TINY))
    assert weights_hash(resumed) == weights_hash(whole)
    meta = json.loads((resumed / "coworkenv_model.json").read_text())
    assert meta["steps"] == 9 + 24 and meta["weights_sha256"] == weights_hash(whole)
    assert 0 <= meta["copy_rate_after_copying"] <= 1
    assert meta["data_seeds"] == [PRETRAIN_SEED_FROM, PRETRAIN_SEED_FROM + 1] and re.fullmatch(r"[0-9a-f]{16}", meta["data_hash"])
    assert meta["losses"][-1]["loss"] == json.loads((whole / "coworkenv_model.json").read_text())["losses"][-1]["loss"]
    with pytest.raises(ValueError, match="another recipe"):
        pretrain_base(PretrainSettings(out_dir=str(broken), **{**TINY, "steps": 30}))


def test_a_base_with_the_copying_circuit_pretrains_on_the_exercises_and_keeps_its_circuit(tmp_path):
    """--copy-circuit: a GPT-2 whose copying heads are set by hand, pretrained without a copying stage (it
    copies from the first step); the circuit's weights come out exactly as built, the rest has learned."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from coworkenv.trainer._circuit import circuit_gpt2, held_masks
    from coworkenv.trainer._pretrain import copy_rate

    recipe: dict[str, Any] = dict(seeds=2, exercises_per_seed=30, tokenizer_seeds=1, vocab_size=600, hidden_size=96,
                                  head_dim=16, layers=2, intermediate_size=128, seq_len=256, batch_size=4, steps=20,
                                  warmup_steps=2, copy_circuit=True)
    settings = PretrainSettings(out_dir=str(tmp_path / "run"), **recipe)
    assert settings.copy_steps == 0
    path = pretrain_base(settings)
    model = AutoModelForCausalLM.from_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    assert model.config.model_type == "gpt2" and "coworkenv_circuit" in model.config.to_dict()
    built = circuit_gpt2(settings.circuit(), tokenizer)
    trained = dict(model.named_parameters())
    masks = held_masks(built)
    assert masks
    for name, weights in built.named_parameters():
        if weights in masks:
            held = masks[weights] == 0
            assert torch.equal(weights[held], trained[name][held]), name  # neither gradient nor weight decay
    free = "transformer.h.1.mlp.c_fc.weight"
    assert not torch.equal(dict(built.named_parameters())[free], trained[free])
    assert copy_rate(model.eval(), tokenizer) > 0.5  # copies a repeated random span, untaught
    meta = json.loads((path / "coworkenv_model.json").read_text())
    assert meta["steps"] == 20 and meta["recipe"]["copy_circuit"] and meta["recipe"]["copy_steps"] == 0
    with pytest.raises(ValueError, match="copies from the start"):
        PretrainSettings(out_dir=str(tmp_path / "other"), **{**recipe, "copy_steps": 10})
    with pytest.raises(ValueError, match="must be a multiple of the head size"):
        PretrainSettings(out_dir=str(tmp_path / "other"), **{**recipe, "hidden_size": 100})

"""A base whose copying circuit is set by hand (``model init-tiny --copy-circuit``): it copies before
any training, real TRL steps leave the circuit as built while the rest learns, and vLLM serves it
exactly as it runs in process."""

import json
import random

import pytest

pytest.importorskip("trl", reason="needs the 'train' extra")

import httpx
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from typer.testing import CliRunner

from coworkenv.cli import app
from coworkenv.trainer import (
    CircuitConfig,
    TinyConfig,
    TrainSettings,
    circuit_layout,
    copy_rate,
    init_tiny_model,
    train_dpo,
    train_sft,
)
from coworkenv.trainer._circuit import PointerLoss, content_tokens, copy_stops, held_masks, pointer_targets
from coworkenv.trainer._serve import VLLMSettings, vllm_server
from coworkenv.trainer._train import stop_weighted_loss

runner = CliRunner()
TOKENIZER = TinyConfig(vocab_size=500)


@pytest.fixture(scope="module")
def circuit_base(tmp_path_factory, chat_rows):
    return init_tiny_model(chat_rows, tmp_path_factory.mktemp("circuit") / "base", TOKENIZER,
                           circuit=CircuitConfig(hidden_size=160, intermediate_size=256))


def _load(path):
    return AutoModelForCausalLM.from_pretrained(path, dtype="float32").eval(), AutoTokenizer.from_pretrained(path)


def test_the_base_copies_a_repeated_span_before_any_training(circuit_base, chat_rows, tmp_path):
    model, tokenizer = _load(circuit_base)
    assert circuit_layout(model) == json.loads((circuit_base / "config.json").read_text())["coworkenv_circuit"]
    meta = json.loads((circuit_base / "coworkenv_model.json").read_text())
    assert meta["copy_circuit"]["hidden_size"] == 160 and model.config.model_type == "gpt2"
    # far above chance (1/500) at every length, where the same tokenizer's untrained Qwen3 guesses
    for length in (64, 256, 1024):
        assert copy_rate(model, tokenizer, seq_len=length, sequences=8) > 0.6, length
    plain = init_tiny_model(chat_rows, tmp_path / "plain", TOKENIZER)
    assert copy_rate(*_load(plain), seq_len=256, sequences=8) < 0.05
    assert circuit_layout(_load(plain)[0]) is None and held_masks(_load(plain)[0]) == {}


def test_the_gate_turns_copying_off_and_writes_nothing_in_its_place(circuit_base):
    """The trainable part of the induction head's query scores the first position (the conversation's
    <|im_start|>), whose value is cancelled: opened fully, the head copies nothing and adds nothing."""
    model, tokenizer = _load(circuit_base)
    start = tokenizer.convert_tokens_to_ids("<|im_start|>")
    generator = torch.Generator().manual_seed(1)
    span = torch.randint(20, len(tokenizer), (4, 40), generator=generator)
    ids = torch.cat([torch.full((4, 1), start), torch.randint(20, len(tokenizer), (4, 30), generator=generator),
                     span, span], 1)
    target = ids[:, 72:]

    def copied() -> float:
        with torch.no_grad():
            return float((model(ids).logits[:, 71:-1].argmax(-1) == target).float().mean())

    assert copied() > 0.8
    gate = json.loads((circuit_base / "config.json").read_text())["coworkenv_circuit"]["trained_query_columns"][1][0]
    attention = model.transformer.h[1].attn
    with torch.no_grad():
        attention.c_attn.bias[gate] = 1e3
        assert copied() < 0.05
        # the induction head's value at the first position, from what layer 1 reads there: next to nothing (what
        # LayerNorm's mean leaves) against the code any other position writes
        residual = model(ids, output_hidden_states=True).hidden_states[1]
        head = model.config.n_embd // model.config.n_head
        value = attention.c_attn(model.transformer.h[1].ln_1(residual))[..., 2 * model.config.n_embd:][..., :head]
        norms = value.norm(dim=-1)
        assert float(norms[:, 0].max()) < 0.25 * float(norms[:, 1:].min())


def _pointer_writes(model, layer: int, head: int, ids) -> torch.Tensor:
    """For each position j of ``ids``: the token whose code ``head`` of ``layer`` writes into E (the logit it
    raises) were it to attend to j alone."""
    with torch.no_grad():
        residual = model(ids, output_hidden_states=True).hidden_states[layer]
        attention, width, size = model.transformer.h[layer].attn, model.config.n_embd, 32
        value = attention.c_attn(model.transformer.h[layer].ln_1(residual))[..., 2 * width + head * size:][..., :size]
        write = value @ attention.c_proj.weight[head * size:(head + 1) * size]
        return (write[..., :size - 1] @ model.transformer.wte.weight[:, :size - 1].T).argmax(-1)


def test_pointer_heads_in_a_later_layer_write_the_token_before_where_they_look(tmp_path, chat_rows):
    """With ``pointer_layer``, the pointer heads sit in a layer after the induction head (their queries and
    keys see what the free layers between gathered): attending to a position, one writes the logit of the
    token before it (E holds the induction head's prediction by then, P the token before); the induction
    head still copies, and the pointer heads' writes are held as in layer 1."""
    base = init_tiny_model(chat_rows, tmp_path / "late", TOKENIZER,
                           circuit=CircuitConfig(hidden_size=160, intermediate_size=256, num_hidden_layers=3,
                                                 pointer_layer=2, pointer_heads=2))
    model, tokenizer = _load(base)
    layout = circuit_layout(model)
    assert layout["pointer_heads"] == [[], [], [0, 1]] and layout["held_heads"] == [[0, 1], [0], []]
    assert copy_rate(model, tokenizer, seq_len=256, sequences=8) > 0.6
    ids = torch.randint(20, len(tokenizer), (2, 50), generator=torch.Generator().manual_seed(4))
    for head in (0, 1):
        assert torch.equal(_pointer_writes(model, 2, head, ids)[:, 1:], ids[:, :-1])
    masks = held_masks(model)
    value = model.transformer.h[2].attn.c_attn.weight
    assert float(masks[value][:, 2 * 160:2 * 160 + 64].sum()) == 0  # both heads' values held
    assert float(masks[value][:, :64].sum()) > 0  # their queries train
    early = init_tiny_model(chat_rows, tmp_path / "early", TOKENIZER,
                            circuit=CircuitConfig(hidden_size=160, intermediate_size=256))
    assert torch.equal(_pointer_writes(_load(early)[0], 1, 1, ids), ids)  # in layer 1: the token it attends to
    louder = init_tiny_model(chat_rows, tmp_path / "louder", TOKENIZER,
                             circuit=CircuitConfig(hidden_size=160, intermediate_size=256, pointer_gain=8.0))
    model = _load(louder)[0]
    assert torch.equal(_pointer_writes(model, 1, 1, ids), ids)
    written = model.transformer.h[1].attn.c_proj.weight
    default = _load(early)[0].transformer.h[1].attn.c_proj.weight
    assert torch.allclose(written[32:64], 2 * default[32:64])  # the pointer's write, at 8 against copy_gain's 4
    assert torch.equal(written[:32], default[:32])  # the induction head's as before
    with pytest.raises(ValueError, match="gain"):
        CircuitConfig(pointer_gain=0.0).check()
    for bad in (0, 3):
        with pytest.raises(ValueError, match="pointer heads' layer"):
            CircuitConfig(num_hidden_layers=3, pointer_layer=bad).check()


def _held_and_free(before, after, masks_of):
    """The largest change of a held weight, and whether any free weight moved."""
    held_change, free_moved = 0.0, False
    for name, parameter in masks_of.items():
        delta = (after[name] - before[name]).abs()
        held_change = max(held_change, float((delta * (parameter == 0)).max()))
        free_moved |= bool((delta * parameter).max() > 0)
    return held_change, free_moved


def _masks_by_name(path):
    model = AutoModelForCausalLM.from_pretrained(path, dtype="float32")
    names = {id(p): n for n, p in model.named_parameters()}
    return {names[id(p)]: mask for p, mask in held_masks(model).items()}


def _state(path):
    return {k: v.detach().clone() for k, v in AutoModelForCausalLM.from_pretrained(path, dtype="float32").state_dict().items()}


@pytest.mark.slow
def test_training_learns_around_the_circuit_and_leaves_it_as_built(circuit_base, chat_rows, tmp_path, store):
    data = tmp_path / "sft.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in chat_rows))
    masks = _masks_by_name(circuit_base)
    before = _state(circuit_base)
    held = train_sft(store, TrainSettings(model=str(circuit_base), data=str(data), out_dir=str(tmp_path / "held"),
                                          max_steps=4, batch_size=2, learning_rate=1e-2))
    after = _state(held.model_dir)
    held_change, free_moved = _held_and_free(before, after, masks)
    assert held_change == 0.0 and free_moved
    # the pointer head (layer 1, head 1) learns where to look, and writes as it was built
    width, head = 160, 32
    weights = "transformer.h.1.attn.c_attn.weight"
    assert not torch.equal(before[weights][:, head:2 * head], after[weights][:, head:2 * head])  # its query
    assert torch.equal(before[weights][:, 2 * width + head:2 * width + 2 * head],
                       after[weights][:, 2 * width + head:2 * width + 2 * head])  # its value
    model, tokenizer = _load(held.model_dir)
    assert copy_rate(model, tokenizer, seq_len=256, sequences=8) > 0.5
    # the same run with the circuit released changes it; DPO holds it as SFT does
    free = train_sft(store, TrainSettings(model=str(circuit_base), data=str(data), out_dir=str(tmp_path / "free"),
                                          max_steps=4, batch_size=2, learning_rate=1e-2, hold_circuit=False))
    assert _held_and_free(before, _state(free.model_dir), masks)[0] > 0
    pairs = tmp_path / "dpo.jsonl"
    pairs.write_text("".join(json.dumps({"prompt": row["messages"][:2], "chosen": row["messages"][2:], "tools": row["tools"],
                                         "rejected": [{"role": "assistant", "content": "Done."}]}) + "\n"
                             for row in chat_rows))
    dpo = train_dpo(store, TrainSettings(model=str(held.model_dir), data=str(pairs), out_dir=str(tmp_path / "dpo"),
                                         max_steps=2, batch_size=2, learning_rate=1e-2))
    assert _held_and_free(before, _state(dpo.model_dir), masks)[0] == 0.0


def test_pointer_targets_are_where_a_copied_span_starts_and_the_induction_head_cannot_find_it():
    content = [True] * 10
    #      0  1  2  3  4  5  6  7  8  9  10 11
    ids = [0, 5, 6, 1, 5, 6, 2, 9, 5, 6, 7, 3]
    trained = [False] * 7 + [True] * 5
    # 8 starts a copy of (5, 6), found at 1 and 4; 9 goes on with it (from 2 and 5), 10 does not (7 is new);
    # 4 starts one too, but is not trained
    assert pointer_targets(ids, trained, content) == [(8, [1, 4]), (9, [2, 5])]
    assert pointer_targets(ids, [True] * 12, content) == [(4, [1]), (5, [2]), (8, [1, 4]), (9, [2, 5])]
    # the copy is followed while the assistant's turn goes on, and only from the places that go on the same way
    assert pointer_targets([0, 5, 6, 7, 1, 5, 6, 8, 2, 5, 6, 7], [False] * 9 + [True] * 3, content) == [
        (9, [1, 5]), (10, [2, 6]), (11, [3])]
    assert pointer_targets(ids, trained[:9] + [False] * 3, content) == [(8, [1, 4])]
    content[5] = False  # punctuation or a special token: nothing to point at
    assert pointer_targets(ids, trained, content) == []


def test_copy_stops_are_where_the_pair_before_went_on_otherwise_earlier():
    content = [True] * 10
    #      0  1  2  3  4  5  6  7  8
    ids = [0, 5, 6, 7, 1, 5, 6, 8, 2]
    trained = [False] * 4 + [True] * 5
    # (5, 6) went on with 7 at 1..3; at 7 the assistant writes 8 after it: the copy stops there
    assert copy_stops(ids, trained, content) == [7]
    # going on as before (7) is no stop; the next token is, where (6, 7) went on with 1 earlier
    assert copy_stops(ids[:7] + [7, 2], trained, content) == [8]
    assert copy_stops(ids, trained[:7] + [False, True], content) == []  # not trained
    content[6] = False  # after punctuation or a special token (a JSON key's quote, a role): no copy to stop
    assert copy_stops(ids, trained, content) == []
    # the earlier places are the context before the pair: a pair's first occurrence stops nothing
    assert copy_stops([0, 5, 6, 7], [True] * 4, [True] * 10) == []


def _rendered(tokenizer, row):
    """A row's token ids and its labels (the tokens after the instruction)."""
    ids = tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=True, return_dict=True)["input_ids"]
    start = len(tokenizer.apply_chat_template(row["messages"][:2], tools=row["tools"], tokenize=True,
                                              return_dict=True)["input_ids"])
    return torch.tensor([ids]), torch.tensor([[-100] * start + ids[start:]])


def test_the_stop_weighted_loss_is_the_models_own_at_weight_1_and_counts_stops_more_above(circuit_base, chat_rows):
    model, tokenizer = _load(circuit_base)
    content = content_tokens(tokenizer)
    found = 0
    for row in chat_rows:
        ids, labels = _rendered(tokenizer, row)
        with torch.no_grad():
            outputs = model(ids, labels=labels)
            own = stop_weighted_loss(outputs.logits, ids, labels, None, 1.0, content)
            assert float(own) == pytest.approx(float(outputs.loss), rel=1e-5)
            stops = copy_stops(ids[0].tolist(), [m != -100 for m in labels[0].tolist()], content)
            found += len(stops)
            counted = int((labels[:, 1:] != -100).sum())
            at_stops = torch.nn.functional.cross_entropy(outputs.logits[0, [t - 1 for t in stops]], ids[0, stops],
                                                         reduction="sum")
            weighted = stop_weighted_loss(outputs.logits, ids, labels, counted, 4.0, content)
            assert float(weighted) == pytest.approx(float(outputs.loss) + 3 * float(at_stops) / counted, rel=1e-4)
    assert found > 0  # the rows copy values and stop


def _pointer_loss(model_dir, rows) -> float:
    """The pointer loss of a model on ``rows`` (every token after the instruction trained), as training
    computes it."""
    model, tokenizer = _load(model_dir)
    loss = PointerLoss(model, tokenizer)
    values = []
    for row in rows:
        ids, labels = _rendered(tokenizer, row)
        with torch.no_grad():
            with loss.capture(model):
                model(ids)
            value = loss(model, ids, labels)
        assert value is not None
        values.append(float(value))
    return sum(values) / len(values)


def _trained_with_and_without(circuit_base, chat_rows, tmp_path, store, **option):
    """12 real TRL steps on ``chat_rows`` from the circuit base with ``option`` set, and the same steps without."""
    data = tmp_path / "sft.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in chat_rows))
    settings = dict(model=str(circuit_base), data=str(data), max_steps=12, batch_size=4, learning_rate=1e-2,
                    logging_steps=4)
    return (train_sft(store, TrainSettings(out_dir=str(tmp_path / "with"), **option, **settings)),
            train_sft(store, TrainSettings(out_dir=str(tmp_path / "without"), **settings)))


@pytest.mark.slow
def test_a_pointer_loss_teaches_the_pointer_where_a_copied_value_is(circuit_base, chat_rows, tmp_path, store):
    """Beside the next-token loss, the attention of the pointer head on the earlier places of what the
    assistant copies (its instruction's date, a message id) rises; without it, the same steps hardly move it."""
    taught, plain = _trained_with_and_without(circuit_base, chat_rows, tmp_path, store, pointer_loss=1.0)
    logged = [entry["pointer_loss"] for entry in taught.metrics["losses"]]
    assert len(logged) == len(taught.metrics["losses"]) and logged[-1] < logged[0]
    assert all("pointer_loss" not in entry for entry in plain.metrics["losses"])
    before = _pointer_loss(circuit_base, chat_rows)
    after, without = _pointer_loss(taught.model_dir, chat_rows), _pointer_loss(plain.model_dir, chat_rows)
    assert after < before - 1.0 and after < without - 0.5, (before, after, without)
    assert _held_and_free(_state(circuit_base), _state(taught.model_dir), _masks_by_name(circuit_base))[0] == 0.0


def _loss_at_stops(model_dir, rows) -> float:
    """A model's mean cross-entropy at the copy stops of the assistant's tokens of ``rows``."""
    model, tokenizer = _load(model_dir)
    content, losses = content_tokens(tokenizer), []
    for row in rows:
        rendered = tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=True, return_dict=True,
                                                 return_assistant_tokens_mask=True)
        ids = rendered["input_ids"]
        stops = copy_stops(ids, [bool(m) for m in rendered["assistant_masks"]], content)
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0]
        losses += torch.nn.functional.cross_entropy(logits[[t - 1 for t in stops]], torch.tensor(ids)[stops],
                                                    reduction="none").tolist()
    assert losses, "the rows have no copy stops"
    return sum(losses) / len(losses)


@pytest.mark.slow
def test_a_stop_weight_teaches_where_a_copy_stops(circuit_base, chat_rows, tmp_path, store):
    """The same steps with the tokens where a copy stops counted eight times: the model's loss at those
    tokens falls further than without, and the run records its weight."""
    weighted, plain = _trained_with_and_without(circuit_base, chat_rows, tmp_path, store, stop_weight=8.0)
    before = _loss_at_stops(circuit_base, chat_rows)
    after, without = _loss_at_stops(weighted.model_dir, chat_rows), _loss_at_stops(plain.model_dir, chat_rows)
    assert after < without < before, (before, without, after)
    assert sorted(run.config["stop_weight"] for run in store.training_runs("sft")) == [1.0, 8.0]


def test_a_circuit_too_narrow_or_on_a_checkpoint_is_refused_by_name(tmp_path, chat_rows):
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in chat_rows))
    narrow = runner.invoke(app, ["model", "init-tiny", "--data", str(data), "--out", str(tmp_path / "m"),
                                 "--copy-circuit", "--hidden-size", "128"])
    assert narrow.exit_code == 2, narrow.output
    assert "--copy-circuit" in narrow.output and "at least 160" in narrow.output
    on_base = runner.invoke(app, ["model", "init-tiny", "--copy-circuit", "--base", str(tmp_path)])
    assert on_base.exit_code == 2 and "--base" in on_base.output
    assert not (tmp_path / "m").exists()
    built = runner.invoke(app, ["model", "init-tiny", "--data", str(data), "--out", str(tmp_path / "m"),
                                "--copy-circuit", "--vocab-size", "400", "--json"])
    assert built.exit_code == 0, built.output
    assert json.loads((tmp_path / "m" / "config.json").read_text())["n_embd"] == 192  # the circuit's default width


@pytest.mark.slow
def test_vllm_serves_the_circuit_as_it_runs_in_process(circuit_base, vllm_interpreter):
    """GPT-2 is among vLLM's architectures: greedy continuations of repeated random spans are the same
    tokens served as in process, and the server takes the model's full context (n_positions)."""
    model, tokenizer = _load(circuit_base)
    rng = random.Random(3)
    prompts = []
    for _ in range(4):
        def tokens(n):
            return [rng.randrange(20, len(tokenizer)) for _ in range(n)]

        span = tokens(24)
        prompts.append(tokens(30) + span + tokens(10) + span[:4])
    settings = VLLMSettings(python=vllm_interpreter, optimization_level=0)
    with vllm_server(circuit_base, "circuit", settings=settings) as url:
        served_len = httpx.get(f"{url}/models", timeout=10).json()["data"][0]["max_model_len"]
        for prompt in prompts:
            with torch.no_grad():
                local = model.generate(torch.tensor([prompt]), max_new_tokens=12, do_sample=False)[0][len(prompt):]
            reply = httpx.post(f"{url}/completions", timeout=60, json={
                "model": "circuit", "prompt": prompt, "max_tokens": 12, "temperature": 0, "return_token_ids": True})
            assert reply.json()["choices"][0]["token_ids"] == local.tolist()
    assert served_len == model.config.n_positions == 4096

"""Real TRL steps on a tiny Qwen3: SFT and DPO change the parameters, keep the loss finite, resume,
and are recorded in the store."""

import json
import math
import sys

import pytest

pytest.importorskip("trl", reason="needs the 'train' extra")

import torch
from transformers import AutoModelForCausalLM

from coworkenv.trainer import TinyConfig, TrainingUnavailable, TrainSettings, init_tiny_model, train_dpo, train_sft
from coworkenv.trainer._train import TrainProgress, check_reporters

TINY = TinyConfig(vocab_size=500, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                  num_attention_heads=2, num_key_value_heads=1, head_dim=32)


def _weights(path) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in AutoModelForCausalLM.from_pretrained(path).state_dict().items()}


def _changed(before, after) -> bool:
    return any(not torch.equal(before[k], after[k]) for k in before)


@pytest.fixture(scope="module")
def base(tmp_path_factory, chat_rows):
    return init_tiny_model(chat_rows, tmp_path_factory.mktemp("base") / "tiny", TINY)


@pytest.fixture
def sft_data(tmp_path, chat_rows):
    path = tmp_path / "sft.jsonl"
    path.write_text("".join(json.dumps({**row, "capability": "lookup" if i % 2 else "single_write"}) + "\n"
                            for i, row in enumerate(chat_rows)))
    return path


def _dpo_rows(chat_rows):
    rows = []
    for row in chat_rows:
        prompt, rest = row["messages"][:2], row["messages"][2:]
        rows.append({"prompt": prompt, "chosen": rest, "tools": row["tools"],
                     "rejected": [{"role": "assistant", "content": "Done, I looked into it."}]})
    return rows


def test_sft_steps_change_parameters_are_recorded_and_resume(base, sft_data, tmp_path, store):
    settings = TrainSettings(model=str(base), data=str(sft_data), out_dir=str(tmp_path / "run"), max_steps=3,
                             batch_size=2, save_steps=2, logging_steps=1, warmup_steps=0, learning_rate=1e-2)
    events: list[TrainProgress] = []
    result = train_sft(store, settings, on_progress=events.append)
    assert result.metrics["steps"] == 3 and all(math.isfinite(x["loss"]) for x in result.metrics["losses"])
    # progress: prepared, begun, then every step, with the loss and learning rate of each logged one
    assert [(e.event, e.step) for e in events] == [
        ("prepare", 0), ("begin", 0), ("step", 1), ("log", 1), ("step", 2), ("log", 2), ("step", 3), ("log", 3),
        ("end", 3)]
    assert events[0].rows == 12 and all(e.kind == "sft" and e.max_steps == 3 for e in events)
    logged = [e for e in events if e.event == "log"]
    assert [e.loss for e in logged] == [x["loss"] for x in result.metrics["losses"]]
    assert all(e.learning_rate is not None and e.eta_seconds is not None and e.seconds > 0 for e in logged)
    assert logged[-1].eta_seconds == 0
    assert _changed(_weights(base), _weights(result.model_dir))
    (run,) = store.training_runs("sft")
    assert run.status == "done" and run.rows == 12 and run.output_dir == str(result.model_dir)
    assert len(run.data_hash) == 64 and run.config["max_steps"] == 3
    assert run.metrics["final_loss"] == result.metrics["final_loss"]
    assert store.training_run(run.id) == run
    # the same output folder with more steps resumes from the last checkpoint
    events.clear()
    again = train_sft(store, settings.model_copy(update={"max_steps": 4}), on_progress=events.append)
    assert again.metrics["resumed_from"].endswith("checkpoint-3") and again.metrics["steps"] == 4
    begin = next(e for e in events if e.event == "begin")
    assert (begin.step, begin.first_step, begin.max_steps) == (3, 3, 4)
    assert [r.status for r in store.training_runs("sft")] == ["done", "done"]


def test_sft_loss_on_every_token_is_a_setting_of_the_run(base, sft_data, tmp_path, store):
    def first_loss(name: str, assistant_only: bool) -> float:
        settings = TrainSettings(model=str(base), data=str(sft_data), out_dir=str(tmp_path / name), max_steps=1,
                                 batch_size=4, logging_steps=1, warmup_steps=0, assistant_only_loss=assistant_only)
        return train_sft(store, settings).metrics["first_loss"]

    # the same untrained model, the same first batch: only the tokens the loss counts differ
    assistant, every = first_loss("assistant", True), first_loss("all", False)
    assert math.isfinite(every) and every != pytest.approx(assistant, rel=1e-3)
    configs = [r.config for r in store.training_runs("sft")]
    assert sorted(c["assistant_only_loss"] for c in configs) == [False, True]


def test_sft_plain_and_fused_lm_head_give_the_same_loss(base, sft_data, tmp_path, store):
    def losses(name: str, fused: bool, assistant_only: bool) -> list[float]:
        settings = TrainSettings(model=str(base), data=str(sft_data), out_dir=str(tmp_path / name), max_steps=2,
                                 batch_size=4, logging_steps=1, warmup_steps=0, learning_rate=1e-2,
                                 fused_lm_head=fused, assistant_only_loss=assistant_only)
        return [x["loss"] for x in train_sft(store, settings).metrics["losses"]]

    # the tiny model's default is the plain cross-entropy; TRL's chunked head computes the same loss,
    # over the assistant's tokens or every token, and so takes the same first step
    for assistant_only in (True, False):
        plain = losses(f"plain-{assistant_only}", False, assistant_only)
        fused = losses(f"fused-{assistant_only}", True, assistant_only)
        assert plain == pytest.approx(fused, rel=1e-4) and all(math.isfinite(x) for x in plain)
    configs = [r.config for r in store.training_runs("sft")]
    assert sorted(c["fused_lm_head"] for c in configs) == [False, False, True, True]


def test_sft_in_bf16_takes_the_fp32_steps_to_bf16_precision_and_saves_fp32_weights(base, sft_data, tmp_path, store):
    def run(name: str, bf16: bool):
        settings = TrainSettings(model=str(base), data=str(sft_data), out_dir=str(tmp_path / name), max_steps=2,
                                 batch_size=4, logging_steps=1, warmup_steps=0, learning_rate=1e-2, bf16=bf16)
        return train_sft(store, settings)

    fp32, bf16 = run("fp32", False), run("bf16", True)
    # autocast computes the products in bfloat16: the same batches give losses within its precision, not equal ones
    fp32_losses, bf16_losses = ([x["loss"] for x in r.metrics["losses"]] for r in (fp32, bf16))
    assert bf16_losses == pytest.approx(fp32_losses, rel=2e-2) and bf16_losses != fp32_losses
    weights = _weights(bf16.model_dir)
    assert _changed(_weights(base), weights) and all(w.dtype == torch.float32 for w in weights.values())
    assert sorted(r.config["bf16"] for r in store.training_runs("sft")) == [False, True]


def test_sft_with_frozen_attention_keeps_the_bases_attention_and_trains_the_rest(base, sft_data, tmp_path, store):
    settings = TrainSettings(model=str(base), data=str(sft_data), out_dir=str(tmp_path / "frozen"), max_steps=2,
                             batch_size=2, warmup_steps=0, learning_rate=1e-2, freeze_attention=True)
    before, after = _weights(base), _weights(train_sft(store, settings).model_dir)
    attention = [k for k in before if ".self_attn." in k]
    assert attention and all(torch.equal(before[k], after[k]) for k in attention)
    assert any(not torch.equal(before[k], after[k]) for k in before if ".mlp." in k)


def test_sft_with_lora_saves_an_adapter_and_a_merged_model(base, sft_data, tmp_path, store):
    settings = TrainSettings(model=str(base), data=str(sft_data), out_dir=str(tmp_path / "lora"), max_steps=2,
                             batch_size=2, warmup_steps=0, learning_rate=1e-2, lora=True, lora_r=4, lora_alpha=8,
                             capabilities=["lookup"])
    result = train_sft(store, settings)
    assert (tmp_path / "lora" / "adapter" / "adapter_config.json").exists()
    assert _changed(_weights(base), _weights(result.model_dir))
    assert store.training_runs("sft")[0].rows == 6  # only the lookup rows


def test_dpo_steps_change_parameters_and_are_recorded(base, tmp_path, store, chat_rows):
    data = tmp_path / "dpo.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _dpo_rows(chat_rows)))
    settings = TrainSettings(model=str(base), data=str(data), out_dir=str(tmp_path / "dpo"), max_steps=2,
                             batch_size=2, warmup_steps=0, learning_rate=1e-2, logging_steps=1, report_to="tensorboard")
    result = train_dpo(store, settings)
    assert all(math.isfinite(x["loss"]) for x in result.metrics["losses"]) and result.metrics["steps"] == 2
    assert _changed(_weights(base), _weights(result.model_dir))
    (run,) = store.training_runs("dpo")
    assert run.status == "done" and run.rows == 12 and run.config["report_to"] == ["tensorboard"]
    # TensorBoard's event files are in the run folder, with the logged losses
    assert result.metrics["tensorboard_dir"] == str(tmp_path / "dpo" / "tensorboard")
    assert [(step, loss) for step, loss in _scalars(tmp_path / "dpo" / "tensorboard", "train/loss")] == [
        (x["step"], pytest.approx(x["loss"])) for x in result.metrics["losses"]]


def _scalars(logdir, tag: str) -> list[tuple[int, float]]:
    accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    events = accumulator.EventAccumulator(str(logdir))
    events.Reload()
    return [(e.step, e.value) for e in events.Scalars(tag)]


def test_trackers_are_checked_before_a_run_is_recorded(base, sft_data, tmp_path, store, monkeypatch):
    settings = TrainSettings(model=str(base), data=str(sft_data), out_dir=str(tmp_path / "run"), max_steps=1,
                             report_to="none,tensorboard")
    assert settings.report_to == ["tensorboard"] and TrainSettings(model="m", data="d", out_dir="o",
                                                                   report_to=["none"]).report_to == []
    with pytest.raises(ValueError, match="unknown --report-to 'tensorbored'; choose from: none, all, .*tensorboard"):
        check_reporters(["tensorbored"])
    for module in ("tensorboard", "tensorboardX"):  # as on a machine without them
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(TrainingUnavailable, match="--report-to tensorboard needs the tensorboard package: "
                                                  "pip install tensorboard"):
        train_sft(store, settings)
    assert store.training_runs() == [] and not (tmp_path / "run").exists()


def test_bad_training_input_is_named_and_failed_runs_are_recorded(base, tmp_path, store, sft_data):
    with pytest.raises(FileNotFoundError, match="no dataset"):
        train_sft(store, TrainSettings(model=str(base), data=str(tmp_path / "none.jsonl"), out_dir=str(tmp_path)))
    with pytest.raises(FileNotFoundError, match="not a model folder"):
        train_sft(store, TrainSettings(model=str(tmp_path), data=str(sft_data), out_dir=str(tmp_path / "x")))
    with pytest.raises(ValueError, match="capabilities"):
        train_sft(store, TrainSettings(model=str(base), data=str(sft_data), out_dir=str(tmp_path / "x"),
                                       capabilities=["telepathy"]))
    with pytest.raises(ValueError, match="not a DPO pair"):
        train_dpo(store, TrainSettings(model=str(base), data=str(sft_data), out_dir=str(tmp_path / "y"), max_steps=1))
    assert [r.status for r in store.training_runs("dpo")] == ["failed"]
    assert "not a DPO pair" in store.training_runs("dpo")[0].error


def test_sft_value_swaps_add_variants_of_the_rows(base, chat_rows, tmp_path, store):
    titles = ["Harbor", "Quarry", "Tundra", "Meadow", "Canyon", "Lagoon", "Summit", "Prairie", "Glacier", "Estuary",
              "Orchard", "Fjord"]
    data = tmp_path / "sft.jsonl"  # rows whose title (copied from the instruction) differs
    data.write_text("".join(json.dumps(row).replace("Lunch", title) + "\n" for row, title in zip(chat_rows, titles, strict=True)))
    settings = TrainSettings(model=str(base), data=str(data), out_dir=str(tmp_path / "swaps"), max_steps=2,
                             batch_size=4, logging_steps=1, warmup_steps=0, value_swaps=1)
    events: list[TrainProgress] = []
    result = train_sft(store, settings, on_progress=events.append)
    assert all(math.isfinite(x["loss"]) for x in result.metrics["losses"])
    assert events[0].rows == 24  # the 12 rows of the file and a variant of each
    (run,) = store.training_runs("sft")
    assert run.rows == 24 and run.config["value_swaps"] == 1
    with pytest.raises(ValueError, match="value_swaps"):
        TrainSettings(model=str(base), data=str(data), out_dir=str(tmp_path / "bad"), value_swaps=-1)

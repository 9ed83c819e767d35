"""Training with TRL: SFT on exported trajectories, DPO on repaired-versus-failed pairs.

``train_sft(store, settings)`` and ``train_dpo(store, settings)`` run TRL's ``SFTTrainer`` /
``DPOTrainer`` on a JSON-lines export, record the run in the store's ``training_runs`` table
(config, data hash, metrics, and the final model folder as ``output_dir``), write checkpoints under ``OUT/checkpoints`` and the
final model under ``OUT/model`` (with ``lora``: the adapter under ``OUT/adapter`` and the merged
model under ``OUT/model``). A run started again on the same ``OUT`` resumes from its last
checkpoint.

Datasets keep tool-call arguments and tool lists as JSON strings: a plain ``datasets.Dataset``
would merge differing argument dicts into one struct (and the template would then render
``null`` for arguments a call never had).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..store import Store
from ._model import read_rows, require_training


class TrainSettings(BaseModel):
    """Settings of one training run (SFT or DPO); stored with the run."""

    model: str  # a model folder (``coworkenv model init-tiny`` output, a checkpoint, a trained run's model/)
    data: str  # the JSON-lines export
    out_dir: str
    max_steps: int = Field(default=300, ge=1)
    batch_size: int = Field(default=8, ge=1)
    grad_accum: int = Field(default=1, ge=1)
    learning_rate: float = Field(default=3e-3, gt=0)
    warmup_steps: int = Field(default=20, ge=0)
    max_length: int = Field(default=2048, ge=16)
    save_steps: int = Field(default=100, ge=1)
    logging_steps: int = Field(default=10, ge=1)
    seed: int = 0
    lora: bool = False
    lora_r: int = Field(default=16, ge=1)
    lora_alpha: int = Field(default=32, ge=1)
    beta: float = Field(default=0.1, gt=0)  # DPO only
    capabilities: list[str] = Field(default_factory=list)  # train only on rows of these (all when empty)
    # SFT: loss on the assistant's tokens only (True), or on every token of the conversation (False:
    # a model trained from scratch then also learns from the tool results, which echo the values of
    # the calls, how to copy a value from its context)
    assistant_only_loss: bool = True
    # SFT: TRL's chunked LM head, which never builds the full logits (memory on large vocabularies).
    # None: on for vocabularies of FUSED_HEAD_MIN_VOCAB tokens or more; a tiny model's logits are
    # small, and on a CPU the plain cross-entropy runs a step about 1.6x faster
    fused_lm_head: bool | None = None
    resume: bool = True


FUSED_HEAD_MIN_VOCAB = 32_768


@dataclass
class TrainResult:
    run_id: str
    kind: str
    model_dir: Path
    metrics: dict[str, Any] = field(default_factory=dict)


def file_hash(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _message(m: dict[str, Any]) -> dict[str, Any]:
    out = {"role": m["role"], "content": m.get("content") or ""}
    if m.get("tool_calls"):
        out["tool_calls"] = [
            {"type": "function", "function": {
                "name": c["function"]["name"],
                "arguments": c["function"]["arguments"] if isinstance(c["function"]["arguments"], str)
                else json.dumps(c["function"]["arguments"]),
            }}
            for c in m["tool_calls"]
        ]
    return out


def _select(rows: list[dict[str, Any]], settings: TrainSettings) -> list[dict[str, Any]]:
    if settings.capabilities:
        rows = [r for r in rows if r.get("capability") in settings.capabilities]
    if not rows:
        which = f" of capabilities {settings.capabilities}" if settings.capabilities else ""
        raise ValueError(f"no training rows{which} in {settings.data}")
    return rows


def sft_dataset(rows: list[dict[str, Any]]):
    """SFT rows as a ``datasets.Dataset`` of ``messages`` and ``tools`` (a JSON string)."""
    from datasets import Dataset

    for n, row in enumerate(rows, 1):
        if not isinstance(row.get("messages"), list) or not any(m.get("role") == "assistant" for m in row["messages"]):
            raise ValueError(f"row {n} is not an SFT row: it needs `messages` with an assistant turn")
    return Dataset.from_list([
        {"messages": [_message(m) for m in row["messages"]], "tools": json.dumps(row.get("tools") or [])}
        for row in rows
    ])


def dpo_dataset(rows: list[dict[str, Any]]):
    """DPO rows as a ``datasets.Dataset`` of conversational ``prompt``/``chosen``/``rejected``."""
    from datasets import Dataset

    for n, row in enumerate(rows, 1):
        missing = [k for k in ("prompt", "chosen", "rejected") if not isinstance(row.get(k), list)]
        if missing:
            raise ValueError(f"row {n} is not a DPO pair: missing {', '.join(missing)}")
    return Dataset.from_list([
        {"prompt": [_message(m) for m in row["prompt"]], "chosen": [_message(m) for m in row["chosen"]],
         "rejected": [_message(m) for m in row["rejected"]], "tools": json.dumps(row.get("tools") or [])}
        for row in rows
    ])


def _last_checkpoint(checkpoints: Path) -> str | None:
    found = sorted(checkpoints.glob("checkpoint-*"), key=lambda p: int(p.name.rsplit("-", 1)[1]))
    return str(found[-1]) if found else None


def _common_args(settings: TrainSettings) -> dict[str, Any]:
    return dict(
        output_dir=str(Path(settings.out_dir) / "checkpoints"),
        max_steps=settings.max_steps,
        per_device_train_batch_size=settings.batch_size,
        gradient_accumulation_steps=settings.grad_accum,
        learning_rate=settings.learning_rate,
        warmup_steps=settings.warmup_steps,
        lr_scheduler_type="cosine",
        logging_steps=min(settings.logging_steps, settings.max_steps),  # a short run still logs its loss
        save_steps=settings.save_steps,
        save_total_limit=2,
        seed=settings.seed,
        max_length=settings.max_length,
        bf16=False,  # fp32 on the CPU: tiny models, exact losses
        gradient_checkpointing=False,
        report_to="none",
        dataloader_num_workers=0,
        dataloader_pin_memory=False,
        disable_tqdm=True,
    )


def _lora_config(settings: TrainSettings):
    from peft import LoraConfig

    return LoraConfig(r=settings.lora_r, lora_alpha=settings.lora_alpha, lora_dropout=0.0,
                      target_modules="all-linear", task_type="CAUSAL_LM")


def _finish(trainer, settings: TrainSettings, tokenizer) -> dict[str, Any]:
    out = Path(settings.out_dir)
    model = trainer.model
    if settings.lora:
        model.save_pretrained(out / "adapter")
        tokenizer.save_pretrained(out / "adapter")
        model = model.merge_and_unload()
    model.save_pretrained(out / "model")
    tokenizer.save_pretrained(out / "model")
    history = [h for h in trainer.state.log_history if "loss" in h]
    return {
        "steps": trainer.state.global_step,
        "losses": [{"step": h["step"], "loss": h["loss"]} for h in history],
        "first_loss": history[0]["loss"] if history else None,
        "final_loss": history[-1]["loss"] if history else None,
    }


def _run(store: Store | None, kind: Literal["sft", "dpo"], settings: TrainSettings, build) -> TrainResult:
    require_training()
    rows = _select(read_rows(settings.data), settings)
    if not (Path(settings.model) / "config.json").exists():
        raise FileNotFoundError(f"{settings.model} is not a model folder (no config.json);"
                                " create one with `coworkenv model init-tiny`")
    run_id = None
    if store is not None:
        run_id = store.start_training_run({
            "kind": kind, "base_model": str(settings.model), "data_path": str(settings.data),
            "data_hash": file_hash(settings.data), "rows": len(rows), "config": settings.model_dump_json(),
            "output_dir": str(Path(settings.out_dir) / "model"),  # what serve-model RUN serves
        })
    started = time.perf_counter()
    try:
        from transformers import PrinterCallback

        trainer, tokenizer = build(rows)
        trainer.remove_callback(PrinterCallback)  # no log dicts on stdout; losses are in the metrics
        resume = _last_checkpoint(Path(settings.out_dir) / "checkpoints") if settings.resume else None
        trainer.train(resume_from_checkpoint=resume)
        metrics = _finish(trainer, settings, tokenizer)
        metrics.update(seconds=round(time.perf_counter() - started, 2), resumed_from=resume, rows=len(rows))
        if metrics["final_loss"] is not None and not math.isfinite(metrics["final_loss"]):
            raise FloatingPointError(f"the {kind} loss diverged ({metrics['final_loss']})")
    except BaseException as exc:
        if store is not None and run_id is not None:
            store.end_training_run(run_id, status="failed", error=f"{type(exc).__name__}: {exc}")
        raise
    if store is not None and run_id is not None:
        store.end_training_run(run_id, status="done", metrics=metrics)
    return TrainResult(run_id or "", kind, Path(settings.out_dir) / "model", metrics)


def _load(settings: TrainSettings):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(settings.model, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(settings.model, local_files_only=True, dtype="float32")
    return model, tokenizer


def _plain_loss_trainer():
    """``SFTTrainer`` with the model's own loss over its full logits (no fused LM head).

    The loss is the same: the summed cross-entropy of the labelled tokens (the assistant's, with
    ``assistant_only_loss``) divided by their number in the batch.
    """
    from trl import SFTTrainer  # pyright: ignore[reportPrivateImportUsage]  # trl's lazy exports

    class PlainLossSFTTrainer(SFTTrainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            outputs = model(input_ids=inputs["input_ids"], attention_mask=inputs.get("attention_mask"),
                            labels=inputs["labels"], num_items_in_batch=num_items_in_batch, use_cache=False)
            return (outputs.loss, outputs) if return_outputs else outputs.loss

    return PlainLossSFTTrainer


def train_sft(store: Store | None, settings: TrainSettings) -> TrainResult:
    """Supervised fine-tuning on ``messages`` + ``tools`` rows, loss on assistant tokens only."""

    def build(rows):
        from trl import SFTConfig, SFTTrainer  # pyright: ignore[reportPrivateImportUsage]

        model, tokenizer = _load(settings)
        fused = settings.fused_lm_head
        if fused is None:
            fused = model.config.get_text_config().vocab_size >= FUSED_HEAD_MIN_VOCAB
        trainer_class = SFTTrainer if fused else _plain_loss_trainer()
        config = SFTConfig(**_common_args(settings), assistant_only_loss=settings.assistant_only_loss, packing=False)
        trainer = trainer_class(model=model, args=config, train_dataset=sft_dataset(rows), processing_class=tokenizer,
                                peft_config=_lora_config(settings) if settings.lora else None)
        return trainer, tokenizer

    return _run(store, "sft", settings, build)


def train_dpo(store: Store | None, settings: TrainSettings) -> TrainResult:
    """Direct preference optimisation on repaired (chosen) versus failed (rejected) continuations."""

    def build(rows):
        from trl import DPOConfig, DPOTrainer  # pyright: ignore[reportPrivateImportUsage]

        model, tokenizer = _load(settings)
        config = DPOConfig(**_common_args(settings), beta=settings.beta)
        trainer = DPOTrainer(model=model, args=config, train_dataset=dpo_dataset(rows), processing_class=tokenizer,
                             peft_config=_lora_config(settings) if settings.lora else None)
        return trainer, tokenizer

    return _run(store, "dpo", settings, build)

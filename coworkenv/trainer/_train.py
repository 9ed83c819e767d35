"""Training with TRL: SFT on exported trajectories, DPO on repaired-versus-failed pairs.

``train_sft(store, settings)`` and ``train_dpo(store, settings)`` run TRL's ``SFTTrainer`` /
``DPOTrainer`` on a JSON-lines export, record the run in the store's ``training_runs`` table
(config, data hash, metrics, and the final model folder as ``output_dir``), write checkpoints under ``OUT/checkpoints`` and the
final model under ``OUT/model`` (with ``lora``: the adapter under ``OUT/adapter`` and the merged
model under ``OUT/model``). A run started again on the same ``OUT`` resumes from its last
checkpoint.

Progress: ``on_progress`` (a function of a ``TrainProgress``) hears when the run prepares, begins,
ends a step and logs a loss, so that a caller can show a bar; the library itself prints nothing.
``report_to`` names the trackers transformers reports the logs to (``tensorboard`` writes its
event files under ``OUT/tensorboard``); a tracker whose package is missing is refused before the run
is recorded.

Datasets keep tool-call arguments and tool lists as JSON strings: a plain ``datasets.Dataset``
would merge differing argument dicts into one struct (and the template would then render
``null`` for arguments a call never had).
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from ..store import Store
from ._chat_template import tojson
from ._circuit import CONFIG_KEY as CIRCUIT_KEY
from ._circuit import PointerLoss, content_tokens, copy_stops, hold_circuit, pointer_heads
from ._model import TrainingError, TrainingUnavailable, read_rows, require_training
from ._pretrain_data import replay_rows
from ._swaps import swapped_rows


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
    max_minutes: float | None = Field(default=None, gt=0)  # stop at the first step end past this wall time
    capabilities: list[str] = Field(default_factory=list)  # train only on rows of these (all when empty)
    # SFT: loss on the assistant's tokens only (True), or on every token of the conversation (False:
    # a model trained from scratch then also learns from the tool results, which echo the values of
    # the calls, how to copy a value from its context)
    assistant_only_loss: bool = True
    # SFT: for each row, this many variants with the values its assistant copies swapped for other values
    # of the data, everywhere in the row (``swapped_rows``): answering them needs copying, not recall;
    # for a model trained from scratch, which must learn to copy values (benchmarks/loop.md)
    value_swaps: int = Field(default=0, ge=0)
    # SFT: reading-and-copying exercises of the base's pretraining (``_pretrain_data``, over workspaces no
    # task uses) mixed in, this many per task row: a pretrained base keeps what it was pretrained for
    # while it learns the tools, instead of unlearning it in the first hundred steps (benchmarks/loop.md)
    replay: float = Field(default=0.0, ge=0)
    # SFT: the attention layers kept as the base has them (only embeddings, MLPs and norms train): a
    # base's copying heads, which a few hundred SFT steps on a few hundred rows erase (benchmarks/loop.md)
    freeze_attention: bool = False
    # a base with a copying circuit (``model init-tiny --copy-circuit``): its weights held as built (a mask on
    # their gradients), so that training learns around the circuit instead of erasing it (benchmarks/loop.md)
    hold_circuit: bool = True
    # SFT, with a base whose circuit has pointer heads: the weight of a loss on where they look (``PointerLoss``:
    # at each span the assistant copies out of its context, from its first token on, the attention on the
    # span's earlier places), beside the next-token loss. 0: none
    pointer_loss: float = Field(default=0.0, ge=0)
    # SFT: the weight of the next-token loss at the tokens where a copy stops (``copy_stops``: the pair before
    # stood earlier in the context and went on otherwise there, e.g. a value's closing quote after a name
    # copied out of a sentence), against 1 for every other token. 1: no token weighted
    stop_weight: float = Field(default=1.0, ge=0)
    # SFT: batches of rows of about the same length (transformers' length-grouped sampler): less padding
    group_by_length: bool = True
    # mixed precision: matrix products in bfloat16 (torch.autocast), weights and optimizer in fp32
    bf16: bool = False
    # SFT: TRL's chunked LM head, which never builds the full logits (memory on large vocabularies).
    # None: on for vocabularies of FUSED_HEAD_MIN_VOCAB tokens or more; a tiny model's logits are
    # small, and on a CPU the plain cross-entropy runs a step about 1.6x faster
    fused_lm_head: bool | None = None
    resume: bool = True
    # trackers transformers reports the logs to (see REPORTERS); empty: none. ``all``: every one installed
    report_to: list[str] = Field(default_factory=list)

    @field_validator("report_to", mode="before")
    @classmethod
    def _reporters(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [value]
        if isinstance(value, list):
            names = [n.strip().lower() for v in value for n in str(v).split(",") if n.strip()]
            return [n for n in dict.fromkeys(names) if n != "none"]
        return value


FUSED_HEAD_MIN_VOCAB = 32_768

# --report-to: trackers transformers reports to, with the packages each needs (their modules are
# named as pip names them). transformers knows a few more (azure_ml, flyte, kubeflow); those are
# passed through unchecked.
REPORTERS: dict[str, tuple[str, ...]] = {
    "tensorboard": ("tensorboard",), "wandb": ("wandb",), "mlflow": ("mlflow",), "trackio": ("trackio",),
    "comet_ml": ("comet_ml",), "neptune": ("neptune",), "clearml": ("clearml",), "dvclive": ("dvclive",),
    "swanlab": ("swanlab",), "codecarbon": ("codecarbon",), "dagshub": ("dagshub", "mlflow"),
}
TENSORBOARD_DIR = "tensorboard"  # under the run folder


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ValueError:  # a module in sys.modules without a spec
        return False


def check_reporters(names: list[str]) -> list[str]:
    """The trackers to report to (``all`` expanded to those installed); ``ValueError`` for a name
    transformers does not know, ``TrainingUnavailable`` naming the package to install for one whose
    package is missing."""
    require_training()
    from transformers.integrations.integration_utils import (
        INTEGRATION_TO_CALLBACK,
        get_available_reporting_integrations,
    )

    known = ["none", "all", *INTEGRATION_TO_CALLBACK]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise TrainingError(f"unknown --report-to {unknown[0]!r}; choose from: {', '.join(known)}")
    if "all" in names:
        names = list(dict.fromkeys([*(n for n in names if n != "all"), *get_available_reporting_integrations()]))
    for name in names:
        for package in REPORTERS.get(name, ()):
            if name == "tensorboard" and _installed("tensorboardX"):
                continue  # transformers' and our writer take tensorboardX too
            if not _installed(package):
                raise TrainingUnavailable(f"--report-to {name} needs the {package} package: pip install {package}")
    return names


@dataclass(frozen=True)
class TrainProgress:
    """Where a run is, for ``on_progress``: ``prepare`` (loading the model, tokenizing the rows),
    ``begin`` (the first step is next), ``step`` (a step ended), ``log`` (a loss was logged), ``end``."""

    kind: str  # sft | dpo
    event: Literal["prepare", "begin", "step", "log", "end"]
    step: int
    max_steps: int
    first_step: int = 0  # the step this run started from (a resumed run: its checkpoint's)
    loss: float | None = None  # the last logged loss
    learning_rate: float | None = None  # the last logged learning rate
    seconds: float = 0.0  # since the first step began
    rows: int = 0

    @property
    def eta_seconds(self) -> float | None:
        """The seconds left at the pace of this run's steps so far (None before a step ended)."""
        done = self.step - self.first_step
        return self.seconds / done * (self.max_steps - self.step) if done > 0 else None


ProgressHook = Callable[[TrainProgress], None]


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
                else tojson(c["function"]["arguments"]),
            }}
            for c in m["tool_calls"]
        ]
    return out


def _select(rows: list[dict[str, Any]], settings: TrainSettings) -> list[dict[str, Any]]:
    if settings.capabilities:
        rows = [r for r in rows if r.get("capability") in settings.capabilities]
    if not rows:
        which = f" of capabilities {settings.capabilities}" if settings.capabilities else ""
        raise TrainingError(f"no training rows{which} in {settings.data}")
    return rows


def sft_dataset(rows: list[dict[str, Any]]):
    """SFT rows as a ``datasets.Dataset`` of ``messages`` and ``tools`` (a JSON string)."""
    from datasets import Dataset

    for n, row in enumerate(rows, 1):
        if not isinstance(row.get("messages"), list) or not any(m.get("role") == "assistant" for m in row["messages"]):
            raise TrainingError(f"row {n} is not an SFT row: it needs `messages` with an assistant turn")
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
            raise TrainingError(f"row {n} is not a DPO pair: missing {', '.join(missing)}")
    return Dataset.from_list([
        {"prompt": [_message(m) for m in row["prompt"]], "chosen": [_message(m) for m in row["chosen"]],
         "rejected": [_message(m) for m in row["rejected"]], "tools": json.dumps(row.get("tools") or [])}
        for row in rows
    ])


def _last_checkpoint(checkpoints: Path) -> str | None:
    found = sorted(checkpoints.glob("checkpoint-*"), key=lambda p: int(p.name.rsplit("-", 1)[1]))
    return str(found[-1]) if found else None


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def bf16_is_fast() -> bool:
    """Whether this machine multiplies bfloat16 matrices in hardware: a CUDA GPU that supports it, or a CPU
    with bf16 matrix instructions (AMX or AVX512-BF16, as Linux lists them in /proc/cpuinfo). Where it does,
    ``TrainSettings(bf16=True)`` makes a step faster; elsewhere autocast would emulate bfloat16, slower."""
    import torch

    if _cuda():
        return torch.cuda.is_bf16_supported()
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return False
    return bool(flags & {"amx_bf16", "avx512_bf16"})


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
        logging_first_step=True,  # the untrained loss, at once
        save_steps=settings.save_steps,
        save_total_limit=2,
        seed=settings.seed,
        max_length=settings.max_length,
        bf16=settings.bf16,
        use_cpu=settings.bf16 and not _cuda(),  # transformers' bf16 on a CPU: torch.autocast("cpu")
        activation_checkpointing=False,  # (TRL defaults its deprecated alias gradient_checkpointing to True)
        report_to=[n for n in settings.report_to if n != "tensorboard"] or "none",  # tensorboard: _tensorboard
        dataloader_num_workers=0,
        dataloader_pin_memory=False,
        disable_tqdm=True,
    )


def _lora_config(r: int, alpha: int):
    from peft import LoraConfig

    return LoraConfig(r=r, lora_alpha=alpha, lora_dropout=0.0,
                      target_modules="all-linear", task_type="CAUSAL_LM")


def _tensorboard(out_dir: str):
    """transformers' TensorBoard callback writing under ``OUT/tensorboard`` (its default is a dated
    folder under the checkpoints, set only through an environment variable)."""
    from transformers.integrations.integration_utils import TensorBoardCallback

    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # tensorboardX instead
        from tensorboardX import SummaryWriter  # pyright: ignore[reportMissingImports]

    return TensorBoardCallback(tb_writer=SummaryWriter(log_dir=str(Path(out_dir) / TENSORBOARD_DIR)))


def _run_callback(kind: str, on_progress: ProgressHook | None, max_seconds: float | None = None):
    """A ``TrainerCallback`` that logs the last step's loss too (transformers logs every
    ``logging_steps`` only, so a run's final loss would be an earlier one), tells ``on_progress``
    where the run is, and ends the run (logged and checkpointed) at the first step that ends past
    ``max_seconds`` of training."""
    from transformers import TrainerCallback

    class RunCallback(TrainerCallback):
        def __init__(self) -> None:
            self.first_step = 0
            self.started = time.perf_counter()
            self.loss: float | None = None
            self.learning_rate: float | None = None
            self.out_of_time = False

        def _tell(self, event, state) -> None:
            if on_progress is None:
                return
            on_progress(TrainProgress(kind, event, state.global_step, state.max_steps, self.first_step, self.loss,
                                      self.learning_rate, time.perf_counter() - self.started))

        def on_train_begin(self, args, state, control, **kwargs):
            self.first_step, self.started = state.global_step, time.perf_counter()
            self._tell("begin", state)

        def on_step_end(self, args, state, control, **kwargs):
            if max_seconds is not None and time.perf_counter() - self.started >= max_seconds:
                self.out_of_time = control.should_training_stop = control.should_save = True
            if state.global_step >= state.max_steps or self.out_of_time:
                control.should_log = True
            self._tell("step", state)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                self.loss = float(logs["loss"])
                self.learning_rate = float(logs["learning_rate"]) if "learning_rate" in logs else self.learning_rate
                self._tell("log", state)

        def on_train_end(self, args, state, control, **kwargs):
            self._tell("end", state)

    return RunCallback()


def _finish(trainer, out_dir: str, lora: bool, tokenizer) -> dict[str, Any]:
    out = Path(out_dir)
    model = trainer.model
    if lora:
        model.save_pretrained(out / "adapter")
        tokenizer.save_pretrained(out / "adapter")
        model = model.merge_and_unload()
    model.save_pretrained(out / "model")
    tokenizer.save_pretrained(out / "model")
    history = [h for h in trainer.state.log_history if "loss" in h]
    return {
        "steps": trainer.state.global_step,
        "losses": [{key: h[key] for key in ("step", "loss", "pointer_loss") if key in h} for h in history],
        "first_loss": history[0]["loss"] if history else None,
        "final_loss": history[-1]["loss"] if history else None,
    }


def check_training(settings: TrainSettings) -> TrainSettings:
    """What a run needs before anything is recorded: the training extra, the data file, the model
    folder and the trackers' packages. Returns ``settings`` with ``report_to`` resolved; raises
    ``TrainingUnavailable``, ``FileNotFoundError`` or ``ValueError`` naming what is wrong."""
    require_training()
    if not Path(settings.data).is_file():
        raise FileNotFoundError(f"no dataset at {settings.data}")
    if not (Path(settings.model) / "config.json").exists():
        raise FileNotFoundError(f"{settings.model} is not a model folder (no config.json);"
                                " create one with `coworkenv model init-tiny`")
    if settings.pointer_loss > 0:
        check_pointer_heads(Path(settings.model))
        if settings.fused_lm_head:
            raise ValueError("--pointer-loss needs the plain LM head: drop --fused-lm-head")
    if settings.stop_weight != 1 and settings.fused_lm_head:
        raise ValueError("--stop-weight needs the plain LM head: drop --fused-lm-head")
    return settings.model_copy(update={"report_to": check_reporters(settings.report_to)})


def check_pointer_heads(model: Path) -> None:
    """Raise ``ValueError`` unless the model folder ``model`` has a circuit with pointer heads (what
    ``--pointer-loss`` trains)."""
    config = json.loads((model / "config.json").read_text(encoding="utf-8"))
    if pointer_heads(config.get(CIRCUIT_KEY)) is None:
        raise ValueError(f"--pointer-loss needs a base with pointer heads (`coworkenv model init-tiny "
                         f"--copy-circuit`); {model} has none")


@dataclass(frozen=True)
class RunRecord:
    """What a training run stores before it starts (its ``training_runs`` row) and where it writes."""

    kind: str
    settings: BaseModel  # stored as the run's config
    out_dir: str
    data_path: str
    data_hash: str
    rows: int
    lora: bool
    resume: bool
    report_to: list[str]
    max_steps: int
    max_minutes: float | None = None


def recorded_run(store: Store | None, record: RunRecord, build, *, on_progress: ProgressHook | None = None,
                 callbacks: tuple[Any, ...] = (), summarize=None) -> TrainResult:
    """Build a trainer (``build() -> (trainer, tokenizer)``), train it (resuming from the last
    checkpoint under ``OUT/checkpoints`` when asked), save the model and record the run in
    ``training_runs``: started before anything loads, ``done`` with its metrics (losses, steps,
    seconds, whether the time limit ended it, and whatever ``summarize(trainer)`` adds) or
    ``failed`` with the error. Every kind of run (SFT, DPO, GRPO, GDPO) goes through here."""
    if on_progress is not None:
        on_progress(TrainProgress(record.kind, "prepare", 0, record.max_steps, rows=record.rows))
    run_id = None
    if store is not None:
        store.interrupt_orphaned_runs()  # what a killed process left running (this folder's last run, say)
        run_id = store.start_training_run({
            "kind": record.kind, "base_model": str(getattr(record.settings, "model", "")),
            "data_path": record.data_path, "data_hash": record.data_hash, "rows": record.rows,
            "config": record.settings.model_dump_json(),
            "output_dir": str(Path(record.out_dir) / "model"),  # what serve-model RUN serves
        })
    started = time.perf_counter()
    try:
        from transformers import PrinterCallback

        trainer, tokenizer = build()
        dataset = getattr(trainer, "train_dataset", None)
        if dataset is not None and len(dataset) == 0:  # TRL dropped every row while preparing them
            raise TrainingError(
                f"none of the {record.rows} rows is left to train on once prepared: each must keep tokens to learn "
                f"from within --max-length {getattr(record.settings, 'max_length', '?')} (rows of the full view are "
                "long: export with --style compact or minimal, or raise --max-length)")
        trainer.remove_callback(PrinterCallback)  # no log dicts on stdout; losses are in the metrics
        if "tensorboard" in record.report_to:
            trainer.add_callback(_tensorboard(record.out_dir))
        for callback in callbacks:
            trainer.add_callback(callback)
        max_seconds = record.max_minutes * 60 if record.max_minutes is not None else None
        run_callback = _run_callback(record.kind, on_progress, max_seconds)
        trainer.add_callback(run_callback)
        resume = _last_checkpoint(Path(record.out_dir) / "checkpoints") if record.resume else None
        trainer.train(resume_from_checkpoint=resume)
        metrics = _finish(trainer, record.out_dir, record.lora, tokenizer)
        metrics.update(seconds=round(time.perf_counter() - started, 2), resumed_from=resume, rows=record.rows,
                       stopped_by_time_limit=run_callback.out_of_time)
        if summarize is not None:
            metrics.update(summarize(trainer))
        if "tensorboard" in record.report_to:
            metrics["tensorboard_dir"] = str(Path(record.out_dir) / TENSORBOARD_DIR)
        if metrics["final_loss"] is not None and not math.isfinite(metrics["final_loss"]):
            raise FloatingPointError(f"the {record.kind} loss diverged ({metrics['final_loss']})")
    except BaseException as exc:
        if store is not None and run_id is not None:  # Ctrl-C: interrupted (the same --out resumes it)
            stopped = isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError))
            store.end_training_run(run_id, status="interrupted" if stopped else "failed",
                                   error=f"{type(exc).__name__}: {exc}")
        raise
    if store is not None and run_id is not None:
        store.end_training_run(run_id, status="done", metrics=metrics)
    return TrainResult(run_id or "", record.kind, Path(record.out_dir) / "model", metrics)


def _run(store: Store | None, kind: Literal["sft", "dpo"], settings: TrainSettings, build,
         on_progress: ProgressHook | None, extra=None) -> TrainResult:
    settings = check_training(settings)
    rows = _select(read_rows(settings.data), settings)
    if extra is not None:
        rows = rows + extra(rows)
    record = RunRecord(kind, settings, settings.out_dir, str(settings.data), file_hash(settings.data), len(rows),
                       settings.lora, settings.resume, settings.report_to, settings.max_steps, settings.max_minutes)
    return recorded_run(store, record, lambda: build(rows), on_progress=on_progress)


def load_model(path: str, *, hold: bool = True):
    """A model folder's model (float32) and tokenizer, for training; a copying circuit the model carries
    is held (``hold_circuit``) unless ``hold`` is False."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype="float32")
    if hold:
        hold_circuit(model)
    return model, tokenizer


def stop_weighted_loss(logits, input_ids, labels, num_items_in_batch, stop_weight: float, content: list[bool]):
    """The causal LM loss (the summed cross-entropy of the labelled tokens over ``num_items_in_batch``, or
    their mean where it is None), with each token where a copy stops (``copy_stops``) counted
    ``stop_weight`` times. At a weight of 1 it is the model's own loss."""
    import torch

    targets = labels[:, 1:]
    # one row of logits a token (the class dimension last and contiguous): half the time of (batch, vocab, tokens)
    losses = torch.nn.functional.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]),
                                               targets.reshape(-1), reduction="none",
                                               ignore_index=-100).view(targets.shape)
    weights = torch.ones_like(losses)
    for row, (ids, marks) in enumerate(zip(input_ids.tolist(), labels.tolist(), strict=True)):
        stops = copy_stops(ids, [mark != -100 for mark in marks], content)
        weights[row, [t - 1 for t in stops]] = stop_weight
    count = num_items_in_batch if num_items_in_batch is not None else (targets != -100).sum()
    return (losses * weights).sum() / count


def _plain_loss_trainer(pointer: PointerLoss | None = None, weight: float = 0.0, *, stop_weight: float = 1.0,
                        content: list[bool] | None = None):
    """``SFTTrainer`` with the model's own loss over its full logits (no fused LM head).

    The loss is the same: the summed cross-entropy of the labelled tokens (the assistant's, with
    ``assistant_only_loss``) divided by their number in the batch, each token's counted ``stop_weight``
    times where a copy stops (``copy_stops``, with ``content`` the word-piece tokens); plus ``weight``
    times ``pointer``'s loss on where the pointer heads look, where one is given (logged as
    ``pointer_loss``; the logged ``loss`` is the sum trained on).
    """
    import contextlib

    from trl import SFTTrainer  # pyright: ignore[reportPrivateImportUsage]  # trl's lazy exports

    pointer_losses: list[float] = []  # since the last log
    weighted = stop_weight != 1

    class PlainLossSFTTrainer(SFTTrainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            with pointer.capture(model) if pointer is not None else contextlib.nullcontext():
                outputs = model(input_ids=inputs["input_ids"], attention_mask=inputs.get("attention_mask"),
                                labels=None if weighted else inputs["labels"], num_items_in_batch=num_items_in_batch,
                                use_cache=False)
            loss = outputs.loss
            if weighted:
                loss = stop_weighted_loss(outputs.logits, inputs["input_ids"], inputs["labels"], num_items_in_batch,
                                          stop_weight, content or [])
            if pointer is not None:
                extra = pointer(model, inputs["input_ids"], inputs["labels"])
                if extra is not None:
                    pointer_losses.append(float(extra.detach()))
                    # the next-token loss is divided by the tokens of all accumulated batches, not by their number
                    accumulated = self.args.gradient_accumulation_steps if num_items_in_batch is not None else 1
                    loss = loss + weight * extra / accumulated
            return (loss, outputs) if return_outputs else loss

        def log(self, logs, *args, **kwargs):
            if pointer_losses and "loss" in logs:
                logs["pointer_loss"] = round(sum(pointer_losses) / len(pointer_losses), 4)
                pointer_losses.clear()
            super().log(logs, *args, **kwargs)

    return PlainLossSFTTrainer


def train_sft(store: Store | None, settings: TrainSettings, *, on_progress: ProgressHook | None = None) -> TrainResult:
    """Supervised fine-tuning on ``messages`` + ``tools`` rows, loss on assistant tokens only."""

    return _run(store, "sft", settings, lambda rows: _sft_trainer(settings, rows), on_progress,
                extra=lambda rows: swapped_rows(rows, settings.value_swaps, seed=settings.seed)
                + replay_rows(round(len(rows) * settings.replay), seed=settings.seed))


def _sft_trainer(settings: TrainSettings, rows: list[dict[str, Any]]):
    from trl import SFTConfig, SFTTrainer  # pyright: ignore[reportPrivateImportUsage]

    model, tokenizer = load_model(settings.model, hold=settings.hold_circuit)
    if settings.freeze_attention:
        for name, parameter in model.named_parameters():
            if ".self_attn." in name:
                parameter.requires_grad_(False)
    fused = settings.fused_lm_head
    if fused is None:
        fused = model.config.get_text_config().vocab_size >= FUSED_HEAD_MIN_VOCAB
    pointer = PointerLoss(model, tokenizer) if settings.pointer_loss > 0 else None
    weighted = settings.stop_weight != 1
    fused = fused and pointer is None and not weighted  # the pointer loss and the weights need the plain loss
    trainer_class = SFTTrainer if fused else _plain_loss_trainer(
        pointer, settings.pointer_loss, stop_weight=settings.stop_weight,
        content=content_tokens(tokenizer) if weighted else None)
    config = SFTConfig(**_common_args(settings), assistant_only_loss=settings.assistant_only_loss, packing=False,
                       train_sampling_strategy="group_by_length" if settings.group_by_length else "random")
    trainer = trainer_class(model=model, args=config, train_dataset=sft_dataset(rows), processing_class=tokenizer,
                            peft_config=_lora_config(settings.lora_r, settings.lora_alpha) if settings.lora else None)
    return trainer, tokenizer


def sft_token_ids(model: str, rows: list[dict[str, Any]], *, max_length: int = 2048) -> list[list[int]]:
    """The token ids ``train sft`` trains ``model`` on for each of ``rows`` (SFT rows as exported),
    prepared by the same trainer and settings as a run, without training. What a server renders for
    the same conversation must equal these (``vllm``'s ``/tokenize`` shows what it renders)."""
    import tempfile

    require_training()
    with tempfile.TemporaryDirectory(prefix="coworkenv-tokens-") as out:
        settings = TrainSettings(model=model, data="", out_dir=out, max_length=max_length, max_steps=1)
        trainer, _ = _sft_trainer(settings, rows)
        dataset = trainer.train_dataset
        assert dataset is not None
        return [list(ids) for ids in dataset["input_ids"]]


def train_dpo(store: Store | None, settings: TrainSettings, *, on_progress: ProgressHook | None = None) -> TrainResult:
    """Direct preference optimisation on repaired (chosen) versus failed (rejected) continuations."""

    def build(rows):
        from trl import DPOConfig, DPOTrainer  # pyright: ignore[reportPrivateImportUsage]

        model, tokenizer = load_model(settings.model, hold=settings.hold_circuit)
        config = DPOConfig(**_common_args(settings), beta=settings.beta)
        trainer = DPOTrainer(model=model, args=config, train_dataset=dpo_dataset(rows), processing_class=tokenizer,
                             peft_config=_lora_config(settings.lora_r, settings.lora_alpha) if settings.lora else None)
        return trainer, tokenizer

    return _run(store, "dpo", settings, build, on_progress)

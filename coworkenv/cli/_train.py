"""``coworkenv model init-tiny`` and ``coworkenv train sft|dpo``: thin commands over coworkenv.trainer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console

from ..store import Store
from ..trainer import TinyConfig, TrainingUnavailable, TrainSettings, init_model, init_tiny_model, read_rows

model_app = typer.Typer(help="Create PocketWorker base models.", no_args_is_help=True)
train_app = typer.Typer(help="Train PocketWorker models with TRL.", no_args_is_help=True)
err = Console(stderr=True)


def quiet_training_logs() -> None:
    """No per-step progress bars and load reports from datasets/transformers on the console."""
    try:
        import datasets
        import transformers
    except ImportError:
        return
    datasets.disable_progress_bars()
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


def _fail(message: str) -> typer.Exit:
    err.print(f"[red]error:[/red] {message}")
    return typer.Exit(2)


@model_app.command("init-tiny")
def init_tiny_command(
    data: Annotated[Path, typer.Option(help="Exported SFT rows (JSON lines) the tokenizer is trained on.")] = Path(
        "runs/export/sft.jsonl"),
    out: Annotated[Path, typer.Option(help="Where the model folder goes.")] = Path("runs/models/tiny"),
    vocab_size: Annotated[int, typer.Option(min=300, help="BPE vocabulary size (before entity tokens).")] = 2048,
    hidden_size: Annotated[int, typer.Option(min=16)] = 128,
    intermediate_size: Annotated[int, typer.Option(min=16)] = 512,
    layers: Annotated[int, typer.Option(min=1)] = 2,
    heads: Annotated[int, typer.Option(min=1)] = 4,
    kv_heads: Annotated[int, typer.Option(min=1)] = 2,
    head_dim: Annotated[int, typer.Option(min=8)] = 32,
    seed: Annotated[int, typer.Option()] = 0,
    base: Annotated[Path | None, typer.Option(
        help="Instead of a tiny model, prepare this local checkpoint folder (e.g. a Qwen3-0.6B download).")] = None,
) -> None:
    """A tiny Qwen3 with a BPE tokenizer trained on the corpus and the ChatML/Hermes chat template."""
    quiet_training_logs()
    try:
        if base is not None:
            path = init_model(out, base=base)
        else:
            if heads % kv_heads:
                raise _fail(f"--heads ({heads}) must be a multiple of --kv-heads ({kv_heads})")
            config = TinyConfig(vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=intermediate_size,
                                num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                                head_dim=head_dim, seed=seed)
            path = init_tiny_model(read_rows(data), out, config)
    except (TrainingUnavailable, FileNotFoundError, ValueError) as exc:
        raise _fail(str(exc)) from None
    meta = json.loads((path / "coworkenv_model.json").read_text())
    err.print(f"wrote a {meta['kind']} model with {meta['parameters']:,} parameters to {path}")


def _train(kind: str, **options) -> None:
    from ..trainer import train_dpo, train_sft

    store = options.pop("store")
    quiet_training_logs()
    try:
        settings = TrainSettings(**options)
    except ValidationError as exc:
        raise _fail(str(exc)) from None
    try:
        result = (train_sft if kind == "sft" else train_dpo)(Store(store), settings)
    except (TrainingUnavailable, FileNotFoundError, ValueError) as exc:
        raise _fail(str(exc)) from None
    m = result.metrics
    err.print(f"{kind}: {m['steps']} steps, loss {m['first_loss']:.3f} → {m['final_loss']:.3f}, "
              f"{m['seconds']:.0f}s; model in {result.model_dir} (run {result.run_id})")


StoreOpt = Annotated[Path, typer.Option("--store", envvar="COWORKENV_STORE", help="The SQLite store (runs are recorded).")]
ModelOpt = Annotated[Path, typer.Option("--model", help="The model folder to start from.")]
OutOpt = Annotated[Path, typer.Option("--out", help="Run folder: checkpoints/, model/ (and adapter/ with --lora).")]
StepsOpt = Annotated[int, typer.Option("--steps", min=1, help="Optimizer steps.")]
BatchOpt = Annotated[int, typer.Option("--batch-size", min=1)]
LrOpt = Annotated[float, typer.Option("--lr", min=0.0)]
MaxLenOpt = Annotated[int, typer.Option("--max-length", min=16, help="Longer rows are truncated.")]
SaveOpt = Annotated[int, typer.Option("--save-steps", min=1, help="Checkpoint every this many steps.")]
LoraOpt = Annotated[bool, typer.Option("--lora", help="Train a LoRA adapter (peft) instead of all weights.")]
LoraROpt = Annotated[int, typer.Option("--lora-r", min=1)]
CapOpt = Annotated[list[str] | None, typer.Option("--capability", help="Train only on rows of this capability (repeatable).")]
ResumeOpt = Annotated[bool, typer.Option("--resume/--no-resume", help="Resume from the last checkpoint in --out.")]
SeedOpt = Annotated[int, typer.Option("--seed")]


@train_app.command("sft")
def train_sft_command(
    model: ModelOpt = Path("runs/models/tiny"),
    data: Annotated[Path, typer.Option(help="`coworkenv export sft` output.")] = Path("runs/export/sft.jsonl"),
    out: OutOpt = Path("runs/train/sft"),
    store: StoreOpt = Path("runs/coworkenv.db"),
    steps: StepsOpt = 300,
    batch_size: BatchOpt = 8,
    lr: LrOpt = 3e-3,
    max_length: MaxLenOpt = 2048,
    save_steps: SaveOpt = 100,
    lora: LoraOpt = False,
    lora_r: LoraROpt = 16,
    capability: CapOpt = None,
    resume: ResumeOpt = True,
    seed: SeedOpt = 0,
    loss_on: Annotated[str, typer.Option("--loss-on", help="assistant: loss on the assistant's tokens only; all: on "
                                         "every token (for a model trained from scratch, which then also learns "
                                         "from the tool results how values are copied).")] = "assistant",
    fused_lm_head: Annotated[bool | None, typer.Option(
        "--fused-lm-head/--plain-lm-head", help="TRL's chunked LM head, which never builds the full logits, or the "
        "plain cross-entropy (default: fused for vocabularies of 32k tokens or more).")] = None,
) -> None:
    """Supervised fine-tuning (TRL SFTTrainer), by default with loss on assistant tokens only."""
    if loss_on not in ("assistant", "all"):
        raise _fail(f"unknown --loss-on {loss_on!r}; choose one of: assistant, all")
    _train("sft", store=store, model=str(model), data=str(data), out_dir=str(out), max_steps=steps,
           batch_size=batch_size, learning_rate=lr, max_length=max_length, save_steps=save_steps, lora=lora,
           lora_r=lora_r, lora_alpha=2 * lora_r, capabilities=capability or [], resume=resume, seed=seed,
           assistant_only_loss=loss_on == "assistant", fused_lm_head=fused_lm_head)


@train_app.command("dpo")
def train_dpo_command(
    model: ModelOpt = Path("runs/train/sft/model"),
    data: Annotated[Path, typer.Option(help="`coworkenv export dpo` output.")] = Path("runs/export/dpo.jsonl"),
    out: OutOpt = Path("runs/train/dpo"),
    store: StoreOpt = Path("runs/coworkenv.db"),
    steps: StepsOpt = 100,
    batch_size: BatchOpt = 4,
    lr: LrOpt = 5e-5,
    beta: Annotated[float, typer.Option("--beta", min=0.0, help="DPO temperature.")] = 0.1,
    max_length: MaxLenOpt = 2048,
    save_steps: SaveOpt = 50,
    lora: LoraOpt = False,
    lora_r: LoraROpt = 16,
    capability: CapOpt = None,
    resume: ResumeOpt = True,
    seed: SeedOpt = 0,
) -> None:
    """Direct preference optimisation (TRL DPOTrainer) on repaired-versus-failed pairs."""
    _train("dpo", store=store, model=str(model), data=str(data), out_dir=str(out), max_steps=steps,
           batch_size=batch_size, learning_rate=lr, beta=beta, max_length=max_length, save_steps=save_steps,
           lora=lora, lora_r=lora_r, lora_alpha=2 * lora_r, capabilities=capability or [], resume=resume, seed=seed)

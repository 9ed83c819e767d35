"""``coworkenv model init-tiny`` and ``coworkenv train sft|dpo|grpo|gdpo``: thin commands over
coworkenv.trainer (and, for GRPO and GDPO, coworkenv.loop, which plays the live episodes).

They show on stderr what they are doing while they run (a spinner with the elapsed time while a
model is built, a bar with the step, loss, learning rate, elapsed time and ETA while one trains; a
line per stage or logged loss when stderr is not a terminal) and end with a summary: a line on
stderr, or with ``--json`` an object on stdout.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from .._errors import CoworkenvError
from ..trainer import REPORTERS, CircuitConfig, TinyConfig, TrainSettings, init_model, init_tiny_model, read_rows
from ..trainer._chat_template import ToolLines
from ..trainer._model import Spaces
from ..workspace import PromptStyle
from ._common import FAILED, JsonOpt, SandboxOpt, emit, err, fail, is_quiet, open_host, open_store, spinner

if TYPE_CHECKING:
    from ..trainer import RLKind, TrainProgress

model_app = typer.Typer(help="Base models of a PocketWorker (a small tool-calling model trained on the store's "
                        "episodes): a tiny Qwen3 from a config, a pretrained base, or a local checkpoint.",
                        no_args_is_help=True)
train_app = typer.Typer(help="Train a PocketWorker (a small tool-calling model) on exported episodes with TRL.",
                        no_args_is_help=True)


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
    # deprecations the libraries raise about their own calls to each other: nothing a user can change
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"(transformers|trl|peft)\.")


FLAGS = {"max_steps": "--steps", "learning_rate": "--lr", "out_dir": "--out", "lora_alpha": "--lora-r"}
"""Settings fields whose command-line flag is not their name in dashes."""


def _reason(exc: Exception) -> str:
    """One line for a user error: an OS error as ``PATH: what``, a validation error as its first
    problem, named by its flag."""
    if isinstance(exc, OSError) and exc.strerror and exc.filename:
        return f"{exc.filename}: {exc.strerror}"
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        field = ".".join(str(x) for x in first["loc"])
        return f"{FLAGS.get(field, '--' + field.replace('_', '-')) if field else 'settings'}: {first['msg']}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


# Settings and their checks (ours; pydantic's ValidationError is a ValueError) may raise any ValueError:
# nothing of TRL has run yet. While TRL runs, only our own user errors (CoworkenvError: TrainingError,
# StoreError, TrainingUnavailable, ...) and OSError are one-line errors; any other ValueError is a bug in
# coworkenv or TRL and keeps its traceback.
CHECK_ERRORS = (CoworkenvError, OSError, ValueError)
RUN_ERRORS = (CoworkenvError, OSError)


def _clock(seconds: float | None) -> str:
    return "-:--:--" if seconds is None else str(timedelta(seconds=round(seconds)))


class TrainingDisplay:
    """A training run's progress (``on_progress`` of ``train_sft``/``train_dpo``): on a terminal a
    bar with the step, the last loss and learning rate, the elapsed time and the ETA; elsewhere (a
    log file, CI) a line per stage and per logged loss."""

    def __init__(self, console: Console = err) -> None:
        self.console = console
        self.progress: Progress | None = None
        self.task: TaskID | None = None
        self.kind = ""

    def __enter__(self) -> TrainingDisplay:
        if self.console.is_terminal and not is_quiet():
            self.progress = Progress(
                SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[step]}"),
                TextColumn("loss {task.fields[loss]}"), TextColumn("lr {task.fields[lr]}"), TimeElapsedColumn(),
                TextColumn("ETA {task.fields[eta]}"), console=self.console)
            self.progress.start()
        return self

    def __exit__(self, *exc_info) -> None:
        if self.progress is not None:
            if self.task is not None:
                self.progress.update(self.task, description=self.kind)  # done saving (or stopped)
            self.progress.stop()

    def __call__(self, p: TrainProgress) -> None:
        self.kind = p.kind
        if is_quiet():
            return
        loss = "-" if p.loss is None else f"{p.loss:.4f}"
        lr = "-" if p.learning_rate is None else f"{p.learning_rate:.2e}"
        step = f"step {p.step}/{p.max_steps}"
        if self.progress is None:
            if p.event == "prepare":
                self.console.print(f"{p.kind}: loading the model and preparing {p.rows:,} rows")
            elif p.event == "begin":
                resumed = f" (resuming at step {p.first_step})" if p.first_step else ""
                self.console.print(f"{p.kind}: training {p.max_steps - p.first_step} steps{resumed}")
            elif p.event == "log":
                self.console.print(f"{p.kind} {step}  loss {loss}  lr {lr}  elapsed {_clock(p.seconds)}"
                                   f"  ETA {_clock(p.eta_seconds)}", highlight=False)
            return
        eta = _clock(p.eta_seconds)
        if p.event == "prepare":
            self.task = self.progress.add_task(f"{p.kind}: loading the model, preparing {p.rows:,} rows",
                                               total=None, step=step, loss=loss, lr=lr, eta=eta)
        elif self.task is not None:
            description = f"{p.kind}" if p.event != "end" else f"{p.kind}: saving"
            self.progress.update(self.task, description=description, total=p.max_steps, completed=p.step,
                                 step=step, loss=loss, lr=lr, eta=eta)
            if p.event == "begin":
                self.progress.reset(self.task, total=p.max_steps, completed=p.step)  # the clock starts now


class LossOn(StrEnum):
    assistant = "assistant"
    all = "all"


@model_app.command("init-tiny")
def init_tiny_command(
    data: Annotated[Path, typer.Option(help="Exported SFT rows (JSON lines) the tokenizer is trained on.")] = Path(
        "runs/export/sft.jsonl"),
    out: Annotated[Path, typer.Option(help="Where the model folder goes.")] = Path("runs/models/tiny"),
    vocab_size: Annotated[int, typer.Option(min=300, help="BPE vocabulary size (before entity tokens).")] = 2048,
    hidden_size: Annotated[int | None, typer.Option(min=16, help="Width of the model (its hidden state); default "
                                                    "128, with --copy-circuit 192.")] = None,
    intermediate_size: Annotated[int | None, typer.Option(min=16, help="Width of each layer's feed-forward block; "
                                                          "default 4 x the hidden size.")] = None,
    layers: Annotated[int, typer.Option(min=1, help="Transformer layers.")] = 2,
    heads: Annotated[int, typer.Option(min=1, help="Attention heads.")] = 4,
    kv_heads: Annotated[int, typer.Option(min=1, help="Key/value heads (grouped-query attention; divides --heads).")] = 2,
    head_dim: Annotated[int, typer.Option(min=8, help="Width of each attention head.")] = 32,
    seed: Annotated[int, typer.Option(help="Seed of the random initial weights.")] = 0,
    tool_lines: Annotated[ToolLines, typer.Option(
        help="How the chat template lists the tools: a JSON object a line, or a signature (name(param*, "
        "other:integer)), a fifth of the tokens.")] = "json",
    spaces: Annotated[Spaces, typer.Option(
        help="The tokenizer's cut before a word: GPT-2's, the space part of the word's first token (attached), or "
        "the space a token of its own (separate), so that a value is the same tokens in a sentence as in JSON.")
    ] = "attached",
    copy_circuit: Annotated[bool, typer.Option(
        "--copy-circuit", help="A GPT-2 whose copying heads are set by hand (training holds them) instead of a "
        "Qwen3; --heads and --kv-heads then follow from --hidden-size (heads of --head-dim).")] = False,
    base: Annotated[Path | None, typer.Option(
        help="Instead of a tiny model, prepare this local checkpoint folder (e.g. a Qwen3-0.6B download).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """A tiny Qwen3 (or with --copy-circuit a GPT-2 that copies) with a BPE tokenizer trained on the corpus
    and the ChatML/Hermes chat template."""
    if base is not None and copy_circuit:
        raise fail("--copy-circuit builds a tiny model; it does not apply to --base")
    width = hidden_size or (CircuitConfig.hidden_size if copy_circuit else TinyConfig.hidden_size)
    ffn = intermediate_size or 4 * width
    circuit = None
    if copy_circuit:
        circuit = CircuitConfig(hidden_size=width, intermediate_size=ffn,
                                num_hidden_layers=layers, head_dim=head_dim, seed=seed)
        try:
            circuit.check()
        except ValueError as exc:
            raise fail(f"--copy-circuit: {exc}") from None
    elif base is None and heads % kv_heads:
        raise fail(f"--heads ({heads}) must be a multiple of --kv-heads ({kv_heads})")
    if out.exists() and not out.is_dir():
        raise fail(f"--out {out} is a file; give a folder for the model")
    quiet_training_logs()
    try:
        if base is not None:
            with spinner(f"preparing {base}") as stage:
                path = init_model(out, base=base, on_stage=stage)
        else:
            config = TinyConfig(vocab_size=vocab_size, hidden_size=width, intermediate_size=ffn,
                                num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                                head_dim=head_dim, seed=seed, tool_lines=tool_lines, spaces=spaces)
            rows = read_rows(data)
            with spinner(f"building a tiny model from {len(rows):,} rows of {data}") as stage:
                path = init_tiny_model(rows, out, config, circuit=circuit, on_stage=stage)
    except RUN_ERRORS as exc:
        raise fail(_reason(exc)) from None
    meta = json.loads((path / "coworkenv_model.json").read_text())
    written = {"path": str(path), "kind": meta["kind"], "parameters": meta["parameters"],
               "vocab_size": meta.get("vocab_size"), **({"base": meta["base"]} if "base" in meta else {})}
    emit(as_json, written, lambda: err.print(
        f"wrote a {meta['kind']} model with {meta['parameters']:,} parameters and a vocabulary of "
        f"{meta.get('vocab_size', 0):,} tokens to {path}"))


def _train(kind: str, *, as_json: bool, **options) -> None:
    from ..trainer import check_training, train_dpo, train_sft

    store = options.pop("store")
    try:
        settings = check_training(TrainSettings(**options))  # before the store is opened or created
    except CHECK_ERRORS as exc:
        raise fail(_reason(exc)) from None
    quiet_training_logs()
    opened = open_store(store, create=True)
    try:
        with TrainingDisplay() as display:
            result = (train_sft if kind == "sft" else train_dpo)(opened, settings, on_progress=display)
    except FloatingPointError as exc:  # the run was tried and diverged; it is recorded as failed
        raise fail(str(exc), FAILED) from None
    except RUN_ERRORS as exc:
        raise fail(_reason(exc)) from None
    m = result.metrics
    losses = "no loss logged" if m["first_loss"] is None else f"loss {m['first_loss']:.3f} → {m['final_loss']:.3f}"
    board = f"; tensorboard --logdir {m['tensorboard_dir']}" if "tensorboard_dir" in m else ""
    emit(as_json, {"run_id": result.run_id, "kind": kind, "model_dir": str(result.model_dir), **m}, lambda: err.print(
        f"{kind}: {m['steps']} steps, {losses}, {m['seconds']:.0f}s; model in {result.model_dir} "
        f"(run {result.run_id}){board}"))


StoreOpt = Annotated[Path, typer.Option("--store", envvar="COWORKENV_STORE", help="The SQLite store (runs are recorded).")]
ModelOpt = Annotated[Path, typer.Option("--model", help="The model folder to start from.")]
OutOpt = Annotated[Path, typer.Option("--out", help="Run folder: checkpoints/, model/ (and adapter/ with --lora, "
                                      "tensorboard/ with --report-to tensorboard).")]
StepsOpt = Annotated[int, typer.Option("--steps", min=1, help="Optimizer steps.")]
BatchOpt = Annotated[int, typer.Option("--batch-size", min=1, help="Rows per optimizer step.")]
LrOpt = Annotated[float, typer.Option("--lr", min=0.0, help="Peak learning rate (cosine schedule); near 1e-4 for "
                                      "--lora on a real base.")]
MaxLenOpt = Annotated[int, typer.Option("--max-length", min=16, help="Longer rows are truncated.")]
SaveOpt = Annotated[int, typer.Option("--save-steps", min=1, help="Checkpoint every this many steps.")]
LoggingOpt = Annotated[int, typer.Option("--logging-steps", min=1, help="Log the loss every this many steps "
                                         "(and at the first).")]
LoraOpt = Annotated[bool, typer.Option("--lora", help="Train a LoRA adapter (peft) instead of all weights.")]
LoraROpt = Annotated[int, typer.Option("--lora-r", min=1, help="Rank of the LoRA adapter (with --lora).")]
CapOpt = Annotated[list[str] | None, typer.Option("--capability", help="Train only on rows of this capability (repeatable).")]
ResumeOpt = Annotated[bool, typer.Option("--resume/--no-resume", help="Resume from the last checkpoint in --out.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Random seed of the run (data order, new weights, sampling).")]
MinutesOpt = Annotated[float | None, typer.Option(
    "--max-minutes", min=0.0, help="Stop at the end of the first step past this many minutes of "
    "training (checkpointed and saved as at --steps; --steps still caps the run).")]
HoldOpt = Annotated[bool, typer.Option(
    "--hold-circuit/--free-circuit", help="With a base built by `model init-tiny --copy-circuit`: keep its copying "
    "heads as built (the default), or let training change them too.")]
Bf16Opt = Annotated[bool, typer.Option(
    "--bf16/--fp32", help="Matrix products in bfloat16 (torch.autocast; weights and optimizer stay fp32), or all in "
    "fp32. On a CPU with bf16 matrix units a tiny model's step is faster (benchmarks/RESULTS.md).")]
ReportOpt = Annotated[list[str] | None, typer.Option(
    "--report-to", metavar="NAME", help="Report the logs to: none (the default), all (every tracker installed), or "
    f"a tracker transformers supports: {', '.join(REPORTERS)} (repeatable or comma-separated; tensorboard writes "
    "under OUT/tensorboard).")]


@model_app.command("pretrain-base")
def pretrain_base_command(
    out: Annotated[Path, typer.Option(help="The run folder: tokenizer/, data/, checkpoint.pt, then model/.")] = Path(
        "runs/models/pretrain"),
    steps: Annotated[int, typer.Option(min=1, help="Optimizer steps on the exercises.")] = 3000,
    copy_steps: Annotated[int | None, typer.Option(min=0, help="Steps of random-token copying before the exercises "
                                                   "(the model forms the head that copies; 0: none). Default 8000, "
                                                   "none with --copy-circuit.")] = None,
    copy_circuit: Annotated[bool, typer.Option(
        "--copy-circuit", help="A GPT-2 whose copying heads are set by hand and held (as `model init-tiny "
        "--copy-circuit` builds) instead of a Qwen3: it copies from the start, so it has no copying stage.")] = False,
    seeds: Annotated[int, typer.Option(min=1, help="Pretraining workspaces (seeds from 1,000,000 on).")] = 600,
    hidden_size: Annotated[int, typer.Option(min=16, help="Width of the model (its hidden state).")] = 192,
    layers: Annotated[int, typer.Option(min=1, help="Transformer layers.")] = 3,
    threads: Annotated[int, typer.Option(min=1, help="Torch threads; part of the recipe (the arithmetic's order "
                                         "depends on it), so a rebuild uses the same.")] = 2,
    seed: Annotated[int, typer.Option(help="Seed of the initial weights and of the batches' order.")] = 0,
    max_minutes: MinutesOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Pretrain a PocketWorker base on reading-and-copying exercises over workspaces no task uses.

    Resumable: run it again with the same recipe and it goes on from its last checkpoint (every 100
    steps). The same recipe, software and --threads give the same weights, byte for byte."""
    from ..trainer import PretrainSettings, pretrain_base

    try:
        settings = PretrainSettings(out_dir=str(out), steps=steps, copy_circuit=copy_circuit, seeds=seeds,
                                    **({} if copy_steps is None else {"copy_steps": copy_steps}),
                                    hidden_size=hidden_size, layers=layers, heads=max(1, hidden_size // 32),
                                    intermediate_size=4 * hidden_size,
                                    threads=threads, seed=seed, max_minutes=max_minutes)
    except ValueError as exc:
        raise fail(_reason(exc)) from None
    quiet_training_logs()
    with spinner(f"pretraining a base into {out}") as stage:
        def show(p) -> None:
            if p.stage in ("copy", "train"):
                stage(f"{p.stage}: step {p.step}/{p.steps}, loss {p.loss:.4f}, {_clock(p.seconds)}"
                      + (f"; {p.detail}" if p.detail else ""))
            else:
                stage(f"{p.stage}: {p.detail}" + (f" ({p.step}/{p.steps})" if p.steps else ""))

        try:
            path = pretrain_base(settings, on_progress=show)
        except RUN_ERRORS as exc:
            raise fail(_reason(exc)) from None
    if path.name != "model":  # stopped by --max-minutes: checkpointed, not finished
        state = {"out": str(out), "finished": False, "checkpoint": str(path)}
        emit(as_json, state, lambda: err.print(f"stopped after --max-minutes; run it again to go on ({path})"))
        return
    meta = json.loads((path / "coworkenv_model.json").read_text())
    emit(as_json, {"path": str(path), "finished": True, **{k: meta[k] for k in (
        "steps", "wall_seconds", "final_loss", "copy_rate_after_copying", "parameters", "vocab_size",
        "weights_sha256")}}, lambda: err.print(
        f"pretrained {meta['parameters']:,} parameters in {meta['steps']} steps ({_clock(meta['wall_seconds'])}), "
        f"final loss {meta['final_loss']}; weights {meta['weights_sha256'][:16]} in {path}"))


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
    logging_steps: LoggingOpt = 10,
    lora: LoraOpt = False,
    lora_r: LoraROpt = 16,
    capability: CapOpt = None,
    resume: ResumeOpt = True,
    seed: SeedOpt = 0,
    loss_on: Annotated[LossOn, typer.Option("--loss-on", help="assistant: loss on the assistant's tokens only; all: on "
                                            "every token (for a model trained from scratch, which then also learns "
                                            "from the tool results how values are copied).")] = LossOn.assistant,
    fused_lm_head: Annotated[bool | None, typer.Option(
        "--fused-lm-head/--plain-lm-head", help="TRL's chunked LM head, which never builds the full logits, or the "
        "plain cross-entropy (default: fused for vocabularies of 32k tokens or more).")] = None,
    value_swaps: Annotated[int, typer.Option(
        "--value-swaps", min=0,
        help="Add this many variants of each row with the values its assistant copies (out of the instruction "
        "or a tool result) swapped for other values of the data, everywhere in the row: a model trained from "
        "scratch cannot answer them from what it recalls of the training values, only by copying.")] = 0,
    hold_circuit: HoldOpt = True,
    pointer_loss: Annotated[float, typer.Option(
        "--pointer-loss", min=0.0, help="With a base built by `model init-tiny --copy-circuit`: the weight of a loss "
        "on where its pointer heads look (at each span the assistant copies out of its context, from its first token "
        "on, the attention on the span's earlier places), beside the next-token loss. 0: none.")] = 0.0,
    stop_weight: Annotated[float, typer.Option(
        "--stop-weight", min=0.0, help="The weight of the next-token loss at each token where a copy stops (the two "
        "tokens before it stood together earlier and went on otherwise there: the quote that closes a value copied "
        "out of a sentence), against 1 for every other token. 1: no token weighted.")] = 1.0,
    bf16: Bf16Opt = False,
    max_minutes: MinutesOpt = None,
    report_to: ReportOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Supervised fine-tuning (TRL SFTTrainer), by default with loss on assistant tokens only."""
    _train("sft", as_json=as_json, store=store, model=str(model), data=str(data), out_dir=str(out), max_steps=steps,
           batch_size=batch_size, learning_rate=lr, max_length=max_length, save_steps=save_steps,
           logging_steps=logging_steps, lora=lora, lora_r=lora_r, lora_alpha=2 * lora_r, capabilities=capability or [],
           resume=resume, seed=seed, assistant_only_loss=loss_on == LossOn.assistant, fused_lm_head=fused_lm_head,
           value_swaps=value_swaps, hold_circuit=hold_circuit, pointer_loss=pointer_loss, stop_weight=stop_weight, bf16=bf16,
           max_minutes=max_minutes, report_to=report_to or [])


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
    logging_steps: LoggingOpt = 10,
    lora: LoraOpt = False,
    lora_r: LoraROpt = 16,
    capability: CapOpt = None,
    resume: ResumeOpt = True,
    seed: SeedOpt = 0,
    hold_circuit: HoldOpt = True,
    bf16: Bf16Opt = False,
    max_minutes: MinutesOpt = None,
    report_to: ReportOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Direct preference optimisation (TRL DPOTrainer) on repaired-versus-failed pairs."""
    _train("dpo", as_json=as_json, store=store, model=str(model), data=str(data), out_dir=str(out), max_steps=steps,
           batch_size=batch_size, learning_rate=lr, beta=beta, max_length=max_length, save_steps=save_steps,
           logging_steps=logging_steps, lora=lora, lora_r=lora_r, lora_alpha=2 * lora_r,
           capabilities=capability or [], resume=resume, seed=seed, hold_circuit=hold_circuit, bf16=bf16,
           max_minutes=max_minutes, report_to=report_to or [])


def _train_rl(kind: RLKind, *, as_json: bool, store: Path, sandbox: str, **options) -> None:
    from ..loop import run_rl
    from ..server import running_http_server
    from ..trainer import RLSettings, ServeError, WeightSyncError, check_rl_training

    try:
        settings = check_rl_training(RLSettings(**options))  # before the store is opened
    except (*CHECK_ERRORS, ServeError) as exc:
        raise fail(_reason(exc)) from None
    quiet_training_logs()
    host = open_host(store, sandbox)  # the store must exist: its admitted tasks are the environments

    async def run():
        try:
            async with running_http_server(host) as url:
                with TrainingDisplay() as display:
                    return await run_rl(host, settings, kind=kind, base_url=url, on_progress=display)
        finally:
            await host.close()

    try:
        result, _ = asyncio.run(run())
    except (FloatingPointError, ServeError, WeightSyncError) as exc:  # tried and failed (recorded as failed)
        raise fail(str(exc), FAILED) from None
    except RUN_ERRORS as exc:
        raise fail(_reason(exc)) from None
    m = result.metrics
    rewards = ", ".join(f"{name} {value:.2f}" for name, value in m["final_rewards"].items() if value is not None)
    split = m["time_split"]
    emit(as_json, {"run_id": result.run_id, "kind": kind, "model_dir": str(result.model_dir), **m}, lambda: err.print(
        f"{kind}: {m['steps']} steps, {m['episodes']} episodes ({m['episodes_per_s']:.2f}/s), last rewards: "
        f"{rewards or 'none logged'}; time: generation {split['generation_s']:.1f}s, environment "
        f"{split['environment_s']:.1f}s, update {split['update_s']:.1f}s of {m['seconds']:.0f}s; model in "
        f"{result.model_dir} (run {result.run_id})", highlight=False))


RLStyleOpt = Annotated[PromptStyle, typer.Option(
    "--style", help="Agent view the policy plays in: full, compact or minimal (the view the model was trained on).")]
RLDataOpt = Annotated[Path | None, typer.Option(
    "--data", help="`coworkenv export rl` output (default: every admitted task of the store, in --style).")]
GenerationsOpt = Annotated[int, typer.Option("--num-generations", min=2, help="Episodes per prompt (a GRPO group).")]
RLBatchOpt = Annotated[int, typer.Option("--batch-size", min=2, help="Episodes per step, played concurrently "
                                         "(a multiple of --num-generations).")]
RLLrOpt = Annotated[float, typer.Option("--lr", "--learning-rate", min=0.0, help="Learning rate of the policy's "
                                        "updates.")]
EpisodeStepsOpt = Annotated[int | None, typer.Option(
    "--max-steps-per-episode", min=1, help="Policy turns per episode (default: each task's own limit).")]
NewTokensOpt = Annotated[int, typer.Option("--max-new-tokens", min=1, help="Tokens per policy turn (a turn that "
                                           "reaches it is cut off).")]
TemperatureOpt = Annotated[float, typer.Option("--temperature", min=0.0, help="Sampling temperature (0: greedy).")]
GenerationOpt = Annotated[Literal["transformers", "vllm"], typer.Option(
    "--generation", help="Who samples the policy's turns: transformers (the trainer's model, in process) or vllm (a "
    "vLLM server started for the run, its weights pushed before every step's rollouts and checked; vLLM's CPU "
    "build cannot reload the weights of a model with tied embeddings in place: use --lora there).")]
VLLMPythonOpt = Annotated[str | None, typer.Option(
    "--vllm-python", envvar="COWORKENV_VLLM_PYTHON", help="--generation vllm: the interpreter that has vLLM "
    "(default: this one).")]


def _rl_command(kind: RLKind):
    names = {"grpo": "GRPO: the three reward components are summed, then normalised within each group",
             "gdpo": "GDPO: each reward component is normalised within its group, then they are summed"}

    def command(
        model: ModelOpt = Path("runs/train/sft/model"),
        store: StoreOpt = Path("runs/coworkenv.db"),
        data: RLDataOpt = None,
        out: OutOpt = Path(f"runs/train/{kind}"),
        steps: StepsOpt = 100,
        num_generations: GenerationsOpt = 4,
        batch_size: RLBatchOpt = 4,
        lr: RLLrOpt = 1e-5,
        style: RLStyleOpt = "minimal",
        max_steps_per_episode: EpisodeStepsOpt = None,
        max_new_tokens: NewTokensOpt = 128,
        temperature: TemperatureOpt = 1.0,
        generation: GenerationOpt = "transformers",
        vllm_python: VLLMPythonOpt = None,
        save_steps: SaveOpt = 50,
        lora: LoraOpt = False,
        lora_r: LoraROpt = 16,
        resume: ResumeOpt = True,
        seed: SeedOpt = 0,
        sandbox: SandboxOpt = "bwrap",
        max_minutes: MinutesOpt = None,
        report_to: ReportOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        _train_rl(kind, as_json=as_json, store=store, sandbox=sandbox, model=str(model),
                  data=str(data) if data is not None else None, out_dir=str(out), max_steps=steps,
                  num_generations=num_generations, batch_size=batch_size, learning_rate=lr, style=style,
                  max_steps_per_episode=max_steps_per_episode, max_new_tokens=max_new_tokens, temperature=temperature,
                  save_steps=save_steps, lora=lora, lora_r=lora_r, lora_alpha=2 * lora_r, resume=resume, seed=seed,
                  max_minutes=max_minutes, report_to=report_to or [], generation=generation, vllm_python=vllm_python)

    command.__doc__ = (
        f"{names[kind]} (TRL GRPOTrainer). Each rollout is a live episode of an admitted task in a fresh sandbox, "
        "played by the policy through the agent view and graded by the gate; its completion, safety and "
        "robustness are the rewards.")
    return command


train_app.command("grpo")(_rl_command("grpo"))
train_app.command("gdpo")(_rl_command("gdpo"))

"""``coworkenv demo``: synth → calibrate → collect → gate → export on embedded defaults.

``coworkenv demo --full`` closes the loop: it exports the minimal agent view, builds a tiny
Qwen3 on the corpus (``init-tiny``), fine-tunes it with TRL (``train sft``), serves the base and
the trained model (vLLM when ``--serve vllm``; in process, ``hf:PATH``, when ``--serve local``)
and evaluates both on held-out tasks of new seeds through the MCP server, then prints the
before/after table. Every stage resumes from what the run folder already holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Literal, Optional

import typer
from pydantic import BaseModel, Field, ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..gate import run_gate
from ..sandbox import BwrapSandbox, SandboxUnavailable
from ..server import EpisodeHost, EpisodeSettings
from ..store import Store
from ..synth import synthesize
from ..trainer import DEFAULT_EVAL_SEED
from ..workspace import CAPABILITIES

# --full on embedded defaults (benchmarks/loop.md records what they reach on a 2-core machine)
FULL_CAPABILITIES = ("lookup", "single_write")
FULL_TASKS = 1000  # distinct tasks: few enough passes over each that copying values pays, not memorising them
FULL_STEPS = 2400  # about 16 minutes of a quiet 2-core CPU for the default tiny model (benchmarks/loop.md)


async def run_demo(directory: Path, n: int, seed: int, error_rate: float, progress: Progress,
                   capabilities: tuple[str, ...] = CAPABILITIES, concurrency: int = 4) -> dict:
    """Run the loop into ``directory`` (resumable: what the store holds is kept and reused).

    Up to ``concurrency`` tasks calibrate, and up to as many teacher episodes run, at once.
    """
    from ..agents import ProviderSettings, TeacherSettings, collect
    from ..trainer import export_sft

    started = time.perf_counter()
    store = Store(directory / "coworkenv.db")
    host = EpisodeHost(store, EpisodeSettings(backend="bwrap", cache_dir=directory / "cache"))
    try:
        job = progress.add_task("synthesize + calibrate", total=n)
        synth = await synthesize(host, n, seed, capabilities=capabilities, concurrency=concurrency,
                                 on_task=lambda *_: progress.advance(job))
        job = progress.add_task("collect (oracle teacher)", total=synth.admitted)
        settings = TeacherSettings(provider="oracle", concurrency=concurrency,
                                   provider_settings=ProviderSettings(error_rate=error_rate, seed=seed))
        collected = await collect(host, settings, on_run=lambda _: progress.advance(job))
        progress.update(job, total=collected.tasks, completed=collected.tasks)
    finally:
        await host.close()
    job = progress.add_task("gate", total=1)
    run_gate(store)
    progress.advance(job)
    job = progress.add_task("export sft", total=1)
    rows = export_sft(store, directory / "export" / "sft.jsonl")
    progress.advance(job)

    count = lambda sql: store.query(sql)[0]["n"]  # noqa: E731
    graded = count("select count(distinct episode_id) as n from verdicts v join episodes e on e.id = v.episode_id"
                   " where e.source = 'teacher'")
    admitted = count("select count(distinct episode_id) as n from verdicts v join episodes e on e.id = v.episode_id"
                     " where e.source = 'teacher' and v.admitted = 1")
    return {
        "store": str(directory / "coworkenv.db"),
        "tasks_generated": count("select count(*) as n from tasks"),
        "tasks_admitted": count("select count(*) as n from tasks where status = 'admitted'"),
        "tasks_quarantined": count("select count(*) as n from tasks where status = 'quarantined'"),
        "episodes": count("select count(*) as n from episodes where source = 'teacher'"),
        "repaired_episodes": count("select count(*) as n from episodes e where source = 'teacher' and repaired_from"
                                   " is not null and exists (select 1 from verdicts v where v.episode_id = e.id"
                                   " and v.admitted = 1)"),
        "gate_pass_rate": round(admitted / graded, 4) if graded else 0.0,
        "exported_rows": rows,
        "export": str(directory / "export" / "sft.jsonl"),
        "seconds": round(time.perf_counter() - started, 2),
    }


def demo_command(
    directory: Annotated[Path, typer.Option("--dir", help="Where the store and exports go.")] = Path("runs/demo"),
    n: Annotated[Optional[int], typer.Option("-n", "--tasks", min=1, help="How many tasks to synthesize "
                                             f"(default 24; {FULL_TASKS} with --full).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of synthesis and of the oracle's mistakes.")] = 0,
    error_rate: Annotated[float, typer.Option(min=0.0, max=1.0, help="Share of oracle episodes with a mistake.")] = 0.3,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    full: Annotated[bool, typer.Option("--full", help="Also init-tiny → train sft → serve → eval the base and the "
                                       "trained model on held-out tasks, and print the before/after table.")] = False,
    capability: Annotated[Optional[list[str]], typer.Option(
        help="--full: capabilities to synthesize, train and evaluate (repeatable; default lookup, single_write).")] = None,
    steps: Annotated[Optional[int], typer.Option(min=1, help=f"--full: SFT steps (default {FULL_STEPS}).")] = None,
    eval_tasks: Annotated[int, typer.Option(min=1, help="--full: held-out tasks (new seeds).")] = 24,
    serve: Annotated[str, typer.Option(help="--full: how models are served for evaluation: local (in process, "
                                       "hf:PATH) or vllm (vLLM's OpenAI server, tool parser hermes).")] = "local",
    vllm_python: Annotated[Optional[str], typer.Option(help="--full --serve vllm: the interpreter that has vLLM.")] = None,
) -> None:
    """Run the loop on embedded defaults (SQLite, bubblewrap, oracle teacher) and summarize it."""
    err = Console(stderr=True)
    try:
        BwrapSandbox.check_available()
    except SandboxUnavailable as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    settings = None
    if full:
        try:
            settings = FullSettings(capabilities=tuple(capability or FULL_CAPABILITIES), train_steps=steps or FULL_STEPS,
                                    eval_tasks=eval_tasks, serve=serve, vllm_python=vllm_python)
        except ValidationError as exc:
            err.print(f"[red]error:[/red] {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}")
            raise typer.Exit(2) from None
        problem = _full_prerequisites(settings)
        if problem:
            err.print(f"[red]error:[/red] {problem}")
            raise typer.Exit(2)
        from ._train import quiet_training_logs

        quiet_training_logs()
    directory.mkdir(parents=True, exist_ok=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err) as progress:
        if settings is None:
            summary = asyncio.run(run_demo(directory, n or 24, seed, error_rate, progress))
        else:
            summary = asyncio.run(run_full(directory, n or FULL_TASKS, seed, error_rate, settings, progress))
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    table = Table(title="coworkenv demo", show_header=False)
    table.add_column("")
    table.add_column("", justify="right")
    for key in ("tasks_generated", "tasks_admitted", "tasks_quarantined", "episodes", "repaired_episodes",
                "gate_pass_rate", "exported_rows", "seconds"):
        value = summary[key]
        table.add_row(key.replace("_", " "), f"{value:.0%}" if key == "gate_pass_rate" else str(value))
    Console().print(table)
    Console().print(f"store: {summary['store']}\nSFT data: {summary['export']}")
    if settings is not None:
        Console().print(_full_table(summary))
        Console().print(f"trained model: {summary['trained_model']}")


def _full_prerequisites(settings: FullSettings) -> str | None:
    """Why ``--full`` cannot run here, or ``None``."""
    from ..synth import TEMPLATES

    unknown = [c for c in settings.capabilities if c not in TEMPLATES]
    if unknown:
        return f"unknown capability {unknown[0]!r}; known: {', '.join(TEMPLATES)}"
    try:
        from ..trainer import require_training

        require_training()
    except Exception as exc:  # TrainingUnavailable, or an older package without the training half
        return str(exc)
    try:
        from ..trainer import run_eval  # noqa: F401
        from ..trainer._serve import check_vllm
    except ImportError:
        return "this build has no evaluation (coworkenv.trainer.run_eval): --full cannot measure the trained model"
    if settings.serve == "vllm":
        try:
            check_vllm(settings.vllm_python)
        except Exception as exc:  # ServeError with the install hint
            return str(exc)
    return None


# --------------------------------------------------------------------------- the full loop



class FullSettings(BaseModel):
    """The closing half of the loop (``demo --full``) on embedded defaults."""

    capabilities: tuple[str, ...] = FULL_CAPABILITIES
    style: str = "minimal"  # the agent view of training and evaluation (see coworkenv.agents._prompting)
    vocab_size: int = 2048
    hidden_size: int = 128
    layers: int = 2
    train_steps: int = Field(default=FULL_STEPS, ge=1)
    assistant_only_loss: bool = True  # every-token loss learned the protocol more slowly (benchmarks/loop.md)
    batch_size: int = Field(default=8, ge=1)
    learning_rate: float = 1e-2  # 3e-3 learned to copy values far more slowly (benchmarks/loop.md)
    eval_tasks: int = Field(default=24, ge=1)
    eval_seed: int = DEFAULT_EVAL_SEED
    eval_trials: int = Field(default=1, ge=1)
    serve: Literal["local", "vllm"] = "local"
    vllm_python: str | None = None


@contextlib.contextmanager
def _stage(progress: Progress, name: str, timings: dict[str, float]) -> Iterator[None]:
    """A progress line for one stage, timed into ``timings``."""
    job = progress.add_task(name, total=1)
    started = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = round(time.perf_counter() - started, 1)
        progress.update(job, completed=1)


async def _evaluate(host: EpisodeHost, model_dir: Path, name: str, settings: FullSettings, store_dir: Path) -> dict:
    from ..trainer import EvalSettings, VLLMSettings, run_eval, running_vllm_server

    def options(spec: str) -> EvalSettings:
        return EvalSettings(model=spec, tasks=settings.eval_tasks, seed=settings.eval_seed,
                            capabilities=settings.capabilities, trials=settings.eval_trials,
                            prompt_style=settings.style, temperature=0.0 if settings.eval_trials == 1 else 0.7,
                            max_tokens=256, concurrency=2)

    profile = store_dir / "eval" / f"{name}.profile.json"
    if settings.serve == "local":
        report = await run_eval(host, options(f"hf:{model_dir}"), profile_path=profile)
    else:
        async with running_vllm_server(model_dir, name, settings=VLLMSettings(python=settings.vllm_python)) as url:
            report = await run_eval(host, options(f"openai:{name}@{url}"), profile_path=profile)
    return report.summary


async def run_full(directory: Path, n: int, seed: int, error_rate: float, settings: FullSettings,
                   progress: Progress) -> dict:
    """synth → collect → gate → export → init-tiny → train sft → serve → eval (base and trained)."""
    from ..trainer import TinyConfig, TrainSettings, export_sft, init_tiny_model, read_rows, train_sft

    started = time.perf_counter()
    timings: dict[str, float] = {}
    with _stage(progress, "synth → collect → gate → export", timings):
        collected = await run_demo(directory, n, seed, error_rate, progress, capabilities=settings.capabilities)
    store = Store(directory / "coworkenv.db")
    data = directory / "export" / f"sft.{settings.style}.jsonl"
    rows = export_sft(store, data, style=settings.style)
    base_dir = directory / "models" / "tiny"
    with _stage(progress, "init-tiny", timings):
        if not (base_dir / "config.json").exists():
            init_tiny_model(read_rows(data), base_dir, TinyConfig(
                vocab_size=settings.vocab_size, hidden_size=settings.hidden_size,
                intermediate_size=4 * settings.hidden_size, num_hidden_layers=settings.layers,
                num_attention_heads=max(1, settings.hidden_size // 32),
                num_key_value_heads=max(1, settings.hidden_size // 64), head_dim=32, seed=seed))
    run_dir = directory / "train" / "sft"
    with _stage(progress, f"train sft ({settings.train_steps} steps)", timings):
        if not (run_dir / "model" / "config.json").exists():
            train_sft(store, TrainSettings(model=str(base_dir), data=str(data), out_dir=str(run_dir),
                                           max_steps=settings.train_steps, batch_size=settings.batch_size,
                                           learning_rate=settings.learning_rate, seed=seed,
                                           assistant_only_loss=settings.assistant_only_loss))
    host = EpisodeHost(store, EpisodeSettings(backend="bwrap", cache_dir=directory / "cache"))
    try:
        with _stage(progress, f"eval base ({settings.serve})", timings):
            before = await _evaluate(host, base_dir, "base", settings, directory)
        with _stage(progress, f"eval trained ({settings.serve})", timings):
            after = await _evaluate(host, run_dir / "model", "trained", settings, directory)
    finally:
        await host.close()
    capabilities = {
        c: {"base": before["capabilities"].get(c, {}).get("pass_rate"),
            "trained": after["capabilities"].get(c, {}).get("pass_rate"),
            "tasks": after["capabilities"].get(c, {}).get("tasks", 0)}
        for c in settings.capabilities
    }
    return {
        **collected,
        "sft_rows": rows,
        "capabilities": capabilities,
        "overall": {"base": before["overall"]["pass_rate"], "trained": after["overall"]["pass_rate"],
                    "tasks": after["overall"]["tasks"]},
        "base_model": str(base_dir),
        "trained_model": str(run_dir / "model"),
        "stage_seconds": timings,
        "seconds": round(time.perf_counter() - started, 1),
    }


def _full_table(summary: dict) -> Table:
    table = Table(title="held-out pass rate (new seeds), before → after training")
    table.add_column("capability")
    table.add_column("tasks", justify="right")
    table.add_column("base", justify="right")
    table.add_column("trained", justify="right")
    pct = lambda x: "-" if x is None else f"{x:.0%}"  # noqa: E731
    for capability, row in summary["capabilities"].items():
        table.add_row(capability, str(row["tasks"]), pct(row["base"]), pct(row["trained"]))
    overall = summary["overall"]
    table.add_row("overall", str(overall["tasks"]), pct(overall["base"]), pct(overall["trained"]))
    return table

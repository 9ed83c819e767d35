"""``coworkenv demo``: synth → calibrate → collect → gate → export on embedded defaults.

``coworkenv demo --full`` closes the loop: it exports the minimal agent view, builds a tiny
Qwen3 on the corpus (``init-tiny``), fine-tunes it with TRL (``train sft``), serves the base and
the trained model and evaluates both on held-out tasks of new seeds through the MCP server, then
prints the before/after table. ``--serve auto`` (the default) evaluates in process (``hf:PATH``)
and, where vLLM is installed, the trained model through vLLM's OpenAI server as well, and prints
both pass rates with how often the two paths agree trial by trial; ``--serve local`` or
``--serve vllm`` evaluate on one path. Every stage resumes from what the run folder already holds.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from pydantic import ValidationError
from rich.table import Table

from ..loop import (
    DEMO_TASKS,
    FULL_BASE,
    FULL_CAPABILITIES,
    FULL_EVAL_TASKS,
    FULL_POINTER_LOSS,
    FULL_SPACES,
    FULL_STEPS,
    FULL_TASKS,
    FULL_TOOL_LINES,
    FULL_UNSEEN_SHARE,
    FULL_VALUE_SWAPS,
    SPLITS,
)
from ..loop._defaults import FULL_PER_WORKSPACE  # not re-exported by coworkenv.loop: its names are never None
from ..sandbox import BwrapSandbox, SandboxUnavailable
from ..trainer._chat_template import ToolLines
from ..trainer._model import Spaces
from ._common import AppOpt, GeneratorOpt, JsonOpt, PerWorkspaceOpt, check_apps, emit, err, fail, open_store, out, progress

if TYPE_CHECKING:
    from ..loop import FullSettings


def demo_command(
    directory: Annotated[Path, typer.Option(
        "--dir", help="Where the store (coworkenv.db), exports and models go; the default is where every other "
        "command looks (runs/coworkenv.db).")] = Path("runs"),
    n: Annotated[int | None, typer.Option("-n", "--tasks", min=1, help="How many tasks to synthesize "
                                             f"(default {DEMO_TASKS}; {FULL_TASKS} with --full).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of synthesis and of the oracle's mistakes.")] = 0,
    error_rate: Annotated[float, typer.Option(min=0.0, max=1.0, help="Share of oracle episodes with a mistake.")] = 0.3,
    as_json: JsonOpt = False,
    full: Annotated[bool, typer.Option("--full", help="Also init-tiny → train sft → serve → eval the base and the "
                                       "trained model on held-out tasks, and print the before/after table.")] = False,
    capability: Annotated[list[str] | None, typer.Option(
        metavar="CAPABILITY", help="--full: capabilities to synthesize, train and evaluate (repeatable; default "
        f"{', '.join(FULL_CAPABILITIES)}).")] = None,
    app_name: AppOpt = None,
    generator: GeneratorOpt = "all",
    per_workspace: PerWorkspaceOpt = FULL_PER_WORKSPACE,
    steps: Annotated[int | None, typer.Option(min=1, help=f"--full: SFT steps (default {FULL_STEPS}).")] = None,
    base: Annotated[str, typer.Option(
        help="--full: the PocketWorker base fine-tuned: pretrained (the project's pretrained base, see `coworkenv "
        "model pretrain-base`), scratch (a tiny model built from the SFT rows by init-tiny), circuit (the same with "
        "init-tiny --copy-circuit: a GPT-2 whose copying heads are set by hand) or a model folder.")] = FULL_BASE,
    tool_lines: Annotated[ToolLines, typer.Option(
        help="--full with --base scratch or circuit: how the base's chat template lists the tools, a JSON object "
        "or a signature (name(param*, ...)) a line.")] = FULL_TOOL_LINES,
    spaces: Annotated[Spaces, typer.Option(
        help="--full with --base scratch or circuit: the base tokenizer's cut before a word, the space a token of its "
        "own (separate) or part of the word's first token (attached, GPT-2's).")] = FULL_SPACES,
    pointer_loss: Annotated[float | None, typer.Option(
        "--pointer-loss", min=0.0, help="--full: the weight of SFT's loss on where the circuit base's pointer heads "
        f"look (see `train sft --pointer-loss`; default {FULL_POINTER_LOSS} with --base circuit, 0 with others).")
    ] = None,
    eval_tasks: Annotated[int, typer.Option(
        min=1, help="--full: held-out tasks, all on new workspace seeds (both splits).")] = FULL_EVAL_TASKS,
    unseen_share: Annotated[float, typer.Option(
        min=0.0, help="--full: share of each capability's combinations (the tools its tasks "
        "compose) kept out of training; held-out tasks of them are the unseen-combinations split.")] = FULL_UNSEEN_SHARE,
    value_swaps: Annotated[int, typer.Option(
        min=0, help="--full: variants of each training row with the values it copies (from the instruction or a "
        "tool result) swapped for other values of the data, so that the model learns to copy them.")] = FULL_VALUE_SWAPS,
    bf16: Annotated[bool | None, typer.Option(
        "--bf16/--fp32", help="--full: SFT's matrix products in bfloat16 (weights stay fp32) or all in fp32 (default: "
        "bfloat16 where the GPU or CPU multiplies it in hardware, such as AMX or AVX512-BF16).")] = None,
    serve: Annotated[Literal["auto", "local", "vllm"], typer.Option(
        help="--full: how models are served for evaluation: local (in process, hf:PATH), vllm (vLLM's OpenAI "
        "server, tool parser hermes) or auto (in process, and the trained model through vLLM too where vLLM is "
        "installed; both pass rates reported).")] = "auto",
    vllm_python: Annotated[str | None, typer.Option(
        envvar="COWORKENV_VLLM_PYTHON", help="--full: the interpreter that has vLLM (for --serve vllm or auto; default: "
        ".venv-vllm/bin/python in the current directory or the project root, where `make vllm` puts it, else this "
        "one).")] = None,
) -> None:
    """Run the loop on embedded defaults (SQLite, bubblewrap, oracle teacher) and summarize it."""
    try:
        BwrapSandbox.check_available()
    except SandboxUnavailable as exc:
        raise fail(str(exc)) from None
    from ..loop import FullSettings, run_demo, run_full

    apps = check_apps(app_name)
    settings = None
    if full:
        from ._vllm import install_hint
        from ._vllm import vllm_python as find_vllm

        found = find_vllm(vllm_python, "--vllm-python")
        vllm_python = found.path
        try:
            settings = FullSettings.model_validate(dict(
                capabilities=tuple(capability or FULL_CAPABILITIES), apps=apps, generator=generator,
                train_steps=steps or FULL_STEPS, base=base, tool_lines=tool_lines, spaces=spaces,
                pointer_loss=pointer_loss, per_workspace=per_workspace,
                eval_tasks=eval_tasks, unseen_share=unseen_share, value_swaps=value_swaps, bf16=bf16, serve=serve,
                vllm_python=vllm_python))
        except ValidationError as exc:
            raise fail(f"{exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}") from None
        problem = _full_prerequisites(settings)
        if problem:
            raise fail(problem if "not installed" not in problem else
                       f"{problem.split(';')[0]} ({found.found}); {install_hint(found, '--vllm-python')}")
        skipped = settings.vllm_skipped()
        if skipped:  # said now, before the long run, and again in the summary
            err.print(f"the served path is skipped (--serve auto evaluates in process only): {skipped} "
                      f"({found.found}); {install_hint(found, '--vllm-python')}", markup=False)
        elif settings.serve != "local":
            err.print(f"vLLM from {found}", markup=False)
        from ._train import quiet_training_logs

        quiet_training_logs()
    open_store(directory / "coworkenv.db", create=True).close()  # a usable store there, or a one-line error
    with progress() as bar:
        if settings is None:
            summary = asyncio.run(run_demo(directory, n or DEMO_TASKS, seed, error_rate, bar, apps=apps,
                                           generator=generator, per_workspace=per_workspace))
        else:
            summary = asyncio.run(run_full(directory, n or FULL_TASKS, seed, error_rate, settings, bar))
    def human() -> None:
        table = Table(title="coworkenv demo", show_header=False)
        table.add_column("")
        table.add_column("", justify="right")
        for key in ("tasks_generated", "tasks_admitted", "tasks_quarantined", "episodes", "repaired_episodes",
                    "gate_pass_rate", "exported_rows", "seconds"):
            value = summary[key]
            table.add_row(key.replace("_", " "), f"{value:.0%}" if key == "gate_pass_rate" else str(value))
        out.print(table)
        typer.echo(f"store: {summary['store']}\nSFT data: {summary['export']}")
        if settings is not None:
            out.print(_full_table(summary))
            unseen = summary["unseen_combinations"]
            if summary["value_swaps"]:
                typer.echo(f"trained on {summary['trained_rows']} rows: {summary['sft_rows']} of the training file and "
                           f"their variants with values swapped (--value-swaps {summary['value_swaps']})")
            typer.echo(f"kept out of training ({summary['tasks_kept_out']} tasks): "
                       + (", ".join(unseen) if unseen else "no combination"))
            serving = summary["serving"]
            if serving.get("skipped"):
                typer.echo(f"served path (vLLM) skipped: {serving['skipped']}")
            if len(serving["pass_rate"]) > 1:
                rates = ", ".join(f"{path} {rate:.0%}" for path, rate in serving["pass_rate"].items())
                typer.echo(f"trained model by serving path: {rates}; the same verdict in "
                           f"{serving['agreement']:.0%} of {serving['trials']} trials")
            typer.echo(f"trained model: {summary['trained_model']}")
        typer.echo(f"report: {summary['report']} (open it in a browser)")

    emit(as_json, summary, human)
    if summary.get("collect_failures"):
        raise fail(f"{len(summary['collect_failures'])} tasks could not be collected; run the demo again to retry "
                   "them", code=1)


def _full_prerequisites(settings: FullSettings) -> str | None:
    """Why ``--full`` cannot run here, or ``None``."""
    from ..trainer import resolve_base

    if not settings.scratch:
        try:
            base = resolve_base(settings.base)
        except FileNotFoundError as exc:
            return f"--base {settings.base}: {exc}"
        if settings.sft_pointer_loss() > 0:
            from ..trainer._train import check_pointer_heads

            try:
                check_pointer_heads(base)
            except ValueError as exc:
                return str(exc)
    elif settings.base == "scratch" and settings.sft_pointer_loss() > 0:
        return "--pointer-loss needs a base with pointer heads: --base circuit (--base scratch has none)"
    from ..synth import GENERATED

    unknown = [c for c in settings.capabilities if c not in GENERATED]
    if unknown:
        return f"unknown capability {unknown[0]!r}; known: {', '.join(GENERATED)}"
    try:
        from ..trainer import require_training

        require_training()
    except Exception as exc:  # TrainingUnavailable: the train extra is missing
        return str(exc)
    from ..trainer import check_vllm

    if settings.serve == "vllm":
        try:
            check_vllm(settings.vllm_python)
        except Exception as exc:  # ServeError with the install hint
            return str(exc)
    return None


def _full_table(summary: dict) -> Table:
    table = Table(title="held-out pass rate, base → trained, per split (new seeds; unseen combinations)")
    table.add_column("capability")
    splits = list(SPLITS)
    for split in splits:
        table.add_column(f"{split.replace('_', ' ')}: tasks", justify="right")
        table.add_column("base → trained", justify="right")
    table.add_column("all: base → trained", justify="right")
    pct = lambda x: "-" if x is None else f"{x:.0%}"

    def cells(row: dict) -> list[str]:  # per split: its tasks, base → trained; then all of them
        found = []
        for split in splits:
            cell = row.get("splits", {}).get(split, {})
            found += [str(cell.get("tasks", 0)), f"{pct(cell.get('base'))} → {pct(cell.get('trained'))}"]
        return [*found, f"{pct(row['base'])} → {pct(row['trained'])}"]

    for capability, row in summary["capabilities"].items():
        table.add_row(capability, *cells(row))
    table.add_row("overall", *cells(summary["overall"]))
    return table

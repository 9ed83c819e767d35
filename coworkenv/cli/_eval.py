"""``coworkenv eval``: a model on held-out tasks, through the MCP server."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from ..agents import provider_help
from ..loop import DEFAULT_EVAL_SEED, SPLITS
from ..sandbox import BACKENDS
from ..synth import TEMPLATES
from ..workspace import PROMPT_STYLES
from ._common import err, open_host, progress
from ._common import fail as _fail


def _table(summary: dict[str, Any], k: int) -> Table:
    table = Table("group", "tasks", "trials", "avg score", "pass rate", f"pass@{k}", f"pass^{k}", "avg steps",
                  title="evaluation")
    rows = [("overall", summary["overall"])]
    rows += [(f"split: {s}", summary["splits"][s]) for s in SPLITS]
    rows += [(f"  {c}", v) for c, v in summary["capability_difficulty"].items()]
    for label, stats in rows:
        if not stats["tasks"]:
            table.add_row(label, "0", "0", "-", "-", "-", "-", "-")
            continue
        table.add_row(label, str(stats["tasks"]), str(stats["trials"]), f"{stats['avg_score']:.2f}",
                      f"{stats['pass_rate']:.0%}", f"{stats[f'pass@{k}']:.0%}", f"{stats[f'pass^{k}']:.0%}",
                      f"{stats['avg_steps']:.1f}")
    return table


def eval_command(
    model: Annotated[str, typer.Option("--model", help="The model to evaluate (a served model is openai:NAME@URL): "
                                       + provider_help())],
    store: Annotated[Path, typer.Option("--store", envvar="COWORKENV_STORE", help="The SQLite store file.")] = Path("runs/coworkenv.db"),
    tasks: Annotated[int, typer.Option("-n", "--tasks", min=1, help="Held-out tasks to generate.")] = 12,
    seed: Annotated[int, typer.Option(help="Seed of the held-out tasks (their workspaces must be new).")] = DEFAULT_EVAL_SEED,
    capability: Annotated[list[str] | None, typer.Option(help="Capabilities to cover (repeatable).")] = None,
    trials: Annotated[int, typer.Option(min=1, help="Episodes per task (n).")] = 3,
    k: Annotated[int | None, typer.Option("-k", min=1, help="k of pass@k and pass^k (default: --trials).")] = None,
    style: Annotated[str, typer.Option("--style", help="The agent view the model was trained on: full | compact | minimal.")] = "full",
    temperature: Annotated[float, typer.Option(min=0.0, help="Sampling temperature.")] = 0.7,
    max_tokens: Annotated[int, typer.Option(min=1, help="Tokens per model reply.")] = 512,
    max_steps: Annotated[int | None, typer.Option(min=1, help="Cap on agent steps per episode.")] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Episodes run at once.")] = 4,
    retries: Annotated[int, typer.Option(
        min=0, help="Replays of a trial that an infrastructure failure (model server, sandbox) ended.")] = 2,
    train_data: Annotated[Path | None, typer.Option(
        help="The SFT file the model was trained on (its task_id column); default: the store's training tasks.")] = None,
    profile: Annotated[Path | None, typer.Option(
        help="Where to write the capability profile (default: profile.json beside the store).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the run id and summary as JSON.")] = False,
    sandbox: Annotated[str, typer.Option("--sandbox", help=f"Sandbox backend: {', '.join(BACKENDS)}.")] = "bwrap",
) -> None:
    """Evaluate a model on held-out tasks through the MCP server: pass@k and pass^k per capability."""
    from ..agents import ProviderError
    from ..loop import EvalError, EvalSettings, run_eval, task_ids_in

    capabilities = tuple(capability or TEMPLATES)
    unknown = [c for c in capabilities if c not in TEMPLATES]
    if unknown:
        raise _fail(f"unknown capability {unknown[0]!r}; known: {', '.join(TEMPLATES)}")
    if style not in PROMPT_STYLES:
        raise _fail(f"unknown --style {style!r}; choose one of: {', '.join(PROMPT_STYLES)}")
    try:
        settings = EvalSettings.model_validate(dict(
            model=model, tasks=tasks, seed=seed, capabilities=capabilities, trials=trials, k=k, prompt_style=style,
            temperature=temperature, max_tokens=max_tokens, max_steps=max_steps, concurrency=concurrency,
            retries=retries, api_key=os.environ.get("OPENAI_API_KEY"),
            train_tasks=task_ids_in(train_data) if train_data is not None else None,
        ))
    except ValidationError as exc:
        raise _fail("; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())) from None
    except (ValueError, OSError) as exc:
        raise _fail(str(exc)) from None
    if not store.exists():
        raise _fail(f"no store at {store}; run `coworkenv synth --store {store}` first (or `coworkenv demo`)")
    host = open_host(store, sandbox)
    profile = profile or store.parent / "profile.json"

    async def run():
        with progress() as bar:
            prepare = bar.add_task("held-out tasks", total=tasks)
            play = bar.add_task("episodes", total=None)
            try:
                return await run_eval(host, settings, profile_path=profile,
                                      on_task=lambda _: bar.advance(prepare),
                                      on_trial=lambda _: bar.advance(play))
            finally:
                await host.close()

    try:
        result = asyncio.run(run())
    except (EvalError, ProviderError) as exc:
        raise _fail(str(exc)) from None
    if as_json:
        typer.echo(json.dumps({"run_id": result.run_id, "model": result.model, "profile": str(result.profile_path),
                               "failures": result.failures, **result.summary}, indent=2))
    else:
        Console().print(_table(result.summary, settings.pass_k))
        err.print(f"eval run {result.run_id} stored in {store}; profile: {result.profile_path}")
    if result.failures:
        for trial, why in sorted(result.failures.items()):
            err.print(f"  [red]failed[/red] {trial}: {why}")
        raise _fail(f"{len(result.failures)} trials ended by infrastructure failures (left out of the figures)",
                    code=1)

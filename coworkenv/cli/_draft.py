"""``coworkenv draft``: a model writes tasks, calibration judges them, failures go back for repair."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from ..agents import provider_help
from ..synth import GENERATED
from ._common import (
    DEFAULT_STORE,
    FAILED,
    JsonOpt,
    SandboxOpt,
    StoreOpt,
    check_apps,
    check_capabilities,
    emit,
    err,
    fail,
    open_host,
    progress,
)


def draft_command(
    provider: Annotated[str, typer.Option("--provider", help="The model that drafts (any but the oracle): " + provider_help())],
    capability: Annotated[str, typer.Option("--capability", help=f"The capability the tasks target: {', '.join(GENERATED)}.")],
    store: StoreOpt = Path(DEFAULT_STORE),
    n: Annotated[int, typer.Option("-n", "--tasks", min=1, help="How many tasks to ask for.")] = 1,
    rounds: Annotated[int, typer.Option(
        min=1, help="Drafts per task: a draft that fails goes back with its feedback until one is admitted.")] = 3,
    seed: Annotated[int, typer.Option(help="Seed of the workspace the tasks are written for.")] = 0,
    app_names: Annotated[list[str] | None, typer.Option(
        "--app", metavar="APP", help="An app of the workspace (repeatable; default: every app).")] = None,
    temperature: Annotated[float, typer.Option(min=0.0, help="Sampling temperature of the drafting model.")] = 0.7,
    max_tokens: Annotated[int, typer.Option(min=1, help="Tokens per draft.")] = 4096,
    sandbox: SandboxOpt = "bwrap",
    as_json: JsonOpt = False,
) -> None:
    """Have a model write tasks in the spec format; admit those that calibrate, repairing the others.

    A draft that does not parse, or that calibration quarantines, goes back to the model with the
    exact error or the failing checks, for up to --rounds rounds. Every attempt is stored with its
    feedback and outcome (coworkenv tasks list shows the tasks), so the repair rate per round shows."""
    from .._errors import ModelError
    from ..agents import ProviderError, ProviderSettings, chat_model, parse_provider, provider_problem
    from ..synth import draft_tasks

    try:
        spec = parse_provider(provider)
        settings = ProviderSettings(temperature=temperature, max_tokens=max_tokens,
                                    api_key=os.environ.get("OPENAI_API_KEY"))
        problem = provider_problem(spec, os.environ)
        if problem is None:
            chat_model(spec, None, None, settings)  # a provider that cannot draft says so now
    except ProviderError as exc:
        raise fail(str(exc)) from None
    if problem:
        raise fail(problem)
    check_capabilities([capability])
    apps = check_apps(app_names)
    host = open_host(store, sandbox, create=True)

    async def run():
        with progress() as bar:
            job = bar.add_task("drafting tasks", total=n)

            def attempted(row) -> None:
                bar.update(job, description=f"drafting tasks (last: round {row.round}, {row.outcome})")
                if row.outcome == "admitted" or row.round == rounds:
                    bar.advance(job)

            try:
                return await draft_tasks(host, spec, capability=capability, n=n, rounds=rounds, seed=seed,
                                         apps=apps, settings=settings,
                                         on_attempt=attempted)
            finally:
                await host.close()

    try:
        summary = asyncio.run(run())
    except ModelError as exc:
        raise fail(f"{exc} (the attempts before it are stored in {store})", code=FAILED) from None

    by_round = {r: {"reached": summary.reached[r], "admitted": summary.admitted_by_round.get(r, 0), "rate": rate}
                for r, rate in summary.rate_by_round.items()}

    def human() -> None:
        outcomes = ", ".join(f"{outcome} {count}" for outcome, count in summary.outcomes.items())
        err.print(f"requests {summary.requests}, attempts {summary.attempts} ({outcomes}), "
                  f"admitted {summary.admitted} on {summary.workspace_id}")
        err.print("admitted by round: " + ", ".join(
            f"round {r}: {v['admitted']} of {v['reached']} ({v['rate']:.0%})" for r, v in by_round.items()))
        for request_id, feedback in summary.failed.items():
            err.print(f"  [yellow]not admitted[/yellow] {request_id}: {escape(' '.join(feedback.split()))}")

    emit(as_json, {"store": str(store), "provider": spec.label, "capability": capability,
                   "workspace_id": summary.workspace_id, "requests": summary.requests, "attempts": summary.attempts,
                   "admitted": summary.admitted, "outcomes": summary.outcomes, "rounds": by_round,
                   "tasks": summary.tasks, "failed": summary.failed}, human)

"""The ``coworkenv`` command line: thin commands over the library."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Annotated

import typer
from pydantic import SecretStr
from rich.console import Console
from rich.table import Table

from ..agents import provider_help
from ..gate import run_gate
from ..server import ServeSettings, serve_conformance, serve_http, serve_stdio
from ..store import Store
from ..synth import TEMPLATES, ProfileError, load_profile, synthesize
from ..workspace import PROMPT_STYLES, PromptStyle
from ._common import DEFAULT_STORE, SandboxOpt, StoreOpt, check_sandbox, err, fail, open_host, progress
from ._demo import demo_command
from ._eval import eval_command
from ._serve_model import serve_model_command
from ._train import model_app, train_app
from ._sandbox import sandbox_app

app = typer.Typer(
    name="coworkenv",
    help="Synthesize executable workspaces for tool-using agents, serve them over MCP in sandboxes, "
    "collect and gate trajectories, and export training data.",
    no_args_is_help=True,
    add_completion=False,
)
export_app = typer.Typer(help="Export datasets from the store.", no_args_is_help=True)
app.add_typer(export_app, name="export")
app.add_typer(model_app, name="model")
app.add_typer(train_app, name="train")
app.add_typer(sandbox_app, name="sandbox")
app.command("demo")(demo_command)
app.command("serve-model")(serve_model_command)
app.command("eval")(eval_command)

@app.command()
def synth(
    store: StoreOpt = Path(DEFAULT_STORE),
    n: Annotated[int, typer.Option("-n", "--tasks", min=1, help="How many tasks to generate.")] = 12,
    seed: Annotated[int, typer.Option(help="Seed of the generation.")] = 0,
    capability: Annotated[list[str] | None, typer.Option(help="Capabilities to cover (repeatable).")] = None,
    sandbox: SandboxOpt = "bwrap",
    concurrency: Annotated[int, typer.Option(min=1, help="Tasks calibrated at once.")] = 1,
    profile: Annotated[Path | None, typer.Option(
        help="A capability profile written by `coworkenv eval`: spend the tasks where the model fails most.")] = None,
) -> None:
    """Generate tasks deterministically from a seed and admit those that calibrate."""
    capabilities = tuple(capability or TEMPLATES)
    unknown = [c for c in capabilities if c not in TEMPLATES]
    if unknown:
        raise fail(f"unknown capability {unknown[0]!r}; known: {', '.join(TEMPLATES)}")
    try:
        measured = load_profile(profile) if profile is not None else None
    except ProfileError as exc:
        raise fail(str(exc)) from None
    host = open_host(store, sandbox)

    async def run():
        with progress() as bar:
            job = bar.add_task("calibrating tasks", total=n)
            try:
                return await synthesize(host, n, seed, capabilities=capabilities, profile=measured,
                                        on_task=lambda *_: bar.advance(job), concurrency=concurrency)
            finally:
                await host.close()

    summary = asyncio.run(run())
    if measured is not None:
        err.print("tasks per capability (from the profile): "
                  + ", ".join(f"{c} {k}" for c, k in summary.allocation.items()))
    err.print(f"generated {summary.generated}, admitted {summary.admitted}, "
              f"quarantined {len(summary.quarantined)} (already calibrated: {summary.skipped})")
    for task_id, reason in summary.quarantined.items():
        err.print(f"  [yellow]quarantined[/yellow] {task_id}: {reason}")


@app.command()
def serve(
    store: StoreOpt = Path(DEFAULT_STORE),
    stdio: Annotated[bool, typer.Option("--stdio", help="Serve one episode on stdin/stdout.")] = False,
    task: Annotated[str | None, typer.Option(help="The task of the episode (with --stdio).")] = None,
    host: Annotated[str, typer.Option("--host", help="Address to bind (HTTP).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to bind (HTTP).")] = 8765,
    sandbox: SandboxOpt = "bwrap",
    token: Annotated[str | None, typer.Option(
        envvar="COWORKENV_TOKEN", help="Bearer token clients must send (required unless bound to loopback).")] = None,
    allowed_host: Annotated[list[str] | None, typer.Option(
        "--allowed-host", help="A Host name clients may use besides the bind address (repeatable).")] = None,
    idle_timeout: Annotated[float, typer.Option(min=1, help="End an episode after this many idle seconds.")] = 1800,
    fresh_idle_timeout: Annotated[float, typer.Option(
        min=1, help="End an episode that has made no call after this many idle seconds.")] = 120,
    max_episodes: Annotated[int, typer.Option(min=1, help="Episodes open at once, in all.")] = 2048,
    max_episodes_per_client: Annotated[int, typer.Option(
        min=1, help="Episodes one client address may hold open at once.")] = 1024,
    serve_heldout: Annotated[bool, typer.Option(
        "--serve-heldout", help="Serve held-out (evaluation) tasks to any client too.")] = False,
    rate: Annotated[float, typer.Option(min=0, help="Requests/s allowed per episode and client (0: no limit).")] = 50,
    client_rate: Annotated[float, typer.Option(
        min=0, help="Requests/s allowed per client address, all episodes together (0: no limit).")] = 0,
    conformance: Annotated[bool, typer.Option(
        "--conformance", help="Serve the MCP conformance suite's fixtures at /mcp instead of tasks.")] = False,
) -> None:
    """Serve the stored tasks over MCP: one sandboxed episode per session (HTTP) or per process (stdio)."""
    settings = ServeSettings(bind=host, port=port, token=SecretStr(token) if token is not None else None,
                             allowed_hosts=allowed_host or [],
                             session_idle_timeout=idle_timeout, episode_idle_timeout=idle_timeout,
                             fresh_idle_timeout=min(fresh_idle_timeout, idle_timeout), max_episodes=max_episodes,
                             max_episodes_per_client=max_episodes_per_client, serve_heldout=serve_heldout,
                             rate_per_s=rate or None, client_rate_per_s=client_rate or None)
    try:
        settings.check()
    except ValueError as exc:
        raise fail(f"{exc} (--token or $COWORKENV_TOKEN)") from None
    if conformance:
        err.print(f"serving the MCP conformance fixtures on http://{host}:{port}/mcp")
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve_conformance(settings))
        return
    if stdio and not task:
        raise fail("--stdio needs --task TASK_ID (one episode per process)")
    if not stdio and task:
        raise fail("--task goes with --stdio; over HTTP each task is at /t/{task}/mcp")
    if not store.exists():
        raise fail(f"no store at {store}; run `coworkenv synth --store {store}` first")
    episodes = open_host(store, sandbox)
    row = episodes.store.task(task) if task else None
    if task and row is None:
        raise fail(f"no task {task!r} in {store}")
    if row is not None and row.status not in (("admitted", "heldout") if serve_heldout else ("admitted",)):
        raise fail(f"task {task!r} is {row.status}" + (f" ({row.reason})" if row.reason else "")
                   + ("; --serve-heldout serves it" if row.status == "heldout" else "; only admitted tasks are served"))
    if stdio and task:
        asyncio.run(serve_stdio(episodes, task))
        return
    err.print(f"serving MCP on http://{host}:{port}/t/<task>/mcp (tasks: http://{host}:{port}/tasks)")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve_http(episodes, settings))


@app.command("collect")
def collect_command(
    store: StoreOpt = Path(DEFAULT_STORE),
    provider: Annotated[str, typer.Option(help=provider_help())] = "oracle",
    error_rate: Annotated[float, typer.Option(min=0.0, max=1.0, help="Oracle only: share of episodes with a mistake.")] = 0.3,
    seed: Annotated[int, typer.Option(help="Oracle only: seed of its mistakes.")] = 0,
    url: Annotated[str | None, typer.Option(
        help="A running `coworkenv serve` on the same store to play through (default: an in-process one).")] = None,
    token: Annotated[str | None, typer.Option(
        envvar="COWORKENV_TOKEN", help="Bearer token of the server at --url.")] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="At most this many tasks.")] = None,
    max_repairs: Annotated[int, typer.Option(min=0, help="Repair attempts per failed task.")] = 2,
    retries: Annotated[int, typer.Option(
        min=0, help="Replays of an episode that an infrastructure failure (model server, sandbox) ended.")] = 2,
    concurrency: Annotated[int, typer.Option(min=1, help="Tasks run at once.")] = 4,
    sandbox: SandboxOpt = "bwrap",
) -> None:
    """Run the LangGraph teacher on admitted tasks over MCP, repairing failed episodes."""
    from ..agents import ProviderError, ProviderSettings, parse_provider
    from ..loop import LocalEpisodes, RemoteEpisodes, TeacherSettings, collect
    from ..server import running_http_server

    try:
        parse_provider(provider)
    except ProviderError as exc:
        raise fail(str(exc)) from None
    settings = TeacherSettings(
        provider=provider, max_repairs=max_repairs, retries=retries, concurrency=concurrency,
        provider_settings=ProviderSettings(error_rate=error_rate, seed=seed,
                                           api_key=os.environ.get("OPENAI_API_KEY")),
    )
    if url is None:
        host = open_host(store, sandbox)
    elif not store.exists():
        raise fail(f"no store at {store}; --url needs the store that server serves")

    async def run():
        with progress() as bar:
            job = bar.add_task("collecting trajectories", total=None)
            if url is not None:
                remote = RemoteEpisodes(url, token=token)
                try:
                    return await collect(Store(store), remote, settings, limit=limit, on_run=lambda _: bar.advance(job))
                finally:
                    await remote.aclose()
            try:
                async with running_http_server(host) as local_url:
                    return await collect(host.store, LocalEpisodes(host, local_url), settings, limit=limit,
                                         on_run=lambda _: bar.advance(job))
            finally:
                await host.close()

    summary = asyncio.run(run())
    err.print(f"tasks {summary.tasks} (already done: {summary.skipped}), episodes {summary.episodes}, "
              f"repaired {summary.repaired}, succeeded {summary.succeeded}")
    if summary.failures:
        for task_id, why in sorted(summary.failures.items()):
            err.print(f"  [red]failed[/red] {task_id}: {why}")
        raise fail(f"{len(summary.failures)} of {summary.tasks} tasks could not be collected "
                   f"({summary.infrastructure_failures} episodes ended by infrastructure failures); "
                   "run collect again to retry them", code=1)


@app.command()
def gate(
    store: StoreOpt = Path(DEFAULT_STORE),
    regrade: Annotated[bool, typer.Option(help="Grade again episodes that already have a verdict.")] = False,
) -> None:
    """Grade ended episodes and record verdicts (incremental by grader version)."""
    if not store.exists():
        raise fail(f"no store at {store}")
    summary = run_gate(Store(store), regrade=regrade)
    table = Table("reason", "episodes")
    for reason, count in summary.reasons.most_common():
        table.add_row(reason, str(count))
    Console().print(table)
    err.print(f"graded {summary.graded}, admitted {summary.admitted} ({summary.pass_rate:.0%})")


StyleOpt = Annotated[str, typer.Option("--style", help="Agent view the rows show: full | compact (short prompt, "
                                        "only the tools of the apps a task needs; for small models) | minimal "
                                        "(compact without descriptions; for tiny models).")]


def check_style_option(style: str) -> PromptStyle:
    if style not in PROMPT_STYLES:
        raise fail(f"unknown --style {style!r}; choose one of: {', '.join(PROMPT_STYLES)}")
    return style  # type: ignore[return-value]  # one of PROMPT_STYLES


@export_app.command("sft")
def export_sft_command(
    store: StoreOpt = Path(DEFAULT_STORE),
    out: Annotated[Path, typer.Option(help="Output JSON-lines file.")] = Path("runs/export/sft.jsonl"),
    style: StyleOpt = "full",
) -> None:
    """Admitted trajectories as chat messages with tool calls plus a tools column (TRL SFT format)."""
    from ..trainer import export_sft

    if not store.exists():
        raise fail(f"no store at {store}")
    rows = export_sft(Store(store), out, style=check_style_option(style))
    err.print(f"wrote {rows} rows to {out}")


@export_app.command("dpo")
def export_dpo_command(
    store: StoreOpt = Path(DEFAULT_STORE),
    out: Annotated[Path, typer.Option(help="Output JSON-lines file.")] = Path("runs/export/dpo.jsonl"),
    style: StyleOpt = "full",
) -> None:
    """Repaired-versus-failed pairs (prompt, chosen, rejected, tools) for TRL's DPOTrainer."""
    from ..trainer import export_dpo

    if not store.exists():
        raise fail(f"no store at {store}")
    rows = export_dpo(Store(store), out, style=check_style_option(style))
    err.print(f"wrote {rows} pairs to {out}")


@app.command("check-sandbox")
def check_sandbox_command(sandbox: SandboxOpt = "bwrap") -> None:
    """Check that a sandbox backend works on this machine."""
    from ..sandbox import BACKENDS

    check_sandbox(sandbox)
    typer.echo(f"{sandbox}: available at {BACKENDS[sandbox].check_available()}")

"""The ``coworkenv`` command line: thin commands over the library."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import SecretStr
from rich.markup import escape
from rich.table import Table

from .. import __version__
from ..agents import provider_help
from ..gate import GRADER_VERSION, reason_rule, run_gate
from ..server import ServeSettings, redact_url, serve_conformance, serve_http, serve_stdio, unix_socket
from ..synth import ProfileError, WorkerError, load_profile, synthesize
from ..trainer import DEFAULT_LICENSE, DatasetFormat, ExportKind, TrainingUnavailable
from ..workspace import PromptStyle
from ._browse import browse_command
from ._bundle import bundle_app
from ._claw import claw_app
from ._common import (
    DEFAULT_STORE,
    FAILED,
    AppOpt,
    CapabilityOpt,
    GeneratorOpt,
    JsonOpt,
    PerWorkspaceOpt,
    RayOpt,
    SandboxOpt,
    StoreOpt,
    UserModelOpt,
    check_apps,
    check_capabilities,
    check_ray,
    check_sandbox,
    emit,
    err,
    fail,
    is_quiet,
    listen_or_fail,
    on_cluster,
    open_host,
    open_store,
    out,
    progress,
    ray_cluster,
    set_verbosity,
)
from ._compose import compose_app
from ._demo import demo_command
from ._doctor import doctor_command
from ._draft import draft_command
from ._eval import eval_command
from ._inspect import register as register_inspect
from ._report import report_command
from ._sandbox import sandbox_app
from ._serve_model import serve_model_command
from ._terminal import CoworkGroup
from ._train import model_app, train_app
from ._view import view_command

app = typer.Typer(
    name="coworkenv",
    cls=CoworkGroup,  # commands in the loop's order, plain usage lines, Ctrl-C as one line
    help="Synthesize executable workspaces for tool-using agents, serve them over MCP in sandboxes, "
    "collect and gate trajectories, and export training data.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
export_app = typer.Typer(help="Export datasets from the store.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(export_app, name="export")
app.add_typer(model_app, name="model")
app.add_typer(train_app, name="train")
app.add_typer(sandbox_app, name="sandbox")
app.add_typer(bundle_app, name="bundle")
app.add_typer(compose_app, name="compose")
app.add_typer(claw_app, name="claw-eval")
register_inspect(app)  # tasks, episodes, runs
app.command("demo")(demo_command)
app.command("serve-model")(serve_model_command)
app.command("eval")(eval_command)
app.command("draft")(draft_command)
app.command("doctor")(doctor_command)
app.command("browse")(browse_command)
app.command("report")(report_command)
app.command("view")(view_command)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"coworkenv {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
    verbose: Annotated[int, typer.Option("-v", "--verbose", count=True,
                                         help="Say more: -v logs what the library does, -vv debug detail.")] = 0,
    quiet: Annotated[bool, typer.Option("-q", "--quiet", help="Only errors and results: no progress.")] = False,
) -> None:
    """Exit codes: 0 done, 1 the work failed (e.g. episodes that could not be collected), 2 a usage
    error (an option, a file or a store that cannot be used)."""
    set_verbosity(-1 if quiet else verbose)


@app.command()
def synth(
    store: StoreOpt = Path(DEFAULT_STORE),
    n: Annotated[int, typer.Option("-n", "--tasks", "--budget", min=1, help="How many tasks to generate.")] = 12,
    seed: Annotated[int, typer.Option(help="Seed of the generation.")] = 0,
    capability: CapabilityOpt = None,
    generator: GeneratorOpt = "all",
    app_name: AppOpt = None,
    sandbox: SandboxOpt = "bwrap",
    concurrency: Annotated[int | None, typer.Option(
        min=1, show_default=False, help="Tasks calibrated at once (on each node, with --ray).  [default: 4 in one "
        "process, 1 on each node]")] = None,
    profile: Annotated[Path | None, typer.Option(
        help="A capability profile written by `coworkenv eval`: spend the budget by capability and difficulty "
             "where the model fails most.")] = None,
    ray: RayOpt = None,
    workers: Annotated[int, typer.Option(
        min=1, max=64, help="Calibrate in this many processes of this machine (one task at a time each) while "
        "generation goes on; worth it with more than two cores.")] = 1,
    per_workspace: PerWorkspaceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Generate tasks deterministically from a seed and admit those that calibrate and that no hack
    probe beats."""
    capabilities = check_capabilities(capability)
    apps = check_apps(app_name)
    try:
        measured = load_profile(profile) if profile is not None else None
    except ProfileError as exc:
        raise fail(str(exc)) from None
    if workers > 1 and ray is not None:
        raise fail("--workers runs calibration in processes of this machine; --ray runs it on a cluster's nodes")
    if workers > 1 and concurrency is not None and concurrency > 1:
        raise fail("--concurrency is what one process calibrates at once; with --workers each worker process "
                   "calibrates one task at a time")
    if concurrency is None:  # four at once keep a process and its sandboxes busier than one or two (RESULTS.md)
        concurrency = 4 if ray is None and workers == 1 else 1
    check_ray(ray)
    host = open_host(store, sandbox, create=True, local=ray is None)

    async def run():
        with progress() as bar:
            job = bar.add_task("calibrating tasks", total=n)
            options: dict[str, Any] = dict(capabilities=capabilities, profile=measured, apps=apps, generator=generator,
                                           per_workspace=per_workspace, on_task=lambda *_: bar.advance(job))
            try:
                if ray is None:
                    return await synthesize(host, n, seed, concurrency=concurrency, workers=workers, **options)
                async with ray_cluster(ray, host, concurrency) as cluster:  # the cluster bounds what runs at once
                    return await synthesize(host, n, seed, concurrency=n, calibrate=cluster.calibrate, **options)
            finally:
                await host.close()

    try:
        summary = on_cluster(lambda: asyncio.run(run()))
    except WorkerError as exc:
        raise fail(str(exc), code=FAILED) from None

    def human() -> None:
        if measured is not None:
            err.print("tasks per capability (from the profile): "
                      + ", ".join(f"{c} {k}" for c, k in summary.allocation.items()))
        err.print(f"asked {n}: generated {summary.generated}, admitted {summary.admitted}, "
                  f"quarantined {len(summary.quarantined)} (already calibrated: {summary.skipped}; "
                  f"near-duplicates dropped: {summary.duplicates})")
        if summary.not_generated:  # the budget not met: which capabilities ran out of new tasks
            err.print(f"  [yellow]not generated[/yellow] {sum(summary.not_generated.values())}: "
                      + ", ".join(f"{c} {k}" for c, k in sorted(summary.not_generated.items()))
                      + " (their templates found nothing new to make in these workspaces: nothing to work on, or "
                      "near-duplicates of tasks made already; --seed or --app give others)")
        for reason, task_ids in _by_reason(summary.quarantined).items():  # a line per reason, not per task
            shown = ", ".join(task_ids[:3]) + (f" and {len(task_ids) - 3} more" if len(task_ids) > 3 else "")
            err.print(f"  [yellow]quarantined[/yellow] {len(task_ids)}: {escape(reason)} ({escape(shown)})")
        if summary.admitted:
            table = Table("admitted by", "counts")
            for key, counts in summary.admitted_by.items():
                table.add_row(key, ", ".join(f"{name} {k}" for name, k in counts.items()))
            out.print(table)
            err.print(f"distinct instructions: {summary.distinct_instructions:.0%} of the admitted tasks"
                      + (f"; hack probes that beat a task: {summary.beaten}" if summary.beaten else ""))

    emit(as_json, {"store": str(store), "asked": n, "generated": summary.generated, "admitted": summary.admitted,
                   "not_generated": summary.not_generated, "quarantined": summary.quarantined,
                   "quarantined_by_reason": {r: len(ids) for r, ids in _by_reason(summary.quarantined).items()},
                   "skipped": summary.skipped,
                   "allocation": summary.allocation, "duplicates": summary.duplicates,
                   "admitted_by": summary.admitted_by, "distinct_instructions": summary.distinct_instructions,
                   "beaten": summary.beaten}, human)


def _by_reason(quarantined: dict[str, str]) -> dict[str, list[str]]:
    """Reason -> the tasks quarantined for it, the most frequent reason first."""
    found: dict[str, list[str]] = {}
    for task_id, reason in quarantined.items():
        found.setdefault(reason, []).append(task_id)
    return dict(sorted(found.items(), key=lambda item: -len(item[1])))


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
    operator_token: Annotated[str | None, typer.Option(
        envvar="COWORKENV_OPERATOR_TOKEN", help="The operator's credential (X-Coworkenv-Operator header), not the "
        "clients' token: only it opens teacher, eval, rl and calibration episodes, ends episodes as infrastructure "
        "failures and reads others' verdicts (collect --url sends it).")] = None,
    allowed_host: Annotated[list[str] | None, typer.Option(
        "--allowed-host", help="A Host name clients may use besides the bind address (repeatable).")] = None,
    idle_timeout: Annotated[float, typer.Option(min=1, help="End an episode after this many idle seconds.")] = 1800,
    fresh_idle_timeout: Annotated[float, typer.Option(
        min=1, help="End an episode that has made one call or none (an address opened and left, a one-shot "
        "tools/call) after this many idle seconds.")] = 120,
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
    user_model: UserModelOpt = "",
    hide_grade: Annotated[bool, typer.Option(
        "--hide-grade", help="Do not tell live clients their score and failed checks when they submit.")] = False,
    sync: Annotated[bool, typer.Option(
        "--sync", help="Commit each tool call to the store before its result is sent: a killed server loses no "
        "answered call (by default calls are written behind, at most 50 ms after their result).")] = False,
    upstream: Annotated[str | None, typer.Option(
        envvar="COWORKENV_UPSTREAM", help="A model server's base URL (…/v1): record what agents and their model say "
        "through OpenAI- and Anthropic-compatible endpoints at each episode's address (…/e/<key>/v1).")] = None,
    upstream_view: Annotated[PromptStyle | None, typer.Option(
        help="Rewrite chat requests into the agent view the served model was trained on (its system prompt and "
        "the task's tools in that view).")] = None,
    workers: Annotated[int, typer.Option(
        min=1, max=256, help="Worker processes behind the one address (HTTP): each episode lives in one, and every "
        "request reaches the worker that holds its episode.")] = 1,
    worker_socket: Annotated[str | None, typer.Option(hidden=True, help="Serve as one of --workers' processes.")] = None,
    caps_socket: Annotated[str | None, typer.Option(
        hidden=True, help="As one of --workers' processes: where the front counts open episodes for all workers.")] = None,
) -> None:
    """Serve the stored tasks over MCP: one sandboxed episode per session (HTTP) or per process (stdio)."""
    settings = ServeSettings(bind=host, port=port, token=SecretStr(token) if token is not None else None,
                             operator_token=SecretStr(operator_token) if operator_token is not None else None,
                             allowed_hosts=allowed_host or [],
                             session_idle_timeout=idle_timeout, episode_idle_timeout=idle_timeout,
                             fresh_idle_timeout=min(fresh_idle_timeout, idle_timeout), max_episodes=max_episodes,
                             max_episodes_per_client=max_episodes_per_client, serve_heldout=serve_heldout,
                             rate_per_s=rate or None, client_rate_per_s=client_rate or None, upstream=upstream,
                             upstream_view=upstream_view)
    if upstream_view is not None and upstream is None:
        raise fail("--upstream-view goes with --upstream (the model server whose requests it rewrites)")
    if upstream is not None and not upstream.startswith(("http://", "https://")):
        raise fail(f"--upstream {upstream!r} is not an http(s) URL (e.g. http://127.0.0.1:8000/v1)")
    try:
        settings.check()
    except ValueError as exc:
        raise fail(f"{exc} (--token or $COWORKENV_TOKEN, --operator-token or $COWORKENV_OPERATOR_TOKEN)") from None
    if workers > 1 and stdio:
        raise fail("--workers serves HTTP; --stdio is one episode in one process")
    if workers > 1 and worker_socket is None:
        _serve_with_workers(workers, settings, "conformance fixtures at /mcp" if conformance else "")
        return
    if conformance:
        if worker_socket is not None:
            with contextlib.suppress(KeyboardInterrupt):
                asyncio.run(serve_conformance(settings, sock=unix_socket(worker_socket), worker=True))
            return
        sock = listen_or_fail(host, port)
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve_conformance(settings, sock=sock, on_ready=lambda: err.print(
                f"serving the MCP conformance fixtures on http://{host}:{sock.getsockname()[1]}/mcp")))
        return
    if stdio and not task:
        raise fail("--stdio needs --task TASK_ID (one episode per process)")
    if not stdio and task:
        raise fail("--task goes with --stdio; over HTTP each task is at /t/{task}/mcp")
    episodes = open_host(store, sandbox, user_model=user_model, reveal_grade=not hide_grade, sync=sync)
    if not is_quiet():  # one line per ended episode
        logging.getLogger("coworkenv.server.episodes").setLevel(logging.INFO)
    row = episodes.store.task(task) if task else None
    if task and row is None:
        raise fail(f"no task {task!r} in {store} (coworkenv tasks list --store {store} lists them)")
    if row is not None and row.status not in (("admitted", "heldout") if serve_heldout else ("admitted",)):
        raise fail(f"task {task!r} is {row.status}" + (f" ({row.reason})" if row.reason else "")
                   + ("; --serve-heldout serves it" if row.status == "heldout" else "; only admitted tasks are served"))
    if stdio and task:
        asyncio.run(serve_stdio(episodes, task))
        return
    if worker_socket is not None:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve_http(episodes, settings, sock=unix_socket(worker_socket), worker=True,
                                   caps_socket=caps_socket))
        return
    sock = listen_or_fail(host, port)
    bound = sock.getsockname()[1]

    def ready() -> None:
        err.print(f"serving MCP on http://{host}:{bound}/t/<task>/mcp (tasks: http://{host}:{bound}/tasks); "
                  "Ctrl-C stops it")
        if upstream:
            err.print(f"recording model calls to {redact_url(upstream)} at http://{host}:{bound}/t/<task>/e/<key>/v1")

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve_http(episodes, settings, sock=sock, on_ready=ready))


def _serve_with_workers(count: int, settings: ServeSettings, what: str) -> None:
    """``serve --workers N``: N worker processes (this command's options) behind a front on the one
    address, which enforces the token, body size, client rate and episode caps for all of them."""
    import sys
    import tempfile

    from ..server import Workers, serve_front

    argv = sys.argv[sys.argv.index("serve") + 1:] if "serve" in sys.argv else []
    args: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--workers":
            skip = True
        elif not arg.startswith("--workers="):
            args.append(arg)
    host, port = settings.bind, settings.port
    sock = listen_or_fail(host, port)
    bound = sock.getsockname()[1]

    def ready() -> None:
        served = what or f"MCP on http://{host}:{bound}/t/<task>/mcp (tasks: http://{host}:{bound}/tasks)"
        err.print(f"serving {served} with {count} workers on http://{host}:{bound}; Ctrl-C stops it")

    # the workers' sockets, in a folder of this user's only; short, since a socket's path has ~100 bytes at most
    base = tempfile.gettempdir()
    base = "/tmp" if len(base) > 60 and os.path.isdir("/tmp") else base
    with tempfile.TemporaryDirectory(prefix="cw-workers-", dir=base) as directory, \
            Workers(args, count, Path(directory)) as running:
        try:
            asyncio.run(serve_front(running, sock, settings=settings, on_ready=ready))
        except KeyboardInterrupt:
            pass
        except RuntimeError as exc:
            raise fail(str(exc)) from None


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
    operator_token: Annotated[str | None, typer.Option(
        envvar="COWORKENV_OPERATOR_TOKEN", help="Operator credential of the server at --url (its --operator-token): "
        "teacher episodes open with it only.")] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="At most this many tasks.")] = None,
    episodes_per_task: Annotated[int, typer.Option(
        min=1, help="Admitted episodes wanted of each task from this provider (collect again for more).")] = 1,
    max_repairs: Annotated[int, typer.Option(min=0, help="Repair attempts per failed task.")] = 2,
    retries: Annotated[int, typer.Option(
        min=0, help="Replays of an episode that an infrastructure failure (model server, sandbox) ended.")] = 2,
    concurrency: Annotated[int, typer.Option(min=1, help="Tasks run at once (on each node, with --ray).")] = 4,
    sandbox: SandboxOpt = "bwrap",
    user_model: UserModelOpt = "",
    ray: RayOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run the LangGraph teacher on admitted tasks over MCP, repairing failed episodes.

    A task is done when it has --episodes-per-task admitted episodes from this provider: another
    provider on the same store collects its own. Collectors of one provider on one store share the
    work: each claims a task before playing it and leaves the tasks another one holds."""
    from ..agents import ProviderError, ProviderSettings, parse_provider, provider_problem
    from ..loop import LocalEpisodes, RemoteEpisodes, TeacherSettings, collect
    from ..server import running_http_server

    try:
        spec = parse_provider(provider)
    except ProviderError as exc:
        raise fail(str(exc)) from None
    problem = provider_problem(spec, os.environ)
    if problem:
        raise fail(problem)
    settings = TeacherSettings(
        provider=provider, max_repairs=max_repairs, retries=retries, concurrency=concurrency,
        episodes_per_task=episodes_per_task,
        provider_settings=ProviderSettings(error_rate=error_rate, seed=seed,
                                           api_key=os.environ.get("OPENAI_API_KEY")),
    )
    if url is not None and ray is not None:
        raise fail("--url and --ray are two places to play: give one")
    check_ray(ray)
    if url is None:
        host = open_host(store, sandbox, user_model=user_model, local=ray is None)
    elif user_model:
        raise fail("--user-model goes with an in-process server; the server at --url plays its own users "
                   "(coworkenv serve --user-model)")
    else:
        shared = open_store(store)

    async def run():
        with progress() as bar:
            job = bar.add_task("collecting trajectories", total=None)

            def started(summary) -> None:
                bar.update(job, total=summary.runs)

            if url is not None:
                remote = RemoteEpisodes(url, token=token, operator_token=operator_token)
                try:
                    return await collect(shared, remote, settings, limit=limit, on_run=lambda _: bar.advance(job),
                                         on_start=started)
                finally:
                    await remote.aclose()
            try:
                if ray is not None:
                    async with ray_cluster(ray, host, concurrency) as cluster:
                        return await collect(host.store, None, settings, limit=limit, cluster=cluster,
                                             on_run=lambda _: bar.advance(job), on_start=started)
                async with running_http_server(host) as local_url:
                    return await collect(host.store, LocalEpisodes(host, local_url), settings, limit=limit,
                                         on_run=lambda _: bar.advance(job), on_start=started)
            finally:
                await host.close()

    summary = on_cluster(lambda: asyncio.run(run()))

    def human() -> None:
        elsewhere = f", left to another collector: {summary.elsewhere}" if summary.elsewhere else ""
        err.print(f"tasks {summary.tasks} (already done: {summary.skipped}{elsewhere}), episodes {summary.episodes}, "
                  f"repaired {summary.repaired}, succeeded {summary.succeeded}")
        for task_id, why in sorted(summary.failures.items()):
            err.print(f"  [red]failed[/red] {task_id}: {escape(why)}")

    emit(as_json, {"store": str(store), "provider": spec.label, "tasks": summary.tasks, "skipped": summary.skipped,
                   "elsewhere": summary.elsewhere, "episodes": summary.episodes, "repaired": summary.repaired,
                   "succeeded": summary.succeeded, "infrastructure_failures": summary.infrastructure_failures,
                   "failures": summary.failures}, human)
    if summary.failures:
        raise fail(f"{len(summary.failures)} of {summary.tasks} tasks could not be collected "
                   f"({summary.infrastructure_failures} episodes ended by infrastructure failures); "
                   "run collect again to retry them", code=FAILED)


@app.command()
def gate(
    store: StoreOpt = Path(DEFAULT_STORE),
    regrade: Annotated[bool, typer.Option(help="Grade again episodes that already have a verdict.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Grade ended episodes and record verdicts (incremental by grader version)."""
    summary = run_gate(open_store(store), regrade=regrade)
    counted = "agents' episodes (teacher, live, eval, rl)"
    apart = (f"; {summary.calibration} calibration episodes (task references and hack probes designed to fail) "
             "graded apart, not counted" if summary.calibration else "")

    def human() -> None:
        if not summary.graded and not summary.calibration:  # one line, not an empty table
            err.print("nothing to grade: " + ("the store holds no ended episode" if regrade else
                      f"every ended episode has a verdict of grader version {GRADER_VERSION} "
                      "(--regrade grades them again)"), highlight=False)
            return
        table = Table("reason", "episodes", "rule", title=f"verdicts of {counted}")
        for reason, count in summary.reasons.most_common():
            example = summary.examples.get(reason)
            table.add_row(reason, str(count), reason_rule(reason) + (f"\ne.g. {example}" if example else ""))
        if summary.reasons:
            out.print(table)
        err.print(f"graded {summary.graded} {counted}, admitted {summary.admitted} ({summary.pass_rate:.0%}){apart}")

    emit(as_json, {"graded": summary.graded, "admitted": summary.admitted, "pass_rate": summary.pass_rate,
                   "counted": counted, "reasons": dict(summary.reasons),
                   "rules": {reason: reason_rule(reason) for reason in summary.reasons}, "examples": summary.examples,
                   "calibration": {"graded": summary.calibration, "reasons": dict(summary.calibration_reasons)}},
         human)


StyleOpt = Annotated[PromptStyle, typer.Option(
    "--style", help="Agent view the rows show: full, compact (short prompt, only the tools of the apps a task "
    "needs; for small models) or minimal (compact with empty descriptions; for tiny models).")]


FormatOpt = Annotated[DatasetFormat, typer.Option(
    "--format", help="jsonl: one JSON object per line; parquet: one parquet file; hf: a Hugging Face dataset folder "
    "(datasets.load_dataset reads it: a parquet file per capability split and a README.md dataset card with the "
    "features, splits, seeds, bundle and grader hashes and licence).")]
LicenseOpt = Annotated[str, typer.Option(
    "--license", help="--format hf: the licence the dataset card states (a Hub licence id).")]


def _export(kind: ExportKind, store: Path, out_path: Path | None, style: PromptStyle, as_json: bool, fmt: DatasetFormat,
            license: str, vision: bool = False, run_tag: str | None = None, ungated: bool = False) -> None:
    from ..trainer import (
        SKIP_REASONS,
        TrainingError,
        check_dataset_target,
        dpo_skipped,
        export_dataset,
        export_dpo,
        export_rl,
        export_sft,
        sft_skipped,
    )

    if out_path is None:
        out_path = Path("runs/export") / (kind if fmt == "hf" else f"{kind}.{fmt}")
    if fmt != "jsonl" and vision:
        raise fail("--vision gives messages list content, which only --format jsonl writes")
    if fmt != "jsonl" and ungated:
        raise fail("--ungated rows are for measuring the gate, not for a dataset to share: only --format jsonl "
                   "writes them")
    try:
        check_dataset_target(out_path, fmt, kind)
    except TrainingError as exc:
        raise fail(str(exc)) from None
    opened = open_store(store)
    # what the export leaves out, and why (a conversation that is not what was graded, say)
    skipped = sft_skipped(opened, run_tag=run_tag, ungated=ungated) if kind == "sft" else dpo_skipped(opened) if kind == "dpo" else []
    reasons: dict[str, list[str]] = {}
    for episode_id, reason in skipped:
        reasons.setdefault(reason, []).append(episode_id)
    told = [f"skipped {len(ids)} episodes ({reason}: {SKIP_REASONS[reason]}): " + ", ".join(ids[:20])
            + (" …" if len(ids) > 20 else "") for reason, ids in reasons.items()]
    splits: dict[str, int] | None = None
    try:
        if fmt != "jsonl":
            options = {"run_tag": run_tag} if kind == "sft" else {}
            splits = export_dataset(opened, kind, out_path, fmt=fmt, style=style, license=license, allow_empty=False,
                                    **options)
            rows = sum(splits.values())
        elif kind == "sft":
            rows = export_sft(opened, out_path, style=style, allow_empty=False, vision=vision, run_tag=run_tag,
                              ungated=ungated)
        elif kind == "dpo":
            rows = export_dpo(opened, out_path, style=style, allow_empty=False)
        else:
            rows = export_rl(opened, out_path, style=style, allow_empty=False)
    except OSError as exc:
        raise fail(f"cannot write {out_path}: {exc.strerror or exc}") from None
    except TrainingUnavailable as exc:
        raise fail(str(exc)) from None
    except TrainingError as exc:  # nothing to export: no file is written (a ValueError from a library is a bug)
        raise fail("\n".join([str(exc), *told]), code=FAILED) from None
    noun = "pairs" if kind == "dpo" else "rows"

    def human() -> None:
        where = f" ({', '.join(f'{name} {n}' for name, n in splits.items())})" if splits and fmt == "hf" else ""
        err.print(f"wrote {rows} {noun} to {out_path}{where}")
        for line in told:
            err.print(escape(line))

    emit(as_json, {"out": str(out_path), noun: rows, "style": style, "format": fmt,
                   **({"splits": splits} if fmt == "hf" else {}),
                   **({"skipped": [{"episode_id": e, "reason": r, "why": SKIP_REASONS[r]} for e, r in skipped]}
                      if kind in ("sft", "dpo") else {})},
         human)


OutOpt = Annotated[Path | None, typer.Option(
    "--out", help="Output file (a folder with --format hf); default runs/export/KIND.jsonl, KIND.parquet or KIND/.")]


@export_app.command("sft")
def export_sft_command(
    store: StoreOpt = Path(DEFAULT_STORE),
    out_path: OutOpt = None,
    style: StyleOpt = "full",
    vision: Annotated[bool, typer.Option(
        "--vision", help="Messages that carried images get the list content of vision-language chat templates "
        "(the images are written beside the file and named in each row's images either way).")] = False,
    run_tag: Annotated[str | None, typer.Option(
        help="Only the episodes of this run tag (the one live clients gave: ?run=TAG or X-Coworkenv-Run).")] = None,
    ungated: Annotated[bool, typer.Option(
        "--ungated", help="Every graded teacher and live episode, the ones the gate rejected too: what training "
        "without the gate would see (to measure what the gate is worth; jsonl only).")] = False,
    fmt: FormatOpt = "jsonl",
    license: LicenseOpt = DEFAULT_LICENSE,
    as_json: JsonOpt = False,
) -> None:
    """Admitted trajectories as chat messages with tool calls plus a tools column (TRL SFT format); live
    episodes whose conversation was not captured are listed as skipped."""
    _export("sft", store, out_path, style, as_json, fmt, license, vision, run_tag, ungated)


def _export_command(kind: ExportKind, doc: str) -> None:
    """Register ``export KIND`` for a kind with the options every export has and no others (dpo, rl)."""

    def command(
        store: StoreOpt = Path(DEFAULT_STORE),
        out_path: OutOpt = None,
        style: StyleOpt = "full",
        fmt: FormatOpt = "jsonl",
        license: LicenseOpt = DEFAULT_LICENSE,
        as_json: JsonOpt = False,
    ) -> None:
        _export(kind, store, out_path, style, as_json, fmt, license)

    command.__doc__ = doc
    export_app.command(kind)(command)


_export_command("dpo", "Repaired-versus-failed pairs (prompt, chosen, rejected, tools) for TRL's DPOTrainer.")
_export_command("rl", """Admitted tasks as RL prompts (prompt, tools, task, bundle hash) with the reward vector
    (completion, safety, robustness, score) of each graded episode, for TRL's GRPOTrainer.""")


@app.command("check-sandbox")
def check_sandbox_command(sandbox: SandboxOpt = "bwrap", as_json: JsonOpt = False) -> None:
    """Check that a sandbox backend works on this machine: a sandbox starts and answers a tool call."""
    from ..sandbox import SandboxError, trial

    check_sandbox(sandbox)
    try:
        detail = asyncio.run(trial(sandbox))
    except SandboxError as exc:
        raise fail(f"{sandbox}: {exc}", FAILED) from None
    emit(as_json, {"sandbox": sandbox, "available": True, "detail": detail},
         lambda: typer.echo(f"{sandbox}: works ({detail})"))


@app.command("apps")
def apps_command(as_json: JsonOpt = False) -> None:
    """The apps a workspace can have (built-in and registered), with their tools and effects."""
    from ..workspace import app_spec, listed_apps

    specs = [app_spec(name) for name in sorted(listed_apps())]
    payload = {"apps": [{"name": s.name, "description": s.description,
                         "tools": [{"name": t.name, "effect": t.effect, "description": t.description} for t in s.tools],
                         "resources": [f"coworkenv://{s.name}/{r.collection}/{{id}}" for r in s.resources]}
                        for s in specs],
               "tools": sum(len(s.tools) for s in specs)}

    def human() -> None:
        table = Table("app", "tools", "effects", "description")
        for s in specs:
            effects = sorted({t.effect for t in s.tools})
            table.add_row(s.name, str(len(s.tools)), ", ".join(effects), s.description)
        out.print(table)
        err.print(f"{len(specs)} apps, {payload['tools']} tools")

    emit(as_json, payload, human)

"""What the commands share: exit codes and one-line errors, the store, sandbox, capability and JSON
options, opening a store or an episode host, output (JSON or human), verbosity and progress."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console, ConsoleDimensions
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from ..episodes import EpisodeHost, EpisodeSettings
from ..sandbox import BACKENDS, BackendName, SandboxUnavailable
from ..store import Store
from ..synth import GENERATED, Generator
from ..synth._generate import TURNS_PER_WORKSPACE

PIPE_WIDTH = 100_000  # characters a line may have when the output is not a terminal: tables are not cut


class _Console(Console):
    """A console as wide as a terminal when it writes to one, and unbounded when it writes to a pipe
    or a file (unless $COLUMNS says otherwise): ``coworkenv tasks list | cat`` keeps every column
    and every value whole. Decided at each print, so that it follows where output goes now."""

    @property
    def size(self) -> ConsoleDimensions:
        if self._width is None and not self.is_terminal and "COLUMNS" not in os.environ:
            return ConsoleDimensions(PIPE_WIDTH, super().size.height)
        return super().size

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]


err = _Console(stderr=True, soft_wrap=True)  # progress, summaries for people, errors (lines are not wrapped)
out = _Console()  # a command's output (tables); JSON and plain lines go through typer.echo
DEFAULT_STORE = "runs/coworkenv.db"
USAGE = 2  # exit code: the command was given something it cannot use (an option, a file, a store)
FAILED = 1  # exit code: the work was tried and did not succeed (failed episodes, a crashed run)

StoreOpt = Annotated[
    Path,
    typer.Option("--store", envvar="COWORKENV_STORE", help="The SQLite store file.", show_default=True),
]
SandboxOpt = Annotated[BackendName, typer.Option("--sandbox", help=(
    "Sandbox backend. local isolates nothing (tools run as you, on your files and network): for tests and development."))]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as one JSON document on stdout.")]
UserModelOpt = Annotated[str, typer.Option(
    "--user-model", metavar="PROVIDER",
    help="Who plays the user of multi-turn tasks: a chat model (a provider spec, as --provider takes) told the "
         "persona and hidden facts; the scripted user (reveals a fact only when asked about it) when left out.")]
RayOpt = Annotated[str | None, typer.Option(
    "--ray", metavar="ADDRESS",
    help="Run on the nodes of a Ray cluster (host:port of its head, or auto: the cluster this machine is in); "
         "this process writes the store. Every node needs coworkenv with its 'ray' extra and the sandbox backend.")]
CapabilityOpt = Annotated[list[str] | None, typer.Option(
    "--capability", metavar="CAPABILITY", help=f"Capabilities to cover (repeatable): {', '.join(GENERATED)}.")]

AppOpt = Annotated[list[str] | None, typer.Option(
    "--app", metavar="APP", help="Workspaces of these apps only (repeatable; default: every app).")]
GeneratorOpt = Annotated[Generator, typer.Option(
    help="Hand-written templates, shapes composed over any app's tools, or all of them.")]
PerWorkspaceOpt = Annotated[int | None, typer.Option(
    min=1, show_default=False, help="Tasks of each capability per workspace (1: each task on workspace data that few "
    f"other tasks share).  [default: a round of the capability's templates, at least {TURNS_PER_WORKSPACE}]")]

_quiet = False


def set_verbosity(level: int) -> None:
    """-1: quiet (no progress), 0: warnings, 1: info, 2: debug; for coworkenv's loggers."""
    global _quiet
    _quiet = level < 0
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("coworkenv").setLevel(
        {-1: logging.ERROR, 0: logging.WARNING, 1: logging.INFO}.get(level, logging.DEBUG))


def is_quiet() -> bool:
    """Whether ``-q`` was given (progress and spinners show nothing then)."""
    return _quiet


@contextlib.contextmanager
def spinner(message: str, console: Console = err) -> Iterator[Callable[[str], None]]:
    """A spinner with the elapsed time showing ``message``, then each stage given to the function
    it yields (plain text, not markup); when ``console`` is not a terminal, a line per stage
    instead; nothing with ``-q``."""
    if is_quiet():
        yield lambda stage: None
        return
    if not console.is_terminal:
        line = lambda text: console.print(text, markup=False, highlight=False)
        line(message)
        yield line
        return
    with Progress(SpinnerColumn(), TextColumn("{task.description}", markup=False), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        task = progress.add_task(message, total=None)
        yield lambda stage: progress.update(task, description=stage)


def fail(message: str, code: int = USAGE) -> typer.Exit:
    """Print ``message`` as a one-line error and return the exit to raise (``USAGE`` or ``FAILED``)."""
    err.print(f"[red]error:[/red] {escape(message)}", highlight=False)
    return typer.Exit(code)


def listen_or_fail(host: str, port: int):
    """A listening socket on ``host:port`` (bound before the command says it serves), or a usage error
    naming the address when it cannot be had."""
    from ..server import bind_socket

    try:
        return bind_socket(host, port)
    except OSError as exc:
        raise fail(f"cannot listen on {host}:{port}: {exc.strerror or exc} (another server there? try --port)") from None


def serve_asgi(app: Any, sock: Any, ready: Callable[[], None], startup: Callable[[], Any] | None = None) -> None:
    """Serve the ASGI ``app`` on the bound ``sock`` until Ctrl-C; ``ready`` runs once it accepts
    connections (after the awaitable ``startup()``, when given)."""
    import asyncio
    import contextlib

    import uvicorn

    async def serve() -> None:
        if startup is not None:
            await startup()
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        task = asyncio.ensure_future(server.serve(sockets=[sock]))
        while not server.started and not task.done():
            await asyncio.sleep(0.01)
        if server.started:
            ready()
        await task

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())


def emit(as_json: bool, payload: dict[str, Any], human: Callable[[], None]) -> None:
    """A command's result: ``payload`` as JSON on stdout, or ``human()`` for people."""
    if as_json:
        typer.echo(json.dumps(payload, indent=2, default=str))
    else:
        human()


def check_capabilities(names: list[str] | None) -> tuple[str, ...]:
    capabilities = tuple(names or GENERATED)
    unknown = [c for c in capabilities if c not in GENERATED]
    if unknown:
        raise fail(f"unknown capability {unknown[0]!r}; known: {', '.join(GENERATED)}")
    return capabilities


def check_apps(names: list[str] | None) -> tuple[str, ...] | None:
    """The apps named (None: every app), after checking that each is registered."""
    if not names:
        return None
    from ..workspace import listed_apps

    known = listed_apps()
    unknown = [name for name in names if name not in known]
    if unknown:
        raise fail(f"unknown app {unknown[0]!r}; the apps are: {', '.join(sorted(known))}")
    return tuple(dict.fromkeys(names))


def open_store(path: Path, *, create: bool = False) -> Store:
    """The store at ``path`` (created when missing only with ``create``); a file that cannot be a
    store raises ``StoreError``, which the command line's one handler prints as a usage error."""
    return Store(path, create=create)


def check_sandbox(sandbox: str, *, here: bool = True) -> None:
    """A usage error for an unknown backend, or (``here``) one that does not work on this machine; a
    warning on stderr for one that isolates nothing (``local``)."""
    if sandbox not in BACKENDS:
        raise fail(f"unknown sandbox backend {sandbox!r}; choose one of: {', '.join(BACKENDS)}")
    if not BACKENDS[sandbox].isolated:
        err.print(f"[yellow]warning: the {sandbox} sandbox backend isolates nothing: tools run as this user, with "
                  "this machine's files, network and processes in reach (for tests and development only)[/]",
                  highlight=False)
    if not here:
        return
    try:
        BACKENDS[sandbox].check_available()
    except SandboxUnavailable as exc:
        raise fail(str(exc)) from None


def check_user_model(user_model: str) -> None:
    """A usage error unless ``user_model`` is empty (the scripted user) or a provider that can play here."""
    if not user_model:
        return
    from ..agents import ProviderError, parse_provider, provider_problem

    try:
        spec = parse_provider(user_model)
    except ProviderError as exc:
        raise fail(f"--user-model: {exc}") from None
    if spec.kind == "oracle":
        raise fail("--user-model: the oracle plays tasks, not users; give a chat model (or leave it out for "
                   "the scripted user)")
    problem = provider_problem(spec, os.environ)
    if problem:
        raise fail(f"--user-model: {problem}")


def open_host(store: Path, sandbox: str, cache_dir: Path | None = None, *, create: bool = False,
              user_model: str = "", reveal_grade: bool = True, service_env: dict[str, str] | None = None,
              local: bool = True, sync: bool = False) -> EpisodeHost:
    """An episode host on the store; ``local=False`` for one whose episodes run on a Ray cluster's
    nodes (the backend is checked there, not here)."""
    check_sandbox(sandbox, here=local)
    check_user_model(user_model)
    return EpisodeHost(open_store(store, create=create),
                       EpisodeSettings(backend=sandbox, cache_dir=cache_dir or store.parent / "cache",
                                       user_model=user_model, reveal_grade=reveal_grade, service_env=service_env or {},
                                       sync=sync))


def progress() -> Progress:
    """Progress bars on stderr (none with ``-q``): done of total, elapsed and remaining time."""
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TimeRemainingColumn(), console=err, transient=False, disable=_quiet)


@contextlib.asynccontextmanager
async def ray_cluster(address: str, host: EpisodeHost, per_node: int):
    """The Ray cluster at ``address``, a host of ``host``'s settings started on each node (``per_node``
    units at once), writing into ``host``'s store; a usage error when it cannot be joined or used.
    While joined, stdout is stderr: Ray prints what its nodes report (a node lost, a worker killed)
    on stdout from its own threads, and stdout carries only the command's result (``--json``)."""
    from ..loop import ClusterError, RayCluster

    cluster = RayCluster(address, host.store, host.settings, per_node=per_node)
    with contextlib.redirect_stdout(sys.stderr):
        try:
            nodes = await cluster.start()
        except ClusterError as exc:
            await cluster.close()
            raise fail(str(exc)) from None
        if not _quiet:
            err.print(f"Ray cluster at {address}: {len(nodes)} node(s) run episodes ({', '.join(nodes)})",
                      highlight=False)
        try:
            yield cluster
        finally:
            await cluster.close()
        for line in cluster.lost:
            err.print(f"[yellow]ray node lost:[/yellow] {escape(line)}", highlight=False)
        if cluster.reruns:
            err.print(f"{cluster.reruns} unit(s) of work run again on another node", highlight=False)


def on_cluster(work: Callable[[], Any]) -> Any:
    """``work()``, with a Ray cluster lost on the way (every node) reported as a failure."""
    from ..loop import ClusterError

    try:
        return work()
    except ClusterError as exc:
        raise fail(str(exc), code=FAILED) from None


def check_ray(address: str | None) -> None:
    """A usage error, before any work, when ``--ray`` names nothing that answers."""
    if address is None:
        return
    from ..loop._ray import ClusterError, check_reachable

    try:
        check_reachable(address)
    except ClusterError as exc:
        raise fail(str(exc)) from None

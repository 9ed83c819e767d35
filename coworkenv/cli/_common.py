"""What the commands share: the error exit, the store and sandbox options, opening an episode host,
and the progress display."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..episodes import EpisodeHost, EpisodeSettings
from ..sandbox import BACKENDS, SandboxUnavailable
from ..store import Store, StoreError

err = Console(stderr=True)
DEFAULT_STORE = "runs/coworkenv.db"

StoreOpt = Annotated[
    Path,
    typer.Option("--store", envvar="COWORKENV_STORE", help="The SQLite store file.", show_default=True),
]
SandboxOpt = Annotated[str, typer.Option("--sandbox", help=f"Sandbox backend: {', '.join(BACKENDS)}.")]


USAGE = 2  # exit code: the command was given something it cannot use (an option, a file, a store)
FAILED = 1  # exit code: the work was tried and did not succeed (failed episodes, a crashed run)


def fail(message: str, code: int = USAGE) -> typer.Exit:
    """Print ``message`` as a one-line error and return the exit to raise (``USAGE`` or ``FAILED``)."""
    err.print(f"[red]error:[/red] {message}")
    return typer.Exit(code)


def open_store(path: Path, *, create: bool = False) -> Store:
    """The store at ``path`` (created when missing only with ``create``), or a usage error naming
    what is wrong with the file."""
    try:
        return Store(path, create=create)
    except StoreError as exc:
        raise fail(str(exc)) from None


def check_sandbox(sandbox: str) -> None:
    if sandbox not in BACKENDS:
        raise fail(f"unknown sandbox backend {sandbox!r}; choose one of: {', '.join(BACKENDS)}")
    try:
        BACKENDS[sandbox].check_available()
    except SandboxUnavailable as exc:
        raise fail(str(exc)) from None


def open_host(store: Path, sandbox: str, cache_dir: Path | None = None, *, create: bool = False) -> EpisodeHost:
    check_sandbox(sandbox)
    return EpisodeHost(open_store(store, create=create),
                       EpisodeSettings(backend=sandbox, cache_dir=cache_dir or store.parent / "cache"))


def progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=err, transient=False)

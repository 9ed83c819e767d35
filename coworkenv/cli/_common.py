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
from ..store import Store

err = Console(stderr=True)
DEFAULT_STORE = "runs/coworkenv.db"

StoreOpt = Annotated[
    Path,
    typer.Option("--store", envvar="COWORKENV_STORE", help="The SQLite store file.", show_default=True),
]
SandboxOpt = Annotated[str, typer.Option("--sandbox", help=f"Sandbox backend: {', '.join(BACKENDS)}.")]


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``message`` as an error and return the exit to raise (2: bad input, 1: the work failed)."""
    err.print(f"[red]error:[/red] {message}")
    return typer.Exit(code)


def check_sandbox(sandbox: str) -> None:
    if sandbox not in BACKENDS:
        raise fail(f"unknown sandbox backend {sandbox!r}; choose one of: {', '.join(BACKENDS)}")
    try:
        BACKENDS[sandbox].check_available()
    except SandboxUnavailable as exc:
        raise fail(str(exc)) from None


def open_host(store: Path, sandbox: str, cache_dir: Path | None = None) -> EpisodeHost:
    check_sandbox(sandbox)
    return EpisodeHost(Store(store), EpisodeSettings(backend=sandbox, cache_dir=cache_dir or store.parent / "cache"))


def progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=err, transient=False)

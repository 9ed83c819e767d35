"""``coworkenv sandbox …``: build the Docker sandbox image, remove what dead processes left behind."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from ..sandbox import BACKENDS, SandboxUnavailable, build_image, cleanup
from ._common import DEFAULT_STORE, JsonOpt, StoreOpt, emit, err, fail, open_store

sandbox_app = typer.Typer(help="Sandbox images and hygiene.", no_args_is_help=True, rich_markup_mode=None)


@sandbox_app.command("build-image")
def build_image_command(
    cache_dir: Annotated[Path | None, typer.Option(
        help="Where the root filesystem tarball is kept (default: ~/.cache/coworkenv).")] = None,
    mirror: Annotated[str | None, typer.Option(
        envvar="COWORKENV_DEBIAN_MIRROR",
        help="Debian archive for debootstrap (default: the first one in this machine's apt sources).")] = None,
    dockerfile: Annotated[bool, typer.Option(
        "--dockerfile", help="Build from the shipped Dockerfile instead (needs to pull debian:bookworm-slim).")] = False,
    force: Annotated[bool, typer.Option("--force", help="Build again even if the image exists.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Build the docker sandbox image with no registry (debootstrap + docker import); reuses what exists."""
    try:
        with err.status("building the sandbox image (debootstrap, then docker import; minutes the first time)"):
            result = build_image(cache_dir=cache_dir, mirror=mirror, dockerfile=dockerfile, force=force,
                                 log=lambda line: err.print(escape(line), highlight=False))
    except SandboxUnavailable as exc:
        raise fail(str(exc)) from None
    emit(as_json, {"image": result.image, "how": result.how}, lambda: typer.echo(f"{result.image}: {result.how}"))


@sandbox_app.command("cleanup")
def cleanup_command(
    root: Annotated[Path | None, typer.Option(
        help="Where episode directories are (default: the system temp directory).")] = None,
    everything: Annotated[bool, typer.Option(
        "--all", help="Remove every labeled sandbox, also those of live processes.")] = False,
    docker: Annotated[bool, typer.Option(
        help="Also clean up after the docker backend (its containers and episode directories).")] = True,
    store: StoreOpt = Path(DEFAULT_STORE),
    as_json: JsonOpt = False,
) -> None:
    """Remove sandbox directories and containers whose owning process is gone (after a crash or SIGKILL),
    and end the episodes, evaluations and trainings such processes left running in the store (as
    interrupted), if it exists."""
    if root is not None and not root.is_dir():
        raise fail(f"--root {root} is not a folder")
    backends = None if docker else [name for name in BACKENDS if name != "docker"]
    ended: list[str] = []
    runs: list[str] = []
    if store.exists():
        from ..episodes import interrupt_orphaned_episodes

        opened = open_store(store)
        ended, runs = interrupt_orphaned_episodes(opened), opened.interrupt_orphaned_runs()
    report = cleanup(root=root, backends=backends, everything=everything)

    def human() -> None:
        for note in report.notes:
            err.print(f"[yellow]{escape(note)}[/yellow]", highlight=False)
        for episode_id in ended:
            typer.echo(f"ended episode {episode_id} (interrupted: its process is gone)")
        for run_id in runs:
            typer.echo(f"ended run {run_id} (interrupted: its process is gone)")
        for kind, names in (("directory", report.directories), ("container", report.containers)):
            for name in names:
                typer.echo(f"removed {kind} {name}")
        typer.echo(f"removed {report.removed}, kept {report.kept} (owner alive)")

    emit(as_json, {"directories": report.directories, "containers": report.containers, "kept": report.kept,
                   "notes": report.notes, "episodes_ended": ended, "runs_ended": runs}, human)

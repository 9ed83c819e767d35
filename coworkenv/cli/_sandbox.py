"""``coworkenv sandbox …``: build the Docker sandbox image, remove what dead processes left behind."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ..sandbox import BACKENDS, SandboxUnavailable, build_image, cleanup

sandbox_app = typer.Typer(help="Sandbox images and hygiene.", no_args_is_help=True)
err = Console(stderr=True)


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
) -> None:
    """Build the docker sandbox image with no registry (debootstrap + docker import); reuses what exists."""
    try:
        result = build_image(cache_dir=cache_dir, mirror=mirror, dockerfile=dockerfile, force=force,
                             log=lambda line: err.print(line))
    except SandboxUnavailable as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    typer.echo(f"{result.image}: {result.how}")


@sandbox_app.command("cleanup")
def cleanup_command(
    root: Annotated[Path | None, typer.Option(
        help="Where episode directories are (default: the system temp directory).")] = None,
    everything: Annotated[bool, typer.Option(
        "--all", help="Remove every labeled sandbox, also those of live processes.")] = False,
    docker: Annotated[bool, typer.Option(
        help="Also clean up after the docker backend (its containers and episode directories).")] = True,
    store: Annotated[Path, typer.Option(
        "--store", envvar="COWORKENV_STORE",
        help="Also end the store's episodes whose process is gone (as interrupted), if the store exists.")] = Path(
            "runs/coworkenv.db"),
) -> None:
    """Remove sandbox directories and containers whose owning process is gone (after a crash or SIGKILL),
    and end the episodes such processes left running."""
    backends = None if docker else [name for name in BACKENDS if name != "docker"]
    if store.exists():
        from ..episodes import interrupt_orphaned_episodes
        from ..store import Store

        for episode_id in interrupt_orphaned_episodes(Store(store)):
            typer.echo(f"ended episode {episode_id} (interrupted: its process is gone)")
    report = cleanup(root=root, backends=backends, everything=everything)
    for note in report.notes:
        err.print(f"[yellow]{note}[/yellow]")
    for kind, names in (("directory", report.directories), ("container", report.containers)):
        for name in names:
            typer.echo(f"removed {kind} {name}")
    typer.echo(f"removed {report.removed}, kept {report.kept} (owner alive)")

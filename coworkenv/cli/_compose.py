"""``coworkenv compose build``: the images the top-level ``compose.yaml`` runs, built offline."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from ..sandbox import SandboxUnavailable, build_app_image
from ._common import JsonOpt, emit, err, fail

compose_app = typer.Typer(help="The images of compose.yaml (the server, the viewer, the jobs, the model server).",
                          no_args_is_help=True, rich_markup_mode=None)


@compose_app.command("build")
def compose_build_command(
    tag: Annotated[str, typer.Option(help="Tag of the images (compose.yaml reads $COWORKENV_IMAGE_TAG).")] = "local",
    with_model: Annotated[bool, typer.Option(
        "--with-model", help="Also build coworkenv-model (the model server's image, with vLLM; large).")] = False,
    cache_dir: Annotated[Path | None, typer.Option(
        help="Where the root filesystem tarball is kept (default: ~/.cache/coworkenv).")] = None,
    mirror: Annotated[str | None, typer.Option(
        envvar="COWORKENV_DEBIAN_MIRROR",
        help="Debian archive for debootstrap (default: the first one in this machine's apt sources).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Build again even if the images are up to date.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Build coworkenv:TAG with no registry: a Debian root filesystem with python3 and bubblewrap (debootstrap +
    docker import), coworkenv and its requirements installed by this machine's pip; reuses what is up to date."""
    results = []
    try:
        with err.status("building the compose images (debootstrap, pip, docker build; minutes the first time)"):
            for with_vllm in (False, True) if with_model else (False,):
                results.append(build_app_image(tag=tag, with_vllm=with_vllm, cache_dir=cache_dir, mirror=mirror,
                                               force=force, log=lambda line: err.print(escape(line), highlight=False)))
    except SandboxUnavailable as exc:
        raise fail(str(exc)) from None
    emit(as_json, {"images": [{"image": r.image, "how": r.how} for r in results]},
         lambda: typer.echo("\n".join(f"{r.image}: {r.how}" for r in results)))

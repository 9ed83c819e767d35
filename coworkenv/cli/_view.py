"""``coworkenv view``: the store in a local web app (runs, tasks, episodes as timelines with the rows
each call changed, two episodes side by side)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._common import DEFAULT_STORE, StoreOpt, err, listen_or_fail, open_store, serve_asgi


def view_command(
    store: StoreOpt = Path(DEFAULT_STORE),
    host: Annotated[str, typer.Option("--host", help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to bind (0: any free one).")] = 8002,
) -> None:
    """Look at the store in a browser: runs with their figures, tasks, episodes with filters, each episode as a
    timeline of its calls with the state rows they changed, its checks and reward; Ctrl-C stops it."""
    from ..view import view_app

    opened = open_store(store)
    try:
        sock = listen_or_fail(host, port)
        bound = sock.getsockname()[1]
        serve_asgi(view_app(opened), sock, lambda: err.print(
            f"viewing {store} on http://{host}:{bound}/ ; Ctrl-C stops it"))
    finally:
        opened.close()

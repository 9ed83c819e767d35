"""``coworkenv browse``: the store in Datasette, read only, with what each table and column means
and canned queries (pass rate by capability, failure reasons, slowest tools, episodes per source,
evaluation pass rates)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from .. import __version__
from ..gate import GRADER_VERSION
from ..store import TABLE_DOCS, StoreError, canned_queries, schema_status
from ._common import DEFAULT_STORE, StoreOpt, err, fail, listen_or_fail, serve_asgi


def datasette_metadata(store: Path) -> dict[str, Any]:
    """Datasette's metadata for ``store``: table and column descriptions, canned queries."""
    return {
        "title": f"coworkenv store {store.name}",
        "description": f"A coworkenv store (coworkenv {__version__}, grader {GRADER_VERSION}), opened read only.",
        "databases": {store.stem: {
            "description": "Tasks, episodes, grades and verdicts, evaluations and training runs.",
            "tables": {name: {"description": description, "columns": columns}
                       for name, (description, columns) in TABLE_DOCS.items()},
            "queries": {q.name: {"title": q.title, "description": q.description, "sql": q.sql}
                        for q in canned_queries(GRADER_VERSION)},
        }},
    }


def browse_command(
    store: StoreOpt = Path(DEFAULT_STORE),
    host: Annotated[str, typer.Option("--host", help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to bind (0: any free one).")] = 8001,
) -> None:
    """Open the store in Datasette (read only) with table descriptions and canned queries; Ctrl-C stops it."""
    try:
        from datasette.app import Datasette
    except ImportError:
        raise fail("browse needs Datasette: pip install 'coworkenv[browse]'") from None
    try:
        status = schema_status(store)  # missing, foreign or newer stores are refused before serving
    except StoreError as exc:
        raise fail(str(exc)) from None
    if status.unknown:
        raise fail(f"{store} was written by a newer coworkenv (migrations {', '.join(status.unknown)})")
    sock = listen_or_fail(host, port)
    datasette = Datasette([str(store)], metadata=datasette_metadata(store), settings={"default_page_size": 50})
    bound = sock.getsockname()[1]

    serve_asgi(datasette.app(), sock, lambda: err.print(
        f"browsing {store} on http://{host}:{bound}/{store.stem} (read only); Ctrl-C stops it"),
        startup=datasette.invoke_startup)

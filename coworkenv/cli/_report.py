"""``coworkenv report``: a self-contained HTML report of a store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..view import write_report
from ._common import DEFAULT_STORE, FAILED, JsonOpt, StoreOpt, emit, fail, open_store


def report_command(
    store: StoreOpt = Path(DEFAULT_STORE),
    out_path: Annotated[Path | None, typer.Option(
        "--out", help="The HTML file to write (default: report.html beside the store).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Write one self-contained HTML file about the store: synthesis counts per capability and app, gate
    reasons, every evaluation per capability and split, training loss and reward curves (plots inline)."""
    target = out_path or store.parent / "report.html"
    if target.is_dir():
        raise fail(f"--out {target} is a folder; give a file name")
    opened = open_store(store)
    try:
        written = write_report(opened, target)
    except OSError as exc:
        raise fail(f"cannot write the report to {target}: {exc.strerror or exc}", FAILED) from None
    finally:
        opened.close()
    emit(as_json, {"report": str(written), "bytes": written.stat().st_size},
         lambda: typer.echo(f"report: {written} (open it in a browser)"))

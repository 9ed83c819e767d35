"""``coworkenv demo``: synth → calibrate → collect → gate → export on embedded defaults."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..agents import ProviderSettings, TeacherSettings, collect
from ..gate import run_gate
from ..sandbox import BwrapSandbox, SandboxUnavailable
from ..server import EpisodeHost, EpisodeSettings
from ..store import Store
from ..synth import synthesize
from ..trainer import export_sft


async def run_demo(directory: Path, n: int, seed: int, error_rate: float, progress: Progress) -> dict:
    """Run the loop into ``directory`` (resumable: what the store holds is kept and reused)."""
    started = time.perf_counter()
    store = Store(directory / "coworkenv.db")
    host = EpisodeHost(store, EpisodeSettings(backend="bwrap", cache_dir=directory / "cache"))
    try:
        job = progress.add_task("synthesize + calibrate", total=n)
        synth = await synthesize(host, n, seed, on_task=lambda *_: progress.advance(job))
        job = progress.add_task("collect (oracle teacher)", total=synth.admitted)
        settings = TeacherSettings(provider="oracle",
                                   provider_settings=ProviderSettings(error_rate=error_rate, seed=seed))
        collected = await collect(host, settings, on_run=lambda _: progress.advance(job))
        progress.update(job, total=collected.tasks, completed=collected.tasks)
    finally:
        await host.close()
    job = progress.add_task("gate", total=1)
    run_gate(store)
    progress.advance(job)
    job = progress.add_task("export sft", total=1)
    rows = export_sft(store, directory / "export" / "sft.jsonl")
    progress.advance(job)

    count = lambda sql: store.query(sql)[0]["n"]  # noqa: E731
    graded = count("select count(distinct episode_id) as n from verdicts v join episodes e on e.id = v.episode_id"
                   " where e.source = 'teacher'")
    admitted = count("select count(distinct episode_id) as n from verdicts v join episodes e on e.id = v.episode_id"
                     " where e.source = 'teacher' and v.admitted = 1")
    return {
        "store": str(directory / "coworkenv.db"),
        "tasks_generated": count("select count(*) as n from tasks"),
        "tasks_admitted": count("select count(*) as n from tasks where status = 'admitted'"),
        "tasks_quarantined": count("select count(*) as n from tasks where status = 'quarantined'"),
        "episodes": count("select count(*) as n from episodes where source = 'teacher'"),
        "repaired_episodes": count("select count(*) as n from episodes e where source = 'teacher' and repaired_from"
                                   " is not null and exists (select 1 from verdicts v where v.episode_id = e.id"
                                   " and v.admitted = 1)"),
        "gate_pass_rate": round(admitted / graded, 4) if graded else 0.0,
        "exported_rows": rows,
        "export": str(directory / "export" / "sft.jsonl"),
        "seconds": round(time.perf_counter() - started, 2),
    }


def demo_command(
    directory: Annotated[Path, typer.Option("--dir", help="Where the store and exports go.")] = Path("runs/demo"),
    n: Annotated[int, typer.Option("-n", "--tasks", min=1, help="How many tasks to synthesize.")] = 24,
    seed: Annotated[int, typer.Option(help="Seed of synthesis and of the oracle's mistakes.")] = 0,
    error_rate: Annotated[float, typer.Option(min=0.0, max=1.0, help="Share of oracle episodes with a mistake.")] = 0.3,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Run the loop on embedded defaults (SQLite, bubblewrap, oracle teacher) and summarize it."""
    err = Console(stderr=True)
    try:
        BwrapSandbox.check_available()
    except SandboxUnavailable as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    directory.mkdir(parents=True, exist_ok=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err) as progress:
        summary = asyncio.run(run_demo(directory, n, seed, error_rate, progress))
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    table = Table(title="coworkenv demo", show_header=False)
    table.add_column("")
    table.add_column("", justify="right")
    for key in ("tasks_generated", "tasks_admitted", "tasks_quarantined", "episodes", "repaired_episodes",
                "gate_pass_rate", "exported_rows", "seconds"):
        value = summary[key]
        table.add_row(key.replace("_", " "), f"{value:.0%}" if key == "gate_pass_rate" else str(value))
    Console().print(table)
    Console().print(f"store: {summary['store']}\nSFT data: {summary['export']}")

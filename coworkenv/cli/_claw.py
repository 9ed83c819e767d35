"""``coworkenv claw-eval import``: Claw-Eval's tasks from a checkout, as held-out coworkenv tasks."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from ._common import DEFAULT_STORE, JsonOpt, StoreOpt, emit, err, fail, open_store, out

claw_app = typer.Typer(help="Claw-Eval's tasks through coworkenv: import them from a checkout, then play them "
                            "with eval --suite claw-eval or any MCP client (serve).",
                       no_args_is_help=True, rich_markup_mode=None)


@claw_app.command("import")
def import_command(
    directory: Annotated[Path, typer.Argument(metavar="DIR", help="A Claw-Eval checkout, its tasks/ folder, or one "
                                                                  "task folder (task.yaml, grader.py).")],
    store: StoreOpt = Path(DEFAULT_STORE),
    task: Annotated[list[str] | None, typer.Option(
        "--task", metavar="ID", help="Only this task (repeatable; a folder name under tasks/).")] = None,
    language: Annotated[list[str] | None, typer.Option(
        metavar="LANG", help="Tasks whose prompt is in this language (repeatable; default: en; 'all' for every one).")] = None,
    judge: Annotated[str, typer.Option(
        metavar="openai:MODEL[@URL]", help="The LLM judge for graders that ask one (OPENAI_API_KEY); without it "
                                           "those tasks are skipped, not scored 0.")] = "",
    as_json: JsonOpt = False,
) -> None:
    """Import Claw-Eval tasks: their services run in each episode's sandbox, their own graders score them.

    Tasks coworkenv cannot run as Claw-Eval does are skipped with the reason; where a task's file and
    its grader disagree, the summary says so and nothing is patched."""
    from ..claweval import ClawEvalError, import_claw_eval

    languages = tuple(language or ["en"])
    if judge and not judge.startswith("openai:"):
        raise fail(f"--judge {judge!r}: Claw-Eval's judge speaks the OpenAI API; give openai:MODEL[@URL]")
    opened = open_store(store, create=True)
    try:
        summary = import_claw_eval(opened, directory, task_ids=tuple(task or ()),
                                   languages=() if "all" in languages else languages, judge=judge)
    except ClawEvalError as exc:
        raise fail(str(exc)) from None

    def human() -> None:
        table = Table("Claw-Eval task", "coworkenv task", "split", "category", "graded by", title="imported")
        for item in summary.imported:
            table.add_row(item.task_id, item.coworkenv_id, item.split, item.category,
                          f"grader + judge {item.judge}" if item.judge else "grader")
        out.print(table)
        out.print(_categories(summary.by_category))
        reasons: dict[str, int] = {}
        for why in summary.skipped.values():
            reasons[why] = reasons.get(why, 0) + 1
        for why, count in sorted(reasons.items(), key=lambda item: -item[1]):
            err.print(f"skipped {count}: {escape(why)}")
        for task_id, found in sorted(summary.defects.items()):
            for defect in found:
                err.print(f"[yellow]defect[/yellow] {task_id}: {escape(defect)}")
        for task_id, packages in sorted(summary.missing_packages.items()):
            err.print(f"[yellow]missing[/yellow] {task_id}: its services import {', '.join(packages)}, which this "
                      "environment lacks (pip install 'coworkenv\\[claw-eval]')")
        err.print(f"{len(summary.imported)} imported into {store} (held out), {len(summary.skipped)} skipped, "
                  f"{sum(map(len, summary.defects.values()))} defects reported")

    emit(as_json, summary.as_dict(), human)
    if not summary.imported:
        raise fail("no task imported (see the reasons above)")


def _categories(counts: dict[str, dict[str, int]]) -> Table:
    """Tasks by category: how many the checkout holds, how many were imported (judge-graded among
    them) and why the others were skipped (the kinds of ``SKIP_KINDS``)."""
    from ..claweval import SKIP_KINDS

    table = Table("category", "tasks", "imported", "judge-graded", "skipped", title="by category")
    for category, row in sorted(counts.items(), key=lambda item: (-item[1]["imported"], -item[1]["tasks"], item[0])):
        skipped = ", ".join(f"{row[kind]} {kind}" for kind in SKIP_KINDS if row.get(kind))
        table.add_row(category, str(row["tasks"]), str(row["imported"]), str(row["judge_graded"]), skipped)
    total = {key: sum(row.get(key, 0) for row in counts.values()) for key in ("tasks", "imported", "judge_graded")}
    table.add_row("all", *(str(total[key]) for key in ("tasks", "imported", "judge_graded")),
                  str(total["tasks"] - total["imported"]))
    return table

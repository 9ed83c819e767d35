"""``coworkenv tasks|episodes|runs list|show``: what a store holds, without SQL.

Each command reads the store (never creating one) and prints either rich tables (stdout: they are
the command's output) or, with ``--json``, one JSON document a script can parse. An id the store
does not hold is a usage error (exit 2) naming it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..gate import GRADER_VERSION, reason_rule
from ..store import EpisodeRow, EpisodeStatus, EvalRunRow, Source, Store, TaskRow, TaskStatus, TrainingRunRow, VerdictRow, json_or_text
from ..workspace import Capability
from ._common import DEFAULT_STORE, JsonOpt, StoreOpt, err, fail, open_store, out

RunKind = Literal["sft", "dpo", "eval"]

MIN_SQUEEZED = 16  # characters at least of the column a listing cuts to fit
SECRET_KEYS = ("api_key", "token", "secret", "password")  # settings shown as <redacted>
CELL = 160  # characters shown of a long value (arguments, results, error text; --json has it whole)

tasks_app = typer.Typer(help="The store's tasks: find a task id, read its checks and reference solution.",
                        no_args_is_help=True, rich_markup_mode=None)
episodes_app = typer.Typer(help="The store's episodes: provenance, calls, conversation and verdict.",
                           no_args_is_help=True, rich_markup_mode=None)
runs_app = typer.Typer(help="The store's training and evaluation runs.", no_args_is_help=True, rich_markup_mode=None)


@contextmanager
def _reading(path: Path) -> Iterator[Store]:
    store = open_store(path, create=False)
    try:
        yield store
    finally:
        store.close()


def _print_json(document: Any) -> None:
    typer.echo(json.dumps(document, indent=2, ensure_ascii=False, default=str))


def _cut(text: str | None, limit: int = CELL) -> str:
    if text is None:
        return ""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _compact(value: Any) -> str:
    """A value as one line of JSON (spaced, so that a narrow cell wraps it between items)."""
    return json.dumps(value, ensure_ascii=False, default=str)


def _out() -> Console:
    """The console of the command's output: the terminal's width, or lines as long as their content
    when the output goes to a file or a pipe (unless $COLUMNS says otherwise): nothing is cut."""
    return out


def _table(*headers: str) -> Table:
    """A table whose cells wrap (long words fold: nothing is cut)."""
    table = Table(*headers, box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for column in table.columns:
        column.overflow = "fold"
    return table


def _listing(headers: tuple[str, ...], rows: list[list[Text]], *, squeeze: int, optional: tuple[int, ...] = ()) -> None:
    """Print rows one line each: every column whole (ids are copied from here), but for the
    ``squeeze`` column, cut to the width left. Where even that does not fit, the ``optional``
    columns are left out, in their order; past that, the lines are wider than the terminal."""
    console = _out()
    widths = [max(len(h), *(len(row[i].plain) for row in rows)) for i, h in enumerate(headers)]
    shown = list(range(len(headers)))

    def room() -> int:
        return console.width - sum(widths[i] for i in shown if i != squeeze) - 3 * (len(shown) - 1)

    for i in optional:
        if room() >= MIN_SQUEEZED:
            break
        shown.remove(i)
    if room() < MIN_SQUEEZED:
        console = Console(width=console.width - room() + MIN_SQUEEZED)
    table = _table(*(headers[i] for i in shown))
    for column, i in zip(table.columns, shown, strict=True):
        column.no_wrap, column.min_width = True, widths[i]
        if i == squeeze:
            column.min_width, column.max_width, column.overflow = None, room(), "ellipsis"
    for row in rows:
        table.add_row(*(row[i] for i in shown))
    console.print(table)


def _when(stamp: str | None, *, seconds: bool = True) -> str:
    """An ISO timestamp as ``YYYY-MM-DD HH:MM[:SS]`` (UTC, as stored)."""
    return stamp[:19 if seconds else 16].replace("T", " ") if stamp else ""


def _fields(console: Console, rows: list[tuple[str, Any]]) -> None:
    """A two-column grid of labels and values (values printed as text, never as markup)."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    for label, value in rows:
        grid.add_row(label, Text(str(value) if value is not None else ""))
    console.print(grid)


def _section(console: Console, title: str) -> None:
    console.print()
    console.print(Text(title, style="bold underline"))


# --- tasks ---------------------------------------------------------------------------------


def _task_json(row: TaskRow, *, full: bool = False) -> dict[str, Any]:
    doc: dict[str, Any] = {"id": row.id, "capability": row.capability, "difficulty": row.difficulty,
                           "status": row.status, "reason": row.reason, "workspace_id": row.workspace_id,
                           "instruction": row.instruction, "created_at": row.created_at}
    if full:
        spec = row.spec.model_dump(mode="json")
        doc.update({k: spec[k] for k in ("checks", "reference", "reference_answer", "forbidden_tools",
                                         "forbidden_probe", "max_steps")})
    return doc


def _check_fields(check: dict[str, Any]) -> list[tuple[str, str]]:
    """What a check checks, from its own fields whatever its kind (``query``, ``expect``, ``contains``…)."""
    return [(k, v if isinstance(v, str) else _compact(v)) for k, v in check.items()
            if k not in ("id", "kind", "description")]


@tasks_app.command("list")
def tasks_list(
    store: StoreOpt = Path(DEFAULT_STORE),
    status: Annotated[TaskStatus | None, typer.Option(help="Only tasks of this status.")] = None,
    capability: Annotated[Capability | None, typer.Option(help="Only tasks of this capability.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List tasks: id, capability, difficulty, status and instruction."""
    with _reading(store) as s:
        rows = s.tasks_matching(status=status, capability=capability)
    if as_json:
        _print_json([_task_json(r) for r in rows])
        return
    if not rows:
        err.print(f"no tasks match in {store}", markup=False)
        return
    _listing(("id", "capability", "difficulty", "status", "instruction"),
             [[Text(r.id), Text(r.capability), Text(str(r.difficulty)), Text(r.status), Text(_cut(r.instruction, 400))]
              for r in rows], squeeze=4, optional=(2,))


@tasks_app.command("show")
def tasks_show(
    task_id: Annotated[str, typer.Argument(metavar="TASK_ID", help="The task's id (see `coworkenv tasks list`).")],
    store: StoreOpt = Path(DEFAULT_STORE),
    as_json: JsonOpt = False,
) -> None:
    """A task: instruction, workspace, status, checks, reference solution and forbidden tools."""
    with _reading(store) as s:
        row = s.task(task_id)
        if row is None:
            raise fail(f"no task {task_id!r} in {store}")
        try:
            workspace = s.workspace(row.workspace_id)
        except KeyError:
            workspace = None
    doc = _task_json(row, full=True)
    doc["workspace"] = ({"id": workspace.id, "name": workspace.name, "seed": workspace.seed,
                         "apps": [app.name for app in workspace.apps]} if workspace else None)
    if as_json:
        _print_json(doc)
        return
    console = _out()
    _fields(console, [
        ("task", row.id), ("capability", row.capability), ("difficulty", row.difficulty),
        ("status", row.status + (f" ({row.reason})" if row.reason else "")),
        ("workspace", f"{workspace.id} ({workspace.name}, seed {workspace.seed}; apps: "
                      f"{', '.join(a.name for a in workspace.apps)})" if workspace else row.workspace_id),
        ("max steps", row.spec.max_steps),
        ("forbidden tools", ", ".join(row.spec.forbidden_tools) or "none"),
    ])
    _section(console, "instruction")
    console.print(Text(row.instruction))
    _section(console, "checks")
    for check in doc["checks"]:
        head = Text(check["id"], style="bold")
        head.append(f" ({check['kind']}) ", style="dim")
        head.append(check["description"])
        console.print(head)
        for key, value in _check_fields(check):
            console.print(Text(f"    {key}: {value}"))
    _section(console, "reference solution")
    for i, step in enumerate(row.spec.reference, 1):
        line = Text(f"{i:>3}. ")
        line.append(step.tool, style="bold yellow")
        line.append(f" {_compact(step.arguments)}")
        console.print(line)
    if row.spec.reference_answer:
        _fields(console, [("answer", row.spec.reference_answer)])


# --- episodes ------------------------------------------------------------------------------


def _verdict_json(verdict: VerdictRow | None) -> dict[str, Any] | None:
    if verdict is None:
        return None
    return {"grader_version": verdict.grader_version, "admitted": verdict.admitted, "reason": verdict.reason,
            "rule": reason_rule(verdict.reason), "detail": verdict.detail,
            "score": verdict.score, "completion": verdict.completion, "safety": verdict.safety,
            "robustness": verdict.robustness, "checks": [asdict(c) for c in verdict.checks],
            "created_at": verdict.created_at}


def _verdict_cell(verdict: VerdictRow | None) -> Text:
    if verdict is None:
        return Text("—", style="dim")
    style = "green" if verdict.admitted else "red"
    call = f" ({verdict.detail.split(':', 1)[0]})" if verdict.detail else ""  # "call #N tool"
    return Text(f"{'admitted' if verdict.admitted else 'rejected'} {verdict.score:.2f} {verdict.reason}{call}", style=style)


def _episode_json(row: EpisodeRow, verdict: VerdictRow | None) -> dict[str, Any]:
    return {"id": row.id, "task_id": row.task_id, "source": row.source, "provider": row.provider,
            "status": row.status, "attempt": row.attempt, "repaired_from": row.repaired_from,
            "client": row.client, "episode_key": row.key, "run_tag": row.run_tag,
            "started_at": row.started_at, "ended_at": row.ended_at, "verdict": _verdict_json(verdict)}


@episodes_app.command("list")
def episodes_list(
    store: StoreOpt = Path(DEFAULT_STORE),
    task: Annotated[str | None, typer.Option(metavar="TASK_ID", help="Only episodes of this task.")] = None,
    source: Annotated[Source | None, typer.Option(help="Only episodes of this source.")] = None,
    status: Annotated[EpisodeStatus | None, typer.Option(help="Only episodes of this status.")] = None,
    limit: Annotated[int, typer.Option(min=0, metavar="N", help="The newest this many episodes (0: all).")] = 50,
    as_json: JsonOpt = False,
) -> None:
    """List episodes, newest first, with the verdict of the current grader version."""
    with _reading(store) as s:
        if task is not None and s.task(task) is None:
            raise fail(f"no task {task!r} in {store}")
        rows = s.recent_episodes(source=source, task_id=task, status=status, limit=limit + 1 if limit else None)
        more = bool(limit) and len(rows) > limit
        rows = rows[:limit] if limit else rows
        verdicts = s.verdicts([r.id for r in rows], GRADER_VERSION)
    if as_json:
        _print_json([_episode_json(r, verdicts.get(r.id)) for r in rows])
        return
    if not rows:
        err.print(f"no episodes match in {store}", markup=False)
        return
    _listing(("id", "task", "source", "provider", "status", "attempt", "started", "verdict"),
             [[Text(r.id), Text(r.task_id), Text(r.source), Text(r.provider), Text(r.status, style="red" if
               r.status == "failed" else ""), Text(str(r.attempt)), Text(_when(r.started_at, seconds=False)),
               _verdict_cell(verdicts.get(r.id))] for r in rows], squeeze=7, optional=(6, 3, 5, 2))
    if more:
        err.print(f"the newest {limit} shown; more match (--limit 0 shows all)")


@episodes_app.command("show")
def episodes_show(
    episode_id: Annotated[str, typer.Argument(metavar="EPISODE_ID", help="The episode's id.")],
    store: StoreOpt = Path(DEFAULT_STORE),
    as_json: JsonOpt = False,
) -> None:
    """An episode: provenance, every interaction, the conversation, the verdict and any failure."""
    with _reading(store) as s:
        row = s.episode(episode_id)
        if row is None:
            raise fail(f"no episode {episode_id!r} in {store}")
        verdict = s.verdict(episode_id, GRADER_VERSION)
        interactions = s.interactions(episode_id)
        messages = s.messages(episode_id, include_provenance=True)
        task = s.task(row.task_id)
    kinds = {c.id: c.kind for c in task.spec.checks} if task else {}
    if task is not None and task.spec.user is not None:  # the gate's check that the user was asked
        kinds.update({f"asked_{item.id}": "asked" for item in [*task.spec.user.facts, *task.spec.user.confirmations]})
    doc = _episode_json(row, verdict)
    doc.update({"hint": row.hint, "owner": row.owner, "final_answer": row.final_answer, "truncated": row.truncated,
                "error": row.error, "boundary": row.boundary,
                "final_state_bytes": len(row.final_state.encode()) if row.final_state is not None else None})
    if doc["verdict"] is not None:
        for check in doc["verdict"]["checks"]:
            check["kind"] = kinds.get(check["id"])
    doc["interactions"] = [
        {"idx": c.idx, "kind": c.kind, "tool": c.tool, "arguments": c.arguments, "result": json_or_text(c.result),
         "is_error": c.is_error, "error_kind": c.error_kind, "error": c.error, "duration_ms": c.duration_ms,
         "created_at": c.created_at}
        for c in interactions]
    doc["messages"] = [m.model_dump(mode="json") for m in messages]
    if as_json:
        _print_json(doc)
        return
    console = _out()
    fields: list[tuple[str, Any]] = [
        ("episode", row.id), ("task", row.task_id), ("source", row.source), ("provider", row.provider or "—"),
        ("status", row.status), ("attempt", row.attempt)]
    fields += [(label, value) for label, value in (("client", row.client), ("episode key", row.key),
                                                    ("run tag", row.run_tag)) if value]
    if row.repaired_from:
        fields.append(("repaired from", row.repaired_from))
    fields += [("started", _when(row.started_at)), ("ended", _when(row.ended_at) or "—")]
    if row.error:
        fields.append(("error", f"{row.error} (boundary: {row.boundary or 'unknown'})"))
    if row.truncated:
        fields.append(("truncated", "yes (the step limit ended it)"))
    fields.append(("final answer", row.final_answer if row.final_answer is not None else "—"))
    _fields(console, fields)

    _section(console, f"verdict (grader {GRADER_VERSION})")
    if verdict is None:
        console.print(Text("no verdict of this grader version (`coworkenv gate` grades it)", style="dim"))
    else:
        _fields(console, [
            ("verdict", f"{'admitted' if verdict.admitted else 'rejected'} ({verdict.reason})"),
            *([("offending call", verdict.detail)] if verdict.detail else []),
            ("rule", reason_rule(verdict.reason)),
            ("score", f"{verdict.score:.2f} (completion {verdict.completion:.2f}, safety {verdict.safety:.2f}, "
                      f"robustness {verdict.robustness:.2f})")])
        for c in verdict.checks:
            line = Text("  passed " if c.passed else "  failed ", style="green" if c.passed else "red")
            line.append(c.id, style="bold")
            line.append(f" ({kinds.get(c.id) or '?'}) ", style="dim")
            line.append(c.detail)
            console.print(line)

    _section(console, f"interactions ({len(interactions)})")
    for c in interactions:
        if c.kind == "user" and not c.is_error:  # a message to the user and their reply: two turns
            reply = json_or_text(c.result)
            console.print(Text(f"{c.idx:>3} agent → user: ", style="bold").append(str(c.arguments.get("message", ""))))
            console.print(Text("    user: ", style="bold cyan").append(
                str(reply.get("reply", "") if isinstance(reply, dict) else reply)
                + (" (done)" if isinstance(reply, dict) and reply.get("done") else "")))
            continue
        line = Text(f"{c.idx:>3} {c.kind} ", style="bold")
        line.append(c.tool, style="bold yellow")
        line.append(f" {_cut(_compact(c.arguments))}")
        if c.duration_ms is not None:
            line.append(f"  ({c.duration_ms:.0f} ms)", style="dim")
        console.print(line)
        if c.is_error:
            console.print(Text(f"    ✗ {c.error_kind or 'error'}: {_cut(c.error or c.result or '')}", style="red"))
        else:
            console.print(Text(f"    → {_cut(c.result)}"))

    _section(console, f"conversation ({len(messages)} messages)")
    for m in messages:
        head = Text(m.role, style="bold cyan")
        if m.name:
            head.append(f" {m.name}", style="cyan")
        if m.provenance:
            head.append(" (provenance: not in the trajectory)", style="dim")
        console.print(head)
        if m.content:
            console.print(Text(m.content))
        for call in m.tool_calls:
            console.print(Text(f"→ {call.name}({_compact(call.arguments)})", style="yellow"))


# --- runs ----------------------------------------------------------------------------------


def _secret(key: str) -> bool:
    key = key.lower()
    return key in SECRET_KEYS or key.endswith(tuple(f"_{word}" for word in SECRET_KEYS))


def _redacted(settings: Any) -> Any:
    """Settings with the value of every secret-looking key (an API key, a token) hidden."""
    if isinstance(settings, dict):
        return {k: "<redacted>" if v and _secret(k) else _redacted(v)
                for k, v in settings.items()}
    if isinstance(settings, list):
        return [_redacted(v) for v in settings]
    return settings


def _training_json(row: TrainingRunRow) -> dict[str, Any]:
    return {"id": row.id, "kind": row.kind, "status": row.status, "model": row.base_model,
            "started_at": row.started_at, "ended_at": row.ended_at, "data_path": row.data_path,
            "data_hash": row.data_hash, "rows": row.rows, "config": _redacted(row.config), "metrics": row.metrics,
            "output_dir": row.output_dir, "error": row.error, "owner": row.owner}


def _eval_json(row: EvalRunRow) -> dict[str, Any]:
    return {"id": row.id, "kind": "eval", "status": row.status, "model": row.model,
            "started_at": row.started_at, "ended_at": row.ended_at, "settings": _redacted(row.settings),
            "summary": row.summary, "profile_path": row.profile_path, "owner": row.owner}


def _headline(doc: dict[str, Any]) -> str:
    """A run's result in a few words: the final loss of training, the pass rate of an evaluation."""
    if doc["kind"] == "eval":
        overall = (doc["summary"] or {}).get("overall") or {}
        if overall.get("pass_rate") is None:
            return ""
        return f"pass rate {overall['pass_rate']:.0%}, score {overall['avg_score']:.2f} ({overall['trials']} trials)"
    loss = doc["metrics"].get("final_loss")
    return f"final loss {loss:.4f} ({doc['rows']} rows)" if isinstance(loss, (int, float)) else f"{doc['rows']} rows"


@runs_app.command("list")
def runs_list(
    store: StoreOpt = Path(DEFAULT_STORE),
    kind: Annotated[RunKind | None, typer.Option(help="Only runs of this kind.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List training (sft, dpo) and evaluation runs, newest first."""
    with _reading(store) as s:
        docs = [] if kind == "eval" else [_training_json(r) for r in s.training_runs(kind)]
        docs += [_eval_json(r) for r in s.eval_runs()] if kind in (None, "eval") else []
    docs.sort(key=lambda d: (d["started_at"] or "", d["id"]), reverse=True)
    if as_json:
        _print_json(docs)
        return
    if not docs:
        err.print(f"no runs match in {store}", markup=False)
        return
    from .._process import label_gone

    def status(doc: dict[str, Any]) -> Text:  # read only: the next process that works on the store ends a gone one
        if doc["status"] == "running" and doc["owner"] and label_gone(doc["owner"]):
            return Text("running, its process gone", style="red")
        return Text(doc["status"], style="red" if doc["status"] == "failed" else "")

    _listing(("id", "kind", "status", "started", "result", "model"),
             [[Text(d["id"]), Text(d["kind"]), status(d),
               Text(_when(d["started_at"], seconds=False)), Text(_headline(d)), Text(d["model"])] for d in docs],
             squeeze=5, optional=(3,))


@runs_app.command("show")
def runs_show(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="A training or evaluation run's id.")],
    store: StoreOpt = Path(DEFAULT_STORE),
    as_json: JsonOpt = False,
) -> None:
    """A run: its settings, metrics or summary, status, and where its model or profile is."""
    with _reading(store) as s:
        training = s.training_run(run_id)
        evaluation = s.eval_run(run_id) if training is None else None
        if training is None and evaluation is None:
            raise fail(f"no run {run_id!r} in {store}")
        trials = s.eval_trials(run_id) if evaluation is not None else []
    if training is not None:
        doc = _training_json(training)
    else:
        assert evaluation is not None
        doc = _eval_json(evaluation)
        doc["trials"] = [asdict(t) for t in trials]
    if as_json:
        _print_json(doc)
        return
    console = _out()
    fields: list[tuple[str, Any]] = [("run", doc["id"]), ("kind", doc["kind"]), ("status", doc["status"]),
                                     ("model", doc["model"]), ("started", _when(doc["started_at"])),
                                     ("ended", _when(doc["ended_at"]) or "—")]
    if training is not None:
        fields += [("data", f"{training.data_path} ({training.rows} rows, sha256 {training.data_hash[:12]})"),
                   ("model folder", training.output_dir or "—")]
        if training.error:
            fields.append(("error", training.error))
    else:
        fields += [("profile", doc["profile_path"] or "—"), ("trials", len(trials))]
    _fields(console, fields)
    _section(console, "settings")
    _fields(console, [(k, _compact(v) if not isinstance(v, str) else v)
                      for k, v in (doc["config"] if training is not None else doc["settings"]).items()])
    if training is not None:
        _section(console, "metrics")
        metrics = {k: v for k, v in training.metrics.items() if k != "losses"}
        losses = training.metrics.get("losses") or []
        if losses:
            metrics["losses"] = f"{len(losses)} logged (--json has them)"
        _fields(console, [(k, _compact(v) if not isinstance(v, str) else v) for k, v in metrics.items()])
        return
    summary = doc["summary"] or {}
    _section(console, "summary")
    if not summary:
        console.print(Text("no summary (the run did not finish)", style="dim"))
        return
    k = summary.get("k")
    table = _table("group", "tasks", "trials", "avg score", "pass rate", f"pass@{k}", f"pass^{k}")
    groups = [("overall", summary.get("overall") or {})]
    groups += [(f"split {name}", stats) for name, stats in (summary.get("splits") or {}).items()]
    groups += list((summary.get("capabilities") or {}).items())
    for name, stats in groups:
        table.add_row(name, *(_number(stats.get(key)) for key in ("tasks", "trials", "avg_score", "pass_rate",
                                                                  f"pass@{k}", f"pass^{k}")))
    console.print(table)


def _number(value: Any) -> str:
    if value is None:
        return "—"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def register(app: typer.Typer) -> None:
    """Add ``tasks``, ``episodes`` and ``runs`` to the ``coworkenv`` app."""
    app.add_typer(tasks_app, name="tasks")
    app.add_typer(episodes_app, name="episodes")
    app.add_typer(runs_app, name="runs")

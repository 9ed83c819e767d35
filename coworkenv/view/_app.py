"""``coworkenv view``: a local web app over a store. Server-rendered pages, no script and no build
step: the runs with their figures, the tasks, the episodes with filters, one episode with its
verdict first (the reward components, the rule behind the reason, and the call a call-based
rejection rests on, linked), then a timeline where every call shows its arguments, its result and
the rows it changed in the workspace state, then its checks; and two episodes side by side."""

from __future__ import annotations

import json
import re
from html import escape
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from .. import __version__
from ..gate import GRADER_VERSION, reason_rule
from ..store import SOURCES, TASK_STATUSES, EpisodeListing, EpisodeRow, Store, ToolCallRow, VerdictRow
from ._html import Link, Raw, href, items, page, table
from ._report import eval_run_section, gate_section, synthesis_section, training_charts

PAGE_SIZE = 100
SHOWN_TEXT = 4000  # characters of an argument or result shown before "… (n more)"
VERDICTS = ("admitted", "rejected", "ungraded")


class NotFound(Exception):
    """A page about something the store does not hold."""


def _nav(store: Store) -> str:
    return (f"<nav><a href='/'>runs</a><a href='/tasks'>tasks</a><a href='/episodes'>episodes</a>"
            f"<span class='muted'>{escape(store.path)} · grader {escape(GRADER_VERSION)} · "
            f"coworkenv {escape(__version__)}</span></nav>")


def _pre(text: str | None) -> str:
    if text is None:
        return ""
    try:  # JSON shown indented
        text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        pass
    more = len(text) - SHOWN_TEXT
    if more > 0:
        text = text[:SHOWN_TEXT] + f"\n… ({more} more characters)"
    return f"<pre>{escape(text)}</pre>"


def _verdict_text(verdict: VerdictRow | None) -> Raw:
    if verdict is None:
        return Raw('<span class="muted">ungraded</span>')
    if verdict.admitted:
        return Raw('<span class="pass">admitted</span>')
    call = f" ({escape(verdict.detail.split(':', 1)[0])})" if verdict.detail else ""  # "call #N tool"
    return Raw(f'<span class="fail">rejected</span> {escape(verdict.reason)}{call}')


_CALL = re.compile(r"^call #(\d+) ")


def _verdict_box(verdict: VerdictRow | None) -> str:
    """The verdict at the top of an episode: admitted or not and why, with the reward components,
    the rule behind the reason in one sentence, and the offending call (linked to it on the timeline)."""
    if verdict is None:
        return (f"<section class='verdict-box' id='verdict'><h3>Verdict</h3><p class='muted'>not graded by grader "
                f"{escape(GRADER_VERSION)}</p></section>")
    parts = [f"<section class='verdict-box{'' if verdict.admitted else ' rejected'}' id='verdict'><h3>Verdict</h3>",
             table(["completion", "safety", "robustness", "score", "verdict", "grader"],
                   [[verdict.completion, verdict.safety, verdict.robustness, verdict.score, _verdict_text(verdict),
                     verdict.grader_version]], css="verdict")]
    if verdict.detail:
        found = _CALL.match(verdict.detail)
        call = escape(verdict.detail)
        if found:
            head = verdict.detail.split(":", 1)[0]
            call = (f"<a href='#step-{found.group(1)}'>{escape(head)}</a>"
                    f"{escape(verdict.detail[len(head):])}")
        parts.append(f"<p id='verdict-call'><b>Offending call:</b> {call}</p>")
    rule = reason_rule(verdict.reason)
    if rule:
        parts.append(f"<p class='caption' id='verdict-rule'><b>{escape(verdict.reason)}:</b> {escape(rule)}</p>")
    return "".join(parts) + "</section>"


# ---------------------------------------------------------------- runs


def runs_page(store: Store, request: Request) -> str:
    evals = [[Link(r.id, f"/evals/{r.id}"), r.model, r.status, (r.summary or {}).get("overall", {}).get("pass_rate"),
              (r.summary or {}).get("overall", {}).get("trials"), r.started_at] for r in store.eval_runs()]
    trainings = [[Link(r.id, f"/training/{r.id}"), r.kind, r.status, r.base_model, r.rows, r.metrics.get("steps"),
                  r.metrics.get("final_loss"), r.started_at] for r in store.training_runs()]
    counts = store.task_counts()
    sources = store.canned("episodes_per_source", GRADER_VERSION)
    body = ("<h1>Runs</h1><h2>Synthesis and collection</h2>"
            + table(["task status", "tasks"], [[Link(s, href("/tasks", status=s)), n] for s, n in sorted(counts.items())],
                    "task-counts")
            + table(["source", "episodes", "ended", "failed", "admitted"],
                    [[Link(r["source"], href("/episodes", source=r["source"])), r["episodes"], r["ended"], r["failed"],
                      r["admitted"]] for r in sources], "episode-sources")
            + "<h2>Evaluations</h2>"
            + table(["run", "model", "status", "pass rate", "trials", "started"], evals, "eval-runs")
            + "<h2>Training</h2>"
            + table(["run", "kind", "status", "base model", "rows", "steps", "final loss", "started"], trainings,
                    "training-runs")
            + synthesis_section(store) + gate_section(store))
    return page("coworkenv: runs", body, nav=_nav(store))


def eval_page(store: Store, request: Request) -> str:
    run = store.eval_run(request.path_params["run_id"])
    if run is None:
        raise NotFound(f"no evaluation run {request.path_params['run_id']!r}")
    rows = store.eval_trials(run.id)
    verdicts = store.verdicts([t.episode_id for t in rows], GRADER_VERSION)
    trials = [[Link(t.task_id, f"/tasks/{t.task_id}"), t.capability, t.split, t.trial, t.score, t.passed,
               _reason_cell(t.reason, verdicts.get(t.episode_id), t.passed), t.steps,
               Link("episode", f"/episodes/{t.episode_id}")] for t in rows]
    body = (f"<h1>Evaluation {escape(run.id)}</h1>" + eval_run_section(run)
            + f"<h2>Settings</h2>{_pre(json.dumps(run.settings))}<h2>Trials</h2>"
            + table(["task", "capability", "split", "trial", "score", "passed", "reason", "steps", ""], trials,
                    "eval-trials"))
    return page(f"coworkenv: evaluation {run.id}", body, nav=_nav(store))


def _reason_cell(reason: str, verdict: VerdictRow | None, passed: bool) -> Raw:
    """A reason with, where it did not pass, its rule (on hover) and the call a call-based rejection rests on."""
    if passed:
        return Raw(escape(reason))
    call = f"<br><span class='muted'>{escape(verdict.detail)}</span>" if verdict is not None and verdict.detail else ""
    return Raw(f"<span title='{escape(reason_rule(reason))}'>{escape(reason)}</span>{call}")


def training_page(store: Store, request: Request) -> str:
    run = store.training_run(request.path_params["run_id"])
    if run is None:
        raise NotFound(f"no training run {request.path_params['run_id']!r}")
    figures = {k: v for k, v in run.metrics.items() if not isinstance(v, list | dict)}
    body = (f"<h1>Training {escape(run.kind)} {escape(run.id)}</h1><p class='muted'>{escape(run.status)}; "
            f"base {escape(run.base_model)}; {run.rows} rows of {escape(run.data_path)}; output "
            f"{escape(run.output_dir)}</p>"
            + (f"<p class='fail'>{escape(run.error)}</p>" if run.error else "")
            + table(["figure", "value"], [[k, v] for k, v in sorted(figures.items())], "training-figures")
            + training_charts(run) + f"<h2>Config</h2>{_pre(json.dumps(run.config))}")
    return page(f"coworkenv: training {run.id}", body, nav=_nav(store))


# ---------------------------------------------------------------- tasks


def tasks_page(store: Store, request: Request) -> str:
    capability = request.query_params.get("capability") or None
    status = request.query_params.get("status") or None
    if status is not None and status not in TASK_STATUSES:
        raise NotFound(f"unknown task status {status!r}; one of: {', '.join(TASK_STATUSES)}")
    tasks = store.tasks_matching(status=status, capability=capability)  # type: ignore[arg-type]
    rows = [[Link(t.id, f"/tasks/{t.id}"), t.capability, t.difficulty, t.status, t.spec.shape or None,
             t.instruction if len(t.instruction) < 160 else t.instruction[:157] + "…"] for t in tasks]
    capabilities = sorted({t.capability for t in store.tasks()})
    form = _filters("/tasks", {"capability": ("capability", capabilities, capability),
                               "status": ("status", list(TASK_STATUSES), status)})
    body = f"<h1>Tasks</h1>{form}<p>{len(tasks)} tasks</p>" + table(
        ["task", "capability", "difficulty", "status", "shape", "instruction"], rows, "tasks")
    return page("coworkenv: tasks", body, nav=_nav(store))


def task_page(store: Store, request: Request) -> str:
    row = store.task(request.path_params["task_id"])
    if row is None:
        raise NotFound(f"no task {request.path_params['task_id']!r}")
    task = row.spec
    checks = [[c.id, c.kind, c.description, Raw(_pre(c.model_dump_json(exclude={"id", "kind", "description"})))]
              for c in task.checks]
    reference = [[i + 1, step.tool, Raw(_pre(json.dumps(step.arguments)))] for i, step in enumerate(task.reference)]
    calibration = store.calibration(row.id)
    episodes, total = store.episode_listing(GRADER_VERSION, task_id=row.id, limit=PAGE_SIZE)
    body = (f"<h1>Task {escape(row.id)}</h1><p>{escape(row.capability)}, difficulty {row.difficulty}; "
            f"{escape(row.status)}{': ' + escape(row.reason) if row.reason else ''}; workspace "
            f"{escape(row.workspace_id)}{'; shape ' + escape(task.shape) if task.shape else ''}</p>"
            f"<h2>Instruction</h2><p id='instruction'>{escape(row.instruction)}</p>"
            + (f"<h2>User</h2><p>{escape(task.user.persona.name)} ({escape(task.user.persona.role)}) holds what the "
               "agent must ask for:</p>" + table(["fact", "value"], [[f.id, f.value] for f in task.user.facts], "facts")
               if task.user is not None else "")
            + "<h2>Checks</h2>" + table(["check", "kind", "description", "spec"], checks, "checks")
            + "<h2>Reference</h2>" + table(["step", "tool", "arguments"], reference, "reference")
            + f"<p>Reference answer: {escape(task.reference_answer) or '<span class=muted>none</span>'}</p>"
            + f"<div id='forbidden-tools'>Forbidden tools: {items(task.forbidden_tools)}</div>"
            + ("<h2>Calibration</h2>" + table(
                ["grader", "reference score", "empty score", "forbidden safety", "deterministic", "admitted", "reason"],
                [[calibration.grader_version, calibration.reference_score, calibration.empty_score,
                  calibration.forbidden_safety, calibration.deterministic, calibration.admitted,
                  calibration.reason or None]], "calibration")
               + table(["hack probe", "outcome"], [[p, o] for p, o in sorted(calibration.probes.items())], "probes")
               if calibration else "")
            + f"<h2>Episodes</h2><p>{total} episodes</p>" + _episode_table(episodes, compare_with=True))
    return page(f"coworkenv: task {row.id}", body, nav=_nav(store))


# ---------------------------------------------------------------- episodes


def _filters(action: str, selects: dict[str, tuple[str, list[str], str | None]], texts: dict[str, str | None]
             | None = None) -> str:
    parts = [f"<form class='filters' method='get' action='{escape(action)}'>"]
    for name, (label, options, chosen) in selects.items():
        choices = "".join(f"<option value='{escape(o)}'{' selected' if o == chosen else ''}>{escape(o)}</option>"
                          for o in options)
        parts.append(f"<label>{escape(label)} <select name='{escape(name)}'><option value=''>any</option>"
                     f"{choices}</select></label>")
    for name, value in (texts or {}).items():
        parts.append(f"<label>{escape(name)} <input name='{escape(name)}' value='{escape(value or '')}'></label>")
    parts.append("<button type='submit'>filter</button></form>")
    return "".join(parts)


def _episode_table(listings: list[EpisodeListing], *, compare_with: bool = False) -> str:
    rows = []
    for item in listings:
        e, v = item.episode, item.verdict
        row: list[Any] = [Link(e.id, f"/episodes/{e.id}"), Link(e.task_id, f"/tasks/{e.task_id}"), item.capability,
                          e.source, e.provider or None, e.attempt, e.status, item.calls, _verdict_text(v),
                          v.score if v else None, e.started_at]
        if compare_with:
            row.append(Link("compare", href("/compare", a=e.repaired_from, b=e.id)) if e.repaired_from else None)
        rows.append(row)
    headers = ["episode", "task", "capability", "source", "provider", "attempt", "status", "calls", "verdict",
               "score", "started"]
    return table(headers + (["repair"] if compare_with else []), rows, "episodes")


def episodes_page(store: Store, request: Request) -> str:
    q = request.query_params
    chosen = {k: (q.get(k) or None) for k in ("task", "capability", "source", "verdict", "reason")}
    if chosen["source"] is not None and chosen["source"] not in SOURCES:
        raise NotFound(f"unknown source {chosen['source']!r}; one of: {', '.join(SOURCES)}")
    if chosen["verdict"] is not None and chosen["verdict"] not in VERDICTS:
        raise NotFound(f"unknown verdict {chosen['verdict']!r}; one of: {', '.join(VERDICTS)}")
    try:
        offset = max(0, int(q.get("offset") or 0))
    except ValueError:
        raise NotFound(f"offset {q.get('offset')!r} is not a number") from None
    listings, total = store.episode_listing(
        GRADER_VERSION, task_id=chosen["task"], capability=chosen["capability"], source=chosen["source"],
        verdict=chosen["verdict"], reason=chosen["reason"], limit=PAGE_SIZE, offset=offset)
    capabilities = sorted({t.capability for t in store.tasks()})
    reasons = sorted({r["reason"] for r in store.canned("failure_reasons", GRADER_VERSION)}
                     | {r["reason"] for r in store.canned("calibration_outcomes", GRADER_VERSION) if r["admitted"] == 0})
    form = _filters("/episodes", {"capability": ("capability", capabilities, chosen["capability"]),
                                  "source": ("source", list(SOURCES), chosen["source"]),
                                  "verdict": ("verdict", list(VERDICTS), chosen["verdict"]),
                                  "reason": ("reason", reasons, chosen["reason"])}, {"task": chosen["task"]})
    pager = []
    if offset > 0:
        pager.append(Link("newer", href("/episodes", **chosen, offset=max(0, offset - PAGE_SIZE) or None)).html())
    if offset + PAGE_SIZE < total:
        pager.append(Link("older", href("/episodes", **chosen, offset=offset + PAGE_SIZE)).html())
    shown = f"{offset + 1}–{offset + len(listings)} of {total}" if listings else f"0 of {total}"
    body = (f"<h1>Episodes</h1>{form}<p id='episode-count'>{shown} episodes</p>" + _episode_table(listings)
            + f"<p>{' · '.join(pager)}</p>")
    return page("coworkenv: episodes", body, nav=_nav(store))


def _row_key(row: dict[str, Any] | None, rowid: Any) -> Any:
    if row and "id" in row:
        return row["id"]
    return rowid


def _values(row: dict[str, Any]) -> str:
    return items([f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in row.items()])


def _merged(changes: dict[str, Any]) -> list[dict[str, Any]]:
    """The changed rows, a row an ``INSERT OR REPLACE`` rewrote (its delete followed by the insert of
    the same key) as one update (marked ``replaced``)."""
    rows, out, i = changes.get("rows", []), [], 0
    while i < len(rows):
        row = rows[i]
        after = rows[i + 1] if i + 1 < len(rows) else None
        if (row["op"] == "delete" and after is not None and after["op"] == "insert" and after["table"] == row["table"]
                and _row_key(row["old"], row["rowid"]) == _row_key(after["new"], after["rowid"])):
            row, i = {**row, "op": "update", "new": after["new"], "replaced": True}, i + 1
        out.append(row)
        i += 1
    return out


def change_counts(changes: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Table -> op -> rows, as the rows read: a rewritten row counts as one update, not a delete and an insert."""
    counts = {table: dict(ops) for table, ops in changes.get("counts", {}).items()}
    for row in _merged(changes):
        if row.get("replaced"):
            ops = counts.setdefault(row["table"], {})
            for op, n in (("delete", -1), ("insert", -1), ("update", 1)):
                ops[op] = ops.get(op, 0) + n
    return {table: {op: n for op, n in ops.items() if n > 0} for table, ops in counts.items()}


def change_rows(changes: dict[str, Any]) -> list[tuple[str, str, Any, str]]:
    """(table, op, key, what changed) per changed row; a row an ``INSERT OR REPLACE`` rewrote (its
    delete followed by the insert of the same key) reads as one update."""
    out = []
    for row in _merged(changes):
        key = _row_key(row["old"] or row["new"], row["rowid"])
        if row["op"] == "update":
            old, new = row["old"] or {}, row["new"] or {}
            changed = [k for k in new if old.get(k) != new.get(k)]
            what = items([Raw(f"<span class='diff'>{escape(k)}: <del>{escape(json.dumps(old.get(k), ensure_ascii=False))}"
                                  f"</del> → <ins>{escape(json.dumps(new.get(k), ensure_ascii=False))}</ins></span>")
                              for k in changed]) if changed else "<span class='muted'>no value changed</span>"
        elif row["op"] == "insert":
            what = _values(row["new"] or {})
        else:
            what = _values(row["old"] or {})
        out.append((row["table"], row["op"], key, what))
    return out


def _changes_html(changes: dict[str, Any] | None) -> str:
    if not changes:
        return ""
    rows = change_rows(changes)
    body = "".join(f"<tr><td>{escape(t)}</td><td class='op-{escape(op)}'>{escape(op)}</td><td>{escape(str(key))}</td>"
                   f"<td>{what}</td></tr>" for t, op, key, what in rows)
    counts = "; ".join(f"{escape(t)}: " + ", ".join(f"{n} {escape(op)}" for op, n in sorted(ops.items()))
                       for t, ops in sorted(change_counts(changes).items()))
    more = " (only the first rows are shown)" if changes.get("truncated") else ""
    return (f"<table class='changes'><thead><tr><th>table</th><th>change</th><th>row</th><th>values</th></tr>"
            f"</thead><tbody>{body}</tbody></table><p class='muted'>state rows: {counts}{more}</p>")


def _step(item: ToolCallRow) -> str:
    css = " ".join(c for c in (item.kind, "error" if item.is_error else "") if c)
    took = f" · {item.duration_ms:.1f} ms" if item.duration_ms is not None else ""
    outcome = (f"<span class='fail'>error ({escape(item.error_kind or 'failed')})</span>" if item.is_error
               else "<span class='pass'>ok</span>")
    title = {"call": "call", "event": "the world moved", "user": "message to the user", "resource": "read resource",
             "completion": "completion", "prompt": "prompt"}.get(item.kind, item.kind)
    label = "reply" if item.kind == "user" else "result"
    return (f"<li class='{css}' id='step-{item.idx}'><div><b>#{item.idx}</b> {escape(title)} "
            f"<code>{escape(item.tool)}</code>{took} · {outcome}</div>"
            f"<details open><summary>arguments</summary>{_pre(json.dumps(item.arguments))}</details>"
            + (f"<details open><summary>{label}</summary>{_pre(item.result)}</details>" if item.result else "")
            + (f"<p class='fail'>{escape(item.error)}</p>" if item.error else "")
            + _changes_html(item.state_changes) + "</li>")


def _episode_body(store: Store, episode: EpisodeRow) -> str:
    """An episode's verdict (why, first), who played it, its timeline, then its answer and checks."""
    task = store.task(episode.task_id)
    verdict = store.verdict(episode.id, GRADER_VERSION)
    described = {c.id: c.description for c in task.spec.checks} if task else {}
    steps = "".join(_step(item) for item in store.interactions(episode.id))
    header = table(["task", "source", "provider", "client", "episode key", "run tag", "attempt", "status", "started",
                    "ended"], [[
        Link(episode.task_id, f"/tasks/{episode.task_id}"), episode.source, episode.provider or None,
        episode.client or None, episode.key or None, episode.run_tag or None, episode.attempt, episode.status,
        episode.started_at, episode.ended_at]], "episode-provenance")
    parts = [_verdict_box(verdict), header]
    if episode.source == "calibration":  # what it played: the reference, or a probe designed to fail
        played = episode.hint or f"played as {episode.provider or 'reference'}"
        parts.append(f"<p id='calibration-play'><b>Calibration episode</b> ({escape(episode.provider or 'reference')}): "
                     f"{escape(played)}</p>")
    if task is not None:
        parts.append(f"<p class='instruction'>{escape(task.instruction)}</p>")
    if episode.repaired_from:
        parts.append(f"<p>A repair of {Link(episode.repaired_from, f'/episodes/{episode.repaired_from}').html()} "
                     f"({Link('side by side', href('/compare', a=episode.repaired_from, b=episode.id)).html()})"
                     + (f"; its hint: {escape(episode.hint)}" if episode.hint else "") + "</p>")
    if episode.error:
        parts.append(f"<p class='fail'>ended by a failure at the {escape(episode.boundary or '?')} boundary: "
                     f"{escape(episode.error)}</p>")
    parts.append(f"<h3>Timeline</h3><ol class='timeline'>{steps}</ol>" if steps else
                 "<h3>Timeline</h3><p class='muted'>no calls</p>")
    answer = escape(episode.final_answer) if episode.final_answer is not None else "<span class='muted'>none</span>"
    parts.append(f"<h3>Answer</h3><p class='answer'>{answer}</p>"
                 + (" <p class='fail'>truncated (ran out of steps)</p>" if episode.truncated else ""))
    if verdict is not None:
        parts.append("<h3>Checks</h3>" + table(["check", "description", "passed", "detail"], [
            [c.id, described.get(c.id), Raw("<span class='pass'>passed</span>" if c.passed else
                                              "<span class='fail'>failed</span>"), c.detail] for c in verdict.checks],
            css="checks"))
    return "".join(parts)


def episode_page(store: Store, request: Request) -> str:
    episode = store.episode(request.path_params["episode_id"])
    if episode is None:
        raise NotFound(f"no episode {request.path_params['episode_id']!r}")
    repairs, _ = store.episode_listing(GRADER_VERSION, repaired_from=episode.id, limit=PAGE_SIZE)
    others, _ = store.episode_listing(GRADER_VERSION, task_id=episode.task_id, limit=PAGE_SIZE)
    body = (f"<h1>Episode {escape(episode.id)}</h1>" + _episode_body(store, episode)
            + "".join(f"<p>Repaired by {Link(r.episode.id, f'/episodes/{r.episode.id}').html()} "
                      f"({Link('side by side', href('/compare', a=episode.id, b=r.episode.id)).html()})</p>"
                      for r in repairs)
            + "<h2>Other episodes of this task</h2>"
            + table(["episode", "source", "played by", "attempt", "verdict", "score", ""], [
                [Link(o.episode.id, f"/episodes/{o.episode.id}"), o.episode.source, o.episode.provider or None,
                 o.episode.attempt,
                 _verdict_text(o.verdict), o.verdict.score if o.verdict else None,
                 Link("side by side", href("/compare", a=episode.id, b=o.episode.id))]
                for o in others if o.episode.id != episode.id], "other-episodes"))
    return page(f"coworkenv: episode {episode.id}", body, nav=_nav(store))


def compare_page(store: Store, request: Request) -> str:
    ids = [request.query_params.get(k) or "" for k in ("a", "b")]
    episodes = [store.episode(i) for i in ids]
    for wanted, found in zip(ids, episodes, strict=True):
        if found is None:
            raise NotFound(f"no episode {wanted!r} (give two: /compare?a=ID&b=ID)")
    sides = "".join(f"<section id='side-{k}'><h2>{Link(e.id, f'/episodes/{e.id}').html()}</h2>"
                    f"{_episode_body(store, e)}</section>"
                    for k, e in zip("ab", episodes, strict=True) if e is not None)
    return page("coworkenv: side by side", f"<h1>Side by side</h1><div class='side'>{sides}</div>",
                nav=_nav(store))


# ---------------------------------------------------------------- the app


def view_app(store: Store) -> Starlette:
    """The viewer over ``store`` (opened by the caller, which closes it)."""

    def route(path: str, render) -> Route:
        def endpoint(request: Request) -> HTMLResponse:  # sync: Starlette runs it in a worker thread
            try:
                return HTMLResponse(render(store, request))
            except NotFound as exc:
                return HTMLResponse(page("coworkenv: not found", f"<h1>Not found</h1><p id='problem'>{escape(str(exc))}"
                                         "</p>", nav=_nav(store)), status_code=404)
        return Route(path, endpoint, methods=["GET"])

    return Starlette(routes=[
        route("/", runs_page), route("/evals/{run_id}", eval_page), route("/training/{run_id}", training_page),
        route("/tasks", tasks_page), route("/tasks/{task_id}", task_page), route("/episodes", episodes_page),
        route("/episodes/{episode_id}", episode_page), route("/compare", compare_page),
    ])

"""``coworkenv report``: one self-contained HTML file about a store (plots inline as SVG, no script,
nothing fetched): what synthesis made, what the gate said, every evaluation per capability and split
side by side (the before/after table of ``demo --full`` when the store holds its two evaluations),
and every training run's loss and reward curves."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

from .. import __version__
from ..gate import GRADER_VERSION, ConversationFigures, conversation_figures, reason_rule
from ..store import EvalRunRow, ExperimentResultRow, Store, TrainingRunRow
from ..workspace import task_apps
from ._html import Raw, page, table
from ._svg import bar_chart, line_chart


def synthesis_section(store: Store) -> str:
    tasks = store.tasks()
    statuses = sorted({t.status for t in tasks})
    by = Counter((t.capability, t.status) for t in tasks)
    capabilities = sorted({t.capability for t in tasks})
    rows = [[c, *(by[(c, s)] for s in statuses), sum(by[(c, s)] for s in statuses)] for c in capabilities]
    apps = Counter(app for t in tasks if t.status in ("admitted", "heldout") for app in task_apps(t.spec))
    chart = bar_chart("admitted tasks per capability", capabilities,
                      {"admitted": [float(by[(c, "admitted")]) for c in capabilities]},
                      top=float(max([by[(c, "admitted")] for c in capabilities], default=0) or 1))
    return ("<h2>Synthesis</h2>"
            f"<p>{len(tasks)} tasks; per capability and status:</p>"
            + table(["capability", *statuses, "all"], rows, "synthesis-capabilities") + chart
            + "<p>Admitted and held-out tasks per app (a task counts for every app it uses):</p>"
            + table(["app", "tasks"], [[a, n] for a, n in sorted(apps.items())], "synthesis-apps"))


COUNTED = ("Pass rates and reasons count agents' episodes only (sources teacher, live, eval, rl). Calibration "
           "episodes (each task's reference, and its probes designed to fail) are counted apart, under Calibration.")


def gate_section(store: Store) -> str:
    sources = store.canned("episodes_per_source", GRADER_VERSION)
    reasons = store.canned("failure_reasons", GRADER_VERSION)
    rates = store.canned("pass_rate_by_capability", GRADER_VERSION)
    calibration = store.canned("calibration_outcomes", GRADER_VERSION)
    examples = store.verdicts([r["example_episode"] for r in reasons], GRADER_VERSION)  # a call-based one names its call

    def example(row: dict[str, Any]) -> str | None:
        verdict = examples.get(row["example_episode"])
        return f"episode {row['example_episode']}: {verdict.detail}" if verdict is not None and verdict.detail else None
    return (f"<h2>Gate</h2><p>Verdicts of grader {escape(GRADER_VERSION)}. Episodes per source:</p>"
            + table(["source", "episodes", "ended", "failed", "admitted"],
                     [[r["source"], r["episodes"], r["ended"], r["failed"], r["admitted"]] for r in sources],
                     "gate-sources")
            + f"<p class='caption' id='gate-counted'>{escape(COUNTED)}</p>"
            + "<p>Reasons of the agents' episodes not admitted, each with its rule (and, for a rejection that "
              "rests on one call, an episode's offending call):</p>"
            + table(["reason", "episodes", "share", "capabilities", "rule", "offending call, e.g."],
                     [[r["reason"], r["episodes"], r["share"], (r["capabilities"] or "").split(","),
                       reason_rule(r["reason"]), example(r)] for r in reasons], "gate-reasons")
            + "<p>Pass rate (score ≥ 0.75) and mean reward components of agents' episodes per capability and source:</p>"
            + table(["capability", "source", "episodes", "pass rate", "completion", "safety", "robustness", "admitted"],
                     [[r["capability"], r["source"], r["episodes"], r["pass_rate"], r["completion"], r["safety"],
                       r["robustness"], r["admitted"]] for r in rates], "gate-pass-rates")
            + "<h3>Calibration</h3><p class='caption'>What calibration played for each task: the reference, which "
              "must be admitted, and probes designed to fail (<code>empty</code>, <code>forbidden</code>, "
              "<code>probe:NAME</code>), which must not: a probe admitted beats its task, and the task is "
              "quarantined.</p>"
            + table(["play", "reason", "episodes", "admitted"],
                     [[Raw(_play_label(r["play"])), r["reason"], r["episodes"], r["admitted"]] for r in calibration],
                     "gate-calibration"))


def _play_label(play: str) -> str:
    designed = "" if play == "reference" else " <span class='muted'>(designed to fail)</span>"
    return f"<code>{escape(play)}</code>{designed}"


def _run_label(run) -> str:
    return f"{run.model} ({run.id})"


def eval_run_section(run: EvalRunRow) -> str:
    """One evaluation run: its settings and its pass rates per split and capability."""
    summary = run.summary or {}
    k = summary.get("k") or 1
    rows = []
    for split, capabilities in sorted(summary.get("split_capabilities", {}).items()):
        for capability, stats in sorted(capabilities.items()):
            rows.append([split, capability, stats.get("tasks"), stats.get("trials"), stats.get("pass_rate"),
                         stats.get(f"pass@{k}"), stats.get(f"pass^{k}"), stats.get("avg_score")])
    settings = run.settings
    return (f"<h3>{escape(_run_label(run))}</h3><p class='muted'>{escape(run.status)}; "
            f"{settings.get('trials', '?')} trials, temperature {settings.get('temperature', '?')}, "
            f"view {escape(str(settings.get('prompt_style', '?')))}, started {escape(run.started_at)}</p>"
            + table(["split", "capability", "tasks", "trials", "pass rate", f"pass@{k}", f"pass^{k}",
                     "mean score"], rows, f"eval-{run.id}"))


def _evaluations(store: Store) -> str:
    runs = [r for r in store.eval_runs() if r.summary]
    if not runs:
        return '<h2>Evaluations</h2><p class="muted">none</p>'
    parts = ["<h2>Evaluations</h2>"]
    capabilities = sorted({c for r in runs for c in (r.summary or {}).get("capabilities", {})})
    side = []
    for capability in [*capabilities, "overall"]:
        row: list[Any] = [capability]
        for run in runs:
            summary = run.summary or {}
            stats = summary["overall"] if capability == "overall" else summary.get("capabilities", {}).get(capability)
            row.append(None if not stats else stats.get("pass_rate"))
        side.append(row)
    parts.append("<p>Pass rate per capability, every run side by side (held-out tasks):</p>"
                 + table(["capability", *(_run_label(r) for r in runs)], side, "eval-side-by-side"))
    parts.append(bar_chart("held-out pass rate per capability", capabilities,
                           {_run_label(r): [((r.summary or {}).get("capabilities", {}).get(c) or {}).get("pass_rate")
                                            for c in capabilities] for r in runs}, percent=True))
    parts.append(conversations_section(store, runs))
    parts += [eval_run_section(run) for run in runs]
    return "".join(parts)


TALK = ("Over each run's trials whose task has a user: episodes that asked their user anything; the share "
        "of the users' facts and confirmations some message was about (the right questions); the share of "
        "the messages that were redundant (about nothing the user holds, or only about what was asked "
        "already), each by the gate's rule.")


def _user_label(figures: ConversationFigures) -> str:
    return figures.user_model or "scripted"


def conversations_section(store: Store, runs: list[EvalRunRow]) -> str:
    """The evaluations' multi-turn figures, a row per run with such trials and one chart of them all."""
    figures = [(run, f) for run in runs if (f := conversation_figures(store, run.id)) is not None]
    if not figures:
        return ""
    rows = [[_run_label(run), _user_label(f), f.episodes, f.pass_rate, f.asking_rate, f.right_rate, f.questions,
             f.redundant_rate] for run, f in figures]
    measures = ["pass rate", "asked at all", "items asked", "redundant"]
    chart = bar_chart("multi-turn: asking, per evaluation (model, user)", measures,
                      {f"{_run_label(run)}, user {_user_label(f)}":
                       [f.pass_rate, f.asking_rate, f.right_rate, f.redundant_rate] for run, f in figures}, percent=True)
    return ("<h3>Multi-turn conversations</h3>"
            f"<p class='caption' id='eval-talk-rule'>{escape(TALK)}</p>"
            + table(["run", "user played by", "episodes", "pass rate", "asked at all", "items asked", "messages",
                     "redundant"], rows, "eval-conversations") + chart)


EXPERIMENTS = ("The comparisons the benchmarks ran (benchmarks/gate_ablation.py, guided_ablation.py, rl_compare.py, "
               "multi_turn.py), each arm's figures as recorded for each seed: a cell is the mean over the seeds, "
               "each seed's figure after it.")


def _mean(values: list[Any]) -> float | None:
    numbers = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    return sum(numbers) / len(numbers) if numbers else None


def _seeds_cell(values: list[Any]) -> str | None:
    average = _mean(values)
    if average is None:
        return None
    shown = " / ".join("—" if not isinstance(v, int | float) else f"{v:.3g}" for v in values)
    return f"{average:.3g} ({shown})" if len(values) > 1 else f"{average:.3g}"


def experiment_section(name: str, results: list[ExperimentResultRow]) -> str:
    """One experiment: a row per arm (its figures over the seeds) and one chart of the pass rates."""
    arms = list(dict.fromkeys(r.arm for r in results))
    by_arm = {arm: [r for r in results if r.arm == arm] for arm in arms}
    capabilities = list(dict.fromkeys(c for r in results for c in (r.figures.get("capabilities") or {})))
    extras = list(dict.fromkeys(k for r in results for k, v in r.figures.items()
                                if k not in ("pass_rate", "capabilities") and isinstance(v, int | float)))
    rows = []
    for arm in arms:
        chosen = by_arm[arm]
        rows.append([arm, ", ".join(str(r.seed) for r in chosen), _seeds_cell([r.figures.get("pass_rate") for r in chosen]),
                     *(_seeds_cell([(r.figures.get("capabilities") or {}).get(c) for r in chosen]) for c in capabilities),
                     *(_seeds_cell([r.figures.get(k) for r in chosen]) for k in extras)])
    groups = [*capabilities, "overall"]
    chart = bar_chart(f"{name}: held-out pass rate per arm (mean over seeds)", groups,
                      {arm: [_mean([(r.figures.get("capabilities") or {}).get(c) if c != "overall"
                                    else r.figures.get("pass_rate") for r in by_arm[arm]]) for c in groups]
                       for arm in arms}, percent=True)
    return (f"<h3>{escape(name)}</h3>"
            + table(["arm", "seeds", "pass rate", *capabilities, *extras], rows, f"experiment-{name}") + chart)


def _experiments(store: Store) -> str:
    results = store.experiment_results()
    if not results:
        return ""
    names = list(dict.fromkeys(r.experiment for r in results))
    return ("<h2>Experiments</h2>" + f"<p class='caption'>{escape(EXPERIMENTS)}</p>"
            + "".join(experiment_section(n, [r for r in results if r.experiment == n]) for n in names))


def training_charts(run: TrainingRunRow) -> str:
    """A training run's loss curve, and its mean reward per component where it logged them."""
    losses = [(float(p["step"]), float(p["loss"])) for p in run.metrics.get("losses", []) if p.get("loss") is not None]
    parts = [line_chart(f"{run.kind} {run.id}: training loss", {"loss": losses}) or
             '<p class="muted">no loss logged</p>']
    curves = run.metrics.get("reward_curves") or []
    components = sorted({k.split("/")[1] for p in curves for k in p if k.startswith("rewards/") and k.endswith("/mean")})
    if components:
        parts.append(line_chart(f"{run.kind} {run.id}: mean reward per component",
                                {c: [(float(p["step"]), float(p[f"rewards/{c}/mean"])) for p in curves
                                     if p.get(f"rewards/{c}/mean") is not None] for c in components}))
    return "".join(parts)


def _training(store: Store) -> str:
    runs = store.training_runs()
    if not runs:
        return '<h2>Training</h2><p class="muted">none</p>'
    rows = [[r.id, r.kind, r.status, r.base_model, r.rows, r.metrics.get("steps"), r.metrics.get("first_loss"),
             r.metrics.get("final_loss"), r.metrics.get("seconds")] for r in runs]
    parts = ["<h2>Training</h2>",
             table(["run", "kind", "status", "base model", "rows", "steps", "first loss", "final loss", "seconds"],
                    rows, "training-runs")]
    for run in runs:
        parts.append(f"<h3>{escape(run.kind)} {escape(run.id)}</h3>" + training_charts(run))
    return "".join(parts)


def render_report(store: Store) -> str:
    """The whole report of ``store`` as one HTML document."""
    made = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = synthesis_section(store) + gate_section(store) + _evaluations(store) + _experiments(store) + _training(store)
    return page(f"coworkenv report: {Path(store.path).name}",
                f"<h1>coworkenv report</h1><p class='muted'>{escape(store.path)}; made {made} by coworkenv "
                f"{escape(__version__)}, grader {escape(GRADER_VERSION)}</p>{body}")


def write_report(store: Store, out: Path) -> Path:
    """Write the report of ``store`` to ``out`` whole (a partial file renamed at the end)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    try:
        partial.write_text(render_report(store), encoding="utf-8")
        partial.replace(out)
    finally:
        partial.unlink(missing_ok=True)
    return out

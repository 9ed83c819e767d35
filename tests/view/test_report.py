"""`coworkenv report` on a real store (a demo's tasks and teacher episodes, an SFT run, a GRPO run on
live episodes, two evaluations of models and two of the oracle on multi-turn tasks), rendered in a
real headless Chromium (Debian's `chromium`, driven by Playwright); what the page shows is checked
against the store read through the library. The screenshot is kept as a file
(``$COWORKENV_SCREENSHOT_DIR``, by default ``runs/screenshots``)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coworkenv.cli import app
from coworkenv.gate import GRADER_VERSION, conversation_figures
from coworkenv.store import Store

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]
runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "tests" / "fixtures" / "tool-model"  # the conftest's model: it plays a user in one evaluation
REQUESTED: list[str] = []  # every URL the report's page asked for


@pytest.fixture(scope="module")
def page(store, browser, cli, screenshots):
    report = cli("report", "--store", str(store), "--out", str(store.parent / "out" / "report.html"))["report"]
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    page.on("request", lambda request: REQUESTED.append(request.url))
    page.goto(Path(report).as_uri())
    page.screenshot(path=str(screenshots / "report.png"), full_page=True)
    yield page
    page.close()


def test_the_report_stands_alone(page, store, screenshots):
    assert REQUESTED == [page.url]  # nothing fetched beyond the file itself
    assert page.title() == f"coworkenv report: {store.name}"
    assert (screenshots / "report.png").stat().st_size > 10_000


def test_synthesis_and_gate_show_what_the_store_holds(page, store, table):
    library = Store(store, create=False)
    try:
        tasks = library.tasks()
        episodes = library.episodes()
        verdicts = library.verdicts([e.id for e in episodes], GRADER_VERSION)
    finally:
        library.close()
    shown = {row[0]: int(row[-1]) for row in table(page, "synthesis-capabilities")}
    assert shown == dict(Counter(t.capability for t in tasks))
    reasons = {row[0]: int(row[1]) for row in table(page, "gate-reasons")}  # agents' episodes: calibration apart
    calibration = {e.id for e in episodes if e.source == "calibration"}
    assert reasons == dict(Counter(v.reason for e, v in verdicts.items() if not v.admitted and e not in calibration))
    assert reasons
    sources = {row[0]: int(row[1]) for row in table(page, "gate-sources")}
    assert sources == dict(Counter(e.source for e in episodes)) and {"teacher", "eval", "rl"} <= set(sources)


def test_evaluations_side_by_side_and_per_split(page, store, table):
    library = Store(store, create=False)
    try:
        runs = library.eval_runs()
    finally:
        library.close()
    headers = page.eval_on_selector_all("#eval-side-by-side thead th", "cells => cells.map(c => c.innerText)")
    assert headers == ["capability", *(f"{r.model} ({r.id})" for r in runs)] and len(runs) == 4
    overall = [row for row in table(page, "eval-side-by-side") if row[0] == "overall"][0]
    assert [float(v) for v in overall[1:]] == [pytest.approx(r.summary["overall"]["pass_rate"], abs=1e-3) for r in runs]
    for run in runs:
        rows = table(page, f"eval-{run.id}")
        assert {(r[0], r[1]) for r in rows} == {(split, c) for split, caps in run.summary["split_capabilities"].items()
                                                for c in caps}


def test_multi_turn_conversations_are_counted_per_run(page, store, table):
    """A row per evaluation with multi-turn trials, with who played the user. The oracle asks exactly the
    reference's questions: every episode asks, every fact and confirmation is asked about, none twice."""
    library = Store(store, create=False)
    try:
        runs = library.eval_runs()
        figures = {r.id: conversation_figures(library, r.id) for r in runs}
        with_users = {r.id: sum(library.task(t.task_id).spec.user is not None for t in library.eval_trials(r.id))
                      for r in runs}
    finally:
        library.close()
    rows = {row[0]: row for row in table(page, "eval-conversations")}
    assert set(rows) == {f"{r.model} ({r.id})" for r in runs if with_users[r.id]}
    oracle = [r for r in runs if r.model == "oracle"]
    assert [r.settings["user_model"] for r in oracle] == ["", f"hf:{MODEL}"]
    for run in oracle:
        f = figures[run.id]
        assert f is not None and f.episodes == with_users[run.id] == 2
        assert (f.asking_rate, f.right_rate, f.redundant_rate) == (1.0, 1.0, 0.0) and f.questions >= f.episodes
        row = rows[f"oracle ({run.id})"]
        assert row[1] == (run.settings["user_model"] or "scripted") and int(row[2]) == f.episodes
        assert [float(v) for v in (row[4], row[5], row[7])] == [1.0, 1.0, 0.0] and int(row[6]) == f.questions
    titles = page.eval_on_selector_all("svg.chart > title", "ts => ts.map(t => t.textContent)")
    assert "multi-turn: asking, per evaluation (model, user)" in titles


def test_experiments_show_each_arm_over_its_seeds(page, store, table):
    """An arm's cell is the mean over the seeds, each seed's figure after it; one chart per experiment."""
    library = Store(store, create=False)
    try:
        results = library.experiment_results("gate")
    finally:
        library.close()
    assert [(r.arm, r.seed) for r in results] == [("gated", 0), ("ungated", 0), ("gated", 1), ("ungated", 1)]
    rows = table(page, "experiment-gate")
    headers = page.eval_on_selector_all("#experiment-gate thead th", "cells => cells.map(c => c.innerText)")
    assert headers == ["arm", "seeds", "pass rate", "lookup", "safety", "safety_mean"]
    assert rows == [["gated", "0, 1", "0.4 (0.5 / 0.3)", "0.4 (0.5 / 0.3)", "0.6 (0.5 / 0.7)", "0.75 (1 / 0.5)"],
                    ["ungated", "0, 1", "0.3 (0.25 / 0.35)", "0.3 (0.25 / 0.35)", "0.7 (0.75 / 0.65)",
                     "0.75 (1 / 0.5)"]]
    titles = page.eval_on_selector_all("svg.chart > title", "ts => ts.map(t => t.textContent)")
    assert "gate: held-out pass rate per arm (mean over seeds)" in titles
    bars = page.eval_on_selector_all("svg.chart rect.bar > title", "ts => ts.map(t => t.textContent)")
    assert "gated, overall: 40%" in bars and "ungated, safety: 70%" in bars


def test_training_runs_have_their_curves(page, store, table):
    library = Store(store, create=False)
    try:
        runs = library.training_runs()
    finally:
        library.close()
    assert [(row[0], row[1]) for row in table(page, "training-runs")] == [(r.id, r.kind) for r in runs]
    titles = page.eval_on_selector_all("svg.chart > title", "ts => ts.map(t => t.textContent)")
    for run in runs:
        assert f"{run.kind} {run.id}: training loss" in titles
    [grpo] = [r for r in runs if r.kind == "grpo"]
    assert f"grpo {grpo.id}: mean reward per component" in titles
    points = page.eval_on_selector_all("svg.chart circle.point > title", "ts => ts.map(t => t.textContent)")
    for component in ("completion", "safety", "robustness"):
        for point in grpo.metrics["reward_curves"]:
            assert f"{component} at {point['step']:.3g}: {point[f'rewards/{component}/mean']:.3g}" in points


def test_bad_places_are_named_and_nothing_is_written(tmp_path, store):
    result = runner.invoke(app, ["report", "--store", str(tmp_path / "none.db")])
    assert result.exit_code == 2 and "no store at" in result.output and not (tmp_path / "none.db").exists()
    result = runner.invoke(app, ["report", "--store", str(store), "--out", str(tmp_path)])
    assert result.exit_code == 2 and "is a folder" in result.output
    (tmp_path / "file").write_text("")
    result = runner.invoke(app, ["report", "--store", str(store), "--out", str(tmp_path / "file" / "report.html")])
    assert result.exit_code == 1 and "cannot write the report" in result.output
    assert not list(tmp_path.glob("**/*.partial"))

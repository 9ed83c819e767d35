"""`coworkenv view`, started as a user starts it, over a real store (a demo with repaired teacher
episodes, training runs and evaluations), loaded page by page in a real headless Chromium; what
each page shows is checked against the store read through the library. Screenshots of every page
are kept as files."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from coworkenv.gate import GRADER_VERSION
from coworkenv.store import Store

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]


@pytest.fixture(scope="module")
def viewer(store, cli_server) -> Iterator[str]:
    with cli_server(["view", "--store", str(store), "--port", "0"], r"on (http://127\.0\.0\.1:\d+)/") as url:
        yield url


@pytest.fixture(scope="module")
def library(store) -> Iterator[Store]:
    opened = Store(store, create=False)
    yield opened
    opened.close()


@pytest.fixture
def page(browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    yield page
    page.close()


def visit(page, url: str, screenshots: Path, name: str) -> None:
    response = page.goto(url)
    assert response is not None and response.status == 200, (url, response and response.status)
    page.screenshot(path=str(screenshots / f"view-{name}.png"), full_page=True)


def test_runs_list_every_run_and_link_to_their_pages(page, viewer, library, table, screenshots):
    visit(page, viewer + "/", screenshots, "runs")
    runs = library.eval_runs()
    assert [row[0] for row in table(page, "eval-runs")] == [r.id for r in runs] and len(runs) == 4
    assert [(row[0], row[1]) for row in table(page, "training-runs")] == [(r.id, r.kind) for r in library.training_runs()]
    assert {row[0]: int(row[1]) for row in table(page, "task-counts")} == library.task_counts()
    page.click(f"#eval-runs a:text('{runs[0].id}')")
    page.wait_for_url(f"**/evals/{runs[0].id}")
    page.screenshot(path=str(screenshots / "view-eval.png"), full_page=True)
    trials = library.eval_trials(runs[0].id)
    assert [(row[0], row[3], row[6].split("\n")[0]) for row in table(page, "eval-trials")] == [
        (t.task_id, str(t.trial), t.reason) for t in trials]  # a call-based rejection's call is named under its reason
    grpo = [r for r in library.training_runs() if r.kind == "grpo"][0]
    visit(page, f"{viewer}/training/{grpo.id}", screenshots, "training")
    titles = page.eval_on_selector_all("svg.chart > title", "ts => ts.map(t => t.textContent)")
    assert f"grpo {grpo.id}: mean reward per component" in titles


def test_episodes_filter_by_source_verdict_capability_and_reason(page, viewer, library, table, screenshots):
    episodes = library.episodes()
    verdicts = library.verdicts([e.id for e in episodes], GRADER_VERSION)
    capability = {t.id: t.capability for t in library.tasks()}
    visit(page, viewer + "/episodes", screenshots, "episodes")
    shown = table(page, "episodes")
    assert page.inner_text("#episode-count") == f"1–{min(100, len(episodes))} of {len(episodes)} episodes"
    assert len(shown) == min(100, len(episodes)) and {row[0] for row in shown} <= {e.id for e in episodes}
    page.select_option("select[name=source]", "teacher")
    page.select_option("select[name=verdict]", "rejected")
    page.click("form.filters button")
    page.wait_for_url("**/episodes?*")
    expected = {e.id for e in episodes if e.source == "teacher" and e.id in verdicts and not verdicts[e.id].admitted}
    assert expected, "the demo's teacher made mistakes that were rejected"
    assert {row[0] for row in table(page, "episodes")} == expected
    assert page.inner_text("#episode-count").startswith(f"1–{len(expected)} of {len(expected)}")
    reason = next(verdicts[i].reason for i in expected)
    some = next(iter(capability[e.task_id] for e in episodes if e.id in expected))
    visit(page, f"{viewer}/episodes?reason={reason}&capability={some}", screenshots, "episodes-filtered")
    assert {row[0] for row in table(page, "episodes")} == {
        e.id for e in episodes if e.id in verdicts and verdicts[e.id].reason == reason and capability[e.task_id] == some}


def test_an_episode_is_a_timeline_with_the_rows_each_call_changed(page, viewer, library, table, screenshots):
    writes = [e for e in library.episodes(source="teacher")
              if any(c.state_changes for c in library.interactions(e.id))]
    assert writes, "some teacher episode changed the workspace"
    episode = writes[0]
    interactions = library.interactions(episode.id)
    verdict = library.verdict(episode.id, GRADER_VERSION)
    visit(page, f"{viewer}/episodes/{episode.id}", screenshots, "episode")
    steps = page.eval_on_selector_all("ol.timeline > li", "items => items.map(i => i.id)")
    assert steps == [f"step-{i.idx}" for i in interactions]
    for item in interactions:
        head = page.inner_text(f"#step-{item.idx} > div")
        assert item.tool in head and ("error" in head) == item.is_error
        rendered = table(page, f"#step-{item.idx} table.changes")
        if not item.state_changes:
            assert rendered == []
            continue
        recorded = item.state_changes["rows"]
        assert {row[0] for row in rendered} == {r["table"] for r in recorded}
        for row in recorded:  # every inserted or deleted row is named by its key
            values = row["new"] if row["op"] == "insert" else row["old"]
            key = str(values["id"]) if "id" in values else str(row["rowid"])
            assert any(r[2] == key for r in rendered), (key, rendered)
        replaced = len(recorded) - len(rendered)  # an INSERT OR REPLACE reads as one update
        assert [r[1] for r in rendered].count("update") >= replaced >= 0
    assert verdict is not None
    checks = table(page, ".checks")
    assert [(row[0], row[2]) for row in checks] == [(c.id, "passed" if c.passed else "failed") for c in verdict.checks]
    [reward] = table(page, ".verdict")
    assert [float(v) for v in reward[:4]] == pytest.approx(
        [verdict.completion, verdict.safety, verdict.robustness, verdict.score], abs=1e-3)
    assert reward[4].startswith("admitted" if verdict.admitted else "rejected")


def test_a_failed_attempt_and_its_repair_side_by_side(page, viewer, library, screenshots):
    pairs = library.repair_pairs(GRADER_VERSION)
    assert pairs, "the demo repaired some teacher episode"
    repaired, failed, reason = pairs[0]
    visit(page, f"{viewer}/episodes/{failed.id}", screenshots, "failed-episode")
    page.click("text=side by side >> nth=0")
    page.wait_for_url("**/compare?*")
    page.screenshot(path=str(screenshots / "view-compare.png"), full_page=True)
    assert page.inner_text("#side-a h2") == failed.id and page.inner_text("#side-b h2") == repaired.id
    assert page.inner_text("#side-a .verdict").count("rejected") == 1 and reason in page.inner_text("#side-a .verdict")
    assert "admitted" in page.inner_text("#side-b .verdict")
    assert f"A repair of {failed.id}" in page.inner_text("#side-b")
    for side, episode in (("a", failed), ("b", repaired)):
        count = page.eval_on_selector_all(f"#side-{side} ol.timeline > li", "items => items.length")
        assert count == len(library.interactions(episode.id))


def test_a_task_shows_its_instruction_checks_reference_and_episodes(page, viewer, library, table, screenshots):
    task = library.tasks(status="admitted")[0]
    visit(page, f"{viewer}/tasks", screenshots, "tasks")
    assert {row[0] for row in table(page, "tasks")} == {t.id for t in library.tasks()}
    page.click(f"#tasks a:text('{task.id}')")
    page.wait_for_url(f"**/tasks/{task.id}")
    page.screenshot(path=str(screenshots / "view-task.png"), full_page=True)
    assert page.inner_text("#instruction") == task.instruction
    assert [row[0] for row in table(page, "checks")] == [c.id for c in task.spec.checks]
    assert [row[1] for row in table(page, "reference")] == [s.tool for s in task.spec.reference]
    assert {row[0] for row in table(page, "episodes")} == {e.id for e in library.episodes(task_id=task.id)}


def test_unknown_pages_and_bad_filters_are_named(page, viewer):
    for path, problem in (("/episodes/nope", "no episode 'nope'"), ("/tasks/nope", "no task 'nope'"),
                          ("/episodes?verdict=maybe", "unknown verdict 'maybe'"),
                          ("/episodes?source=robot", "unknown source 'robot'"),
                          ("/compare?a=nope", "no episode 'nope'"), ("/evals/nope", "no evaluation run 'nope'")):
        response = page.goto(viewer + path)
        assert response is not None and response.status == 404
        assert problem in page.inner_text("#problem")


def test_a_missing_store_or_a_taken_port_is_named(tmp_path, viewer, store):
    done = subprocess.run([sys.executable, "-m", "coworkenv", "view", "--store", str(tmp_path / "none.db")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "no store at" in done.stderr and not (tmp_path / "none.db").exists()
    port = viewer.rsplit(":", 1)[1]
    done = subprocess.run([sys.executable, "-m", "coworkenv", "view", "--store", str(store), "--port", port],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in done.stderr

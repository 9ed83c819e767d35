"""Layout facts of the report and the viewer, measured in a real headless Chromium over a small real
store: tasks of every capability, live episodes played over MCP (a corrected bad argument name, a
row rewritten in place, long unbroken values), and two evaluations, one of which passed nothing.

What is asserted is geometry and labelling, not pixels: no two labels of a chart overlap (their
boxes as drawn, rotation included), a 0% evaluation draws its bars as 0, list-valued cells are
lists and nothing makes the page scroll sideways, the verdict of an episode is above its first call
and names the offending call with its rule, calibration probes are labelled and counted apart, a
rewritten row reads as one update, and the two sides of ``/compare`` do not overlap."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.gate import GRADER_VERSION, REASON_RULES
from coworkenv.server import running_http_server
from coworkenv.store import Store

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]

LONG = "https://intranet.example/" + "q" * 240  # an unbroken value, as URLs and ids are
GIVE_UP = "Sorry, I cannot do that."


async def _play(store_path: Path, cache: Path) -> dict[str, str]:
    """Live episodes over MCP: one with a misnamed argument (corrected), one that creates an event and
    rewrites it in place (calendar's update is an INSERT OR REPLACE). Returns their episode ids."""
    from mcp import Client

    store = Store(store_path)
    host = EpisodeHost(store, EpisodeSettings(cache_dir=cache))
    played = {}
    try:
        async with running_http_server(host) as base:
            task = next(row.spec for row in store.tasks(status="admitted")
                        if any(t.name == "calendar_update_event" for t in host.workspace(row.spec.workspace_id).tools))
            async with Client(f"{base}/t/{task.id}/e/bad-name/mcp?run=layout-check") as client:
                event = {"title": "Layout review", "date": "2026-03-27", "start": "09:00", "end": "09:30",
                         "description": LONG}
                assert (await client.call_tool("calendar_create_event", {"titel": "Layout review"})).is_error
                created = await client.call_tool("calendar_create_event", event)
                event_id = created.structured_content["event"]["id"]
                moved = await client.call_tool("calendar_update_event", {"id": event_id, "start": "10:00", "end": "10:30"})
                assert not moved.is_error, moved.content
                submitted = await client.call_tool("submit_answer", {"answer": "Moved it. " + LONG})
                played["malformed"] = submitted.structured_content["episode_id"]
            async with Client(f"{base}/t/{task.id}/e/other/mcp") as client:
                await client.call_tool("calendar_list_events", {"query": "sync"})
                submitted = await client.call_tool("submit_answer", {"answer": "I looked. " + LONG})
                played["other"] = submitted.structured_content["episode_id"]
    finally:
        await host.close()
        store.close()
    return played


@pytest.fixture(scope="module")
def small(tmp_path_factory, cli) -> dict:
    d = tmp_path_factory.mktemp("layout")
    store = d / "coworkenv.db"
    cli("synth", "--store", str(store), "-n", "11")
    played = asyncio.run(_play(store, d / "cache"))
    (d / "give-up.yaml").write_text(json.dumps([GIVE_UP]))
    zero = cli("eval", "--model", f"scripted:{d / 'give-up.yaml'}", "--store", str(store), "-n", "11", "--trials", "1")
    cli("eval", "--model", "oracle", "--store", str(store), "-n", "11", "--trials", "1")
    assert zero["overall"]["pass_rate"] == 0.0
    report = cli("report", "--store", str(store), "--out", str(d / "report.html"))["report"]
    return {"store": store, "report": Path(report), "zero_run": zero["run_id"], **played}


@pytest.fixture(scope="module")
def viewer(small, cli_server) -> Iterator[str]:
    with cli_server(["view", "--store", str(small["store"]), "--port", "0"], r"on (http://127\.0\.0\.1:\d+)/") as url:
        yield url


@pytest.fixture
def page(small, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    yield page
    page.close()


def _boxes(page, selector: str) -> list[list[list[tuple[float, float]]]]:
    """For each element of ``selector`` (a chart), the corners of each of its texts as drawn."""
    return page.eval_on_selector_all(selector, """charts => charts.map(svg => [...svg.querySelectorAll('text')]
        .filter(t => t.textContent.trim()).map(t => {
            const b = t.getBBox(), m = t.getScreenCTM();
            return [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]]
                .map(([x, y]) => { const p = new DOMPoint(x, y).matrixTransform(m); return [p.x, p.y]; });
        }))""")


def _overlap(a: list, b: list) -> bool:
    """Whether two convex quadrilaterals overlap by more than a hair (separating axes)."""
    for poly in (a, b):
        for i in range(4):
            (x1, y1), (x2, y2) = poly[i], poly[(i + 1) % 4]
            nx, ny = y2 - y1, x1 - x2
            length = (nx * nx + ny * ny) ** 0.5 or 1.0
            pa = [(x * nx + y * ny) / length for x, y in a]
            pb = [(x * nx + y * ny) / length for x, y in b]
            if max(pa) <= min(pb) + 0.5 or max(pb) <= min(pa) + 0.5:
                return False
    return True


def _no_sideways_scroll(page) -> None:
    """Nothing makes the page scroll sideways, and no table cell's content spills over its neighbours."""
    assert page.evaluate("document.scrollingElement.scrollWidth <= window.innerWidth"), \
        page.evaluate("document.scrollingElement.scrollWidth")
    spilled = page.eval_on_selector_all("td, th", """cs => cs.filter(c => c.scrollWidth > c.clientWidth + 1)
        .map(c => c.innerText.slice(0, 40))""")
    assert not spilled, spilled


def test_report_charts_have_no_overlapping_labels_and_draw_zero_as_zero(page, small, screenshots):
    page.goto(small["report"].as_uri())
    page.screenshot(path=str(screenshots / "layout-report.png"), full_page=True)
    charts = _boxes(page, "svg.chart")
    assert len(charts) >= 2
    for texts in charts:
        clashes = [(i, j) for i in range(len(texts)) for j in range(i + 1, len(texts)) if _overlap(texts[i], texts[j])]
        assert not clashes, clashes
    slanted = page.eval_on_selector_all("svg.chart text.group[transform]", "ts => ts.length")
    assert slanted > 0  # eleven capabilities' names do not fit side by side: they are slanted, and still apart
    zero = page.eval_on_selector_all(
        "svg.chart rect.bar", f"""rs => rs.filter(r => r.querySelector('title').textContent.includes('{small["zero_run"]}'))
            .map(r => [r.querySelector('title').textContent, r.getBoundingClientRect().height])""")
    assert zero and all(title.endswith(": 0%") and height >= 1 for title, height in zero), zero
    _no_sideways_scroll(page)


def test_report_lists_wrap_and_calibration_is_labelled_and_counted_apart(page, small, table):
    page.goto(small["report"].as_uri())
    cells = page.eval_on_selector_all("#gate-reasons tbody tr td:nth-child(4)", """cs => cs.map(c =>
        [c.querySelectorAll('ul.list > li').length, c.scrollWidth <= c.clientWidth + 1])""")
    assert cells and all(items >= 1 and fits for items, fits in cells), cells
    assert "count agents' episodes only" in page.inner_text("#gate-counted")
    assert all(row[1] != "calibration" for row in table(page, "gate-pass-rates"))
    library = Store(small["store"], create=False)
    try:
        calibration = [e for e in library.episodes(source="calibration")]
    finally:
        library.close()
    plays = {row[0] for row in table(page, "gate-calibration")}
    assert "reference" in plays and any(p.startswith("probe:") and p.endswith("(designed to fail)") for p in plays)
    assert {e.provider for e in calibration} == {p.split(" ")[0] for p in plays}
    reasons = {row[0]: row[4:] for row in table(page, "gate-reasons")}
    assert reasons["malformed_call"][0] == REASON_RULES["malformed_call"]
    assert reasons["malformed_call"][1].startswith(  # the offending call of an example episode
        f"episode {small['malformed']}: call #0 calendar_create_event: invalid arguments (the agent saw: ")


def test_the_verdict_is_on_top_and_names_the_offending_call(page, viewer, small, screenshots, table):
    episode = small["malformed"]
    page.goto(f"{viewer}/episodes/{episode}")
    page.screenshot(path=str(screenshots / "layout-episode.png"), full_page=True)
    verdict = page.locator("#verdict").bounding_box()
    first_call = page.locator("ol.timeline > li").first.bounding_box()
    assert verdict is not None and first_call is not None and verdict["y"] + verdict["height"] <= first_call["y"]
    assert page.inner_text("#verdict-call").startswith("Offending call: call #0 calendar_create_event: invalid arguments")
    assert page.get_attribute("#verdict-call a", "href") == "#step-0"
    assert page.inner_text("#verdict-rule") == f"malformed_call: {REASON_RULES['malformed_call']}"
    [provenance] = table(page, "episode-provenance")
    assert provenance[3].startswith("mcp") and provenance[4] == "bad-name" and provenance[5] == "layout-check"
    # the rewritten event reads as one update, in its row and in the counts
    update = page.locator("ol.timeline > li").nth(2)
    assert [row[1] for row in table(page, "ol.timeline > li:nth-child(3) table.changes")] == ["update"]
    assert "calendar_events: 1 update" in update.inner_text() and "delete" not in update.inner_text()
    _no_sideways_scroll(page)


def test_a_calibration_episode_names_its_probe(page, viewer, small):
    library = Store(small["store"], create=False)
    try:
        probe = next(e for e in library.episodes(source="calibration") if e.provider.startswith("probe:"))
        verdict = library.verdict(probe.id, GRADER_VERSION)
    finally:
        library.close()
    page.goto(f"{viewer}/episodes/{probe.id}")
    said = page.inner_text("#calibration-play")
    name = probe.provider.removeprefix("probe:")
    assert said.startswith(f"Calibration episode ({probe.provider}): hack probe {name}: ") and "designed to fail" in said
    assert verdict is not None and not verdict.admitted


def test_compare_sides_do_not_overlap(page, viewer, small, screenshots):
    page.goto(f"{viewer}/compare?a={small['malformed']}&b={small['other']}")
    page.screenshot(path=str(screenshots / "layout-compare.png"), full_page=True)
    right_of_a = page.evaluate("document.querySelector('#side-b').getBoundingClientRect().left")
    widest = page.eval_on_selector_all("#side-a table, #side-a pre, #side-a p, #side-a ul",
                                       "es => Math.max(...es.map(e => e.getBoundingClientRect().right))")
    assert widest <= right_of_a, (widest, right_of_a)
    left_of_b = page.evaluate("document.querySelector('#side-b').getBoundingClientRect().left")
    leftmost = page.eval_on_selector_all("#side-b table, #side-b pre, #side-b p",
                                         "es => Math.min(...es.map(e => e.getBoundingClientRect().left))")
    assert leftmost >= left_of_b
    _no_sideways_scroll(page)

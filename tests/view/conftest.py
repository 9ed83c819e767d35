"""One real store for the report and the viewer (a demo's tasks and teacher episodes with repairs, an
SFT run, a GRPO run on live episodes, two evaluations of models and two of the oracle on multi-turn
tasks, with the scripted user and with a model playing it, and an experiment's results over two
seeds), and a real headless Chromium (Debian's ``chromium``, driven by Playwright). Screenshots are
kept as files (``$COWORKENV_SCREENSHOT_DIR``, by default ``runs/screenshots``)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coworkenv.cli import app
from coworkenv.store import Store

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "tests" / "fixtures" / "tool-model"
SCREENSHOTS = Path(os.environ.get("COWORKENV_SCREENSHOT_DIR", ROOT / "runs" / "screenshots"))
runner = CliRunner()


def run_cli(*args: str) -> dict:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def table_cells(page, selector: str) -> list[list[str]]:
    """The cells of a table's body rows, by the table's id (or any CSS selector of tables)."""
    css = selector if selector[:1] in "#." or " " in selector else f"#{selector}"
    return page.eval_on_selector_all(f"{css} tbody tr",
                                     "rows => rows.map(r => [...r.cells].map(c => c.innerText.trim()))")


@pytest.fixture(scope="session")
def cli():
    """Runs a command with ``--json`` and returns what it printed, parsed."""
    return run_cli


@pytest.fixture(scope="session")
def table():
    """The cells of a table's body rows on a page, by the table's id."""
    return table_cells


@pytest.fixture(scope="session")
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS


@pytest.fixture(scope="session")
def store(tmp_path_factory) -> Path:
    pytest.importorskip("trl", reason="needs the 'train' extra")
    d = tmp_path_factory.mktemp("report")
    demo = run_cli("demo", "--dir", str(d), "-n", "6", "--error-rate", "0.5")
    assert Path(demo["report"]).is_file()  # the demo writes its report and says where
    s = str(d / "coworkenv.db")
    run_cli("export", "sft", "--store", s, "--out", str(d / "sft.compact.jsonl"), "--style", "compact")
    run_cli("train", "sft", "--model", str(MODEL), "--data", str(d / "sft.compact.jsonl"), "--out", str(d / "sft"),
        "--store", s, "--steps", "3", "--no-resume")
    run_cli("train", "grpo", "--model", str(MODEL), "--store", s, "--out", str(d / "grpo"), "--steps", "2",
        "--num-generations", "2", "--batch-size", "2", "--style", "compact", "--max-steps-per-episode", "2",
        "--max-new-tokens", "32")
    for model in (MODEL, d / "sft" / "model"):
        run_cli("eval", "--model", f"hf:{model}", "--store", s, "-n", "3", "--style", "compact", "--max-steps", "3")
    for user in ([], ["--user-model", f"hf:{MODEL}"]):  # multi-turn: the scripted user, then a model playing it
        run_cli("eval", "--model", "oracle", "--store", s, "-n", "2", "--capability", "multi_turn", "--trials", "1",
                *user)
    library = Store(s, create=False)  # an experiment's results, as the benchmarks record them
    try:
        for seed, (gated, ungated) in enumerate([(0.5, 0.25), (0.3, 0.35)]):
            for arm, rate in (("gated", gated), ("ungated", ungated)):
                library.put_experiment_result("gate", arm, seed, {"pass_rate": rate, "capabilities": {
                    "lookup": rate, "safety": 1 - rate}, "safety_mean": 1.0 - seed / 2}, source=f"a test, seed {seed}")
    finally:
        library.close()
    return d / "coworkenv.db"


@pytest.fixture(scope="module")
def browser():
    """Chromium for one test module: Playwright's sync API keeps an event loop running in this thread
    while it is open, which later tests' ``asyncio.run`` must not meet."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs the 'test' extra")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        yield launched
        launched.close()

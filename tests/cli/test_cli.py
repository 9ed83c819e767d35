"""The command line: every command has help and is documented; bad input gets a clear message."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coworkenv.cli import app
from coworkenv.store import Store

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ["synth", "serve", "serve --conformance", "collect", "gate", "export sft", "demo",
            "check-sandbox", "sandbox build-image", "sandbox cleanup", "export dpo", "model init-tiny",
            "train sft", "train dpo", "serve-model", "eval"]
runner = CliRunner()


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_and_is_in_the_docs(command):
    result = runner.invoke(app, [*command.split(), "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output
    docs = "".join(page.read_text() for page in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
    assert f"coworkenv {command}" in docs


def test_bad_flags_are_named(tmp_path):
    result = runner.invoke(app, ["synth", "--store", str(tmp_path / "s.db"), "--capability", "telepathy"])
    assert result.exit_code == 2 and "telepathy" in result.output
    result = runner.invoke(app, ["collect", "--store", str(tmp_path / "s.db"), "--provider", "gemini:x"])
    assert result.exit_code == 2 and "unknown provider" in result.output
    result = runner.invoke(app, ["serve", "--stdio", "--store", str(tmp_path / "s.db")])
    assert result.exit_code == 2 and "--task" in result.output
    result = runner.invoke(app, ["serve", "--host", "0.0.0.0", "--store", str(tmp_path / "s.db")], env={})
    assert result.exit_code == 2 and "token" in result.output
    result = runner.invoke(app, ["synth", "--sandbox", "qemu", "--store", str(tmp_path / "s.db")])
    assert result.exit_code == 2 and "qemu" in result.output
    result = runner.invoke(app, ["gate", "--store", str(tmp_path / "missing.db")])
    assert result.exit_code == 2 and "no store" in result.output
    result = runner.invoke(app, ["synth", "-n", "0"])
    assert result.exit_code == 2
    result = runner.invoke(app, ["synth", "--concurrency", "0", "--store", str(tmp_path / "s.db")])
    assert result.exit_code == 2 and "--concurrency" in result.output


@pytest.mark.bwrap
def test_synth_calibrates_several_tasks_at_once(tmp_path):
    store = tmp_path / "s.db"
    result = runner.invoke(app, ["synth", "--store", str(store), "-n", "3", "--concurrency", "3"])
    assert result.exit_code == 0, result.output
    assert "generated 3, admitted 3" in result.output
    again = runner.invoke(app, ["synth", "--store", str(store), "-n", "3", "--concurrency", "3"])
    assert "already calibrated: 3" in again.output


@pytest.mark.bwrap
def test_synth_calibrates_in_worker_processes(tmp_path):
    store = tmp_path / "s.db"
    result = runner.invoke(app, ["synth", "--store", str(store), "-n", "6", "--workers", "2", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["generated"], summary["admitted"]) == (6, 6)
    for flags, named in ((["--concurrency", "2"], "--concurrency"), (["--ray", "auto"], "--ray")):
        refused = runner.invoke(app, ["synth", "--store", str(store), "-n", "6", "--workers", "2", *flags])
        assert refused.exit_code == 2 and named in refused.output and "--workers" in refused.output
    refused = runner.invoke(app, ["synth", "--store", str(store), "--workers", "0"])
    assert refused.exit_code == 2 and "--workers" in refused.output


@pytest.mark.slow
@pytest.mark.bwrap
def test_demo_end_to_end(tmp_path):
    cmd = [sys.executable, "-m", "coworkenv", "demo", "--dir", str(tmp_path / "demo"), "-n", "9", "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["tasks_generated"] == 9
    assert summary["tasks_admitted"] == 9
    assert summary["episodes"] > 9 and summary["repaired_episodes"] >= 1  # error rate 0.3 on 9 tasks, seed 0
    assert summary["exported_rows"] == 9 and summary["collect_failures"] == {}
    assert 0 < summary["gate_pass_rate"] < 1
    rows = (tmp_path / "demo" / "export" / "sft.jsonl").read_text().splitlines()
    assert len(rows) == 9
    store = Store(summary["store"])
    teacher = store.episodes(source="teacher")
    assert len(teacher) == summary["episodes"] and not store.episodes(source="live")
    assert all(store.verdict_count(e.id) == 1 for e in teacher)  # graded once, when each ended
    store.close()
    # a second run resumes: nothing new is generated, collected or lost
    again = json.loads(subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path).stdout)
    assert again["episodes"] == summary["episodes"] and again["exported_rows"] == 9


def test_the_command_line_loads_no_agent_or_training_stack_until_a_command_needs_it():
    """`coworkenv serve --stdio` is one process per episode: the CLI alone loads neither LangGraph,
    LangChain's chat models, pandas nor torch, and the lazy packages (agents, trainer, loop) still
    give every name they export."""
    probe = ("import sys, coworkenv.cli; "
             "heavy = [m for m in ('langgraph', 'langchain_core.language_models', 'pandas', 'torch', 'transformers') "
             "if m in sys.modules]; "
             "import coworkenv.agents as a, coworkenv.trainer as t, coworkenv.loop as o; "
             "assert all(getattr(p, n) is not None for p in (a, t, o) for n in p.__all__); "
             "import pandas; print(heavy)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr

"""Bad input, on purpose, as a new user would give it: every case gets a one-line error naming what
was wrong, the usage exit code (2) or the failure one (1), no traceback, and nothing already stored
is lost or changed."""

from __future__ import annotations

import hashlib
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coworkenv import __version__
from coworkenv.cli import app

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A store with calibrated tasks and no episodes but calibration ones."""
    path = tmp_path_factory.mktemp("store") / "s.db"
    result = runner.invoke(app, ["synth", "--store", str(path), "-n", "3"])
    assert result.exit_code == 0, result.output
    return path


def digest(path: Path) -> str | None:
    """What a store holds (its rows and schema; the file's bytes move with WAL checkpoints)."""
    import sqlite3

    if not path.is_file():
        return None
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return hashlib.sha256("\n".join(conn.iterdump()).encode()).hexdigest()
    finally:
        conn.close()


def run(args: list[str], env: dict[str, str] | None = None):
    return runner.invoke(app, args, env=env)


def check(result, fragment: str, code: int) -> None:
    assert result.exit_code == code, (result.exit_code, result.output)
    assert fragment in result.output, result.output
    assert "Traceback" not in result.output and result.exception is None or isinstance(result.exception, SystemExit)


CORRUPT_COMMANDS = [
    ["synth", "-n", "1"], ["collect"], ["gate"], ["export", "sft"], ["export", "dpo"], ["serve", "--stdio", "--task", "t"],
    ["eval", "--model", "oracle", "-n", "1"], ["sandbox", "cleanup"], ["tasks", "list"], ["episodes", "list"],
    ["runs", "list"], ["train", "sft", "--model", "tests/fixtures/tool-model", "--data", "tests/fixtures/tool-model/probe.json"],
]


@pytest.mark.parametrize("command", CORRUPT_COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_a_file_that_is_not_a_store_is_named_and_left_alone(tmp_path, command):
    for content, fragment in ((b"this is not a database at all" * 10, "not a coworkenv store"),
                              (b"", "empty file")):
        bad = tmp_path / "bad.db"
        bad.write_bytes(content)
        check(run([*command, "--store", str(bad)]), fragment, 2)
        assert bad.read_bytes() == content  # never turned into a store


def test_demo_on_a_file_that_is_not_a_store(tmp_path):
    (tmp_path / "coworkenv.db").write_bytes(b"not sqlite at all, just text" * 4)
    check(run(["demo", "--dir", str(tmp_path)]), "not a coworkenv store", 2)


def test_a_database_of_something_else_is_refused(tmp_path):
    import sqlite3

    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("create table invoices (id integer)")
    conn.commit()
    conn.close()
    before = digest(other)
    check(run(["gate", "--store", str(other)]), "not a coworkenv store", 2)
    assert digest(other) == before


@pytest.mark.parametrize("command", [["collect"], ["gate"], ["export", "sft"], ["serve"],
                                     ["eval", "--model", "oracle"]], ids=" ".join)
def test_a_missing_store_is_named_and_not_created(tmp_path, command):
    missing = tmp_path / "nope" / "s.db"
    check(run([*command, "--store", str(missing)]), "no store at", 2)
    assert not missing.exists() and not missing.parent.exists()


def test_export_refuses_what_it_cannot_write_and_leaves_nothing_behind(store, tmp_path):
    before = digest(store)
    check(run(["export", "sft", "--store", str(store), "--out", str(tmp_path / "out.jsonl")]), "nothing written", 1)
    assert not (tmp_path / "out.jsonl").exists()
    folder = tmp_path / "a-folder"
    folder.mkdir()
    check(run(["export", "sft", "--store", str(store), "--out", str(folder)]), "is a folder", 2)
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    check(run(["export", "dpo", "--store", str(store), "--out", str(a_file / "dpo.jsonl")]), "nothing", 1)
    check(run(["export", "sft", "--store", str(store), "--out", "/proc/coworkenv/sft.jsonl"]), "nothing", 1)
    check(run(["export", "sft", "--store", str(store), "--ungated", "--format", "hf", "--out", str(tmp_path / "hf")]),
          "only --format jsonl", 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "a-folder"]  # no .partial anywhere
    assert list(folder.iterdir()) == []
    assert digest(store) == before


def test_unwritable_places_are_named(tmp_path):
    check(run(["synth", "--store", "/proc/coworkenv/s.db", "-n", "1"]), "cannot create a store", 2)
    check(run(["demo", "--dir", "/proc/coworkenv"]), "cannot create a store", 2)


def test_providers_that_cannot_run_here_are_named_before_anything_starts(store):
    before = digest(store)
    check(run(["collect", "--store", str(store), "--provider", "anthropic:claude-x"]),
          "pip install 'coworkenv[providers]'", 2)
    check(run(["collect", "--store", str(store), "--provider", "openai:gpt-x"], env={"OPENAI_API_KEY": ""}),
          "$OPENAI_API_KEY", 2)
    check(run(["eval", "--store", str(store), "--model", "hf:/nonexistent/model"]), "no model folder at /nonexistent/model", 2)
    check(run(["collect", "--store", str(store), "--provider", "gemini:x"]), "unknown provider", 2)
    # the oracle plays a generated task's reference; an imported Claw-Eval task has none (it scored 0 before)
    check(run(["eval", "--store", str(store), "--suite", "claw-eval", "--model", "oracle"]),
          "--model oracle plays each task's reference solution, which only a generated task has", 2)
    assert digest(store) == before


def test_bad_flags_and_choices_are_named(store, tmp_path):
    check(run(["synth", "--store", str(store), "--capability", "telepathy"]), "telepathy", 2)
    check(run(["synth", "--store", str(store), "--sandbox", "qemu"]), "qemu", 2)
    check(run(["export", "sft", "--store", str(store), "--style", "tiny"]), "tiny", 2)
    check(run(["sandbox", "cleanup", "--root", str(tmp_path / "nowhere")]), "is not a folder", 2)
    check(run(["serve", "--store", str(store), "--host", "0.0.0.0", "--token", " "]), "empty", 2)


def test_help_lists_closed_choices_and_flags_have_no_type():
    help_text = " ".join(run(["synth", "--help"]).output.split())
    assert "bwrap|docker" in help_text and "lookup, single_write, multi_step" in help_text
    assert "<bool>" not in help_text and "<bool>" not in run(["serve", "--help"]).output
    assert "full|compact|minimal" in run(["export", "sft", "--help"]).output


def test_version_and_completion():
    result = run(["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"coworkenv {__version__}"
    assert "--install-completion" in run(["--help"]).output


def test_serve_on_a_port_in_use_says_so_and_never_claims_to_serve(store):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        out = subprocess.run([sys.executable, "-m", "coworkenv", "serve", "--store", str(store), "--port", str(port)],
                             capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 2, out.stderr
    assert "cannot listen" in out.stderr and "serving" not in out.stderr and "Traceback" not in out.stderr


def test_json_output_is_one_document(store, tmp_path):
    import json

    for args in (["gate", "--store", str(store)], ["check-sandbox"], ["collect", "--store", str(store)],
                 ["synth", "--store", str(store), "-n", "3"], ["tasks", "list", "--store", str(store)],
                 ["sandbox", "cleanup", "--root", str(tmp_path), "--store", str(store)]):
        result = runner.invoke(app, [*args, "--json"])
        assert result.exit_code == 0, result.output
        json.loads(result.stdout)


def test_quiet_shows_no_progress_and_verbose_says_more(store):
    quiet = subprocess.run([sys.executable, "-m", "coworkenv", "-q", "synth", "--store", str(store), "-n", "3"],
                           capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert quiet.returncode == 0 and "calibrating" not in quiet.stderr
    loud = subprocess.run([sys.executable, "-m", "coworkenv", "synth", "--store", str(store), "-n", "3"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert "calibrating" in loud.stderr

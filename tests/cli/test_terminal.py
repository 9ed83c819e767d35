"""The command as a person meets it at a terminal: Ctrl-C answered with one line and status 130, the
run stored as interrupted and the bar left at the real count; full-width tables off a terminal; the
commands in the loop's order; plain usage lines; every word of help defined where it first appears."""

import contextlib
import json
import os
import queue
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coworkenv.cli import app

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def _start(*args: str) -> tuple[subprocess.Popen, "queue.Queue[str | None]"]:
    """``coworkenv ARGS`` in a session of its own (as a terminal's foreground job is), its stderr lines
    read into a queue as they come (None at the end)."""
    # Ctrl-C's default action restored: a shell starts a background job with SIGINT ignored, and a test
    # suite run so would pass that on to the command
    process = subprocess.Popen([sys.executable, "-m", "coworkenv", *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, start_new_session=True,
                               env={**os.environ, "COLUMNS": "200"},
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return process, lines


def _interrupt(process: subprocess.Popen, lines: "queue.Queue[str | None]", seen: list[str],
               signum: int = signal.SIGINT) -> list[str]:
    """Ctrl-C to the process's group (what a terminal sends), or SIGTERM to the process (what a process
    manager sends); its stderr to the end."""
    if signum == signal.SIGINT:
        os.killpg(process.pid, signal.SIGINT)
    else:
        os.kill(process.pid, signum)
    # a command that goes on after Ctrl-C fails the test, it does not hang it; the limit is generous, since
    # on a loaded machine a sandbox's teardown can take minutes
    deadline = time.monotonic() + 300
    while True:
        try:
            line = lines.get(timeout=max(1.0, deadline - time.monotonic()))
        except queue.Empty:  # nothing more before the deadline: the check below fails the test
            line = ""
        if line is None:
            break
        seen.append(line)
        if time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            pytest.fail("still running 300 s after Ctrl-C: " + "".join(seen[-5:]))
    process.wait(timeout=60)
    return seen


def _wait_for_line(lines: "queue.Queue[str | None]", pattern: str) -> list[str]:
    seen = []
    while True:
        line = lines.get(timeout=300)
        assert line is not None, "the command ended before: " + "".join(seen)
        seen.append(line)
        if pattern in line:
            return seen


def _rows(store: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(store) as db:
        return db.execute(sql).fetchall()


def _await_row(store: Path, sql: str, process: subprocess.Popen, limit: float = 600) -> tuple:
    """The first row of ``sql`` once the running command has stored one (the store read, never created)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the command ended ({process.returncode}) before storing a row"
        if store.exists():
            try:
                with contextlib.closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as db:
                    row = db.execute(sql).fetchone()
                if row is not None:
                    return row
            except sqlite3.OperationalError:  # its tables are not made yet
                pass
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    pytest.fail(f"no row after {limit} s: {sql}")


@pytest.mark.bwrap
def test_ctrl_c_stops_collect_with_one_line_and_the_bar_at_the_real_count(six_tasks, copy_store, tmp_path):
    """The in-process server must not take Ctrl-C for itself: it used to drain while the teacher's
    remaining tasks failed one after another against it (the bar jumped to the total), or hang."""
    store = tmp_path / "s.db"
    copy_store(six_tasks, store)
    process, lines = _start("-v", "collect", "--store", str(store), "--concurrency", "1")
    seen = _wait_for_line(lines, "ended after")  # the first teacher episode is graded
    err = "".join(_interrupt(process, lines, seen))
    assert process.returncode == 130, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last == ("interrupted: coworkenv collect stopped; what it stored is kept (resume with the same "
                    "command)"), err
    done, total = map(int, re.findall(r"collecting trajectories .*?(\d+)/(\d+)", err)[-1])
    assert done < total, err  # stopped where it was, not at the total
    finished = _rows(store, "select count(distinct task_id) from episodes where source = 'teacher' and status != "
                            "'running'")[0][0]
    assert done <= finished  # every task the bar counted has its episodes in the store
    assert not _rows(store, "select id from episodes where status = 'running'")
    assert not _rows(store, "select id from episodes where source = 'teacher' and status = 'failed'"), \
        "no teacher episode failed against a closing server"


# SIGTERM (a process manager's or a job scheduler's stop) stops as Ctrl-C does, with its own word and status
STOPS = [pytest.param(signal.SIGINT, "interrupted", 130, id="ctrl-c"),
         pytest.param(signal.SIGTERM, "terminated", 143, id="sigterm")]


@pytest.mark.bwrap
@pytest.mark.parametrize(("signum", "word", "status"), STOPS)
def test_ctrl_c_stores_an_evaluation_as_interrupted(six_tasks, copy_store, tmp_path, signum, word, status):
    """And several trials sample (temperature 0.7), while --trials 1 decodes greedily."""
    store = tmp_path / "s.db"
    copy_store(six_tasks, store)
    process, lines = _start("eval", "--store", str(store), "--model", "oracle", "-n", "6", "--trials", "3",
                            "--concurrency", "1")
    _await_row(store, "select id from eval_trials", process, limit=300)  # its first trial
    err = "".join(_interrupt(process, lines, [], signum))
    assert process.returncode == status, err
    assert err.strip().splitlines()[-1] == f"{word}: coworkenv eval stopped; what it stored is kept", err
    (stored, settings), = _rows(store, "select status, settings from eval_runs")
    assert stored == "interrupted"
    assert json.loads(settings)["temperature"] == 0.7

    greedy = runner.invoke(app, ["eval", "--store", str(store), "--model", "oracle", "-n", "1", "--trials", "1",
                                 "--json"])
    assert greedy.exit_code == 0, greedy.output
    run = json.loads(runner.invoke(app, ["runs", "show", json.loads(greedy.stdout)["run_id"], "--store", str(store),
                                         "--json"]).stdout)
    assert run["settings"]["temperature"] == 0.0 and run["status"] == "done"


def _tiny_training(tmp_path: Path) -> tuple[str, ...]:
    """A ``train sft`` command of a tiny model on eight rows, for as long as it is let run (a checkpoint
    every 5 steps; its store ``tmp_path/s.db``)."""
    pytest.importorskip("trl", reason="needs the 'train' extra")
    tools = [{"type": "function", "function": {"name": "mail_read_message", "description": "Read one message.",
                                               "parameters": {"type": "object",
                                                              "properties": {"id": {"type": "string"}}}}}]
    rows = [{"messages": [{"role": "user", "content": f"Read m{i:02d}."},
                          {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
                              "name": "mail_read_message", "arguments": {"id": f"m{i:02d}"}}}]},
                          {"role": "tool", "name": "mail_read_message", "content": '{"subject": "Lunch"}'},
                          {"role": "assistant", "content": "Lunch."}], "tools": tools} for i in range(8)]
    data = tmp_path / "sft.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    made = runner.invoke(app, ["model", "init-tiny", "--data", str(data), "--out", str(tmp_path / "tiny"),
                               "--vocab-size", "400", "--hidden-size", "32", "--intermediate-size", "64",
                               "--layers", "1", "--heads", "1", "--kv-heads", "1"])
    assert made.exit_code == 0, made.output
    return ("train", "sft", "--model", str(tmp_path / "tiny"), "--data", str(data), "--out", str(tmp_path / "run"),
            "--store", str(tmp_path / "s.db"), "--batch-size", "2", "--steps", "100000", "--logging-steps", "1",
            "--save-steps", "5")


@pytest.mark.parametrize(("signum", "word", "status"), STOPS)
def test_ctrl_c_stores_a_training_run_as_interrupted(tmp_path, signum, word, status):
    """And the same command resumes it: a stopped run was stored as failed, as if it had crashed (and one
    stopped by SIGTERM stayed "running" for good)."""
    command, store = _tiny_training(tmp_path), tmp_path / "s.db"
    process, lines = _start(*command)
    seen = _wait_for_line(lines, "sft step 6/")  # a checkpoint was saved at step 5
    err = "".join(_interrupt(process, lines, seen, signum))
    assert process.returncode == status, err
    assert err.strip().splitlines()[-1] == (f"{word}: coworkenv train sft stopped; what it stored is kept "
                                            "(resume with the same command)"), err
    assert "Traceback" not in err
    (stored,), = _rows(store, "select status from training_runs")
    assert stored == "interrupted"
    process, lines = _start(*command)
    resumed = _wait_for_line(lines, "sft: training")[-1]
    _interrupt(process, lines, [])
    assert "(resuming at step 5)" in resumed, resumed


def _kill(process: subprocess.Popen) -> None:
    """SIGKILL to the command's group (the OOM killer's or a power loss's stop: no chance to record anything)."""
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=60)


def test_a_killed_training_is_ended_as_interrupted_when_the_next_one_starts(tmp_path):
    """A training killed outright stays "running" in the store, with the process that ran it: the runs
    listing says that process is gone, and the next training on the store ends it as interrupted
    before it resumes from the checkpoint (before owners were recorded, it stayed "running" for good)."""
    command, store = _tiny_training(tmp_path), tmp_path / "s.db"
    process, lines = _start(*command)
    _wait_for_line(lines, "sft step 6/")  # a checkpoint was saved at step 5
    _kill(process)
    (killed, stored, owner), = _rows(store, "select id, status, owner from training_runs")
    assert stored == "running" and owner.split(":")[-2] == str(process.pid)
    listed = runner.invoke(app, ["runs", "list", "--store", str(store)], env={"COLUMNS": "200"})
    assert "running, its process gone" in listed.stdout, listed.output
    assert json.loads(runner.invoke(app, ["runs", "list", "--store", str(store), "--json"]).stdout)[0]["owner"] == owner

    process, lines = _start(*command)
    resumed = _wait_for_line(lines, "sft: training")[-1]
    _interrupt(process, lines, [])
    assert "(resuming at step 5)" in resumed, resumed
    runs = {run: (status, error) for run, status, error in _rows(store, "select id, status, error from training_runs")}
    assert runs.pop(killed) == ("interrupted", f"interrupted: the process that ran it ({owner}) is gone")
    assert [status for status, _ in runs.values()] == ["interrupted"]  # the resumed one, stopped by Ctrl-C


@pytest.mark.bwrap
def test_sandbox_cleanup_ends_an_evaluation_whose_process_was_killed(six_tasks, copy_store, tmp_path):
    """And leaves a running evaluation of a live process alone: only what a gone process left is ended."""
    store = tmp_path / "s.db"
    copy_store(six_tasks, store)
    evaluation = ("eval", "--store", str(store), "--model", "oracle", "-n", "6", "--trials", "3", "--concurrency", "1")
    process, _ = _start(*evaluation)
    (killed,) = _await_row(store, "select run_id from eval_trials", process, limit=300)  # its first trial
    _kill(process)

    def cleanup() -> list[str]:
        cleaned = runner.invoke(app, ["sandbox", "cleanup", "--store", str(store), "--json"])
        assert cleaned.exit_code == 0, cleaned.output
        return json.loads(cleaned.stdout)["runs_ended"]

    assert _rows(store, "select status from eval_runs") == [("running",)]
    assert cleanup() == [killed]
    process, lines = _start(*evaluation)
    (live,) = _await_row(store, f"select id from eval_runs where id != '{killed}'", process, limit=300)
    assert cleanup() == []
    assert dict(_rows(store, "select id, status from eval_runs")) == {killed: "interrupted", live: "running"}
    _interrupt(process, lines, [])


def test_the_commands_are_listed_in_the_loops_order():
    listed = re.findall(r"^  ([a-z-]+) ", runner.invoke(app, ["--help"]).stdout.split("Commands:")[1], re.M)
    loop = ["demo", "synth", "draft", "serve", "collect", "gate", "export", "model", "train", "serve-model", "eval"]
    assert listed[:len(loop)] == loop
    assert set(listed) == {"tasks", "episodes", "runs", "view", "report", "browse", "apps", "bundle", "claw-eval",
                           "doctor", "check-sandbox", "sandbox", "compose", *loop}


def test_usage_lines_name_arguments_plainly():
    assert "Usage: coworkenv tasks show [OPTIONS] TASK_ID\n" in runner.invoke(app, ["tasks", "show", "--help"]).stdout
    assert "Usage: coworkenv bundle import [OPTIONS] DIR...\n" in runner.invoke(
        app, ["bundle", "import", "--help"]).stdout
    missing = runner.invoke(app, ["tasks", "show"])
    assert missing.exit_code == 2 and "{" not in missing.output


def test_pocketworker_is_defined_where_the_help_first_names_it():
    listing = runner.invoke(app, ["--help"]).stdout
    first = listing.index("PocketWorker")
    assert listing[first:first + 40].startswith("PocketWorker (a small tool-calling")
    for group in ("model", "train"):
        assert "PocketWorker (a small tool-calling model" in runner.invoke(app, [group, "--help"]).stdout


def test_tables_off_a_terminal_are_not_cut():
    """`coworkenv apps | cat`: one line per row, every value whole however long (the table was cut at 80
    columns, its long values wrapped over several lines or elided)."""
    done = subprocess.run([sys.executable, "-m", "coworkenv", "apps"], cwd=ROOT, capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k != "COLUMNS"}, timeout=120)
    assert done.returncode == 0, done.stderr
    (row,) = [line for line in done.stdout.splitlines() if line.startswith("│ spreadsheets ")]
    assert row.rstrip(" │").endswith("create workbooks, delete sheets, view charts."), row
    assert "…" not in done.stdout


def test_gate_with_nothing_to_grade_says_so_in_one_line(tmp_path):
    """(It printed an empty table.)"""
    from coworkenv.gate import GRADER_VERSION
    from coworkenv.store import Store

    Store(tmp_path / "s.db").close()
    result = runner.invoke(app, ["gate", "--store", str(tmp_path / "s.db")])
    assert result.exit_code == 0, result.output
    assert result.output == (f"nothing to grade: every ended episode has a verdict of grader version {GRADER_VERSION} "
                             "(--regrade grades them again)\n")
    again = runner.invoke(app, ["gate", "--regrade", "--store", str(tmp_path / "s.db")])
    assert again.output == "nothing to grade: the store holds no ended episode\n"


@pytest.mark.slow
@pytest.mark.bwrap
def test_one_ctrl_c_stops_the_full_demos_training(tmp_path):
    """The training runs inside the demo's event loop, where the first Ctrl-C only cancelled the main task,
    which a training step never sees: it went on until a second one. One is enough now, as for ``train sft``."""
    pytest.importorskip("trl", reason="needs the 'train' extra")
    directory = tmp_path / "d"
    process, lines = _start("demo", "--full", "--dir", str(directory), "-n", "6", "--steps", "100000",
                            "--eval-tasks", "2", "--capability", "lookup", "--app", "mail", "--serve", "local")
    _await_row(directory / "coworkenv.db", "select id from training_runs where status = 'running'", process)
    time.sleep(3)  # into its steps
    err = "".join(_interrupt(process, lines, []))
    assert process.returncode == 130, err[-3000:]
    assert err.strip().splitlines()[-1] == ("interrupted: coworkenv demo stopped; what it stored is kept "
                                            "(resume with the same command)"), err[-3000:]
    assert "Traceback" not in err
    assert _rows(directory / "coworkenv.db", "select status from training_runs") == [("interrupted",)]

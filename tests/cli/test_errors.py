"""One handler for user errors: a ``CoworkenvError`` that a command lets through is one line
``error: ...`` (with its hint) and exit 2; any other exception (a ``KeyError``, a ``ValueError``
from inside a library such as TRL) is a bug and keeps its traceback instead of passing for bad input."""

import subprocess
import sys
import textwrap
from pathlib import Path

import typer
from typer.testing import CliRunner

from coworkenv import CoworkenvError
from coworkenv.agents import ProviderError
from coworkenv.cli import app
from coworkenv.cli._terminal import CoworkGroup
from coworkenv.store import StoreError
from coworkenv.workspace import SpecError

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def _app_raising(exc: BaseException) -> typer.Typer:
    """A command line built as ``coworkenv``'s is (its group class), whose one command raises ``exc``
    from deep inside the work it does."""
    cli = typer.Typer(cls=CoworkGroup, rich_markup_mode=None)

    def library_call() -> None:
        raise exc

    @cli.command()
    def work() -> None:
        library_call()

    @cli.command()
    def other() -> None:  # a second command, so that ``work`` is a subcommand as in coworkenv
        pass

    return cli


def test_a_user_error_a_command_lets_through_is_one_line_with_its_hint_and_exit_2():
    result = runner.invoke(_app_raising(SpecError("tasks[3].checks: unknown kind 'sqll'", hint="one of: sql, file")),
                           ["work"])
    assert result.exit_code == 2
    assert result.stderr == "error: tasks[3].checks: unknown kind 'sqll' (one of: sql, file)\n"
    assert "Traceback" not in result.output and not isinstance(result.exception, SpecError)


def test_a_bug_inside_a_command_keeps_its_traceback_and_is_not_a_user_error():
    for bug in (KeyError("grade_completion"), ValueError("TRL: Unexpected shape of logits"), TypeError("NoneType")):
        result = runner.invoke(_app_raising(bug), ["work"])
        assert result.exception is bug, (bug, result.output)  # raised on, as Python shows any bug
        assert result.exit_code == 1 and "error:" not in result.output


def test_a_bug_run_as_the_coworkenv_command_prints_its_traceback(tmp_path):
    """The real entry point (``python -m coworkenv``'s group class) on a command that hits a
    ``ValueError`` that is not ours: the traceback names it; nothing reads as an ``error:`` line."""
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent("""
        import sys
        from coworkenv.cli import app

        @app.command("boom", hidden=True)
        def boom() -> None:
            int("not a number")  # a ValueError from a library call: a bug, not bad input

        sys.argv = ["coworkenv", "boom"]
        app()
    """))
    done = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "invalid literal for int()" in done.stderr
    assert not done.stderr.startswith("error:") and "\nerror:" not in done.stderr


def test_the_package_user_errors_share_the_root_and_stay_value_errors():
    for error in (SpecError, StoreError, ProviderError):
        assert issubclass(error, CoworkenvError) and issubclass(error, ValueError)
    assert CoworkenvError("x", hint="do y").line == "x (do y)" and CoworkenvError("x").line == "x"


def test_the_real_command_turns_a_user_error_from_the_library_into_one_line(tmp_path):
    """``gate`` opens the store without catching anything itself: a file that is not a store reaches
    the one handler as a ``StoreError`` and is one line, exit 2; the file is left as it was."""
    store = tmp_path / "s.db"
    store.write_bytes(b"notes a user keeps, not a database")
    result = runner.invoke(app, ["gate", "--store", str(store)])
    assert result.exit_code == 2 and result.stderr.startswith("error: ") and len(result.stderr.splitlines()) == 1
    assert "Traceback" not in result.output and store.read_bytes() == b"notes a user keeps, not a database"

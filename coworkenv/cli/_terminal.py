"""How the ``coworkenv`` command meets a person at a terminal: the commands listed in the loop's
order, usage lines that name arguments plainly, Ctrl-C answered with one line (and SIGTERM, which a
process manager or a job scheduler sends, as Ctrl-C by the commands that store runs), and a user error
(``CoworkenvError``) answered with one line too, while any other exception keeps its traceback.

``CoworkGroup`` is the class of the top-level command (``typer.Typer(cls=CoworkGroup)``).
"""

from __future__ import annotations

import gc
import signal
import sys
import threading
from typing import Any

import typer
from typer.core import TyperArgument, TyperGroup

from .._errors import CoworkenvError
from ._common import USAGE, err, fail

# ``coworkenv --help`` lists the commands as the loop runs: make and play tasks, grade, train,
# serve and evaluate, then look at the store, then the tools around it. Commands not named here
# follow in the order they were added.
LOOP_ORDER = ("demo", "synth", "draft", "serve", "collect", "gate", "export", "model", "train", "serve-model",
              "eval", "tasks", "episodes", "runs", "view", "report", "browse", "apps", "bundle", "claw-eval",
              "doctor", "check-sandbox", "sandbox", "compose")

# Commands that pick up where they stopped when run again (what they committed stays in the store)
RESUMABLE = ("synth", "collect", "demo", "gate", "draft", "train sft", "train dpo", "train grpo", "train gdpo",
             "model pretrain-base")
# Commands that stop on SIGTERM as on Ctrl-C, storing what they ran as interrupted (a server keeps its own handling)
STOPPED_BY_TERM = (*RESUMABLE, "eval")


class _PlainArgument(TyperArgument):
    """An argument shown in usage lines as its name (``TASK_ID``, ``[NAME]`` when optional), not
    Typer's ``{TASK_ID}``."""

    def get_usage_pieces(self, ctx: Any) -> list[str]:
        name = self.display_name_raw
        if self.nargs != 1 and not name.endswith("..."):
            name += "..."
        return [name if self.required else f"[{name}]"]


def _plain_arguments(command: Any) -> None:
    for param in getattr(command, "params", []):
        if type(param) is TyperArgument:
            param.__class__ = _PlainArgument
    for sub in getattr(command, "commands", {}).values():
        _plain_arguments(sub)


def _drop_closed_loop_leftovers(interrupt: BaseException) -> None:
    """After Ctrl-C has stopped an event loop: the subprocess transports its tasks held (a sandbox, an
    MCP server) are collected once the interrupt's frames go, and each one's ``__del__`` then finds
    the loop closed and prints a traceback below the one line the interrupt gets. They are collected
    here, with that one error (and only that) left unprinted, now and until the process exits."""
    shown = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if not (isinstance(unraisable.exc_value, RuntimeError) and str(unraisable.exc_value) == "Event loop is closed"):
            shown(unraisable)

    sys.unraisablehook = hook
    interrupt.__traceback__ = None
    gc.collect()


class CoworkGroup(TyperGroup):
    """The top-level command. Besides ordering and usage lines, it answers Ctrl-C (which stops
    a command between two things it stores) with one line and exit status 130; a command that is
    a server (``serve``, ``view``, ``serve-model``) stops on Ctrl-C by itself and exits 0.

    It is the one handler of user errors: a ``CoworkenvError`` that a command lets through is
    printed as ``error: ...`` (with its hint) and exits 2. Only that root is caught here, never
    ``ValueError``: a ``ValueError`` or ``KeyError`` from a bug (ours, or TRL's) shows its
    traceback instead of passing for bad input."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        _plain_arguments(self)
        self._invoked = ""

    def list_commands(self, ctx: Any) -> list[str]:
        names = list(self.commands)
        rank = {name: i for i, name in enumerate(LOOP_ORDER)}
        return sorted(names, key=lambda name: (rank.get(name, len(rank)), names.index(name)))

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name, command, rest = super().resolve_command(ctx, args)
        group: dict[str, Any] = getattr(command, "commands", {})
        sub = rest[0] if rest and rest[0] in group else ""
        self._invoked = f"{name} {sub}".strip()
        if self._invoked in STOPPED_BY_TERM and threading.current_thread() is threading.main_thread():
            self._before_term = signal.signal(signal.SIGTERM, self._on_term)
        return name, command, rest

    def _on_term(self, signum: int, frame: Any) -> None:
        """SIGTERM as Ctrl-C: whatever handles SIGINT now (asyncio's, which cancels the running command;
        Python's, which raises KeyboardInterrupt where the work is), KeyboardInterrupt where SIGINT is ignored."""
        self._terminated = True
        on_interrupt = signal.getsignal(signal.SIGINT)
        if not callable(on_interrupt):
            raise KeyboardInterrupt
        on_interrupt(signal.SIGINT, frame)

    def invoke(self, ctx: Any) -> Any:
        self._terminated = False
        self._before_term: Any = None
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            _drop_closed_loop_leftovers(exc)
            what = f"coworkenv {self._invoked}".strip()
            resume = " (resume with the same command)" if self._invoked in RESUMABLE else ""
            how, status = ("terminated", 143) if self._terminated else ("interrupted", 130)
            err.print(f"{how}: {what} stopped; what it stored is kept{resume}", highlight=False, markup=False)
            raise typer.Exit(status) from None
        except CoworkenvError as exc:
            raise fail(exc.line, USAGE) from None
        finally:
            if self._before_term is not None:
                signal.signal(signal.SIGTERM, self._before_term)

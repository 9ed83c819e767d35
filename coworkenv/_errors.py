"""The package's two kinds of failure that are not bugs: user errors and infrastructure failures.

A ``CoworkenvError`` is something the person running coworkenv can fix (a malformed spec, a store
file that is not a store, an unknown provider, a missing package): the CLI prints it as one line
``error: ...`` (with its hint) and exits 2. Any other exception is a bug, in coworkenv or in a
library it drives (TRL, transformers), and keeps its traceback.

Infrastructure failures say what went wrong outside the agent's control, and which boundary it
crossed. A tool's failure is a result the agent sees; an infrastructure failure is one of these, recorded
once on the episode it ended (``episodes.error`` and ``episodes.boundary``), never as a tool
result and never graded as the agent's work. ``collect`` and ``eval`` retry such episodes.
"""

from __future__ import annotations

from typing import Literal, get_args

Boundary = Literal["model", "sandbox", "store", "protocol", "process"]
BOUNDARIES: tuple[str, ...] = get_args(Boundary)


class CoworkenvError(Exception):
    """A user error: the message names what was wrong, ``hint`` (optional) what to do about it.

    Subclasses that used to be ``ValueError``s stay ``ValueError``s too (``class SpecError(CoworkenvError,
    ValueError)``), so callers catching ``ValueError`` keep working."""

    def __init__(self, message: str = "", *, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint

    @property
    def line(self) -> str:
        """The one line a person reads: the message, then the hint when there is one."""
        message = str(self) or type(self).__name__
        return f"{message} ({self.hint})" if self.hint else message


class InfrastructureError(RuntimeError):
    """A failure at ``boundary``: ``model`` (the model server), ``sandbox`` (the sandbox or its
    runner), ``store`` (the SQLite store), ``protocol`` (the MCP connection) or ``process`` (the
    process running the episode died: killed, crashed)."""

    boundary: Boundary = "protocol"

    def __init__(self, message: str, *, boundary: Boundary | None = None) -> None:
        super().__init__(message)
        if boundary is not None:
            self.boundary = boundary


class ModelError(InfrastructureError):
    """The model server failed to answer (unreachable, an HTTP error, a malformed reply)."""

    boundary: Boundary = "model"


class ProtocolError(InfrastructureError):
    """The MCP connection to the episode failed (not a tool's error: those are results)."""

    boundary: Boundary = "protocol"

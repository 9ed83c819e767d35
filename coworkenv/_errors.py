"""Infrastructure failures: what went wrong outside the agent's control, and which boundary it crossed.

A tool's failure is a result the agent sees; an infrastructure failure is one of these, recorded
once on the episode it ended (``episodes.error`` and ``episodes.boundary``), never as a tool
result and never graded as the agent's work. ``collect`` and ``eval`` retry such episodes.
"""

from __future__ import annotations

from typing import Literal, get_args

Boundary = Literal["model", "sandbox", "store", "protocol", "process"]
BOUNDARIES: tuple[str, ...] = get_args(Boundary)


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

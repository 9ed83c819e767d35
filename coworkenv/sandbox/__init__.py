"""Sandboxes in which the tools of a workspace execute, one per episode."""

from pathlib import Path

from ._base import Limits, Sandbox, SandboxError, SandboxUnavailable, ToolOutcome
from ._bwrap import BwrapSandbox

BACKENDS: dict[str, type[Sandbox]] = {"bwrap": BwrapSandbox}


def create_sandbox(backend: str, initial_state: Path, *, limits: Limits | None = None, **options) -> Sandbox:
    """A sandbox of the named backend; an unknown or unavailable one raises with what to do."""
    try:
        cls = BACKENDS[backend]
    except KeyError:
        known = ", ".join(sorted(BACKENDS))
        raise SandboxUnavailable(f"unknown sandbox backend {backend!r}; choose one of: {known}") from None
    cls.check_available()
    return cls(initial_state, limits=limits, **options)


__all__ = [
    "BACKENDS",
    "BwrapSandbox",
    "Limits",
    "Sandbox",
    "SandboxError",
    "SandboxUnavailable",
    "ToolOutcome",
    "create_sandbox",
]

"""Sandboxes in which the tools of a workspace execute, one per episode."""

from pathlib import Path

from ._base import Limits, Sandbox, SandboxError, SandboxUnavailable, ToolOutcome
from ._bwrap import BwrapSandbox
from ._docker import DockerSandbox
from ._image import IMAGE, BuildResult, build_image
from ._labels import CleanupReport, cleanup
from ._pool import PoolSettings, SandboxPool

BACKENDS: dict[str, type[Sandbox]] = {"bwrap": BwrapSandbox, "docker": DockerSandbox}


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
    "BuildResult",
    "BwrapSandbox",
    "CleanupReport",
    "DockerSandbox",
    "IMAGE",
    "Limits",
    "PoolSettings",
    "Sandbox",
    "SandboxError",
    "SandboxPool",
    "SandboxUnavailable",
    "ToolOutcome",
    "build_image",
    "cleanup",
    "create_sandbox",
]

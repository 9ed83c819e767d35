"""The registration of the sandbox backends: the closed list ``BACKENDS``, and what goes through it."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Literal, get_args

from ._base import Limits, Sandbox, SandboxConfig, SandboxUnavailable
from ._bwrap import BwrapSandbox
from ._docker import DockerSandbox
from ._labels import CleanupReport, default_root
from ._local import LocalSandbox

# ``local`` isolates nothing (tests, development): chosen only by name, never in place of another
BackendName = Literal["bwrap", "docker", "local"]
BACKENDS: dict[str, type[Sandbox]] = {"bwrap": BwrapSandbox, "docker": DockerSandbox, "local": LocalSandbox}
assert set(BACKENDS) == set(get_args(BackendName))


def backend_class(backend: str) -> type[Sandbox]:
    """The class of the named backend; an unknown name raises naming the known ones."""
    try:
        return BACKENDS[backend]
    except KeyError:
        known = ", ".join(sorted(BACKENDS))
        raise SandboxUnavailable(f"unknown sandbox backend {backend!r}; choose one of: {known}") from None


def create_sandbox(backend: str, initial_state: Path, *, limits: Limits | None = None,
                   config: SandboxConfig | None = None) -> Sandbox:
    """A sandbox of the named backend; an unknown or unavailable one raises with what to do.

    ``config`` is the backend's own config type (``BACKENDS[backend].config_type``); None takes its defaults.
    """
    cls = backend_class(backend)
    cls.check_available()
    return cls(initial_state, limits=limits, config=config)


def cleanup(*, root: Path | None = None, backends: Iterable[str] | None = None,
            everything: bool = False) -> CleanupReport:
    """Remove what sandboxes of processes that are gone left behind (all of it, with ``everything``).

    Each backend (every one in ``BACKENDS``, or those named) cleans up after its own; ``root`` is where
    episode directories are (the system's temporary directory by default).
    """
    report = CleanupReport()
    where = Path(root or default_root())
    for name in BACKENDS if backends is None else backends:
        backend_class(name).cleanup(report, root=where, everything=everything)
    return report

"""The bubblewrap backend: a long-lived runner inside ``bwrap`` per episode, spoken to over a pipe."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from ._base import Limits, SandboxConfig, SandboxUnavailable
from ._child import ChildRunnerSandbox, runner_python
from ._client import CALL_FILE, RUNNER
from ._labels import CleanupReport, cleanup_directories
from ._runner import CALL_MODULE

__all__ = ["BwrapConfig", "BwrapSandbox", "runner_python"]

SERVICE_ENV = "/opt/coworkenv/env"  # where a sandbox sees this Python's environment (for apps' services)


def _service_python() -> tuple[list[str], str]:
    """The bind that shows this Python's environment read-only to apps' services (a Claw-Eval task's
    mock servers need its packages; tools still run stdlib-only), and the interpreter they run.

    A virtual environment is bound at a fixed path (it works from there: Python finds its packages
    beside the ``pyvenv.cfg`` of the interpreter it was started as), not at its own, which may lie
    under /tmp, the sandbox's scratch space."""
    prefix = os.path.realpath(sys.prefix)
    if prefix != os.path.realpath(sys.base_prefix):
        return ["--ro-bind", prefix, SERVICE_ENV], f"{SERVICE_ENV}/bin/python"
    return [], runner_python()


def _system_binds() -> list[str]:
    args: list[str] = []
    for top in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    prefix = os.path.realpath(sys.base_prefix)
    if not prefix.startswith("/usr"):
        args += ["--ro-bind", prefix, prefix]
    return args


class BwrapConfig(SandboxConfig):
    """The bubblewrap backend's options: those every backend has (``apps_dir``, ``root``), no more."""


class BwrapSandbox(ChildRunnerSandbox):
    """One bubblewrap sandbox: no network, a read-only view of the system, a private workspace.

    Its episode directory's ``workspace/`` is what the sandbox sees as ``/workspace``; ``initial/``,
    its own copy of the initial state, it sees read-only.
    """

    name = "bwrap"
    config_type = BwrapConfig

    def __init__(self, initial_state: Path, *, limits: Limits | None = None,
                 config: BwrapConfig | None = None) -> None:
        super().__init__(initial_state, limits=limits, config=config)

    @staticmethod
    def check_available() -> str:
        path = shutil.which("bwrap")
        if path is None:
            raise SandboxUnavailable(
                "bubblewrap (bwrap) is not installed — install it with `apt-get install bubblewrap`"
            )
        return path

    @classmethod
    def cleanup(cls, report: CleanupReport, *, root: Path, everything: bool = False) -> None:
        """A bwrap sandbox leaves only its episode directory (``--die-with-parent`` takes its processes).

        Directories that name no backend (from before their names carried one, never labelled) are
        judged here too, so that exactly one backend judges them.
        """
        cleanup_directories(root, cls.name, everything, report, unnamed=True)

    def command(self) -> list[str]:
        assert self.workdir is not None
        service_bind, service_python = _service_python()
        return [
            self.check_available(),
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            *_system_binds(),
            "--ro-bind", str(self.apps_dir), "/opt/coworkenv/lib/apps",
            "--ro-bind", str(RUNNER), "/opt/coworkenv/runner.py",
            "--ro-bind", str(CALL_FILE), f"/opt/coworkenv/lib/{CALL_MODULE}.py",
            *service_bind,
            "--ro-bind", str(self.initial_dir), "/opt/coworkenv/initial",
            "--bind", str(self.workdir), "/workspace",
            "--tmpfs", "/tmp",
            "--proc", "/proc",
            "--dev", "/dev",
            "--remount-ro", "/",
            "--chdir", "/workspace",
            "--clearenv",
            "--setenv", "PATH", "/usr/bin:/bin",
            "--setenv", "HOME", "/workspace",
            "--setenv", "COWORKENV_LIB", "/opt/coworkenv/lib",
            "--setenv", "COWORKENV_INITIAL_STATE", "/opt/coworkenv/initial/state.db",
            "--setenv", "COWORKENV_SERVICE_ENV", json.dumps(self.config.service_env),
            "--setenv", "COWORKENV_SERVICE_PYTHON", service_python,
            runner_python(), "-I", "-S", "/opt/coworkenv/runner.py", "--sandboxed",
        ]

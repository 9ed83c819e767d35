"""The local backend: the runner as a plain child process of the host. It isolates NOTHING.

For unit tests and for development on machines without bubblewrap or Docker (macOS, say): tools
run as the host's user, with the host's network, files and processes in reach. Only what the runner
does by itself still holds: each call in a worker process under its CPU-time, memory and wall-clock
limits, the output limit, the file operations kept inside the episode's workspace, a reset that
puts the workspace and the episode's scratch directory back. What needs isolation does not: a tool
can read and write any file the host's user can, connect anywhere, see other processes, start
processes (no process limit), and leave a detached one running after its call.

Never chosen unless named (``--sandbox local``, ``EpisodeSettings(backend="local")``): no code picks
it when another backend is missing. Same runner, same protocol and same episode directory as
bubblewrap (``_child.py``); the apps and ``apply_call`` are linked into a ``lib/`` folder of the
episode directory, which the runner imports them from, as a sandbox has them mounted beside it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ._base import Limits, SandboxConfig, SandboxUnavailable
from ._child import ChildRunnerSandbox, runner_python
from ._client import CALL_FILE, RUNNER
from ._labels import CleanupReport, cleanup_directories
from ._runner import CALL_MODULE, SCRATCH_ENV, STATE_FILE


class LocalConfig(SandboxConfig):
    """The local backend's options: those every backend has (``apps_dir``, ``root``), no more."""


class LocalSandbox(ChildRunnerSandbox):
    """One episode's runner as a plain process over a workspace folder on the host; no isolation.

    In its episode directory: ``workspace/`` (the tools' working directory, where ``state.db`` is),
    ``tmp/`` (the episode's scratch directory, ``$TMPDIR`` of its tools, emptied on reset) and
    ``lib/`` (links to the apps and to ``apply_call``'s file).
    """

    name = "local"
    config_type = LocalConfig
    isolated = False

    def __init__(self, initial_state: Path, *, limits: Limits | None = None,
                 config: LocalConfig | None = None) -> None:
        super().__init__(initial_state, limits=limits, config=config)
        self.scratch_dir: Path | None = None

    @staticmethod
    def check_available() -> str:
        if not hasattr(os, "fork"):  # the runner forks its workers (and sets POSIX limits on them)
            raise SandboxUnavailable("the local sandbox backend needs a POSIX system (Linux or macOS); "
                                     "on Windows, use WSL")
        return "the runner as a plain process of this user: no isolation"

    @classmethod
    def cleanup(cls, report: CleanupReport, *, root: Path, everything: bool = False) -> None:
        """A local sandbox leaves its episode directory; its runner exits when its pipe closes with the host."""
        cleanup_directories(root, cls.name, everything, report)

    def prepare(self) -> None:
        assert self.episode_dir is not None  # made by start()
        lib = self.episode_dir / "lib"
        lib.mkdir()
        (lib / "apps").symlink_to(self.apps_dir.resolve(), target_is_directory=True)
        (lib / f"{CALL_MODULE}.py").symlink_to(CALL_FILE.resolve())
        self.scratch_dir = self.episode_dir / "tmp"
        self.scratch_dir.mkdir()

    def environment(self) -> dict[str, str]:
        """What a sandbox's runner is given, with the episode's folders on the host for the sandbox's
        fixed paths; nothing else of this process's environment (its keys and tokens) is passed on."""
        assert self.episode_dir is not None and self.workdir is not None and self.initial_dir is not None
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.workdir),
            "TMPDIR": str(self.scratch_dir),
            SCRATCH_ENV: str(self.scratch_dir),
            "COWORKENV_LIB": str(self.episode_dir / "lib"),
            "COWORKENV_INITIAL_STATE": str(self.initial_dir / STATE_FILE),
            "COWORKENV_SERVICE_ENV": json.dumps(self.config.service_env),
            "COWORKENV_SERVICE_PYTHON": sys.executable,  # this environment, with the packages services need
        }

    def command(self) -> list[str]:
        return [runner_python(), "-I", "-S", str(RUNNER)]

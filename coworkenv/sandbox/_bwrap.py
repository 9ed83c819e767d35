"""The bubblewrap backend: a long-lived runner inside ``bwrap`` per episode, spoken to over a pipe."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
from pathlib import Path

from ._base import Limits, SandboxConfig, SandboxUnavailable
from ._client import CALL_FILE, MAX_MESSAGE, RUNNER, LineReader, LineWriter, RunnerSandbox
from ._labels import CleanupReport, cleanup_directories, make_episode_dir
from ._runner import CALL_MODULE, STATE_FILE


def runner_python() -> str:
    """The interpreter the runner uses: the base interpreter of this Python, stdlib only."""
    return os.path.realpath(getattr(sys, "_base_executable", sys.executable))


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


class BwrapSandbox(RunnerSandbox):
    """One bubblewrap sandbox: no network, a read-only view of the system, a private workspace.

    On the host an episode is a directory ``coworkenv-ep-*`` holding a label (who owns it, for
    ``coworkenv sandbox cleanup``), ``workspace/``, which the sandbox sees as ``/workspace``, and
    ``initial/``, its own copy of the initial state, which it sees read-only (``retarget`` replaces it).
    """

    name = "bwrap"
    config_type = BwrapConfig
    respawns = True

    def __init__(self, initial_state: Path, *, limits: Limits | None = None,
                 config: BwrapConfig | None = None) -> None:
        self.config = config or BwrapConfig()
        super().__init__(initial_state, limits=limits, config=self.config)
        self.episode_dir: Path | None = None
        self.workdir: Path | None = None
        self.initial_dir: Path | None = None
        self._proc: asyncio.subprocess.Process | None = None

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

    async def start(self) -> None:
        if self.started:
            return
        self.episode_dir = make_episode_dir(self.name, self.config.root)
        self.workdir = self.episode_dir / "workspace"
        self.workdir.mkdir()
        self.initial_dir = self.episode_dir / "initial"
        self.initial_dir.mkdir()
        shutil.copyfile(self.initial_state, self.initial_dir / STATE_FILE)
        shutil.copyfile(self.initial_state, self.workdir / STATE_FILE)
        self.started = True
        try:
            await self._open()
        except BaseException:
            await self.close()
            raise
        self.used = False

    async def retarget(self, initial_state: Path) -> bool:
        """The new initial state replaces the sandbox's copy (a new file, which the runner's next reset
        notices: it drops the connection it kept for the old one), then a reset restores it."""
        if self.closed or not self.started or self.initial_dir is None:
            return False
        staged = self.initial_dir / f".{STATE_FILE}.new"
        shutil.copyfile(initial_state, staged)
        os.replace(staged, self.initial_dir / STATE_FILE)
        self.initial_state = Path(initial_state)
        await self.reset()
        return True

    async def _connect(self) -> tuple[LineReader, LineWriter]:
        self._proc = await asyncio.create_subprocess_exec(
            *self.command(),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=MAX_MESSAGE,
        )
        assert self._proc.stdout is not None and self._proc.stdin is not None
        return self._proc.stdout, self._proc.stdin

    async def _stderr_tail(self) -> str:
        proc = self._proc
        if proc is None or proc.stderr is None:
            return ""
        try:
            data = await asyncio.wait_for(proc.stderr.read(4096), 1)
        except TimeoutError:
            return ""
        return data.decode(errors="replace").strip()

    async def _disconnect(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.returncode is None:
            try:
                proc.kill()
            except ProcessLookupError:
                pass
        await proc.wait()

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        proc = self._proc
        if proc is not None and proc.stdin is not None and proc.returncode is None:
            proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), 2)
            except TimeoutError:
                pass
        self._reader = self._writer = None
        await self._disconnect()
        if self.episode_dir is not None:
            shutil.rmtree(self.episode_dir, ignore_errors=True)
            self.episode_dir = self.workdir = None

    def abandon(self) -> None:
        self.closed = True
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            try:
                os.kill(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.episode_dir is not None:
            shutil.rmtree(self.episode_dir, ignore_errors=True)
            self.episode_dir = self.workdir = None

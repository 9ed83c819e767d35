"""Sandboxes whose runner is a child process of the host, spoken to over its stdin and stdout.

The bubblewrap backend (the runner inside ``bwrap``) and the local one (the runner as a plain
process, no isolation) differ only in the command that starts the runner and what it is given;
their episode directory, start, retarget, respawn and cleanup are written once, here.
"""

from __future__ import annotations

import abc
import asyncio
import os
import shutil
import signal
import sys
from pathlib import Path

from ._base import Limits, SandboxConfig
from ._client import MAX_MESSAGE, LineReader, LineWriter, RunnerSandbox
from ._labels import make_episode_dir
from ._runner import STATE_FILE


def runner_python() -> str:
    """The interpreter the runner uses: the base interpreter of this Python, stdlib only."""
    return os.path.realpath(getattr(sys, "_base_executable", sys.executable))


class ChildRunnerSandbox(RunnerSandbox):
    """A runner started as a child process over an episode directory on the host.

    The episode is a directory ``coworkenv-ep-*`` holding a label (who owns it, for ``coworkenv
    sandbox cleanup``), ``workspace/``, the sandbox's workspace, and ``initial/``, its own copy of
    the initial state (``retarget`` replaces it). A runner that died is started again over the same
    workspace.
    """

    respawns = True

    def __init__(self, initial_state: Path, *, limits: Limits | None = None,
                 config: SandboxConfig | None = None) -> None:
        self.config = config or self.config_type()
        super().__init__(initial_state, limits=limits, config=self.config)
        self.episode_dir: Path | None = None
        self.workdir: Path | None = None
        self.initial_dir: Path | None = None
        self._proc: asyncio.subprocess.Process | None = None

    @abc.abstractmethod
    def command(self) -> list[str]:
        """The runner's command line, once the episode directory is made."""

    def environment(self) -> dict[str, str] | None:
        """The runner process's environment (None: this process's)."""
        return None

    def prepare(self) -> None:  # optional: bwrap needs nothing beyond the directories made here
        """Make what else the backend needs in the new episode directory, before the runner starts."""

    async def start(self) -> None:
        if self.started:
            return
        # absolute: the runner starts in its workspace, where a relative root would name another folder
        self.episode_dir = make_episode_dir(self.name, self.config.root).absolute()
        self.workdir = self.episode_dir / "workspace"
        self.workdir.mkdir()
        self.initial_dir = self.episode_dir / "initial"
        self.initial_dir.mkdir()
        shutil.copyfile(self.initial_state, self.initial_dir / STATE_FILE)
        shutil.copyfile(self.initial_state, self.workdir / STATE_FILE)
        self.started = True
        try:
            self.prepare()
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
            cwd=self.workdir,
            env=self.environment(),
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
            proc.stdin.close()  # the runner ends its worker and services, and exits
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

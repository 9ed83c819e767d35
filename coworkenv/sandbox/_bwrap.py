"""The bubblewrap backend: a long-lived runner inside ``bwrap`` per episode, spoken to over a pipe."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ._base import Limits, Sandbox, SandboxError, SandboxUnavailable, ToolOutcome

RUNNER = Path(__file__).with_name("_runner.py")
DEFAULT_APPS_DIR = Path(__file__).parent.parent / "workspace" / "apps"
STATE_FILE = "state.db"
LABEL = "coworkenv-ep-"  # prefix of every episode directory, so orphans can be found


def runner_python() -> str:
    """The interpreter the runner uses: the base interpreter of this Python, stdlib only."""
    return os.path.realpath(getattr(sys, "_base_executable", sys.executable))


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


def resolve_inside(root: Path, path: str) -> Path:
    """``path`` relative to ``root``; refuses absolute paths, ``..`` escapes and symlinks out."""
    candidate = (root / path).resolve()
    if candidate != root.resolve() and root.resolve() not in candidate.parents:
        raise SandboxError(f"path {path!r} is outside the sandbox workspace")
    return candidate


class BwrapSandbox(Sandbox):
    """One bubblewrap sandbox: no network, a read-only view of the system, a private workspace."""

    name = "bwrap"

    def __init__(
        self,
        initial_state: Path,
        *,
        limits: Limits | None = None,
        apps_dir: Path | None = None,
        root: Path | None = None,
    ) -> None:
        super().__init__(initial_state, limits=limits)
        self.apps_dir = Path(apps_dir or DEFAULT_APPS_DIR)
        self.root = Path(root) if root else None
        self.workdir: Path | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()
        self._ids = itertools.count(1)

    @staticmethod
    def check_available() -> str:
        path = shutil.which("bwrap")
        if path is None:
            raise SandboxUnavailable(
                "bubblewrap (bwrap) is not installed — install it with `apt-get install bubblewrap`"
            )
        return path

    def command(self) -> list[str]:
        assert self.workdir is not None
        return [
            self.check_available(),
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            *_system_binds(),
            "--ro-bind", str(self.apps_dir), "/opt/coworkenv/lib/apps",
            "--ro-bind", str(RUNNER), "/opt/coworkenv/runner.py",
            "--bind", str(self.workdir), "/workspace",
            "--tmpfs", "/tmp",
            "--proc", "/proc",
            "--dev", "/dev",
            "--chdir", "/workspace",
            "--clearenv",
            "--setenv", "PATH", "/usr/bin:/bin",
            "--setenv", "HOME", "/workspace",
            "--setenv", "COWORKENV_LIB", "/opt/coworkenv/lib",
            runner_python(), "-I", "-S", "/opt/coworkenv/runner.py",
        ]

    async def start(self) -> None:
        if self._proc is not None:
            return
        self.workdir = Path(tempfile.mkdtemp(prefix=LABEL, dir=self.root))
        shutil.copyfile(self.initial_state, self.workdir / STATE_FILE)
        await self._spawn()

    async def _spawn(self) -> None:
        self._proc = await asyncio.create_subprocess_exec(
            *self.command(),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=self.limits.output_bytes * 2 + 65536,
        )
        reply = await self._request({"op": "ping"}, timeout=30)
        if not reply.get("ok"):
            raise SandboxError(f"sandbox runner did not start: {reply}")

    async def _request(self, request: dict[str, Any], *, timeout: float) -> dict[str, Any]:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.stdout is None:
            raise SandboxError("sandbox is not started")
        request = {**request, "id": next(self._ids)}
        try:
            proc.stdin.write((json.dumps(request) + "\n").encode())
            await proc.stdin.drain()
            line = await asyncio.wait_for(proc.stdout.readline(), timeout)
        except (asyncio.TimeoutError, BrokenPipeError, ConnectionResetError) as exc:
            await self._kill()
            raise SandboxError(f"sandbox runner stopped answering ({type(exc).__name__})") from None
        if not line:
            stderr = b""
            if proc.stderr is not None:
                try:
                    stderr = await asyncio.wait_for(proc.stderr.read(4096), 1)
                except asyncio.TimeoutError:
                    pass
            await self._kill()
            raise SandboxError(f"sandbox runner exited: {stderr.decode(errors='replace').strip()}")
        return json.loads(line)

    async def call_tool(self, app: str, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
        async with self._lock:
            if self._proc is None:
                # The runner died (killed from inside, say): the episode goes on in a fresh one,
                # over the same workspace directory.
                if self.workdir is None:
                    raise SandboxError("sandbox is not started")
                await self._spawn()
            started = time.perf_counter()
            reply = await self._request(
                {"op": "call", "app": app, "tool": tool, "args": arguments,
                 "limits": self.limits.model_dump()},
                timeout=self.limits.wall_s + 5,
            )
            elapsed = (time.perf_counter() - started) * 1000
        if reply.get("ok"):
            return ToolOutcome(ok=True, result=reply.get("result"), duration_ms=elapsed)
        return ToolOutcome(ok=False, error=reply.get("error", ""), kind=reply.get("kind", "crash"),
                           duration_ms=elapsed)

    async def read_file(self, path: str) -> bytes:
        if self.workdir is None:
            raise SandboxError("sandbox is not started")
        return resolve_inside(self.workdir, path).read_bytes()

    async def write_file(self, path: str, data: bytes) -> None:
        if self.workdir is None:
            raise SandboxError("sandbox is not started")
        target = resolve_inside(self.workdir, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    async def reset(self) -> None:
        if self.workdir is None:
            raise SandboxError("sandbox is not started")
        async with self._lock:
            for entry in self.workdir.iterdir():
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
            shutil.copyfile(self.initial_state, self.workdir / STATE_FILE)

    async def _kill(self) -> None:
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
        proc = self._proc
        if proc is not None and proc.stdin is not None and proc.returncode is None:
            proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), 2)
            except asyncio.TimeoutError:
                pass
        await self._kill()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

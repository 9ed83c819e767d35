"""The host side of the runner protocol, shared by the backends: requests, replies, file ops, reset.

A backend only says how the runner is started and reached (``_connect``) and stopped
(``_disconnect``); everything that crosses the boundary is the JSON-lines protocol of ``_runner.py``.
"""

from __future__ import annotations

import abc
import asyncio
import base64
import hashlib
import itertools
import json
import time
from pathlib import Path
from typing import Any, Protocol

from ._base import FileChanges, Limits, Sandbox, SandboxConfig, SandboxError, ToolOutcome

RUNNER = Path(__file__).with_name("_runner.py")
DEFAULT_APPS_DIR = Path(__file__).parent.parent / "workspace" / "apps"
# how a tool call is applied to a state (``coworkenv.workspace.state.apply_call``, standard library only): the
# runner imports it as ``CALL_MODULE`` from beside the apps, where each backend binds this file
CALL_FILE = Path(__file__).parent.parent / "workspace" / "state" / "_call.py"
MAX_MESSAGE = 1 << 28  # a reply line (a read file, base64) may be this long
CONTROL_TIMEOUT_S = 30.0


class LineReader(Protocol):
    async def readline(self) -> bytes: ...


class LineWriter(Protocol):
    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...


class RunnerSandbox(Sandbox):
    """A sandbox whose tools run through a long-lived runner spoken to in JSON lines."""

    #: whether a runner that died (killed from inside, say) is started again over the same workspace
    respawns = False

    def __init__(self, initial_state: Path, *, limits: Limits | None = None,
                 config: SandboxConfig | None = None) -> None:
        super().__init__(initial_state, limits=limits, config=config)
        # absolute from here: a runner starts elsewhere (a child in its episode directory), where a
        # relative path a user gave (a cache dir of ``cache``) would name another folder
        self.apps_dir = Path((config and config.apps_dir) or DEFAULT_APPS_DIR).absolute()
        self._reader: LineReader | None = None
        self._writer: LineWriter | None = None
        self._lock = asyncio.Lock()
        self._ids = itertools.count(1)
        self._initial_digest: tuple[bytes, str] | None = None  # the initial state read back against, its sha256
        self._dumped_limits: tuple[Limits, dict[str, Any]] | None = None
        self.started = False
        self.closed = False

    @abc.abstractmethod
    async def _connect(self) -> tuple[LineReader, LineWriter]:
        """Start the runner (or reach the one already there) and return its reply and request streams."""

    @abc.abstractmethod
    async def _disconnect(self) -> None:
        """Stop the runner's transport; the next ``_connect`` starts it again if the backend can."""

    async def _stderr_tail(self) -> str:
        return ""

    async def _open(self) -> None:
        self._reader, self._writer = await self._connect()
        reply = await self._request({"op": "ping"}, timeout=CONTROL_TIMEOUT_S)
        if not reply.get("ok"):
            raise SandboxError(f"sandbox runner did not start: {reply}")

    async def _ensure_runner(self) -> None:
        if self.closed or not self.started:
            raise SandboxError("sandbox is not started")
        if self._reader is None:
            if not self.respawns:
                raise SandboxError(f"the {self.name} sandbox's runner is gone; the episode cannot go on")
            await self._open()

    async def _request(self, request: dict[str, Any], *, timeout: float) -> dict[str, Any]:
        reader, writer = self._reader, self._writer
        if reader is None or writer is None:
            raise SandboxError("sandbox is not started")
        request = {**request, "id": next(self._ids)}
        try:
            writer.write((json.dumps(request) + "\n").encode())
            await writer.drain()
            async with asyncio.timeout(timeout):  # no task per request, unlike wait_for
                line = await reader.readline()
        except (TimeoutError, OSError, ValueError, asyncio.IncompleteReadError) as exc:
            await self._lost()
            raise SandboxError(f"sandbox runner stopped answering ({type(exc).__name__})") from None
        if not line:
            tail = await self._stderr_tail()
            await self._lost()
            raise SandboxError(f"sandbox runner exited{': ' + tail if tail else ''}")
        try:
            reply = json.loads(line)
        except ValueError:
            await self._lost()
            raise SandboxError("sandbox runner sent a malformed reply") from None
        if reply.get("id") != request["id"]:
            await self._lost()
            raise SandboxError("sandbox runner replied out of turn")
        return reply

    async def _lost(self) -> None:
        self._reader = self._writer = None
        await self._disconnect()

    async def call_tool(self, app: str, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
        async with self._lock:
            await self._ensure_runner()
            self.used = True
            started = time.perf_counter()
            reply = await self._request(
                {"op": "call", "app": app, "tool": tool, "args": arguments, "limits": self._limits()},
                timeout=self.limits.wall_s + 5,
            )
            elapsed = (time.perf_counter() - started) * 1000
        if reply.get("ok"):
            return ToolOutcome(ok=True, result=reply.get("result"), duration_ms=elapsed,
                               changed=bool(reply.get("changed", True)), changes=reply.get("changes"))
        return ToolOutcome(ok=False, error=reply.get("error", ""), kind=reply.get("kind", "crash"),
                           duration_ms=elapsed)

    def _limits(self) -> dict[str, Any]:
        """The limits as the runner gets them, dumped once while they stay the same object."""
        if self._dumped_limits is None or self._dumped_limits[0] is not self.limits:
            self._dumped_limits = (self.limits, self.limits.model_dump())
        return self._dumped_limits[1]

    async def _control(self, request: dict[str, Any]) -> dict[str, Any]:
        async with self._lock:
            await self._ensure_runner()
            reply = await self._request(request, timeout=CONTROL_TIMEOUT_S)
        if reply.get("ok"):
            return reply.get("result") or {}
        if reply.get("kind") == "missing":
            raise FileNotFoundError(reply.get("error", ""))
        raise SandboxError(reply.get("error") or f"runner refused {request.get('op')}")

    async def read_file(self, path: str) -> bytes:
        result = await self._control({"op": "read", "path": path})
        return base64.b64decode(result["data"])

    async def read_changes(self, path: str, initial: bytes) -> bytes | FileChanges:
        """A file whose initial content was ``initial`` (the initial state's, for ``STATE_FILE``):
        only the blocks that differ from the sandbox's initial state cross (checked to be ``initial``
        by the runner's checksum of it); the whole file where the sandbox started from another."""
        result = await self._control({"op": "read_changes", "path": path})
        if "data" in result:
            return base64.b64decode(result["data"])
        if result.get("base") != self._digest(initial):  # the sandbox started from another file than ``initial``
            return await self.read_file(path)
        return FileChanges(int(result["size"]), int(result["block"]),
                           [(int(index), base64.b64decode(chunk)) for index, chunk in sorted(result["blocks"])])

    def _digest(self, initial: bytes) -> str:
        """``initial``'s sha256, worked out once for the bytes the host passes every time."""
        if self._initial_digest is None or self._initial_digest[0] is not initial:
            self._initial_digest = initial, hashlib.sha256(initial).hexdigest()
        return self._initial_digest[1]

    async def write_file(self, path: str, data: bytes) -> None:
        self.used = True
        await self._control({"op": "write", "path": path, "data": base64.b64encode(data).decode()})

    async def reset(self) -> None:
        """Restore the workspace to the initial state and empty the scratch dirs, in the same sandbox."""
        self.used = True  # until the runner says it is done
        await self._control({"op": "reset"})
        self.used = False

    async def restore(self, *, kept: bool = False) -> bool:
        """``reset``, keeping the runner's worker process when nothing is off about it (see ``_runner``);
        ``kept``: to the state kept last (``keep_state``), unless the runner has to reset."""
        self.used = True
        result = await self._control({"op": "restore", "to": "kept" if kept else "initial"})
        restored_kept = bool(result.get("kept"))
        self.used = restored_kept  # a kept state is not the initial one: the pool resets it
        return restored_kept

    async def keep_state(self) -> bool:
        await self._control({"op": "keep"})
        return True

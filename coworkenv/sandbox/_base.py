"""The ``Sandbox`` interface: one isolated, stateful place per episode where tools execute."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from ._labels import CleanupReport


class SandboxError(RuntimeError):
    """An infrastructure failure of a sandbox (not a tool's failure): recorded on the episode."""

    boundary: ClassVar[str] = "sandbox"


class SandboxUnavailable(SandboxError):
    """A backend cannot run on this machine; the message says what to install or start."""


class Limits(BaseModel):
    """Limits applied inside the sandbox: per tool call, and (docker) on the whole container.

    Frozen: a sandbox's limits change by giving it new ones (``model_copy(update=...)``).
    """

    model_config = ConfigDict(frozen=True)

    cpu_s: int = Field(default=5, ge=1, description="CPU seconds per call")
    mem_mb: int = Field(default=512, ge=32, description="address space per call, MiB")
    wall_s: float = Field(default=10.0, gt=0, description="wall-clock seconds per call")
    output_bytes: int = Field(default=1 << 20, ge=1024, description="largest result of a call")
    pids: int = Field(default=64, ge=4, description="processes a call may run at once")
    cpus: float = Field(default=1.0, gt=0, description="CPUs of the sandbox (docker)")
    workspace_mb: int = Field(default=256, ge=16, description="size of /workspace and /tmp (docker tmpfs)")


class SandboxConfig(BaseModel):
    """What a backend takes beyond ``Limits``; each backend has its own subclass (its ``config_type``).

    The fields here are the ones every backend has: where the apps come from, and where on the host
    an episode's labeled directory is made.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    apps_dir: Path | None = Field(default=None, description="the apps tools come from (default: the built-in ones)")
    root: Path | None = Field(default=None, description="where episode directories are made (default: system temp)")
    service_env: dict[str, str] = Field(default_factory=dict, description=(
        "variables every service an app starts in the sandbox gets (e.g. Claw-Eval's ERROR_RATE)"))


@dataclass(frozen=True)
class FileChanges:
    """A file as the blocks of ``block`` bytes in which it differs from a content the reader knows
    (``Sandbox.read_changes``): ``blocks`` holds (index, bytes) in order, the file is ``size`` bytes
    (past the known content's end it is what the blocks say, zeros where none does)."""

    size: int
    block: int
    blocks: list[tuple[int, bytes]]

    def over(self, initial: bytes) -> bytes:
        """The whole file, put together over ``initial``."""
        base = memoryview(initial)  # its slices are views: the file is copied once, by the join
        pieces: list[bytes | memoryview] = []
        at = 0
        for index, changed in self.blocks:
            start = index * self.block
            pieces += [base[at:start], bytes(max(0, start - max(at, len(initial))))]  # zeros past ``initial``'s end
            pieces.append(changed)
            at = start + len(changed)
        pieces += [base[at:self.size], bytes(max(0, self.size - max(at, len(initial))))]
        return b"".join(pieces)


@dataclass
class ToolOutcome:
    """What a tool call produced: a result, or an error the agent sees (``kind`` says which)."""

    ok: bool
    result: dict[str, Any] | None = None
    error: str = ""
    kind: str = ""  # tool | timeout | limit | crash
    duration_ms: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    changed: bool = True  # whether the call may have written the state (False only when the runner knows it did not)
    changes: dict[str, Any] | None = None  # the rows it inserted, updated and deleted, as the runner saw them


class Sandbox(abc.ABC):
    """Lifecycle: ``start`` → any number of ``call_tool``/``read_file``/``write_file``/``reset`` → ``close``.

    The sandbox's ``/workspace`` holds the episode's private copy of the workspace state;
    ``initial_state`` is the file that ``start`` and ``reset`` copy into it. Backends are chosen
    by name from ``coworkenv.sandbox.BACKENDS``, are constructed as
    ``Backend(initial_state, limits=..., config=Backend.config_type(...))``, clean up after their own
    dead owners (``cleanup``) and pass ``coworkenv.sandbox._conformance`` (a backend that is not
    ``isolated`` all but its ``NEEDS_ISOLATION`` checks).
    """

    name: ClassVar[str] = ""
    config_type: ClassVar[type[SandboxConfig]] = SandboxConfig
    #: whether tools are kept from the host (its network, files and processes); False only for ``local``
    isolated: ClassVar[bool] = True
    closed: bool = False  # set by ``close``

    def __init__(self, initial_state: Path, *, limits: Limits | None = None,
                 config: SandboxConfig | None = None) -> None:
        """``config`` is checked here to be the backend's ``config_type``; the backend keeps it, typed."""
        if config is not None and not isinstance(config, self.config_type):
            raise TypeError(f"the {self.name} sandbox backend takes a {self.config_type.__name__}, "
                            f"not a {type(config).__name__}")
        self.initial_state = Path(initial_state)
        self.limits = limits or Limits()
        self.used = True  # whether anything may have changed it since it started or was reset (a pool resets it then)

    @staticmethod
    def check_available() -> str:
        """Raise ``SandboxUnavailable`` saying what to install or start; return a description."""
        return ""

    @classmethod
    @abc.abstractmethod
    def cleanup(cls, report: CleanupReport, *, root: Path, everything: bool = False) -> None:
        """Remove what this backend's sandboxes left on the host when their owner process died
        (everything of this backend, with ``everything``), and say so in ``report``."""

    @abc.abstractmethod
    async def start(self) -> None: ...

    @abc.abstractmethod
    async def call_tool(self, app: str, tool: str, arguments: dict[str, Any]) -> ToolOutcome: ...

    @abc.abstractmethod
    async def read_file(self, path: str) -> bytes:
        """Read a file of the workspace (``path`` relative to it)."""

    async def read_changed_file(self, path: str, initial: bytes) -> bytes:
        """Read a file whose initial content was ``initial``; a backend may send only what changed."""
        changes = await self.read_changes(path, initial)
        return changes.over(initial) if isinstance(changes, FileChanges) else changes

    async def read_changes(self, path: str, initial: bytes) -> bytes | FileChanges:
        """A file whose initial content was ``initial``: where the backend can, only the blocks in
        which it differs from it; else the whole file."""
        return await self.read_file(path)

    @abc.abstractmethod
    async def write_file(self, path: str, data: bytes) -> None:
        """Write a file of the workspace (``path`` relative to it)."""

    @abc.abstractmethod
    async def reset(self) -> None:
        """Restore the workspace to its initial state."""

    async def restore(self, *, kept: bool = False) -> bool:
        """Restore the workspace to its initial state for another episode of the same task, played
        right after (calibration's): like ``reset``, but a backend may keep the process tools run in
        (the runner's worker) instead of starting a fresh one. Never between episodes of different
        tasks or agents: those get ``reset``.

        ``kept``: to the state ``keep_state`` kept last instead, where the backend can; whether it did
        (False: the sandbox holds the initial state)."""
        await self.reset()
        return False

    async def keep_state(self) -> bool:
        """Keep the workspace's state as it is now, for ``restore(kept=True)`` (until the next keep or
        reset); False when the backend cannot."""
        return False

    async def retarget(self, initial_state: Path) -> bool:
        """Make ``initial_state`` (another workspace's, say) the state this started sandbox restores,
        and reset it to it: a sandbox kept warm for one workspace serves another without a start.
        False when the backend cannot (the caller starts a sandbox instead); the sandbox is then as
        it was. A failure of the reset raises ``SandboxError`` as ``reset`` does."""
        return False

    @abc.abstractmethod
    async def close(self) -> None: ...

    def abandon(self) -> None:  # noqa: B027  # optional: most backends leave nothing that needs it
        """Remove what the sandbox holds on the host without an event loop (at interpreter exit)."""

    async def __aenter__(self) -> Sandbox:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

"""The bench the sandbox conformance suite runs on: sandboxes of one backend over the ``probe`` app,
a real SQLite initial state and a scratch directory standing for the host; and the few helpers every
check uses (a probe call, a value read back, a sandbox still serving, an expected error).
"""
# pyright: reportOptionalSubscript=false
# (``value`` reads ``outcome.result[...]`` after asserting ``outcome.ok``; a None result fails it anyway)

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._backends import backend_class, create_sandbox
from ._base import Limits, Sandbox, SandboxConfig, ToolOutcome
from ._local import LocalSandbox
from ._probe_app import write_initial_state, write_probe_apps

# Roomy in time, so that a loaded machine cannot turn a crash into a wall-clock timeout; small in
# memory and processes, so that the bombs go off fast.
LIMITS = Limits(cpu_s=3, wall_s=20, mem_mb=256, pids=32)
SPIN = LIMITS.model_copy(update={"cpu_s": 1})  # an endless loop ends on CPU time, not wall clock
TIGHT = LIMITS.model_copy(update={"wall_s": 1.5})  # a sleeping tool ends on wall clock


@dataclass
class Bench:
    """Sandboxes of one backend over the probe app, and a scratch directory standing for the host.

    ``config`` is the backend's own (its defaults when None); the bench puts the probe app in it.
    """

    backend: str
    host_dir: Path
    config: SandboxConfig | None = None
    started: list[Sandbox] = field(default_factory=list)

    @property
    def isolated(self) -> bool:
        """Whether the backend keeps tools from the host (every one but ``local``)."""
        return backend_class(self.backend).isolated

    def __post_init__(self) -> None:
        self.apps_dir = write_probe_apps(self.host_dir / "lib")
        config = self.config or backend_class(self.backend).config_type()
        self.config = config.model_copy(update={"apps_dir": self.apps_dir})
        self.initial_state = write_initial_state(self.host_dir / "initial.db")
        self.store_file = self.host_dir / "coworkenv.db"
        self.store_file.write_bytes(b"SQLite format 3\x00 secret store " + uuid.uuid4().hex.encode())
        # A host process with a marker in its command line: a sandbox must not see it in /proc.
        self.marker = f"coworkenv-decoy-{uuid.uuid4().hex}"
        self.decoy = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()", self.marker],
                                      stdin=subprocess.PIPE)

    async def sandbox(self, limits: Limits = LIMITS) -> Sandbox:
        sandbox = create_sandbox(self.backend, self.initial_state, limits=limits, config=self.config)
        self.started.append(sandbox)
        await sandbox.start()
        return sandbox

    async def close(self) -> None:
        for sandbox in self.started:
            await sandbox.close()
        self.started.clear()
        self.decoy.kill()
        self.decoy.wait()


def seen(sandbox: Sandbox, place: str) -> str:
    """Where ``sandbox``'s tools find ``place`` (``/workspace`` or ``/tmp``, as an isolated sandbox
    has them): the episode's own folder on the host in a local sandbox, which has no mounts."""
    if isinstance(sandbox, LocalSandbox):
        folder = {"/workspace": sandbox.workdir, "/tmp": sandbox.scratch_dir}[place]
        assert folder is not None, "the local sandbox is not started"
        return os.path.realpath(folder)
    return place


async def probe(sandbox: Sandbox, tool: str, **args: Any) -> ToolOutcome:
    return await sandbox.call_tool("probe", tool, args)


async def value(sandbox: Sandbox, key: str) -> Any:
    outcome = await probe(sandbox, "get", key=key)
    assert outcome.ok, outcome
    return outcome.result["value"]


async def serving(sandbox: Sandbox, key: str = "seeded", expected: Any = "yes") -> None:
    """The sandbox still answers calls and still holds its state."""
    assert await value(sandbox, key) == expected, f"sandbox lost its state: {key} != {expected!r}"


def expect_error(outcome: ToolOutcome, kind: str, *words: str) -> None:
    assert (outcome.ok, outcome.kind) == (False, kind), f"expected a {kind} error, got {outcome}"
    for word in words:
        assert word in outcome.error, f"{word!r} not in {outcome.error!r}"




@contextlib.asynccontextmanager
async def bench(backend: str, host_dir: Path | None = None, config: SandboxConfig | None = None):
    """A ``Bench`` with a bystander sandbox that must still serve when the bench is done."""
    tmp = None
    if host_dir is None:
        tmp = tempfile.mkdtemp(prefix="coworkenv-conformance-")
        host_dir = Path(tmp)
    b = Bench(backend, Path(host_dir), config)
    try:
        bystander = await b.sandbox()
        assert (await probe(bystander, "put", key="bystander", value="here")).ok
        yield b
        await serving(bystander, "bystander", "here")
    finally:
        await b.close()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


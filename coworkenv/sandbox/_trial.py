"""One real tool call in a fresh sandbox of a backend: what ``coworkenv doctor`` runs to say that a
backend works on this machine, not only that its program is installed."""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from ._backends import backend_class
from ._base import SandboxError
from ._probe_app import write_initial_state, write_probe_apps

TRIAL_TIMEOUT_S = 30.0


async def trial(backend: str) -> str:
    """Start a sandbox of ``backend`` over the conformance suite's probe app, read a seeded value
    back through a tool call, close it, and say how long that took. Raises ``SandboxError`` (or
    ``SandboxUnavailable``, saying what to install or start) when any of it fails."""
    cls = backend_class(backend)
    detail = cls.check_available()
    with tempfile.TemporaryDirectory(prefix="coworkenv-trial-") as tmp:
        host = Path(tmp)
        host.chmod(0o755)  # a docker sandbox's non-root user reads the probe app from here
        config = cls.config_type().model_copy(update={"apps_dir": write_probe_apps(host / "lib")})
        started = time.perf_counter()
        sandbox = cls(write_initial_state(host / "initial.db"), config=config)  # available: checked above
        try:
            async with asyncio.timeout(TRIAL_TIMEOUT_S):
                await sandbox.start()
                outcome = await sandbox.call_tool("probe", "get", {"key": "seeded"})
        except TimeoutError:
            raise SandboxError(f"a {backend} sandbox did not start and answer within {TRIAL_TIMEOUT_S:.0f} s") from None
        finally:
            await sandbox.close()
        if not outcome.ok or (outcome.result or {}).get("value") != "yes":
            raise SandboxError(f"a {backend} sandbox started but its tool call failed: "
                               f"{outcome.kind or 'wrong value'} {outcome.error or outcome.result}")
        return f"{detail}; a sandbox started and answered a tool call in {time.perf_counter() - started:.1f} s"

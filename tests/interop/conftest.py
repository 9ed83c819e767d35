"""The environment where OpenEnv and verifiers are installed (``make interop``: ``.venv-interop``; or
``$COWORKENV_INTEROP_PYTHON``): both pin an mcp older than coworkenv's, so the adapters and the peers'
own clients run there, as subprocesses of the tests, against a ``coworkenv serve`` in the test's process."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from coworkenv.store import Store

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def interop_python_path() -> str:
    configured = os.environ.get("COWORKENV_INTEROP_PYTHON")
    if configured:
        return configured
    return str(ROOT / ".venv-interop" / "bin" / "python")


@pytest.fixture(scope="session")
def interop_python() -> str:
    """The Python that has openenv and verifiers (skips the test where none has: run make interop)."""
    python = interop_python_path()
    if not Path(python).exists():
        pytest.skip(f"no {python}: make interop installs OpenEnv and verifiers there")
    check = subprocess.run([python, "-c", "import openenv.core.env_server, verifiers.envs.multiturn_env"],
                           capture_output=True, text=True)
    if check.returncode != 0:
        pytest.skip(f"{python} lacks openenv or verifiers (make interop): {check.stderr.strip()[-300:]}")
    return python


def interop_env() -> dict[str, str]:
    """The adapters' environment: this checkout's coworkenv first on the path (the interop venv installs it
    without its dependencies), nothing of this interpreter's."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


@contextlib.asynccontextmanager
async def openenv_server(python: str, coworkenv_url: str, *options: str) -> AsyncIterator[str]:
    """``python -m coworkenv.interop.openenv_server`` in front of ``coworkenv_url``; yields its URL."""
    process = await asyncio.create_subprocess_exec(
        python, "-m", "coworkenv.interop.openenv_server", "--server", coworkenv_url, "--port", "0", *options,
        stderr=subprocess.PIPE, env=interop_env())
    assert process.stderr is not None
    try:
        with anyio.fail_after(120):
            line = (await process.stderr.readline()).decode()
        found = re.search(r"on (http://\S+)", line)
        if found is None:
            rest = (await process.stderr.read()).decode()
            raise AssertionError(f"the OpenEnv server did not start: {line}{rest[-2000:]}")
        yield found.group(1)
    finally:
        if process.returncode is None:
            process.terminate()
            with anyio.fail_after(30):
                await process.wait()


async def run_json(python: str, args: list[str], payload: Any, timeout: float = 300) -> Any:
    """Run ``python ARGS`` in the interop environment with ``payload`` as JSON on stdin; its stdout as JSON."""
    process = await asyncio.create_subprocess_exec(python, *args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                   stderr=subprocess.PIPE, env=interop_env())
    with anyio.fail_after(timeout):
        out, err = await process.communicate(json.dumps(payload).encode())
    assert process.returncode == 0, err.decode()[-4000:]
    return json.loads(out)


def reference_plan(store: Store, task_id: str) -> dict[str, Any]:
    """The scripted policy of a task: its reference steps, then its reference answer."""
    task = store.task_spec(task_id)
    submitted = [s.arguments.get("answer", "") for s in task.reference if s.tool == "submit_answer"]
    return {"task_id": task_id, "steps": [[s.tool, s.arguments] for s in task.reference if s.tool != "submit_answer"],
            "answer": submitted[-1] if submitted else task.reference_answer}


PLAYER = str(HERE / "openenv_player.py")


def doc_snippet(marker: str) -> str:
    """The Python example of docs/interop.md that holds ``marker``."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "interop.md").read_text(), re.S)
    [found] = [b for b in blocks if marker in b]
    return found


async def run_snippet(python: str, code: str, path: Path, timeout: float = 300) -> str:
    """Run a documentation example as a program in the interop environment; its stdout."""
    path.write_text(code)
    process = await asyncio.create_subprocess_exec(python, str(path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                   env=interop_env())
    with anyio.fail_after(timeout):
        out, err = await process.communicate()
    assert process.returncode == 0, f"{code}\n{err.decode()[-3000:]}"
    return out.decode()

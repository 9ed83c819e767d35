"""Shared fixtures: a real SQLite store, an episode host with bubblewrap sandboxes, calibrated tasks,
and a real OpenAI-compatible model server that fails every chat request."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sqlite3
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.store import Store
from coworkenv.synth import synthesize


def pytest_collection_modifyitems(config, items):
    if shutil.which("bwrap") is None:
        skip = pytest.mark.skip(reason="bubblewrap is not installed (apt-get install bubblewrap)")
        for item in items:
            if "bwrap" in item.keywords:
                item.add_marker(skip)
    if any(item.get_closest_marker("docker") for item in items):
        problem = _docker_problem()
        if problem and os.environ.get("COWORKENV_REQUIRE_DOCKER"):
            raise pytest.UsageError(f"COWORKENV_REQUIRE_DOCKER is set but {problem}")
        if problem:
            skip = pytest.mark.skip(reason=problem)
            for item in items:
                if item.get_closest_marker("docker"):
                    item.add_marker(skip)


def _docker_problem() -> str | None:
    """Why docker tests cannot run here (the engine's one-line error), or None."""
    from coworkenv.sandbox import SandboxUnavailable
    from coworkenv.sandbox._image import docker_client

    try:
        docker_client()
    except SandboxUnavailable as exc:
        return str(exc)
    return None


@pytest.fixture(scope="session")
def sandbox_image() -> str:
    """The docker sandbox image, built once (a couple of minutes) or reused when it exists."""
    from coworkenv.sandbox import build_image

    return build_image().image


@pytest.fixture(autouse=True)
def _docker_image_for_docker_tests(request):
    if request.node.get_closest_marker("docker") is not None:
        request.getfixturevalue("sandbox_image")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "coworkenv.db"


@pytest.fixture
def store(store_path: Path):
    s = Store(store_path)
    yield s
    s.close()


@pytest.fixture
async def host(store: Store, tmp_path: Path):
    h = EpisodeHost(store, EpisodeSettings(cache_dir=tmp_path / "cache"))
    yield h
    await h.close()


@pytest.fixture
async def tasks(host: EpisodeHost) -> list[str]:
    """Six calibrated tasks (two per capability); returns the admitted task ids."""
    await synthesize(host, 6, seed=0)
    return [row.id for row in host.store.tasks(status="admitted")]


class _FailingModelServer(BaseHTTPRequestHandler):
    """``GET /v1/models`` lists ``m``; ``POST /v1/chat/completions`` answers 503 and, with OpenAI's
    ``x-should-retry: false``, asks the client not to retry (so a test does not wait out its backoff)."""

    def _send(self, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": "m", "object": "model"}]})
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self._send(503, {"error": {"message": "the model is overloaded", "type": "server_error"}},
                   {"x-should-retry": "false"})

    def log_message(self, format: str, *args) -> None:  # quiet
        pass


@pytest.fixture
def failing_model_server() -> Iterator[str]:
    """The base URL (``http://127.0.0.1:PORT/v1``) of a model server whose chat endpoint fails."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FailingModelServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _copy_store(source: Path, target: Path) -> None:
    """Copy a closed store with SQLite's backup (whole, whatever its journal holds)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.closing(sqlite3.connect(source)) as src, contextlib.closing(sqlite3.connect(target)) as dst:
        src.backup(dst)


@pytest.fixture(scope="session")
def copy_store() -> Callable[[Path, Path], None]:
    """``copy_store(source, target)``: a whole copy of a closed store file."""
    return _copy_store


@pytest.fixture(scope="session")
def multi_turn_tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with one admitted task of each multi-turn shape and one single-shot (lookup) task,
    synthesized once per test session; the initial states its episodes need are in
    ``PATH.parent / "building" / "cache"``. Tests copy it (``copy_store``) before writing to it."""
    path = tmp_path_factory.getbasetemp() / "multi-turn-tasks" / "tasks.db"
    building = path.parent / "building" / "tasks.db"
    building.parent.mkdir(parents=True, exist_ok=True)

    async def build() -> None:
        store = Store(building)
        host = EpisodeHost(store, EpisodeSettings(cache_dir=building.parent / "cache"))
        try:
            await synthesize(host, 3, seed=0, capabilities=("multi_turn",))
            await synthesize(host, 1, seed=0, capabilities=("lookup",))
        finally:
            await host.close()
            store.close()

    asyncio.run(build())
    _copy_store(building, path)
    return path

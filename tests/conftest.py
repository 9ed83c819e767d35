"""Shared fixtures: a real SQLite store, an episode host with bubblewrap sandboxes, calibrated tasks,
a real OpenAI-compatible model server that fails every chat request, and one real vLLM server per
test session (``tool_model_server``), started by ``coworkenv serve-model`` and stopped with Ctrl-C:
it serves the committed tiny tool-calling model as ``tool-model`` and a LoRA adapter of it as
``tool-lora``. The interpreter that runs vLLM is ``$COWORKENV_VLLM_PYTHON`` (``make test`` sets it
to the vLLM environment it installs), else ``.venv-vllm/bin/python``, else this one."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.store import Store
from coworkenv.synth import synthesize
from coworkenv.trainer import ServeError
from coworkenv.trainer._serve import check_vllm, free_port


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Where the suite's time goes, per test file (setup, call and teardown of its tests together): the
    20 slowest files and the whole, to see what a shorter suite would have to change."""
    per_file: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            if isinstance(report, pytest.TestReport):
                path = report.nodeid.split("::", 1)[0]
                per_file[path] = per_file.get(path, 0.0) + report.duration
    if len(per_file) < 2:
        return
    terminalreporter.write_sep("=", "slowest 20 test files")
    for path, seconds in sorted(per_file.items(), key=lambda item: -item[1])[:20]:
        terminalreporter.write_line(f"{seconds:8.1f}s {path}")
    terminalreporter.write_line(f"{sum(per_file.values()):8.1f}s in all {len(per_file)} files")


def pytest_collection_modifyitems(config, items):
    _group_for_workers(config, items)
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


SHARED_SERVER = "tool_model_server"


def _group_for_workers(config, items) -> None:
    """Under pytest-xdist (``make test`` runs ``-n`` workers with ``--dist loadgroup``): the tests of one file
    run in one worker, so a module's fixtures are built once, and every file that uses the session's vLLM
    server runs in the same worker, so only one server is started."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    shared = {item.path for item in items if SHARED_SERVER in getattr(item, "fixturenames", ())}
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(SHARED_SERVER if item.path in shared else str(item.path)))


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


@pytest.fixture(scope="session")
def six_tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of the six tasks ``synthesize(host, 6, seed=0)`` makes and calibrates, once per session."""
    path = tmp_path_factory.getbasetemp() / "six-tasks" / "tasks.db"
    path.parent.mkdir(parents=True, exist_ok=True)

    async def build() -> None:
        store = Store(path)
        host = EpisodeHost(store, EpisodeSettings(cache_dir=path.parent / "cache"))
        try:
            await synthesize(host, 6, seed=0)
        finally:
            await host.close()
            store.close()

    asyncio.run(build())
    return path


@pytest.fixture
async def tasks(host: EpisodeHost, six_tasks: Path) -> list[str]:
    """Six calibrated tasks in the test's store (whole: workspaces, tasks, calibration episodes), copied
    from the ones synthesized once per session; returns the admitted task ids."""
    conn = host.store.db.conn
    conn.execute("attach database ? as six", [str(six_tasks)])
    try:
        tables = [r[0] for r in conn.execute("select name from six.sqlite_master where type = 'table' "
                                             "and name not like 'sqlite_%'")]
        with conn:  # rows only: what a test added to its store (a table, a trigger) stays
            for table in tables:
                conn.execute(f'insert or ignore into main."{table}" select * from six."{table}"')
    finally:
        conn.execute("detach database six")
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


# --- one vLLM server per session ------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
STARTUP_S = 420


def vllm_python() -> str:
    configured = os.environ.get("COWORKENV_VLLM_PYTHON")
    if configured:
        return configured
    local = ROOT / ".venv-vllm" / "bin" / "python"
    return str(local) if local.exists() else sys.executable


async def admit_bundles(host: EpisodeHost, folder: Path) -> list[str]:
    """Store and calibrate every bundle under ``folder`` in ``host``'s store; returns the task ids,
    all admitted. A task calibration quarantines fails the test, naming it and the reason: a test
    that plays "the admitted ones" would otherwise play none and check nothing."""
    from coworkenv.synth import calibrate_task
    from coworkenv.workspace import load_bundle

    ids, refused = [], []
    for directory in sorted(folder.iterdir()):
        workspace, specs = load_bundle(directory)
        host.store.put_workspace(workspace)
        for task in specs:
            host.store.put_task(task)
            calibration = await calibrate_task(host, task)
            ids.append(task.id)
            if host.store.task(task.id).status != "admitted":
                refused.append(f"{task.id}: {calibration.reason}")
    if not ids:
        pytest.fail(f"{folder}: no tasks in its bundles")
    if refused:
        pytest.fail(f"{len(refused)} of {len(ids)} tasks under {folder} are not admitted (regenerate what went stale):\n"
                    + "\n".join(refused), pytrace=False)
    return ids


@pytest.fixture
async def tool_model_tasks(host: EpisodeHost) -> list[str]:
    """The tasks the fixture model ``tool-model`` was trained on (its bundles), calibrated in this
    test's store; returns their ids, every one admitted (the fixture fails naming those that are not:
    a stale guard digest is refreshed with ``python tests/fixtures/make_tool_model.py --guards``).
    The model replays the oracle's compact trajectories of these, whatever synthesis makes of their
    seed today."""
    return await admit_bundles(host, FIXTURES / "tool-model-tasks")


@pytest.fixture(scope="session")
def vllm_interpreter() -> str:
    """The Python that has vLLM (skips the test where none has)."""
    python = vllm_python()
    try:
        check_vllm(python)
    except ServeError as exc:
        pytest.skip(str(exc))
    return python


def _serving(url: str) -> set[str]:
    try:
        response = httpx.get(f"{url}/models", timeout=5)
        return {m["id"] for m in response.json()["data"]} if response.status_code == 200 else set()
    except (httpx.HTTPError, ValueError, KeyError):
        return set()


@pytest.fixture(scope="session")
def tool_model_server(tmp_path_factory, vllm_interpreter):
    """The base URL (``http://127.0.0.1:PORT/v1``) of vLLM serving ``tool-model`` and ``tool-lora``."""
    python = vllm_interpreter
    logs = tmp_path_factory.mktemp("vllm")
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    command = [sys.executable, "-m", "coworkenv", "serve-model", str(FIXTURES / "tool-model"), "--name", "tool-model",
               "--lora", f"tool-lora={FIXTURES / 'tool-adapter'}", "--port", str(port), "--python", python,
               "-O", "0", "--startup-timeout", str(STARTUP_S), "--log", str(logs / "vllm.log")]
    with (logs / "cli.log").open("w") as cli_log:
        # started with SIGINT ignored, as a background job of a non-interactive shell starts it:
        # Ctrl-C must still stop the command (and vLLM with it)
        # vLLM keeps Responses API responses only when asked, and a request with previous_response_id needs them;
        # dev mode gives the endpoints an RL run's weight push uses (reload in place)
        process = subprocess.Popen(command, stdout=cli_log, stderr=subprocess.STDOUT,
                                   env={**os.environ, "VLLM_ENABLE_RESPONSES_API_STORE": "1", "VLLM_SERVER_DEV_MODE": "1"},
                                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    deadline = time.monotonic() + STARTUP_S + 30
    try:
        while {"tool-model", "tool-lora"} - _serving(url):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"serve-model did not come up:\n{(logs / 'cli.log').read_text()[-3000:]}")
            try:
                process.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
        yield url
    finally:
        process.send_signal(signal.SIGINT)  # Ctrl-C
        try:
            code = process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    assert code == 0, (logs / "cli.log").read_text()[-3000:]
    assert "stopping vLLM" in (logs / "cli.log").read_text()
    assert not _serving(url)  # the server went down with the command


@contextlib.contextmanager
def _cli_server(args: list[str], address: str) -> Iterator[str]:
    """``python -m coworkenv ARGS`` serving until the block ends; yields what ``address`` (a pattern
    with one group) finds in the first line it prints on stderr, its URL."""
    process = subprocess.Popen([sys.executable, "-m", "coworkenv", *args], stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    line = process.stderr.readline()
    match = re.search(address, line)
    assert match, line
    try:
        yield match.group(1)
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="session")
def cli_server() -> Callable[[list[str], str], contextlib.AbstractContextManager[str]]:
    """Starts a serving coworkenv command (``view``, ``browse``) as a user does; see ``_cli_server``."""
    return _cli_server

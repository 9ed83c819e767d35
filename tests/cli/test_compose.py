"""The top-level compose.yaml, as a user brings it up: `coworkenv compose build` makes the image offline,
docker compose validates the file, a one-shot `synth` job fills the store's volume, `serve` and `view`
come up healthy, a real MCP client lists and calls tools through the composed server with the
bearer token (the episode runs in a bubblewrap sandbox nested in the container), the viewer shows
what synth stored and the episode the client played, and everything comes down again."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

pytestmark = [pytest.mark.docker, pytest.mark.bwrap, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
TOKEN = "compose-" + uuid.uuid4().hex


def compose_command() -> list[str]:
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    pytest.fail("neither `docker compose` nor docker-compose is installed (apt-get install docker-compose)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def stack():
    built = subprocess.run([sys.executable, "-m", "coworkenv", "compose", "build", "--json"], capture_output=True,
                           text=True, timeout=1800)
    assert built.returncode == 0, built.stderr
    assert [i["image"] for i in json.loads(built.stdout)["images"]] == ["coworkenv:local"]
    ports = {"COWORKENV_PORT": str(free_port()), "COWORKENV_VIEW_PORT": str(free_port())}
    env = {**os.environ, **ports, "COWORKENV_TOKEN": TOKEN, "COWORKENV_TASKS": "4"}
    compose = [*compose_command(), "-f", str(ROOT / "compose.yaml"), "-p", f"coworkenv-test-{uuid.uuid4().hex[:8]}"]

    def run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([*compose, *args], env=env, capture_output=True, text=True, timeout=timeout)

    try:
        yield run, ports
    finally:
        down = run("--profile", "jobs", "down", "-v", "--remove-orphans")
        assert down.returncode == 0, down.stderr


def test_the_file_is_valid_and_names_its_services(stack):
    run, _ = stack
    config = run("--profile", "jobs", "--profile", "model", "config", "--services")
    assert config.returncode == 0, config.stderr
    assert set(config.stdout.split()) == {"serve", "view", "model", "synth", "collect", "eval"}
    unset = subprocess.run([*compose_command(), "-f", str(ROOT / "compose.yaml"), "config"], capture_output=True,
                           text=True, env={k: v for k, v in os.environ.items() if k != "COWORKENV_TOKEN"})
    assert unset.returncode != 0 and "COWORKENV_TOKEN" in unset.stderr  # no server without a token


def wait_healthy(run, services: list[str], timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while True:
        ids = run("ps", "-q", *services).stdout.split()
        states = [subprocess.run(["docker", "inspect", "-f", "{{.State.Health.Status}}", i], capture_output=True,
                                 text=True).stdout.strip() for i in ids]
        if len(ids) == len(services) and all(s == "healthy" for s in states):
            return
        assert time.monotonic() < deadline, f"not healthy in {timeout}s: {dict(zip(services, states, strict=False))}"
        time.sleep(1)


def test_synth_then_serve_and_view_come_up_and_answer(stack):
    run, ports = stack
    synth = run("run", "--rm", "synth")
    assert synth.returncode == 0, synth.stderr + synth.stdout
    up = run("up", "-d", "serve", "view")
    assert up.returncode == 0, up.stderr
    wait_healthy(run, ["serve", "view"])
    base = f"http://127.0.0.1:{ports['COWORKENV_PORT']}"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    refused = httpx.get(base + "/tasks", timeout=10)
    assert refused.status_code == 401
    tasks = httpx.get(base + "/tasks", headers=auth, timeout=10).json()
    assert tasks, "synth stored tasks on the shared volume"
    task = tasks[0]["id"]

    async def play() -> list[str]:
        http = httpx2.AsyncClient(headers=auth, timeout=30)
        with anyio.fail_after(120):
            async with Client(streamable_http_client(base + tasks[0]["url"].removesuffix("/mcp") + "/e/compose-test/mcp",
                                                    http_client=http)) as client:
                names = [t.name for t in (await client.list_tools()).tools]
                submitted = await client.call_tool("submit_answer", {"answer": "done"})
                assert not submitted.is_error, submitted
                return names

    names = anyio.run(play)
    assert "submit_answer" in names and len(names) > 3

    view = f"http://127.0.0.1:{ports['COWORKENV_VIEW_PORT']}"
    with urllib.request.urlopen(f"{view}/tasks?status=admitted", timeout=10) as response:
        page = response.read().decode()
    assert all(t["id"] in page for t in tasks)
    with urllib.request.urlopen(f"{view}/episodes?source=live", timeout=10) as response:
        page = response.read().decode()
    assert task in page and "1–1 of 1 episodes" in page  # the episode the MCP client played, read from the volume

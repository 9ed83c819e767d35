"""Hygiene: a server killed with SIGKILL leaves labeled sandboxes that ``cleanup`` finds and removes.

A real ``coworkenv serve`` process (HTTP, each backend) opens an episode for a real MCP client, is
killed with SIGKILL, and ``coworkenv sandbox cleanup`` then removes its episode directories and
containers while keeping those of a process that is alive (this test's own sandbox).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client
from typer.testing import CliRunner

from coworkenv.cli import app
from coworkenv.sandbox import cleanup, create_sandbox
from coworkenv.sandbox._labels import LABEL, LABEL_FILE
from coworkenv.synth import synthesize

pytestmark = pytest.mark.anyio


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def containers_of(pid: int) -> list:
    from coworkenv.sandbox._image import docker_client

    return docker_client().api.containers(all=True, filters={"label": f"coworkenv.owner.pid={pid}"})


async def wait_for_server(base: str, proc: subprocess.Popen) -> None:
    async with httpx.AsyncClient() as http:
        while True:
            assert proc.poll() is None, "the server exited during start-up"
            try:
                if (await http.get(f"{base}/tasks")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await anyio.sleep(0.1)


@pytest.mark.slow
@pytest.mark.parametrize("backend", [pytest.param("bwrap", marks=pytest.mark.bwrap),
                                     pytest.param("docker", marks=[pytest.mark.docker, pytest.mark.bwrap])])
async def test_sigkilled_server_leaves_nothing_that_cleanup_does_not_remove(
        backend: str, host, store_path: Path, tmp_path: Path):
    await synthesize(host, 1, seed=0)
    (task,) = [row["id"] for row in host.store.tasks(status="admitted")]
    spec = host.workspace(host.task(task).workspace_id)
    tool = next(t.name for t in spec.tools if not t.input_schema.get("required"))
    root = tmp_path / "episodes"
    root.mkdir()
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "coworkenv", "serve", "--store", str(store_path), "--port", str(port),
         "--sandbox", backend],
        env={**os.environ, "TMPDIR": str(root)}, cwd=tmp_path,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    alive = None
    try:
        with anyio.fail_after(120):
            base = f"http://127.0.0.1:{port}"
            await wait_for_server(base, server)
            async with Client(f"{base}/t/{task}/e/to-be-killed/mcp") as client:
                result = await client.call_tool(tool, {})
                assert not result.is_error, result
            if backend == "bwrap":
                left = sorted(root.glob(LABEL + "*"))
                assert left and all((d / LABEL_FILE).exists() for d in left)
            else:
                left = containers_of(server.pid)
                assert left, "the server's episode has no labeled container"
            # a sandbox of a live process (this one) in the same place must survive the cleanup
            alive = create_sandbox("bwrap", host.initial_state(spec), root=root)
            await alive.start()
            server.send_signal(signal.SIGKILL)
            server.wait()

            # --die-with-parent took the bwrap processes down; directories and containers remain
            result = CliRunner().invoke(app, ["sandbox", "cleanup", "--root", str(root)])
            assert result.exit_code == 0, result.output
            if backend == "bwrap":
                assert not any(d.exists() for d in left)
                assert all(f"removed directory {d}" in result.output for d in left)
            else:
                assert containers_of(server.pid) == []
                assert "removed container" in result.output
            assert alive.episode_dir.exists() and sorted(root.glob(LABEL + "*")) == [alive.episode_dir]
            assert cleanup(root=root).removed == 0  # nothing left to find
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        if alive is not None:
            await alive.close()


@pytest.mark.slow
@pytest.mark.parametrize("backend", [pytest.param("bwrap", marks=pytest.mark.bwrap),
                                     pytest.param("docker", marks=[pytest.mark.docker, pytest.mark.bwrap])])
async def test_interrupted_server_closes_its_sandboxes(backend: str, host, store_path: Path, tmp_path: Path):
    """Ctrl-C (SIGINT) on a serving process: its episode and its warm pool are gone when it exits."""
    await synthesize(host, 1, seed=0)
    (task,) = [row["id"] for row in host.store.tasks(status="admitted")]
    spec = host.workspace(host.task(task).workspace_id)
    tool = next(t.name for t in spec.tools if not t.input_schema.get("required"))
    root = tmp_path / "episodes"
    root.mkdir()
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "coworkenv", "serve", "--store", str(store_path), "--port", str(port),
         "--sandbox", backend],
        env={**os.environ, "TMPDIR": str(root)}, cwd=tmp_path,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        with anyio.fail_after(120):
            base = f"http://127.0.0.1:{port}"
            await wait_for_server(base, server)
            async with Client(f"{base}/t/{task}/e/interrupted/mcp") as client:
                assert not (await client.call_tool(tool, {})).is_error
            if backend == "bwrap":
                assert list(root.glob(LABEL + "*"))
            else:
                assert containers_of(server.pid)
            server.send_signal(signal.SIGINT)
            while server.poll() is None:
                await anyio.sleep(0.05)
        assert list(root.glob(LABEL + "*")) == []
        if backend == "docker":
            assert containers_of(server.pid) == []
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def test_an_unlabeled_directory_is_judged_by_the_owner_its_name_carries(tmp_path: Path):
    """A process killed between creating an episode directory and labelling it leaves a directory
    whose name still names it: cleanup removes that one and keeps one of a live process."""
    from coworkenv.sandbox._labels import make_episode_dir, process_start

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    start = process_start(dead.pid)
    dead.wait()
    orphan = tmp_path / f"{LABEL}{dead.pid}.{start}-abc123"
    orphan.mkdir()
    (orphan / "workspace").mkdir()
    mine = make_episode_dir(tmp_path, backend="bwrap")
    assert mine.name.startswith(f"{LABEL}{os.getpid()}.")
    (mine / LABEL_FILE).unlink()  # as if this (live) process had not labelled it yet
    legacy = tmp_path / f"{LABEL}oldname"  # no owner in its name, no label, young: kept
    legacy.mkdir()

    report = cleanup(root=tmp_path, docker=False)
    assert report.directories == [str(orphan)]
    assert not orphan.exists() and mine.exists() and legacy.exists()
    assert report.kept == 2

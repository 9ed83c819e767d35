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

from coworkenv._process import process_start
from coworkenv.cli import app
from coworkenv.sandbox import BwrapConfig, BwrapSandbox, CleanupReport, SandboxUnavailable, cleanup, create_sandbox
from coworkenv.sandbox._labels import LABEL, LABEL_FILE, make_episode_dir
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
    (task,) = [row.id for row in host.store.tasks(status="admitted")]
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
                # the warm pool may be making a sandbox right now: its directory gets its label just
                # after it is made (a killed owner's unlabeled directory is judged by its name)
                for _ in range(100):
                    left = sorted(root.glob(LABEL + "*"))
                    if left and all((d / LABEL_FILE).exists() for d in left):
                        break
                    await anyio.sleep(0.05)
                assert left and all((d / LABEL_FILE).exists() for d in left)
            else:
                left = containers_of(server.pid)
                assert left, "the server's episode has no labeled container"
            # a sandbox of a live process (this one) in the same place must survive the cleanup
            alive = create_sandbox("bwrap", host.initial_state(spec), config=BwrapConfig(root=root))
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
    (task,) = [row.id for row in host.store.tasks(status="admitted")]
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


def dead_process() -> tuple[int, str]:
    """The pid and start time of a process that has ended."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    start = process_start(dead.pid)  # a zombie until waited for: its start time is still there
    dead.wait()
    return dead.pid, start


MAKE_EPISODE_DIRS = """
import sys
from pathlib import Path
from coworkenv.sandbox._labels import make_episode_dir
print(*(make_episode_dir(backend, Path(sys.argv[1])) for backend in sys.argv[2:]))
"""


def episode_dirs_of_a_dead_process(root: Path, *backends: str) -> list[Path]:
    """Labeled episode directories, one per backend, made by a process that then ended."""
    made = subprocess.run(
        [sys.executable, "-c", MAKE_EPISODE_DIRS, str(root), *backends],
        capture_output=True, text=True, check=True)
    return [Path(name) for name in made.stdout.split()]


def test_an_unlabeled_directory_is_judged_by_the_owner_its_name_carries(tmp_path: Path):
    """A process killed between creating an episode directory and labelling it leaves a directory
    whose name still names it and its backend: cleanup removes that one and keeps one of a live process."""
    pid, start = dead_process()
    orphan = tmp_path / f"{LABEL}{pid}.{start}-bwrap-abc123"
    older = tmp_path / f"{LABEL}{pid}.{start}-abc123"  # from before names carried the backend
    for directory in (orphan, older):
        (directory / "workspace").mkdir(parents=True)
    mine = make_episode_dir("bwrap", tmp_path)
    assert mine.name.startswith(f"{LABEL}{os.getpid()}.{process_start(os.getpid())}-bwrap-")
    (mine / LABEL_FILE).unlink()  # as if this (live) process had not labelled it yet
    legacy = tmp_path / f"{LABEL}oldname"  # no owner in its name, no label, young: kept
    legacy.mkdir()

    report = cleanup(root=tmp_path, backends=["bwrap"])
    assert report.directories == sorted([str(orphan), str(older)])
    assert not orphan.exists() and not older.exists() and mine.exists() and legacy.exists()
    assert report.kept == 2


def test_each_backend_cleans_up_after_its_own_sandboxes_only(tmp_path: Path):
    """Directories of dead owners are removed by the cleanup of the backend that made them; the
    module's ``cleanup`` runs every backend's and merges what they did into one report."""
    dead_bwrap, dead_docker = episode_dirs_of_a_dead_process(tmp_path, "bwrap", "docker")
    live_bwrap, live_docker = make_episode_dir("bwrap", tmp_path), make_episode_dir("docker", tmp_path)
    pid, start = dead_process()
    unlabeled_docker = tmp_path / f"{LABEL}{pid}.{start}-docker-abc123"
    unlabeled_docker.mkdir()

    report = CleanupReport()
    BwrapSandbox.cleanup(report, root=tmp_path)
    assert report.directories == [str(dead_bwrap)] and report.kept == 1
    assert dead_docker.exists() and unlabeled_docker.exists()

    # every backend's, in one report (the docker backend's directories need no engine; without one
    # its cleanup says it skipped the containers)
    (another_dead_bwrap,) = episode_dirs_of_a_dead_process(tmp_path, "bwrap")
    report = cleanup(root=tmp_path)
    assert sorted(report.directories) == sorted(map(str, (another_dead_bwrap, dead_docker, unlabeled_docker)))
    assert report.kept >= 2  # the live directories (and any live process's containers)
    assert sorted(tmp_path.iterdir()) == sorted([live_bwrap, live_docker])

    report = cleanup(root=tmp_path, backends=["bwrap"], everything=True)  # also those of live owners
    assert report.directories == [str(live_bwrap)] and live_docker.exists()


def test_cleanup_names_the_known_backends_for_an_unknown_one(tmp_path: Path):
    with pytest.raises(SandboxUnavailable, match="unknown sandbox backend 'qemu'.*bwrap, docker"):
        cleanup(root=tmp_path, backends=["qemu"])

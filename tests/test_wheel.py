"""The package works outside the repository: ``python -m build`` makes a wheel holding every file the
package reads (its modules, the sandbox runner, the Dockerfile, the committed assets), and that wheel,
installed with its training extra into a fresh virtual environment, runs ``coworkenv demo``, exports a
Hugging Face dataset and serves a task to an MCP client, from a folder outside the checkout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import anyio
import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slow, pytest.mark.bwrap]

CLIENT = """
import sys
import anyio
from mcp import Client

async def main() -> None:
    async with Client(sys.argv[1]) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        print(len(names), "tools")
        result = await client.call_tool("submit_answer", {"answer": "done"})
        print("error" if result.is_error else "submitted")

anyio.run(main)
"""


def _source_files() -> list[str]:
    """The files a build reads (the package, pyproject.toml, the README) as a fresh clone of the checkout
    would have them: tracked, or new and not ignored."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the git checkout")
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT,
                         capture_output=True, check=True).stdout.decode()
    return [name for name in out.split("\0") if (name.startswith("coworkenv/") or name in ("pyproject.toml", "README.md"))
            and (ROOT / name).is_file()]


def _clean_env(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    return {**env, "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", "HF_HUB_OFFLINE": "1"}


def _run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def test_the_wheel_installs_and_serves_outside_the_repository(tmp_path):
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    files = _source_files()
    source = tmp_path / "src"
    for name in files:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    _run([sys.executable, "-m", "build", "--outdir", str(tmp_path / "dist"), str(source)], timeout=300)
    (wheel,) = (tmp_path / "dist").glob("coworkenv-*.whl")

    # every file the package holds is in the wheel: package data a module reads is not left behind
    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    missing = [name for name in files if name.startswith("coworkenv/") and name not in in_wheel]
    assert not missing, f"not in the wheel (add them to [tool.setuptools.package-data]): {missing}"

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], timeout=120)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    _run([*pip, "torch==2.13.0"], timeout=600)  # the CPU build first: the extra's torch pin then installs nothing
    _run([*pip, f"{wheel}[train]"], timeout=600)

    work = tmp_path / "elsewhere"  # not the checkout: nothing can be found there
    work.mkdir()
    env = _clean_env(venv)
    coworkenv = str(venv / "bin" / "coworkenv")
    found = _run([str(venv / "bin" / "python"), "-c", "import coworkenv; print(coworkenv.__file__)"], cwd=work, env=env)
    assert found.stdout.strip().startswith(str(venv)), found.stdout

    demo = json.loads(_run([coworkenv, "demo", "-n", "4", "--dir", "runs", "--json"], cwd=work, env=env,
                           timeout=300).stdout)
    assert demo["tasks_admitted"] >= 1 and demo["exported_rows"] >= 1 and (work / demo["report"]).exists(), demo
    exported = json.loads(_run([coworkenv, "export", "sft", "--store", "runs/coworkenv.db", "--format", "hf",
                                "--out", "runs/hf", "--json"], cwd=work, env=env, timeout=120).stdout)
    assert exported["rows"] == demo["exported_rows"] and (work / "runs" / "hf" / "README.md").exists()

    port = _free_port()
    server = subprocess.Popen([coworkenv, "serve", "--store", "runs/coworkenv.db", "--port", str(port)], cwd=work,
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        tasks = _wait_for_tasks(server, f"http://127.0.0.1:{port}")
        url = f"http://127.0.0.1:{port}/t/{tasks[0]['id']}/e/wheel-1/mcp"
        (work / "client.py").write_text(CLIENT)
        played = _run([str(venv / "bin" / "python"), "client.py", url], cwd=work, env=env, timeout=120)
        assert played.stdout.split()[-1] == "submitted" and int(played.stdout.split()[0]) > 1, played.stdout
    finally:
        server.terminate()
        server.wait(timeout=30)
    listed = json.loads(_run([coworkenv, "episodes", "list", "--store", "runs/coworkenv.db", "--source", "live",
                              "--json"], cwd=work, env=env).stdout)
    assert [e["episode_key"] for e in listed] == ["wheel-1"] and listed[0]["status"] == "ended", listed
    assert listed[0]["verdict"] is not None  # graded where it ran


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_tasks(server: subprocess.Popen, base: str) -> list[dict]:
    async def wait() -> list[dict]:
        with anyio.fail_after(60):
            while True:
                if server.poll() is not None:
                    pytest.fail(f"coworkenv serve exited: {server.stderr.read() if server.stderr else ''}")
                try:
                    return httpx.get(f"{base}/tasks", timeout=1).json()
                except httpx.TransportError:
                    await anyio.sleep(0.1)

    return anyio.run(wait)

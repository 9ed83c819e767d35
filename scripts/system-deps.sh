#!/usr/bin/env bash
# Install the system packages coworkenv needs (Debian/Ubuntu): bubblewrap for the sandbox.
set -euo pipefail
need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v python3 >/dev/null 2>&1 || need+=(python3 python3-venv)
command -v npm >/dev/null 2>&1 || need+=(npm)  # the MCP conformance suite and Inspector (tests)
if [ "${WITH_DOCKER:-0}" = 1 ]; then  # the docker sandbox backend and its offline image build
  command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
  command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
  # compose.yaml's test brings the stack up with Debian's docker-compose (or the `docker compose` plugin)
  docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
fi
if [ "${WITH_BROWSER:-0}" = 1 ]; then  # headless Chromium: the report and viewer tests render pages in it
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
fi
[ ${#need[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "installing system packages: ${need[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null

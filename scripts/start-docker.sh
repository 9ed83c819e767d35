#!/usr/bin/env bash
# Start the Docker engine in the background when it is installed but not answering (CI, containers
# without systemd), and wait until `docker info` answers. Does nothing when it already answers.
set -euo pipefail
command -v docker >/dev/null 2>&1 || { echo "docker is not installed (apt-get install docker.io)" >&2; exit 1; }
docker info >/dev/null 2>&1 && exit 0
command -v dockerd >/dev/null 2>&1 || { echo "dockerd is not installed (apt-get install docker.io)" >&2; exit 1; }
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
log="${DOCKERD_LOG:-/var/log/dockerd.log}"
$SUDO sh -c "nohup dockerd >'$log' 2>&1 &"
for _ in $(seq 1 60); do
  docker info >/dev/null 2>&1 && exit 0
  sleep 1
done
echo "dockerd did not answer within 60 s; see $log" >&2
tail -20 "$log" >&2 || true
exit 1

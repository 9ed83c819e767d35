"""Labels on what sandboxes leave on the host, and the cleanup of what a dead process left behind.

Every episode directory (``coworkenv-ep-*``) holds ``label.json`` and every container carries
Docker labels naming the process that owns it: host name, pid and the pid's start time (so a
reused pid is not taken for the owner). ``cleanup`` removes what belongs to a process that is gone.
An episode directory's name also carries its owner's pid and start time
(``coworkenv-ep-<pid>.<start>-<random>``), so one whose owner was killed between creating it and
writing its label is still known to be an orphan.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

LABEL = "coworkenv-ep-"  # prefix of every episode directory
LABEL_FILE = "label.json"
DOCKER_LABEL = "coworkenv.sandbox"  # every container of a docker sandbox has it
OWNER_LABELS = ("coworkenv.owner.host", "coworkenv.owner.pid", "coworkenv.owner.start")


def process_start(pid: int) -> str:
    """The start time of ``pid`` in clock ticks since boot, or "" when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def owner() -> dict[str, str]:
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": str(pid), "start": process_start(pid)}


def docker_labels(**extra: str) -> dict[str, str]:
    me = owner()
    return {DOCKER_LABEL: "1", **dict(zip(OWNER_LABELS, (me["host"], me["pid"], me["start"]))), **extra}


def is_orphan(host: str, pid: str, start: str) -> bool:
    """Whether the owner named by a label is gone (only decidable for owners on this host)."""
    if host != socket.gethostname():
        return False
    try:
        alive = process_start(int(pid))
    except ValueError:
        return True
    return alive == "" or alive != start


def write_label(directory: Path, **extra: str) -> None:
    """Write ``label.json`` whole or not at all (a kill mid-write leaves no half label)."""
    partial = directory / (LABEL_FILE + ".partial")
    partial.write_text(json.dumps({**owner(), "created": time.time(), **extra}))
    os.replace(partial, directory / LABEL_FILE)


def make_episode_dir(root: Path | None = None, **extra: str) -> Path:
    """A new labeled episode directory under ``root`` (the system's temporary directory by default)."""
    me = owner()
    directory = Path(tempfile.mkdtemp(prefix=f"{LABEL}{me['pid']}.{me['start']}-", dir=root))
    write_label(directory, **extra)
    return directory


def _owner_from_name(directory: Path) -> tuple[str, str] | None:
    """The (pid, start) that a directory's name carries, or None for a name without them."""
    pid, dot, rest = directory.name[len(LABEL):].partition(".")
    start, dash, _ = rest.partition("-")
    if dot and dash and pid.isdigit() and start.isdigit():
        return pid, start
    return None


def default_root() -> Path:
    return Path(tempfile.gettempdir())


@dataclass
class CleanupReport:
    directories: list[str] = field(default_factory=list)
    containers: list[str] = field(default_factory=list)
    kept: int = 0  # labeled things whose owner is alive (or on another host)
    notes: list[str] = field(default_factory=list)

    @property
    def removed(self) -> int:
        return len(self.directories) + len(self.containers)


def cleanup(*, root: Path | None = None, docker: bool = True, everything: bool = False) -> CleanupReport:
    """Remove episode directories and containers whose owner process is gone (all, with ``everything``)."""
    report = CleanupReport()
    _cleanup_directories(Path(root or default_root()), everything, report)
    if docker:
        _cleanup_docker(everything, report)
    return report


def _cleanup_directories(root: Path, everything: bool, report: CleanupReport) -> None:
    if not root.is_dir():
        return
    for directory in sorted(root.glob(LABEL + "*")):
        if not directory.is_dir() or directory.is_symlink():
            continue
        try:
            label = json.loads((directory / LABEL_FILE).read_text())
            orphan = is_orphan(str(label.get("host")), str(label.get("pid")), str(label.get("start")))
        except (OSError, ValueError):
            named = _owner_from_name(directory)
            if named is not None:
                # No label yet: its owner (named by the directory) is creating it, or died doing so.
                orphan = is_orphan(socket.gethostname(), *named)
            else:
                # A name without an owner, from before owners were named: removed only once it is
                # old enough not to be one being created right now.
                try:
                    orphan = time.time() - directory.stat().st_mtime > 3600
                except FileNotFoundError:
                    continue  # its owner closed it meanwhile
        if orphan or everything:
            shutil.rmtree(directory, ignore_errors=True)
            report.directories.append(str(directory))
        else:
            report.kept += 1


def _cleanup_docker(everything: bool, report: CleanupReport) -> None:
    from ._base import SandboxUnavailable
    from ._image import docker_client

    try:
        client = docker_client()
    except SandboxUnavailable as exc:
        report.notes.append(f"docker skipped: {exc}")
        return
    import docker

    # One listing call (the SDK's containers.list fetches each one again, racing their removal).
    for container in client.api.containers(all=True, filters={"label": DOCKER_LABEL}):
        labels = container.get("Labels") or {}
        name = (container.get("Names") or [container["Id"][:12]])[0].lstrip("/")
        if everything or is_orphan(*(labels.get(k, "") for k in OWNER_LABELS)):
            try:
                client.api.remove_container(container["Id"], force=True)
                report.containers.append(name)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:
                if "already in progress" not in str(exc):
                    report.notes.append(f"could not remove container {name}: {exc}")
        else:
            report.kept += 1

"""Labels on what sandboxes leave on the host, and how to tell what a dead process left behind.

Every episode directory (``coworkenv-ep-*``) holds ``label.json`` and every container carries
Docker labels naming the process that owns it: host name, pid and the pid's start time (so a
reused pid is not taken for the owner), and the backend that made it. Each backend's ``cleanup``
removes what of its own belongs to a process that is gone (``cleanup_directories`` here for the
episode directories). An episode directory's name also carries its owner's pid and start time and
its backend (``coworkenv-ep-<pid>.<start>-<backend>-<random>``), so one whose owner was killed
between creating it and writing its label is still known to be an orphan, and whose.
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

from .._process import is_orphan, this_process

LABEL = "coworkenv-ep-"  # prefix of every episode directory
LABEL_FILE = "label.json"
DOCKER_LABEL = "coworkenv.sandbox"  # every container of a docker sandbox has it
OWNER_LABELS = ("coworkenv.owner.host", "coworkenv.owner.pid", "coworkenv.owner.start")


owner = this_process


def docker_labels(**extra: str) -> dict[str, str]:
    me = owner()
    return {DOCKER_LABEL: "1", **dict(zip(OWNER_LABELS, (me["host"], me["pid"], me["start"]), strict=True)), **extra}


def write_label(directory: Path, **extra: str) -> None:
    """Write ``label.json`` whole or not at all (a kill mid-write leaves no half label)."""
    partial = directory / (LABEL_FILE + ".partial")
    partial.write_text(json.dumps({**owner(), "created": time.time(), **extra}))
    os.replace(partial, directory / LABEL_FILE)


def make_episode_dir(backend: str, root: Path | None = None, **extra: str) -> Path:
    """A new labeled episode directory of ``backend`` under ``root`` (the system's temporary directory
    by default)."""
    me = owner()  # backend names have no "." or "-": the name parses back (``_from_name``)
    directory = Path(tempfile.mkdtemp(prefix=f"{LABEL}{me['pid']}.{me['start']}-{backend}-", dir=root))
    write_label(directory, backend=backend, **extra)
    return directory


def _from_name(directory: Path) -> tuple[str, str, str | None] | None:
    """The (pid, start, backend) that a directory's name carries (backend None in names from before
    they carried one), or None for a name without an owner."""
    pid, dot, rest = directory.name[len(LABEL):].partition(".")
    start, dash, rest = rest.partition("-")
    backend, named, _ = rest.partition("-")  # mkdtemp's random tail has no "-"
    if dot and dash and pid.isdigit() and start.isdigit():
        return pid, start, backend if named else None
    return None


def _read_label(directory: Path) -> dict | None:
    """A directory's label, or None while it has none (or one that is not a label)."""
    try:
        label = json.loads((directory / LABEL_FILE).read_text())
    except (OSError, ValueError):
        return None
    return label if isinstance(label, dict) else None


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


def cleanup_directories(root: Path, backend: str, everything: bool, report: CleanupReport, *,
                        unnamed: bool = False) -> None:
    """Remove ``backend``'s episode directories under ``root`` whose owner is gone (all, with ``everything``).

    A directory's backend is in its label and in its name; one that names none (made before names
    carried it, and never labelled) is judged here only when ``unnamed``, so that one backend does.
    """
    if not root.is_dir():
        return
    for directory in sorted(root.glob(LABEL + "*")):
        if not directory.is_dir() or directory.is_symlink():
            continue
        named, label = _from_name(directory), _read_label(directory)
        whose = (label or {}).get("backend") or (named[2] if named else None)
        if whose != backend and not (whose is None and unnamed):
            continue
        if label is not None:
            orphan = is_orphan(str(label.get("host")), str(label.get("pid")), str(label.get("start")))
        elif named is not None:
            # No label yet: its owner (named by the directory) is creating it, or died doing so.
            orphan = is_orphan(socket.gethostname(), *named[:2])
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

"""Which process owns something, and whether it is gone.

What a process leaves behind (a sandbox's directory or container, an episode, an evaluation or a
training recorded as ``running``, a collector's claim on a task) names its owner by host name, pid and
the pid's start time (so a reused pid is not taken for the owner): ``host:pid:start`` as text. Whether
that owner is gone is decidable on its own host only; elsewhere it is taken as alive.
"""

from __future__ import annotations

import os
import socket


def process_start(pid: int) -> str:
    """The start time of ``pid`` in clock ticks since boot, or "" when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def this_process() -> dict[str, str]:
    """This process: its ``host``, ``pid`` and ``start``."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": str(pid), "start": process_start(pid)}


def process_label() -> str:
    """This process as an owner label: ``host:pid:start``."""
    me = this_process()
    return f"{me['host']}:{me['pid']}:{me['start']}"


def is_orphan(host: str, pid: str, start: str) -> bool:
    """Whether the owner named by its host, pid and start is gone (only decidable for owners on this host)."""
    if host != socket.gethostname():
        return False
    try:
        alive = process_start(int(pid))
    except ValueError:
        return True
    return alive == "" or alive != start


def label_gone(label: str) -> bool:
    """Whether the owner an owner label (``host:pid:start``) names is gone; False for one that does not
    parse (nothing tells) and for one of another host."""
    if label.count(":") < 2:
        return False
    host, pid, start = label.rsplit(":", 2)
    return is_orphan(host, pid, start)

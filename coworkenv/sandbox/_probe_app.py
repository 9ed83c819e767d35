"""The conformance suite's ``probe`` app, whose tools misbehave on purpose, and the initial state it runs over.

Written into an ``apps`` package of its own (``write_probe_apps``) that a sandbox of any backend
loads as it loads the built-in apps; ``coworkenv doctor``'s trial and the latency benchmark use it too.
"""

from __future__ import annotations

import sqlite3
import textwrap
from pathlib import Path

PROBE = textwrap.dedent('''
    """A misbehaving app for the sandbox conformance suite. Standard library only."""

    import os
    import signal
    import socket
    import sqlite3
    import stat
    import sys
    import tempfile
    import threading
    import time

    from ._base import ToolFailure

    _MEMORY = {}


    def _try(fn):
        try:
            return {"ok": True, "value": fn(), "error": ""}
        except Exception as exc:
            return {"ok": False, "value": None, "error": repr(exc)}


    def _read(path):
        with open(path, "rb") as f:
            return f.read(1 << 20).decode(errors="replace")


    def _write(path, text):
        with open(path, "w") as f:
            f.write(text)
        return True


    def _connect(host, port):
        with socket.create_connection((host, port), timeout=2):
            return True


    def _scan_proc(marker):
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            for part in ("environ", "cmdline"):
                try:
                    with open(f"/proc/{name}/{part}", "rb") as f:
                        if marker.encode() in f.read():
                            found.append(name)
                except OSError:
                    pass
        return found


    def handle(conn, tool, args):
        if tool == "put":
            conn.execute("CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v TEXT)")
            conn.execute("INSERT OR REPLACE INTO kv VALUES (?, ?)", (args["key"], args["value"]))
            return {"stored": args["key"]}
        if tool == "put_bytes":
            conn.execute("INSERT OR REPLACE INTO kv VALUES (?, ?)", (args["key"], bytes(args["size"])))
            return {"stored": args["key"]}
        if tool == "get":
            row = conn.execute("SELECT v FROM kv WHERE k = ?", (args["key"],)).fetchone()
            return {"value": row[0] if row else None}
        if tool == "fail":
            raise ToolFailure(args["message"])
        if tool == "put_then_fail":
            conn.execute("INSERT OR REPLACE INTO kv VALUES (?, ?)", (args["key"], args["value"]))
            raise ToolFailure("failed after writing")
        if tool == "close_connection":
            conn.close()
            return {"closed": True}
        if tool == "wal":
            return {"mode": conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]}
        if tool == "pid":
            return {"pid": os.getpid()}
        if tool == "forge":  # an answer for the runner, written into every pipe this process may write
            for fd in range(3, 64):
                try:
                    if stat.S_ISFIFO(os.fstat(fd).st_mode):
                        os.write(fd, b'{"ok": true}\\n')
                except OSError:
                    pass
            time.sleep(0.2)  # read as this call's reply, the real one left in the pipe for what comes next
            return {"forged": True}
        if tool == "remember":
            _MEMORY["value"] = args["value"]
            return {"remembered": True}
        if tool == "recall":
            return {"value": _MEMORY.get("value")}
        if tool == "haunt":
            scribbling = threading.Event()
            def scribble():
                with open("haunt.log", "a") as f:
                    while True:
                        f.write("x")
                        f.flush()
                        scribbling.set()
                        time.sleep(0.001)
            threading.Thread(target=scribble, daemon=True).start()
            return {"started": scribbling.wait(5)}
        if tool == "where":
            return {"cwd": os.getcwd(), "files": sorted(os.listdir(".")), "uid": os.getuid(),
                    "state_mode": os.stat("state.db").st_mode & 0o7777 if os.path.exists("state.db") else None,
                    "tmp": sorted(os.listdir(tempfile.gettempdir())), "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())}
        if tool == "spin":
            while True:
                pass
        if tool == "sleep":
            time.sleep(args["seconds"])
            return {"slept": args["seconds"]}
        if tool == "abort":
            os.abort()
        if tool == "bomb":
            hog = []
            while True:
                hog.append(bytearray(8 << 20))
        if tool == "forkbomb":
            while True:
                try:
                    os.fork()
                except OSError:
                    pass
        if tool == "linger":
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    time.sleep(600)
                os._exit(0)
            return {"started": True}
        if tool == "huge":
            return {"data": "x" * args["size"]}
        if tool == "print":
            sys.stdout.write(args["text"] * args.get("times", 1))
            sys.stdout.flush()
            sys.stderr.write("e" * args["stderr_bytes"])
            sys.stderr.flush()
            return {"printed": True}
        if tool == "kill_runner":
            os.kill(os.getppid(), signal.SIGKILL)
            time.sleep(1)
            return {"runner_survived": True}
        if tool == "connect":
            return _try(lambda: _connect(args["host"], args["port"]))
        if tool == "resolve":
            return _try(lambda: socket.getaddrinfo(args["name"], 80))
        if tool == "read":
            return _try(lambda: _read(args["path"]))
        if tool == "write":
            return _try(lambda: _write(args["path"], args["text"]))
        if tool == "sql":
            conn.executescript(args["sql"])
            return {"done": True}
        if tool == "replace_state":
            how = args["how"]
            if how == "chmod":
                os.chmod("state.db", 0o444)
            elif how == "hardlink":
                os.link("state.db", "state-link.db")
            else:
                os.rename("state.db", "state-old.db")
                if how == "symlink":
                    os.symlink("state-old.db", "state.db")
                else:
                    with open("state-old.db", "rb") as src, open("state.db", "wb") as dst:
                        dst.write(src.read())
            return {"replaced": how}
        if tool == "symlink":
            os.symlink(args["target"], args["name"])
            return {"linked": args["name"]}
        if tool == "scan_proc":
            return {"found": _scan_proc(args["marker"])}
        raise ToolFailure("unknown tool " + repr(tool))
''')


def write_probe_apps(directory: Path) -> Path:
    """An ``apps`` package with the probe app in ``directory``; returns its path."""
    apps = directory / "apps"
    apps.mkdir(parents=True, exist_ok=True)
    (apps / "__init__.py").write_text("")
    (apps / "_base.py").write_text("class ToolFailure(Exception):\n    pass\n")
    (apps / "probe.py").write_text(PROBE)
    for path in (apps, *apps.iterdir()):  # readable by a sandbox's non-root user
        path.chmod(0o755 if path.is_dir() else 0o644)
    return apps


def write_initial_state(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT)")
    conn.execute("INSERT INTO kv VALUES ('seeded', 'yes')")
    conn.commit()
    conn.close()
    path.chmod(0o644)
    return path


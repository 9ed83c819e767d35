"""The conformance and escape suite every sandbox backend must pass, shipped with the package.

Each check is an async function of a ``Bench`` (sandboxes of one backend over a ``probe`` app
whose tools misbehave on purpose, a real SQLite initial state, and a scratch directory on the host)
that raises ``AssertionError`` naming what went wrong. ``CONFORMANCE`` covers the interface
(tool calls, files, reset and restore, limits, isolation between episodes); ``ESCAPES`` covers abuse (network,
host files, writes outside the workspace, fork and memory bombs, endless loops, huge output, path
tricks in the file tools, killing the runner). Every escape case also checks that the abused
sandbox and a bystander sandbox (another episode) keep serving.

Run them all with ``await run_checks("docker")``, or one by one (the tests parametrize over both).
"""
# pyright: reportOptionalSubscript=false
# (the checks below read ``outcome.result[...]`` after asserting ``outcome.ok``; a None result fails them anyway)

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._backends import backend_class, create_sandbox
from ._base import Limits, Sandbox, SandboxConfig, SandboxError, ToolOutcome

# Roomy in time, so that a loaded machine cannot turn a crash into a wall-clock timeout; small in
# memory and processes, so that the bombs go off fast.
LIMITS = Limits(cpu_s=3, wall_s=20, mem_mb=256, pids=32)
SPIN = LIMITS.model_copy(update={"cpu_s": 1})  # an endless loop ends on CPU time, not wall clock
TIGHT = LIMITS.model_copy(update={"wall_s": 1.5})  # a sleeping tool ends on wall clock

PROBE = textwrap.dedent('''
    """A misbehaving app for the sandbox conformance suite. Standard library only."""

    import os
    import signal
    import socket
    import sqlite3
    import stat
    import sys
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
                    "tmp": sorted(os.listdir("/tmp")), "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())}
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


@dataclass
class Bench:
    """Sandboxes of one backend over the probe app, and a scratch directory standing for the host.

    ``config`` is the backend's own (its defaults when None); the bench puts the probe app in it.
    """

    backend: str
    host_dir: Path
    config: SandboxConfig | None = None
    started: list[Sandbox] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.apps_dir = write_probe_apps(self.host_dir / "lib")
        config = self.config or backend_class(self.backend).config_type()
        self.config = config.model_copy(update={"apps_dir": self.apps_dir})
        self.initial_state = write_initial_state(self.host_dir / "initial.db")
        self.store_file = self.host_dir / "coworkenv.db"
        self.store_file.write_bytes(b"SQLite format 3\x00 secret store " + uuid.uuid4().hex.encode())
        # A host process with a marker in its command line: a sandbox must not see it in /proc.
        self.marker = f"coworkenv-decoy-{uuid.uuid4().hex}"
        self.decoy = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()", self.marker],
                                      stdin=subprocess.PIPE)

    async def sandbox(self, limits: Limits = LIMITS) -> Sandbox:
        sandbox = create_sandbox(self.backend, self.initial_state, limits=limits, config=self.config)
        self.started.append(sandbox)
        await sandbox.start()
        return sandbox

    async def close(self) -> None:
        for sandbox in self.started:
            await sandbox.close()
        self.started.clear()
        self.decoy.kill()
        self.decoy.wait()


async def probe(sandbox: Sandbox, tool: str, **args: Any) -> ToolOutcome:
    return await sandbox.call_tool("probe", tool, args)


async def value(sandbox: Sandbox, key: str) -> Any:
    outcome = await probe(sandbox, "get", key=key)
    assert outcome.ok, outcome
    return outcome.result["value"]


async def serving(sandbox: Sandbox, key: str = "seeded", expected: Any = "yes") -> None:
    """The sandbox still answers calls and still holds its state."""
    assert await value(sandbox, key) == expected, f"sandbox lost its state: {key} != {expected!r}"


def expect_error(outcome: ToolOutcome, kind: str, *words: str) -> None:
    assert (outcome.ok, outcome.kind) == (False, kind), f"expected a {kind} error, got {outcome}"
    for word in words:
        assert word in outcome.error, f"{word!r} not in {outcome.error!r}"


# --------------------------------------------------------------------------- conformance


async def check_tool_calls(bench: Bench) -> None:
    sb = await bench.sandbox()
    where = await probe(sb, "where")
    assert where.ok, where
    assert where.result["cwd"] == "/workspace" and where.result["files"] == ["state.db"], where.result
    assert await value(sb, "seeded") == "yes"
    assert (await probe(sb, "put", key="a", value="1")).ok
    assert await value(sb, "a") == "1"
    expect_error(await probe(sb, "fail", message="no message with id 'm99'"), "tool", "no message with id 'm99'")
    missing = await sb.call_tool("nosuchapp", "x", {})
    expect_error(missing, "crash", "nosuchapp")
    # A line on stdout that looks like a reply is not taken for one; a flood on stderr does not block.
    forged = '{"id": 999, "ok": true, "result": {"forged": 1}}\n'
    printed = await probe(sb, "print", text=forged, times=1000, stderr_bytes=8 << 20)
    assert printed.ok and printed.result == {"printed": True}, printed
    assert await value(sb, "a") == "1"


async def check_files(bench: Bench) -> None:
    sb = await bench.sandbox()
    await sb.write_file("notes/deep/a.txt", b"\x00binary\xff")
    assert await sb.read_file("notes/deep/a.txt") == b"\x00binary\xff"
    assert await sb.read_file("notes/../notes/deep/a.txt") == b"\x00binary\xff"
    assert await sb.read_file("state.db") == bench.initial_state.read_bytes()
    written = await probe(sb, "write", path="/workspace/from_tool.txt", text="hello")
    assert written.ok and written.result["ok"], written
    assert await sb.read_file("from_tool.txt") == b"hello"
    try:
        await sb.read_file("nope.txt")
    except FileNotFoundError:
        pass
    else:
        raise AssertionError("reading a missing file did not raise FileNotFoundError")


async def check_reset_restores_exactly(bench: Bench) -> None:
    sb = await bench.sandbox()
    assert (await probe(sb, "put", key="seeded", value="changed")).ok
    assert (await probe(sb, "put", key="new", value="row")).ok
    await sb.write_file("extra/file.txt", b"extra")
    assert (await probe(sb, "write", path="/tmp/scratch.txt", text="left over")).result["ok"]
    assert (await probe(sb, "linger")).ok
    await sb.reset()
    assert await sb.read_file("state.db") == bench.initial_state.read_bytes(), "state.db differs after reset"
    where = await probe(sb, "where")
    assert where.result["files"] == ["state.db"], where.result
    assert where.result["tmp"] == [], f"/tmp kept {where.result['tmp']} across a reset"
    assert await value(sb, "seeded") == "yes" and await value(sb, "new") is None
    await sb.reset()  # twice in a row is fine
    assert await sb.read_file("state.db") == bench.initial_state.read_bytes()


async def check_read_changes(bench: Bench) -> None:
    """A file read back as its changes over the initial state is the file, whether it changed, grew,
    shrank or not at all; given the wrong initial content, the whole file is read instead."""
    sb = await bench.sandbox()
    initial = bench.initial_state.read_bytes()
    assert await sb.read_changed_file("state.db", initial) == initial
    assert (await probe(sb, "put", key="seeded", value="changed")).ok
    assert (await probe(sb, "put_bytes", key="big", size=50_000)).ok  # the file grows
    assert await sb.read_changed_file("state.db", initial) == await sb.read_file("state.db")
    assert await sb.read_changed_file("state.db", b"another file") == await sb.read_file("state.db")
    await sb.write_file("state.db", initial[:4096])  # shorter than it was
    assert await sb.read_changed_file("state.db", initial) == initial[:4096]


async def check_resets_after_anything(bench: Bench) -> None:
    """Whatever an episode did to the state file (rows, tables, the journal mode, its mode bits, the
    file itself replaced, linked or turned into a link), after a reset each call sees the initial
    state and its changes are recorded against it, reset after reset."""
    await _after_anything(bench, "reset")


async def check_restores_after_anything(bench: Bench) -> None:
    """The same for ``restore`` (the episodes of one task played one after another): whatever an
    episode did, the next sees the initial state, its changes recorded against it."""
    await _after_anything(bench, "restore")


async def check_restore_keeps_a_clean_worker(bench: Bench) -> None:
    """``restore`` puts back the state file (no page of the episode's left in what the next call
    reads), the workspace and the scratch dirs, in the same worker process; a worker that crashed
    or left a thread behind is replaced as a ``reset`` would."""
    sb = await bench.sandbox()
    pid = (await probe(sb, "pid")).result["pid"]
    assert (await probe(sb, "put", key="seeded", value="changed")).ok
    assert (await probe(sb, "put", key="new", value="row")).ok
    assert await value(sb, "new") == "row"  # in the worker's page cache
    await sb.write_file("extra/file.txt", b"extra")
    assert (await probe(sb, "write", path="/tmp/scratch.txt", text="left over")).result["ok"]
    await sb.restore()
    assert not sb.used
    assert await sb.read_file("state.db") == bench.initial_state.read_bytes(), "state.db differs after restore"
    assert (await probe(sb, "pid")).result["pid"] == pid, "restore replaced a clean worker"
    assert await value(sb, "seeded") == "yes" and await value(sb, "new") is None, "a restored state kept a write"
    where = await probe(sb, "where")
    assert where.result["files"] == ["state.db"] and where.result["tmp"] == [], where.result
    changed = await probe(sb, "put", key="seeded", value="again")
    assert changed.changes is not None and [(r["op"], r["old"], r["new"]) for r in changed.changes["rows"]] == [
        ("delete", {"k": "seeded", "v": "yes"}, None), ("insert", None, {"k": "seeded", "v": "again"})], changed.changes
    assert (await probe(sb, "put", key="forged", value="kept?")).ok
    await probe(sb, "forge")  # a line in the reply pipe that passes for the call's reply; the real one is left
    await sb.restore()
    assert await sb.read_file("state.db") == bench.initial_state.read_bytes(), "a forged answer passed for a restore"
    assert await value(sb, "forged") is None, "a call after a restore got a reply meant for another request"
    expect_error(await probe(sb, "abort"), "crash", "SIGABRT")
    crashed = (await probe(sb, "pid")).result["pid"]
    assert (await probe(sb, "haunt")).result == {"started": True}
    await sb.restore()
    assert (await probe(sb, "pid")).result["pid"] != crashed, "restore kept a worker with a thread left running"
    assert await sb.read_file("state.db") == bench.initial_state.read_bytes()
    await serving(sb)


async def check_restore_to_a_kept_state(bench: Bench) -> None:
    """``keep_state`` keeps the state as it is; ``restore(kept=True)`` puts exactly that back in the
    same worker (the sandbox then counts as used: a pool resets it), as often as asked, while a plain
    ``restore`` still gives the initial state. A kept copy a tool changed, or none (after a reset),
    gives the initial state and says so."""
    sb = await bench.sandbox()
    initial = bench.initial_state.read_bytes()
    pid = (await probe(sb, "pid")).result["pid"]
    assert (await probe(sb, "put", key="seeded", value="reference")).ok
    kept_bytes = await sb.read_file("state.db")
    assert kept_bytes != initial
    assert await sb.keep_state()
    for _ in range(2):
        assert (await probe(sb, "put", key="extra", value="probe")).ok
        assert (await probe(sb, "write", path="/tmp/scratch.txt", text="left over")).result["ok"]
        assert await sb.restore(kept=True)
        assert sb.used, "a sandbox holding a kept state must count as used"
        assert await sb.read_file("state.db") == kept_bytes, "the kept state did not come back exactly"
        assert await value(sb, "seeded") == "reference" and await value(sb, "extra") is None
        assert "scratch.txt" not in (await probe(sb, "where")).result["tmp"]
        assert (await probe(sb, "pid")).result["pid"] == pid, "a restore to the kept state replaced a clean worker"
    assert not await sb.restore() and not sb.used
    assert await sb.read_file("state.db") == initial
    assert await sb.restore(kept=True)  # still kept after a plain restore
    assert await sb.read_file("state.db") == kept_bytes
    kept_dir = next(name for name in (await probe(sb, "where")).result["tmp"] if name.startswith("coworkenv-kept-"))
    assert (await probe(sb, "write", path=f"/tmp/{kept_dir}/state.db", text="tampered")).result["ok"]
    assert not await sb.restore(kept=True), "a kept copy a tool changed was restored"
    assert await sb.read_file("state.db") == initial and await value(sb, "seeded") == "yes"
    assert await sb.keep_state()
    await sb.reset()
    assert not await sb.restore(kept=True), "a reset left a kept state behind"
    assert await sb.read_file("state.db") == initial
    await serving(sb)


async def _after_anything(bench: Bench, op: str) -> None:
    sb = await bench.sandbox()
    initial = bench.initial_state.read_bytes()
    episodes = [
        [("put", {"key": "seeded", "value": "changed"})],
        [("sql", {"sql": "CREATE TABLE extra (x); INSERT INTO extra VALUES (1); DROP TABLE kv;"})],
        [("wal", {}), ("put", {"key": "w", "value": "1"})],
        [("replace_state", {"how": "chmod"})],
        [("replace_state", {"how": "hardlink"}), ("put", {"key": "l", "value": "1"})],
        [("replace_state", {"how": "copy"}), ("put", {"key": "c", "value": "1"})],
        [("replace_state", {"how": "symlink"})],
        [("put_then_fail", {"key": "f", "value": "1"})],
        [],
    ]
    modes: dict[str, int] = {}
    for number, calls in enumerate(episodes):
        for tool, args in calls:
            await probe(sb, tool, **args)
        await (sb.reset() if op == "reset" else sb.restore())
        where = await probe(sb, "where")
        assert where.result["files"] == ["state.db"], (number, where.result)
        assert where.result["state_mode"] == modes.setdefault("state", where.result["state_mode"]), number
        assert await sb.read_file("state.db") == initial, f"episode {number}: state.db differs after reset"
        replaced = await probe(sb, "put", key="seeded", value=f"episode {number}")
        assert replaced.ok and replaced.changes is not None, (number, replaced)
        assert [(r["op"], r["old"], r["new"]) for r in replaced.changes["rows"]] == [
            ("delete", {"k": "seeded", "v": "yes"}, None),
            ("insert", None, {"k": "seeded", "v": f"episode {number}"})], (number, replaced.changes)
        assert await value(sb, "seeded") == f"episode {number}"
        assert await value(sb, "w") is None and await value(sb, "c") is None, number


async def check_tools_run_as_batch_work(bench: Bench) -> None:
    """Tools run under Linux's batch scheduling policy (``SCHED_BATCH``, inherited from the runner):
    a woken tool does not preempt the host process that hands out calls to many sandboxes at once."""
    sb = await bench.sandbox()
    read = await probe(sb, "read", path="/proc/self/stat")
    assert read.ok and read.result["ok"], read
    fields = read.result["value"].rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    policy = int(fields[38])  # field 41 of proc(5): the scheduling policy
    assert policy == os.SCHED_BATCH, f"a tool ran under scheduling policy {policy}, not SCHED_BATCH"
    await serving(sb)


async def check_calls_share_a_clean_worker(bench: Bench) -> None:
    """Calls reuse one worker process until anything about it is off; then a fresh one serves."""
    sb = await bench.sandbox()
    pid = (await probe(sb, "pid")).result["pid"]
    assert (await probe(sb, "pid")).result["pid"] == pid, "a second call did not reuse the worker"
    expect_error(await probe(sb, "fail", message="bad id"), "tool", "bad id")
    assert (await probe(sb, "pid")).result["pid"] == pid, "a tool's own error replaced the worker"
    expect_error(await probe(sb, "abort"), "crash", "SIGABRT")
    after_crash = (await probe(sb, "pid")).result["pid"]
    assert after_crash != pid, "a crashed worker served again"
    assert (await probe(sb, "haunt")).result == {"started": True}
    assert (await probe(sb, "pid")).result["pid"] != after_crash, "a worker with a thread left running served again"
    size = len(await sb.read_file("haunt.log"))
    for _ in range(5):
        await serving(sb)
    assert len(await sb.read_file("haunt.log")) == size, "a tool's thread kept running after its call"
    assert (await probe(sb, "remember", value="from the last episode")).ok
    await sb.reset()
    assert (await probe(sb, "recall")).result["value"] is None, "a worker's memory survived a reset"


async def check_state_is_the_file(bench: Bench) -> None:
    """Whatever a worker keeps between calls, each call sees the state file as it is and leaves in
    it exactly what it committed: a failed call's writes are rolled back, a connection the tool
    closed does not break the next call, the host's write of the file is seen, and the file the
    host reads holds every committed write (none left in a write-ahead log)."""
    sb = await bench.sandbox()
    assert (await probe(sb, "put", key="a", value="1")).ok
    expect_error(await probe(sb, "put_then_fail", key="b", value="2"), "tool", "failed after writing")
    assert await value(sb, "b") is None, "a failed call's write was kept"
    await probe(sb, "close_connection")  # its own commit then fails: a crash of that call, nothing more
    assert await value(sb, "a") == "1", "a call after the tool closed its connection failed"
    await sb.write_file("state.db", bench.initial_state.read_bytes())
    assert await value(sb, "a") is None, "a call did not see the state file the host wrote"
    wal = await probe(sb, "wal")
    assert wal.result == {"mode": "wal"}, wal
    assert (await probe(sb, "put", key="c", value="3")).ok
    copy = bench.host_dir / "read-back.db"  # the file alone, without any log beside it
    copy.write_bytes(await sb.read_file("state.db"))
    with contextlib.closing(sqlite3.connect(copy)) as db:
        committed = db.execute("SELECT v FROM kv WHERE k = 'c'").fetchall()
    assert committed == [("3",)], "a commit is missing from the file the host reads"
    await serving(sb)


async def check_row_changes(bench: Bench) -> None:
    """A call that changed rows says which, with their values before and after; a read, a failed
    call and a call that changed nothing say nothing; the state file holds none of the record."""
    sb = await bench.sandbox()
    read = await probe(sb, "get", key="seeded")
    assert read.ok and read.changes is None and not read.changed, read
    added = await probe(sb, "put", key="a", value="1")
    assert added.changes == {"rows": [{"table": "kv", "op": "insert", "rowid": 2, "old": None,
                                       "new": {"k": "a", "v": "1"}}],
                             "counts": {"kv": {"insert": 1}}, "truncated": False}, added.changes
    replaced = await probe(sb, "put", key="seeded", value="no")
    assert replaced.changes is not None
    assert [(r["op"], r["old"], r["new"]) for r in replaced.changes["rows"]] == [
        ("delete", {"k": "seeded", "v": "yes"}, None), ("insert", None, {"k": "seeded", "v": "no"})], replaced.changes
    expect_error(await probe(sb, "put_then_fail", key="b", value="2"), "tool", "failed after writing")
    assert (await probe(sb, "put", key="a", value="1")).changes["counts"] == {"kv": {"delete": 1, "insert": 1}}
    blob = await probe(sb, "put_bytes", key="raw", size=3000)  # bytes are named by their size
    assert blob.changes is not None and blob.changes["rows"][-1]["new"] == {"k": "raw", "v": "<3000 bytes>"}, blob.changes
    copy = bench.host_dir / "changes-read-back.db"
    copy.write_bytes(await sb.read_file("state.db"))
    with contextlib.closing(sqlite3.connect(copy)) as db:
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master")]
    assert not [n for n in names if "coworkenv" in n], f"the state file holds {names}"
    await sb.reset()
    again = await probe(sb, "put", key="z", value="9")
    assert again.changes is not None and again.changes["counts"] == {"kv": {"insert": 1}}, again.changes


async def check_limits(bench: Bench) -> None:
    spin = await bench.sandbox(SPIN)
    expect_error(await probe(spin, "spin"), "timeout", "CPU")
    roomy = await bench.sandbox()
    sb = await bench.sandbox(TIGHT)
    assert (await probe(sb, "put", key="before", value="kept")).ok
    sleep = await probe(sb, "sleep", seconds=30)
    expect_error(sleep, "timeout", "wall-clock")
    assert sleep.duration_ms < 10_000, sleep
    expect_error(await probe(roomy, "bomb"), "limit", "memory")
    expect_error(await probe(roomy, "huge", size=LIMITS.output_bytes * 2), "limit", str(LIMITS.output_bytes))
    expect_error(await probe(roomy, "abort"), "crash", "SIGABRT")
    assert (await probe(sb, "huge", size=1000)).ok
    await serving(sb, "before", "kept")


async def check_episodes_are_isolated(bench: Bench) -> None:
    a, b = await bench.sandbox(), await bench.sandbox()
    assert (await probe(a, "put", key="seeded", value="a's")).ok
    await a.write_file("mine.txt", b"a")
    assert (await probe(a, "write", path="/tmp/a.txt", text="a")).result["ok"]
    assert (await probe(a, "linger")).ok
    assert await value(b, "seeded") == "yes"
    where = await probe(b, "where")
    assert where.result["files"] == ["state.db"] and where.result["tmp"] == [], where.result
    assert len(where.result["pids"]) <= 4, f"episode b sees processes {where.result['pids']}"
    try:
        await b.read_file("mine.txt")
    except FileNotFoundError:
        pass
    else:
        raise AssertionError("episode b reads a file episode a wrote")


# --------------------------------------------------------------------------- escapes


@contextlib.contextmanager
def _listener():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        sock.setblocking(False)
        yield sock


async def escape_network(bench: Bench) -> None:
    sb = await bench.sandbox()
    with _listener() as listener:
        port = listener.getsockname()[1]
        for host in ("127.0.0.1", "172.17.0.1", "10.0.2.2"):
            outcome = await probe(sb, "connect", host=host, port=port)
            assert outcome.ok and not outcome.result["ok"], (host, outcome)
        try:
            listener.accept()
        except BlockingIOError:
            pass
        else:
            raise AssertionError("a connection from the sandbox reached the host's listener")
        with socket.create_connection(("127.0.0.1", port), timeout=5):  # the host itself gets through
            pass
    # example.com (reserved by RFC 2606) resolves wherever DNS answers, and is in no hosts file.
    dns = await probe(sb, "resolve", name="example.com")
    assert dns.ok and not dns.result["ok"], f"DNS resolved inside the sandbox: {dns}"


async def escape_read_host_files(bench: Bench) -> None:
    sb = await bench.sandbox()
    secret = bench.store_file.read_bytes().decode(errors="replace")
    for path in (str(bench.store_file), "/etc/shadow", str(bench.initial_state.parent / "coworkenv.db")):
        outcome = await probe(sb, "read", path=path)
        assert outcome.ok, outcome
        assert not outcome.result["ok"] or "secret store" not in (outcome.result["value"] or ""), (path, outcome)
        assert secret not in (outcome.result["value"] or "")
    host_view = [p.name for p in Path("/proc").iterdir() if p.name.isdigit()
                 and bench.marker.encode() in _read_quietly(p / "cmdline")]
    assert host_view, "the decoy process is visible on the host (the check would prove nothing)"
    scan = await probe(sb, "scan_proc", marker=bench.marker)
    assert scan.ok and scan.result["found"] == [], f"host processes visible in /proc: {scan}"


def _read_quietly(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


async def escape_write_outside_workspace(bench: Bench) -> None:
    sb = await bench.sandbox()
    escaped = bench.host_dir / "escaped.txt"
    for path in (str(escaped), str(bench.apps_dir / "evil.py"), "/usr/evil.txt", "/etc/evil", "/evil",
                 "/opt/coworkenv/lib/apps/evil.py", "/opt/coworkenv/runner.py",
                 "/opt/coworkenv/lib/_coworkenv_call.py"):
        outcome = await probe(sb, "write", path=path, text="escaped")
        assert outcome.ok and not outcome.result["ok"], (path, outcome)
    assert not escaped.exists() and not (bench.apps_dir / "evil.py").exists()
    await serving(sb)


async def escape_fork_bomb(bench: Bench) -> None:
    sb = await bench.sandbox()
    bomb = await probe(sb, "forkbomb")
    assert not bomb.ok and bomb.kind in ("limit", "timeout"), bomb
    await serving(sb)
    where = await probe(sb, "where")
    assert len(where.result["pids"]) <= 4, f"processes left after the fork bomb: {where.result['pids']}"


async def escape_memory_bomb(bench: Bench) -> None:
    sb = await bench.sandbox()
    expect_error(await probe(sb, "bomb"), "limit", "memory")
    await serving(sb)


async def escape_endless_loop(bench: Bench) -> None:
    sb = await bench.sandbox(SPIN)
    expect_error(await probe(sb, "spin"), "timeout")
    await serving(sb)


async def escape_huge_output(bench: Bench) -> None:
    sb = await bench.sandbox(LIMITS.model_copy(update={"mem_mb": 512}))
    expect_error(await probe(sb, "huge", size=100 << 20), "limit")
    printed = await probe(sb, "print", text="y" * (1 << 20), times=100, stderr_bytes=0)
    assert printed.ok, printed  # printing goes nowhere; only the result counts
    await serving(sb)


async def _refuses(sb, path: str, *, missing_ok: bool, what: str) -> None:
    """Both file operations on ``path`` are refused as outside the workspace (or find nothing)."""
    for op in ("read", "write"):
        try:
            if op == "read":
                await sb.read_file(path)
            else:
                await sb.write_file(path, b"escaped")
        except SandboxError as exc:
            assert "outside" in str(exc), exc
        except FileNotFoundError:
            if not missing_ok:
                raise
        else:
            raise AssertionError(f"{op}_file({path!r}) {what}")


async def escape_paths_in_file_tools(bench: Bench) -> None:
    sb = await bench.sandbox()
    outside = bench.host_dir / "outside.txt"
    outside.write_text("host secret")
    for path in ("../x", "a/../../x", "/etc/passwd", str(outside), str(bench.store_file)):
        await _refuses(sb, path, missing_ok=False, what="was not refused")
    assert (await probe(sb, "symlink", target=str(outside), name="link")).ok
    assert (await probe(sb, "symlink", target="/etc", name="etc")).ok
    assert (await probe(sb, "symlink", target="..", name="up")).ok
    for path in ("link", "etc/passwd", "up/x", "up/workspace/state.db/../../x"):
        await _refuses(sb, path, missing_ok=True, what="followed a symlink out of the workspace")
    assert outside.read_text() == "host secret"
    await serving(sb)


async def escape_kill_the_runner(bench: Bench) -> None:
    sb = await bench.sandbox()
    assert (await probe(sb, "put", key="survives", value="yes")).ok
    try:
        outcome = await probe(sb, "kill_runner")
    except SandboxError:
        pass  # an episode error; the backend starts a new runner over the same workspace, or ends it
    else:
        # the runner could not be killed (process 1 of its namespace ignores the signal)
        assert outcome.ok or outcome.kind in ("crash", "timeout"), outcome
    try:
        await serving(sb, "survives", "yes")
    except SandboxError as exc:
        assert "runner" in str(exc), exc  # a backend that cannot respawn says so


CONFORMANCE: dict[str, Callable[[Bench], Awaitable[None]]] = {
    "tool_calls": check_tool_calls,
    "files": check_files,
    "reset_restores_exactly": check_reset_restores_exactly,
    "read_changes": check_read_changes,
    "resets_after_anything": check_resets_after_anything,
    "restores_after_anything": check_restores_after_anything,
    "restore_keeps_a_clean_worker": check_restore_keeps_a_clean_worker,
    "restore_to_a_kept_state": check_restore_to_a_kept_state,
    "calls_share_a_clean_worker": check_calls_share_a_clean_worker,
    "tools_run_as_batch_work": check_tools_run_as_batch_work,
    "state_is_the_file": check_state_is_the_file,
    "row_changes": check_row_changes,
    "limits": check_limits,
    "episodes_are_isolated": check_episodes_are_isolated,
}

ESCAPES: dict[str, Callable[[Bench], Awaitable[None]]] = {
    "network": escape_network,
    "read_host_files": escape_read_host_files,
    "write_outside_workspace": escape_write_outside_workspace,
    "fork_bomb": escape_fork_bomb,
    "memory_bomb": escape_memory_bomb,
    "endless_loop": escape_endless_loop,
    "huge_output": escape_huge_output,
    "paths_in_file_tools": escape_paths_in_file_tools,
    "kill_the_runner": escape_kill_the_runner,
}


@contextlib.asynccontextmanager
async def bench(backend: str, host_dir: Path | None = None, config: SandboxConfig | None = None):
    """A ``Bench`` with a bystander sandbox that must still serve when the bench is done."""
    tmp = None
    if host_dir is None:
        tmp = tempfile.mkdtemp(prefix="coworkenv-conformance-")
        host_dir = Path(tmp)
    b = Bench(backend, Path(host_dir), config)
    try:
        bystander = await b.sandbox()
        assert (await probe(bystander, "put", key="bystander", value="here")).ok
        yield b
        await serving(bystander, "bystander", "here")
    finally:
        await b.close()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


async def run_checks(backend: str, names: list[str] | None = None) -> dict[str, str]:
    """Run the named checks (all by default) against ``backend``: ``{name: ""}`` or the failure."""
    checks = {**CONFORMANCE, **ESCAPES}
    results: dict[str, str] = {}
    for name in names or list(checks):
        try:
            async with bench(backend) as b:
                await checks[name](b)
            results[name] = ""
        except (AssertionError, SandboxError, OSError) as exc:
            results[name] = f"{type(exc).__name__}: {exc}"
    return results

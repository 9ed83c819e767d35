"""The bubblewrap sandbox: per-call limits, isolation from the host, recovery and reset.

Every test runs a real ``bwrap`` sandbox over a small ``apps`` package written into ``tmp_path``
(a ``probe`` app whose tools misbehave on purpose), with a real SQLite file as initial state.
"""

from __future__ import annotations

import socket
import sqlite3
import textwrap
import uuid
from pathlib import Path

import anyio
import pytest

from coworkenv.sandbox import BwrapSandbox, Limits, SandboxError, SandboxUnavailable, create_sandbox

TIGHT = Limits(cpu_s=1, wall_s=2, mem_mb=256)
# Roomy in time, so that a loaded machine cannot turn a crash or a CPU-bound loop into a wall-clock
# timeout; small in memory, so that the memory bomb goes off fast.
ROOMY = Limits(cpu_s=1, wall_s=30, mem_mb=256)

PROBE = textwrap.dedent('''
    """A misbehaving app for the sandbox tests. Standard library only."""

    import os
    import signal
    import socket
    import sqlite3
    import sys
    import time

    from ._base import ToolFailure


    def handle(conn, tool, args):
        if tool == "put":
            conn.execute("CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v TEXT)")
            conn.execute("INSERT OR REPLACE INTO kv VALUES (?, ?)", (args["key"], args["value"]))
            return {"stored": args["key"]}
        if tool == "get":
            try:
                row = conn.execute("SELECT v FROM kv WHERE k = ?", (args["key"],)).fetchone()
            except sqlite3.OperationalError:
                row = None
            return {"value": row[0] if row else None}
        if tool == "fail":
            raise ToolFailure(args["message"])
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
        if tool == "huge":
            return {"data": "x" * args["size"]}
        if tool == "print":
            print(args["text"])
            sys.stdout.flush()
            sys.stderr.write("e" * args["stderr_bytes"])
            sys.stderr.flush()
            return {"printed": True}
        if tool == "kill_runner":
            os.kill(os.getppid(), signal.SIGKILL)
            time.sleep(5)
            return {"survived": True}
        if tool == "connect":
            try:
                with socket.create_connection((args["host"], args["port"]), timeout=2):
                    return {"connected": True, "error": ""}
            except OSError as exc:
                return {"connected": False, "error": repr(exc)}
        if tool == "write":
            try:
                with open(args["path"], "w") as f:
                    f.write(args["text"])
                return {"written": True, "error": ""}
            except OSError as exc:
                return {"written": False, "error": repr(exc)}
        if tool == "read":
            try:
                with open(args["path"], "rb") as f:
                    return {"read": True, "data": f.read().decode(errors="replace"), "error": ""}
            except OSError as exc:
                return {"read": False, "data": "", "error": repr(exc)}
        if tool == "symlink":
            os.symlink(args["target"], args["name"])
            return {"linked": args["name"]}
        if tool == "where":
            return {"cwd": os.getcwd(), "files": sorted(os.listdir("."))}
        raise ToolFailure("unknown tool " + repr(tool))
''')


@pytest.fixture
def apps_dir(tmp_path: Path) -> Path:
    apps = tmp_path / "apps"
    apps.mkdir()
    (apps / "__init__.py").write_text("")
    (apps / "_base.py").write_text("class ToolFailure(Exception):\n    pass\n")
    (apps / "probe.py").write_text(PROBE)
    return apps


@pytest.fixture
def initial_state(tmp_path: Path) -> Path:
    path = tmp_path / "initial.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT)")
    conn.execute("INSERT INTO kv VALUES ('seeded', 'yes')")
    conn.commit()
    conn.close()
    return path


@pytest.fixture
async def make_sandbox(initial_state: Path, apps_dir: Path):
    """Start sandboxes over the probe apps; all are closed at teardown."""
    started: list[BwrapSandbox] = []

    async def make(limits: Limits = ROOMY) -> BwrapSandbox:
        sb = BwrapSandbox(initial_state, apps_dir=apps_dir, limits=limits)
        started.append(sb)
        with anyio.fail_after(30):
            await sb.start()
        return sb

    yield make
    for sb in started:
        with anyio.fail_after(10):
            await sb.close()
        assert sb.workdir is None


@pytest.fixture
async def sandbox(make_sandbox) -> BwrapSandbox:
    return await make_sandbox()


async def probe(sb: BwrapSandbox, tool: str, **args):
    return await sb.call_tool("probe", tool, args)


async def value(sb: BwrapSandbox, key: str):
    outcome = await probe(sb, "get", key=key)
    assert outcome.ok, outcome
    return outcome.result["value"]


# --------------------------------------------------------------------------- basics


@pytest.mark.bwrap
@pytest.mark.anyio
async def test_tool_runs_in_the_workspace_and_keeps_state_between_calls(sandbox):
    with anyio.fail_after(15):
        where = await probe(sandbox, "where")
        assert where.ok, where
        assert where.result["cwd"] == "/workspace"
        assert "state.db" in where.result["files"]
        assert await value(sandbox, "seeded") == "yes"
        assert (await probe(sandbox, "put", key="a", value="1")).ok
        assert await value(sandbox, "a") == "1"
        failure = await probe(sandbox, "fail", message="no message with id 'm99'")
        assert (failure.ok, failure.kind, failure.error) == (False, "tool", "no message with id 'm99'")
        missing = await sandbox.call_tool("nosuchapp", "x", {})
        assert not missing.ok and missing.kind == "crash" and "nosuchapp" in missing.error
        assert await value(sandbox, "a") == "1"


# --------------------------------------------------------------------------- limits


@pytest.mark.bwrap
@pytest.mark.slow
@pytest.mark.anyio
async def test_cpu_and_wall_clock_limits_kill_the_call_not_the_sandbox(make_sandbox):
    with anyio.fail_after(60):
        # The CPU limit stops an endless loop long before its (roomy) wall-clock limit.
        roomy = await make_sandbox(ROOMY)
        assert (await probe(roomy, "put", key="before", value="kept")).ok
        spin = await probe(roomy, "spin")
        assert (spin.ok, spin.kind) == (False, "timeout"), spin
        assert "CPU" in spin.error
        assert spin.duration_ms < ROOMY.wall_s * 1000
        assert await value(roomy, "before") == "kept"

        # The wall-clock limit stops a tool that sleeps.
        tight = await make_sandbox(TIGHT)
        assert (await probe(tight, "put", key="before", value="kept")).ok
        sleep = await probe(tight, "sleep", seconds=30)
        assert (sleep.ok, sleep.kind) == (False, "timeout"), sleep
        assert "wall-clock" in sleep.error
        assert sleep.duration_ms < 10_000
        assert await value(tight, "before") == "kept"
        quick = await probe(tight, "sleep", seconds=0.01)
        assert quick.ok and quick.result == {"slept": 0.01}


@pytest.mark.bwrap
@pytest.mark.anyio
async def test_crash_memory_bomb_and_huge_output_are_reported_and_survived(sandbox):
    with anyio.fail_after(30):
        crash = await probe(sandbox, "abort")
        assert (crash.ok, crash.kind) == (False, "crash"), crash
        assert "SIGABRT" in crash.error

        bomb = await probe(sandbox, "bomb")
        assert (bomb.ok, bomb.kind) == (False, "limit"), bomb
        assert "memory" in bomb.error

        huge = await probe(sandbox, "huge", size=ROOMY.output_bytes * 2)
        assert (huge.ok, huge.kind) == (False, "limit"), huge
        assert str(ROOMY.output_bytes) in huge.error

        fits = await probe(sandbox, "huge", size=1000)
        assert fits.ok and len(fits.result["data"]) == 1000
        assert await value(sandbox, "seeded") == "yes"


@pytest.mark.bwrap
@pytest.mark.anyio
async def test_tool_output_on_stdout_and_stderr_does_not_reach_the_runner_protocol(sandbox):
    with anyio.fail_after(15):
        # A line on stdout that looks like a reply must not be taken for one, and more on stderr
        # than a pipe holds must not block the tool.
        forged = '{"id": 999, "ok": true, "result": {"forged": 1}}'
        printed = await probe(sandbox, "print", text=forged, stderr_bytes=8 << 20)
        assert printed.ok and printed.result == {"printed": True}, printed
        assert await value(sandbox, "seeded") == "yes"
        assert (await probe(sandbox, "put", key="after", value="print")).ok
        assert await value(sandbox, "after") == "print"


@pytest.mark.bwrap
@pytest.mark.anyio
async def test_killed_runner_fails_that_call_then_respawns_with_state_kept(sandbox):
    with anyio.fail_after(30):
        assert (await probe(sandbox, "put", key="survives", value="the runner")).ok
        with pytest.raises(SandboxError):
            await probe(sandbox, "kill_runner")
        assert await value(sandbox, "survives") == "the runner"
        assert (await probe(sandbox, "put", key="next", value="call")).ok
        assert await value(sandbox, "next") == "call"


# --------------------------------------------------------------------------- isolation


@pytest.mark.bwrap
@pytest.mark.anyio
async def test_no_network_to_the_host(sandbox):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]

        with anyio.fail_after(15):
            inside = await probe(sandbox, "connect", host="127.0.0.1", port=port)
        assert inside.ok, inside
        assert inside.result["connected"] is False, inside.result
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):  # nothing reached the listener
            listener.accept()

        # The same connection from the host works, so the sandbox is what blocked it.
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            listener.settimeout(5)
            accepted, _ = listener.accept()
            accepted.close()


@pytest.mark.bwrap
@pytest.mark.anyio
async def test_writes_stay_inside_the_sandbox(sandbox, tmp_path: Path, apps_dir: Path):
    marker = f"/tmp/coworkenv-probe-{uuid.uuid4().hex}"
    with anyio.fail_after(15):
        # /tmp is a private tmpfs: the write works inside and never reaches the host.
        private = await probe(sandbox, "write", path=marker, text="private")
        assert private.ok and private.result["written"], private
        back = await probe(sandbox, "read", path=marker)
        assert back.result["data"] == "private"
        assert not Path(marker).exists()

        # Host paths: the store's directory, the apps, the system.
        for path in (str(tmp_path / "escaped.txt"), str(apps_dir / "evil.py"), "/usr/evil.txt",
                     "/opt/coworkenv/lib/apps/evil.py"):
            outcome = await probe(sandbox, "write", path=path, text="escaped")
            assert outcome.ok and not outcome.result["written"], (path, outcome)
        assert not (tmp_path / "escaped.txt").exists()
        assert not (apps_dir / "evil.py").exists()

        # The workspace is writable, and the host sees the file there.
        inside = await probe(sandbox, "write", path="/workspace/note.txt", text="hello")
        assert inside.ok and inside.result["written"], inside
        assert await sandbox.read_file("note.txt") == b"hello"


@pytest.mark.bwrap
@pytest.mark.anyio
async def test_cannot_read_the_store_or_system_secrets(sandbox, tmp_path: Path):
    store_file = tmp_path / "coworkenv.db"
    store_file.write_bytes(b"SQLite format 3\x00 secret store")
    with anyio.fail_after(15):
        for path in (str(store_file), "/etc/shadow"):
            outcome = await probe(sandbox, "read", path=path)
            assert outcome.ok and not outcome.result["read"], (path, outcome)
            assert "secret" not in outcome.result["data"]


# --------------------------------------------------------------------------- reset and files


@pytest.mark.bwrap
@pytest.mark.anyio
async def test_reset_restores_the_initial_state(sandbox, initial_state: Path):
    with anyio.fail_after(15):
        assert (await probe(sandbox, "put", key="seeded", value="changed")).ok
        assert (await probe(sandbox, "put", key="new", value="row")).ok
        await sandbox.write_file("notes/extra.txt", b"extra")
        await sandbox.reset()
        assert await sandbox.read_file("state.db") == initial_state.read_bytes()
        assert await value(sandbox, "seeded") == "yes"
        assert await value(sandbox, "new") is None
        where = await probe(sandbox, "where")
        assert where.result["files"] == ["state.db"]


@pytest.mark.bwrap
@pytest.mark.anyio
async def test_read_and_write_file_refuse_paths_out_of_the_workspace(sandbox, tmp_path: Path):
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    with anyio.fail_after(15):
        await sandbox.write_file("sub/inside.txt", b"ok")
        assert await sandbox.read_file("sub/inside.txt") == b"ok"
        assert await sandbox.read_file("sub/../sub/inside.txt") == b"ok"

        for path in ("../x", "sub/../../x", str(secret), "/etc/passwd"):
            with pytest.raises(SandboxError, match="outside"):
                await sandbox.read_file(path)
            with pytest.raises(SandboxError, match="outside"):
                await sandbox.write_file(path, b"escaped")
        assert not (sandbox.workdir.parent / "x").exists()
        assert secret.read_text() == "host secret"

        # A symlink made by a tool inside the sandbox cannot lead the host out of the workspace.
        assert (await probe(sandbox, "symlink", target=str(secret), name="link")).ok
        assert (await probe(sandbox, "symlink", target="..", name="up")).ok
        for path in ("link", "up/x"):
            with pytest.raises(SandboxError, match="outside"):
                await sandbox.read_file(path)
            with pytest.raises(SandboxError, match="outside"):
                await sandbox.write_file(path, b"escaped")
        assert secret.read_text() == "host secret"


# --------------------------------------------------------------------------- backends


def test_unknown_backend_names_the_known_ones(initial_state: Path):
    with pytest.raises(SandboxUnavailable, match="nope") as info:
        create_sandbox("nope", initial_state)
    assert "bwrap" in str(info.value)

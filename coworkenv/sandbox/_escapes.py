"""The escape cases of the sandbox conformance suite: abuse a sandbox must contain (network, host
files, writes outside the workspace, fork and memory bombs, endless loops, huge output, path tricks
in the file tools, killing the runner), each as a tool or episode error while the abused sandbox and
a bystander (another episode) keep serving.
"""
# pyright: reportOptionalSubscript=false
# (the cases read ``outcome.result[...]`` after asserting ``outcome.ok``; a None result fails them anyway)

from __future__ import annotations

import contextlib
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

from ._base import SandboxError
from ._bench import LIMITS, SPIN, Bench, expect_error, probe, serving


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


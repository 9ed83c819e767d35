"""The conformance and escape suite every sandbox backend must pass, shipped with the package.

Each check is an async function of a ``Bench`` (sandboxes of one backend over a ``probe`` app
whose tools misbehave on purpose, a real SQLite initial state, and a scratch directory on the host)
that raises ``AssertionError`` naming what went wrong. ``CONFORMANCE`` covers the interface
(tool calls, files, reset and restore, limits, episodes kept apart); ``ESCAPES`` covers abuse
(network, host files, writes outside the workspace, fork and memory bombs, endless loops, huge
output, path tricks in the file tools, killing the runner). Every escape case also checks that the
abused sandbox and a bystander sandbox (another episode) keep serving. The local backend, which
isolates nothing, passes all but those in ``NEEDS_ISOLATION``, which say why they cannot hold there.

The conformance checks are here; the escape cases in ``_escapes``, the bench and the helpers the
checks share in ``_bench``, the probe app in ``_probe_app``. Run them all with
``await run_checks("docker")``, or one by one (the tests parametrize over the backends).
"""
# pyright: reportOptionalSubscript=false
# (the checks below read ``outcome.result[...]`` after asserting ``outcome.ok``; a None result fails them anyway)

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Awaitable, Callable

from ._backends import backend_class
from ._base import SandboxError
from ._bench import LIMITS, SPIN, TIGHT, Bench, bench, expect_error, probe, seen, serving, value
from ._escapes import ESCAPES
from ._probe_app import write_initial_state, write_probe_apps

__all__ = ["CONFORMANCE", "ESCAPES", "LIMITS", "NEEDS_ISOLATION", "Bench", "bench", "probe", "run_checks", "serving", "value",
           "write_initial_state", "write_probe_apps"]


async def check_tool_calls(bench: Bench) -> None:
    sb = await bench.sandbox()
    where = await probe(sb, "where")
    assert where.ok, where
    assert where.result["cwd"] == seen(sb, "/workspace") and where.result["files"] == ["state.db"], where.result
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
    written = await probe(sb, "write", path=f"{seen(sb, '/workspace')}/from_tool.txt", text="hello")
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
    assert (await probe(sb, "write", path=f"{seen(sb, '/tmp')}/scratch.txt", text="left over")).result["ok"]
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
    assert (await probe(sb, "write", path=f"{seen(sb, '/tmp')}/scratch.txt", text="left over")).result["ok"]
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
        assert (await probe(sb, "write", path=f"{seen(sb, '/tmp')}/scratch.txt", text="left over")).result["ok"]
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
    assert (await probe(sb, "write", path=f"{seen(sb, '/tmp')}/{kept_dir}/state.db", text="tampered")).result["ok"]
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


async def check_episodes_are_separate(bench: Bench) -> None:
    """Episodes do not share their state, workspace files or scratch dir."""
    a, b = await bench.sandbox(), await bench.sandbox()
    assert (await probe(a, "put", key="seeded", value="a's")).ok
    await a.write_file("mine.txt", b"a")
    assert (await probe(a, "write", path=f"{seen(a, '/tmp')}/a.txt", text="a")).result["ok"]
    assert await value(b, "seeded") == "yes"
    where = await probe(b, "where")
    assert where.result["files"] == ["state.db"] and where.result["tmp"] == [], where.result
    try:
        await b.read_file("mine.txt")
    except FileNotFoundError:
        pass
    else:
        raise AssertionError("episode b reads a file episode a wrote")


async def check_processes_end_with_their_call(bench: Bench) -> None:
    """A process a tool started and detached (in a session of its own) is ended once its call is done,
    and no episode sees another's processes: the runner sees every process of its sandbox, and only those."""
    a, b = await bench.sandbox(), await bench.sandbox()
    assert (await probe(a, "linger")).ok
    for name, sb in (("a", a), ("b", b)):
        where = await probe(sb, "where")
        assert len(where.result["pids"]) <= 4, f"episode {name} sees processes {where.result['pids']}"
    await a.reset()
    await serving(a)


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
    "episodes_are_separate": check_episodes_are_separate,
    "processes_end_with_their_call": check_processes_end_with_their_call,
}

# What only a backend that keeps tools from the host (``Sandbox.isolated``) passes, and why: never run
# against one that does not (``local``), where some would do real harm to the host.
NEEDS_ISOLATION: dict[str, str] = {
    "processes_end_with_their_call": "without a pid namespace of its own the runner cannot tell a tool's "
                                     "processes from the host's: a detached one lives on",
    "network": "without a network namespace of its own a tool reaches the host's network",
    "read_host_files": "a tool reads whatever the host's user can read, other processes' command lines too",
    "write_outside_workspace": "a tool writes wherever the host's user can (here: into the host's folders)",
    "fork_bomb": "no process limit holds without a pid namespace of its own (here: a fork bomb on the host)",
}
assert set(NEEDS_ISOLATION) <= set(CONFORMANCE) | set(ESCAPES)


async def run_checks(backend: str, names: list[str] | None = None) -> dict[str, str]:
    """Run the named checks (all by default) against ``backend``: ``{name: ""}`` or the failure.
    Against a backend that does not isolate (``local``), those in ``NEEDS_ISOLATION`` are left out."""
    checks = {**CONFORMANCE, **ESCAPES}
    isolated = backend_class(backend).isolated
    results: dict[str, str] = {}
    for name in names or list(checks):
        if name in NEEDS_ISOLATION and not isolated:
            continue
        try:
            async with bench(backend) as b:
                await checks[name](b)
            results[name] = ""
        except (AssertionError, SandboxError, OSError) as exc:
            results[name] = f"{type(exc).__name__}: {exc}"
    return results

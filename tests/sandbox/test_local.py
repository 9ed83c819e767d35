"""What the local backend (the runner as a plain process, no isolation) does beyond the conformance
suite it runs: the built-in apps' real tools on a real workspace through the public sandbox API,
the episode's folders on the host, the environment its tools get, and that it is never a fallback.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from coworkenv.cli import app
from coworkenv.sandbox import BACKENDS, STATE_FILE, LocalConfig, SandboxUnavailable, cleanup, create_sandbox
from coworkenv.sandbox._conformance import bench, probe
from coworkenv.workspace import apps_dir, build_workspace, write_initial_state

pytestmark = pytest.mark.anyio


def _rows(state: bytes, directory: Path, sql: str) -> list[tuple]:
    copy = directory / "read-back.db"
    copy.write_bytes(state)
    with contextlib.closing(sqlite3.connect(copy)) as db:
        return db.execute(sql).fetchall()


async def test_real_tools_on_a_real_workspace_write_its_state_and_reset_puts_it_back(tmp_path: Path):
    initial = write_initial_state(build_workspace(7, ("mail", "contacts")), tmp_path / "initial.db")
    config = LocalConfig(apps_dir=apps_dir(tmp_path / "cache"), root=tmp_path)
    with anyio.fail_after(60):
        sandbox = create_sandbox("local", initial, config=config)
        async with sandbox:
            found = await sandbox.call_tool("mail", "search_messages", {"folder": "inbox", "limit": 3})
            assert found.ok and found.result is not None and found.result["count"] > 0, found
            assert not found.changed and found.changes is None  # a read writes nothing
            sent = await sandbox.call_tool("mail", "send_message", {
                "to": ["someone@example.com"], "subject": "Local", "body": "Sent through the local backend."})
            assert sent.ok and sent.changed, sent
            assert sent.changes is not None and sent.changes["counts"] == {"mail_messages": {"insert": 1}}
            refused = await sandbox.call_tool("mail", "read_message", {"id": "m999"})
            assert (refused.ok, refused.kind) == (False, "tool") and "m999" in refused.error, refused
            state = await sandbox.read_changed_file(STATE_FILE, initial.read_bytes())
            assert _rows(state, tmp_path, "SELECT folder, subject FROM mail_messages WHERE subject = 'Local'") == [
                ("sent", "Local")]
            await sandbox.reset()
            assert await sandbox.read_file(STATE_FILE) == initial.read_bytes()
            again = await sandbox.call_tool("mail", "search_messages", {"query": "Local", "folder": "sent"})
            assert again.ok and again.result == {"messages": [], "count": 0}, again


async def test_the_episode_is_a_labeled_host_directory_with_its_own_scratch_removed_at_close(tmp_path: Path):
    with anyio.fail_after(60):
        async with bench("local", tmp_path) as b:
            sb = await b.sandbox()
            assert (await probe(sb, "write", path="note.txt", text="hello")).result == {
                "ok": True, "value": True, "error": ""}
            episode_dir, workdir = sb.episode_dir, sb.workdir
            assert episode_dir is not None and workdir is not None
            assert (workdir / "note.txt").read_text() == "hello" and (episode_dir / "label.json").is_file()
            assert {p.name for p in episode_dir.iterdir()} >= {"workspace", "initial", "lib", "tmp"}
            await sb.close()
            assert sb.workdir is None and not episode_dir.exists()


async def test_tools_get_none_of_the_hosts_environment_and_the_episodes_own_tmpdir(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("COWORKENV_TEST_SECRET", "do-not-pass-this-on")
    with anyio.fail_after(60):
        async with bench("local", tmp_path) as b:
            sb = await b.sandbox()
            read = await probe(sb, "read", path="/proc/self/environ")
            assert read.ok and read.result is not None and read.result["ok"], read
            environment = dict(entry.split("=", 1) for entry in read.result["value"].split("\0") if entry)
            assert "COWORKENV_TEST_SECRET" not in environment
            assert environment["TMPDIR"] == str(sb.scratch_dir) and environment["HOME"] == str(sb.workdir)


async def test_cleanup_removes_the_local_backends_episode_directories_and_keeps_a_live_owners(tmp_path: Path):
    initial = write_initial_state(build_workspace(7, ("contacts",)), tmp_path / "initial.db")
    root = tmp_path / "episodes"
    root.mkdir()
    with anyio.fail_after(60):
        sandbox = create_sandbox("local", initial, config=LocalConfig(apps_dir=apps_dir(tmp_path / "cache"), root=root))
        async with sandbox:
            episode_dir = sandbox.episode_dir
            assert episode_dir is not None and episode_dir.parent == root
            # not theirs to judge: neither removes nor counts it (docker's count also holds the live
            # containers of any process on this engine, another test's among them, so only its
            # directories are asserted)
            assert cleanup(root=root, backends=["bwrap"]).kept == 0
            others = cleanup(root=root, backends=["docker"])
            assert others.directories == [] and episode_dir.exists()
            kept = cleanup(root=root, backends=["local"])
            assert (kept.removed, kept.kept) == (0, 1)  # its owner, this process, is alive
            removed = cleanup(root=root, backends=["local"], everything=True)
            assert removed.directories == [str(episode_dir)] and not episode_dir.exists()


def test_never_a_fallback_a_missing_backend_is_an_error_naming_it(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # a machine without bwrap on its PATH
    with pytest.raises(SandboxUnavailable, match="bubblewrap"):
        create_sandbox("bwrap", tmp_path / "state.db")
    result = CliRunner().invoke(app, ["check-sandbox"])  # the default backend, bwrap
    assert result.exit_code == 2 and "bubblewrap" in result.output and "local" not in result.output, result.output
    assert not BACKENDS["local"].isolated and all(cls.isolated for name, cls in BACKENDS.items() if name != "local")


def test_choosing_it_on_the_command_line_warns_that_it_isolates_nothing():
    result = CliRunner().invoke(app, ["check-sandbox", "--sandbox", "local"])
    assert result.exit_code == 0, result.output
    assert "isolates nothing" in result.stderr and "local: works" in result.stdout

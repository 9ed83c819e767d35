"""What only the bubblewrap backend does, beyond the conformance and escape suite both backends pass.

Real ``bwrap`` sandboxes over the suite's ``probe`` app (``coworkenv.sandbox._conformance``): the
episode's directory on the host, a runner that respawns over the same workspace after it was killed
from inside, relative folders given by the caller, and the one-line error when bubblewrap is missing.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from coworkenv.sandbox import BwrapConfig, BwrapSandbox, SandboxError, SandboxUnavailable, create_sandbox
from coworkenv.sandbox._conformance import bench, probe, serving


@pytest.mark.anyio
@pytest.mark.bwrap
async def test_the_workspace_is_a_labeled_host_directory_removed_at_close(tmp_path: Path):
    with anyio.fail_after(60):
        async with bench("bwrap", tmp_path) as b:
            sb = await b.sandbox()
            assert (await probe(sb, "write", path="/workspace/note.txt", text="hello")).result["ok"]
            episode_dir, workdir = sb.episode_dir, sb.workdir
            assert (workdir / "note.txt").read_text() == "hello"
            assert (episode_dir / "label.json").is_file()
            await sb.close()
            assert sb.workdir is None and not episode_dir.exists()


@pytest.mark.anyio
@pytest.mark.bwrap
async def test_a_runner_killed_from_inside_fails_that_call_then_respawns_with_state_kept(tmp_path: Path):
    with anyio.fail_after(60):
        async with bench("bwrap", tmp_path) as b:
            sb = await b.sandbox()
            assert (await probe(sb, "put", key="survives", value="the runner")).ok
            with pytest.raises(SandboxError, match="runner"):
                await probe(sb, "kill_runner")
            await serving(sb, "survives", "the runner")
            assert (await probe(sb, "put", key="next", value="call")).ok
            await serving(sb, "next", "call")


@pytest.mark.anyio
@pytest.mark.bwrap
async def test_relative_apps_and_root_folders_are_read_from_where_the_sandbox_is_made(tmp_path: Path, monkeypatch):
    """The runner starts inside its episode directory; folders a user gave relative (a cache dir of
    ``cache``, which holds the apps) still mean the ones beside the caller."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "episodes").mkdir()
    with anyio.fail_after(60):
        async with bench("bwrap", Path("host"), BwrapConfig(root=Path("episodes"))) as b:
            sb = await b.sandbox()
            assert (await probe(sb, "put", key="relative", value="paths")).ok
            await serving(sb, "relative", "paths")
            assert isinstance(sb, BwrapSandbox) and sb.episode_dir is not None
            assert sb.episode_dir.parent == tmp_path / "episodes"


def test_missing_bubblewrap_says_what_to_install(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # a machine without bwrap on its PATH
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        create_sandbox("bwrap", tmp_path / "state.db")

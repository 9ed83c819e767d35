"""A sandbox that dies under an episode is an infrastructure failure, not a tool's error.

The call that finds the runner dead is recorded (``error_kind`` infrastructure), the episode ends
``failed`` with the boundary it crossed (``sandbox``), the MCP client gets a JSON-RPC error rather
than a tool result, and the episode's one verdict says ``infrastructure_error`` (so the loop retries
it and it is never graded as the agent's work). Other episodes go on.

The runner is killed from outside, as a crash or the kernel's OOM killer would: for bubblewrap its
process on this host (the backend starts a new runner over the same workspace for later reads, but
the call in flight has failed), for docker its container.
"""

from __future__ import annotations

import contextlib

import anyio
import httpx
import psutil
import pytest
from mcp import Client, MCPError

from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.gate import GRADER_VERSION
from coworkenv.sandbox import BwrapSandbox, DockerSandbox, Sandbox
from coworkenv.server import ServeSettings, running_http_server
from coworkenv.store import EpisodeRow, Store

pytestmark = pytest.mark.anyio

INTERNAL_ERROR = -32603  # JSON-RPC
BACKENDS = [pytest.param("bwrap", marks=pytest.mark.bwrap),
            pytest.param("docker", marks=[pytest.mark.docker, pytest.mark.slow])]


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def kill_runner(sandbox: Sandbox) -> None:
    """SIGKILL the sandbox's runner from outside and wait until it is gone."""
    if isinstance(sandbox, BwrapSandbox):
        # The sandbox is the bwrap process binding this episode's workspace, and what runs under it.
        assert sandbox.workdir is not None
        tree: list[psutil.Process] = []
        for proc in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if str(sandbox.workdir) in proc.cmdline():
                    tree += [proc, *proc.children(recursive=True)]
        runners = [p for p in tree if _alive(p) and p.name() != "bwrap"]  # the runner (and a worker ending)
        assert runners, f"no runner process under {sandbox.workdir}"
        for proc in runners:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        while any(_alive(p) for p in tree):  # bubblewrap exits with its child
            await anyio.sleep(0.01)
    elif isinstance(sandbox, DockerSandbox):
        import docker

        api = docker.from_env().api
        container = sandbox.container
        assert container is not None
        await anyio.to_thread.run_sync(api.kill, container)
        await anyio.to_thread.run_sync(lambda: api.wait(container, timeout=30))
    else:
        raise AssertionError(f"no way to kill a {type(sandbox).__name__} here")


def episode_row(store: Store, episode_id: str) -> EpisodeRow:
    row = store.episode(episode_id)
    assert row is not None, episode_id
    return row


def check_failed_at_the_sandbox(store: Store, episode_id: str, tools: list[str]) -> None:
    """The episode failed at the sandbox boundary, its last call recorded as the infrastructure's
    failure, and it has one verdict of the current grader: ``infrastructure_error``."""
    row = episode_row(store, episode_id)
    assert (row.status, row.boundary) == ("failed", "sandbox")
    assert row.error and f"during {tools[-1]}" in row.error
    calls = store.tool_calls(episode_id)
    assert [c.tool for c in calls] == tools
    assert [(c.is_error, c.error_kind) for c in calls[:-1]] == [(False, None)] * (len(tools) - 1)
    assert (calls[-1].is_error, calls[-1].error_kind, calls[-1].result) == (True, "infrastructure", None)
    verdict = store.verdict(episode_id, GRADER_VERSION)
    assert verdict is not None and verdict.reason == "infrastructure_error" and not verdict.admitted
    assert store.verdict_count(episode_id) == 1


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_dead_sandbox_fails_the_episode_at_the_sandbox_boundary(store: Store, tasks: list[str],
                                                                        tmp_path, backend: str):
    task = tasks[0]
    host = EpisodeHost(store, EpisodeSettings(backend=backend, cache_dir=tmp_path / backend))
    with anyio.fail_after(120):
        async with (running_http_server(host, ServeSettings(operator_token="operator-s3cret")) as base,
                    httpx.AsyncClient(base_url=base, timeout=30,
                                      headers={"X-Coworkenv-Operator": "operator-s3cret"}) as http):
            opened = await http.post("/episodes", json={"task": task, "source": "teacher", "provider": "oracle"})
            assert opened.status_code == 201, opened.text
            episode_id, url = opened.json()["episode_id"], base + opened.json()["url"]
            async with Client(url) as client, Client(f"{base}/t/{task}/e/bystander/mcp") as bystander:
                assert not (await client.call_tool("calendar_get_event", {"id": "e01"})).is_error
                assert not (await bystander.call_tool("calendar_get_event", {"id": "e01"})).is_error

                await kill_runner(host.open_episodes[episode_id].sandbox)
                with pytest.raises(MCPError) as info:
                    await client.call_tool("calendar_list_events", {})
                assert info.value.code == INTERNAL_ERROR
                assert "sandbox" in info.value.message and "the episode has ended" in info.value.message

                # By the time the error arrives the episode has ended, failed, and been graded once.
                check_failed_at_the_sandbox(host.store, episode_id, ["calendar_get_event", "calendar_list_events"])
                assert episode_id not in host.open_episodes
                status = (await http.get(f"/episodes/{episode_id}")).json()
                assert (status["status"], status["boundary"], status["source"]) == ("failed", "sandbox", "teacher")
                assert status["verdict"]["reason"] == "infrastructure_error"
                with pytest.raises(MCPError, match=episode_id):  # nothing more reaches it
                    await client.call_tool("calendar_get_event", {"id": "e01"})

                # The other episode goes on, in its own sandbox.
                again = await bystander.call_tool("calendar_list_events", {})
                assert not again.is_error and again.structured_content["count"] > 0

            # The loop's end after the failure changes nothing: one verdict, still the failure's.
            ended = await http.post(f"/episodes/{episode_id}/end", json={"truncated": True})
            assert ended.json() == status
    check_failed_at_the_sandbox(store, episode_id, ["calendar_get_event", "calendar_list_events"])
    assert not episode_row(store, episode_id).truncated
    bystander_row = store.episodes(source="live", task_id=task)[0]
    assert bystander_row.status == "ended" and bystander_row.error is None


@pytest.mark.bwrap
async def test_a_legacy_session_whose_sandbox_dies_gets_an_error_and_its_episode_fails(store: Store, tasks: list[str],
                                                                                      tmp_path):
    task = tasks[0]
    host = EpisodeHost(store, EpisodeSettings(cache_dir=tmp_path / "cache"))
    with anyio.fail_after(60):
        async with running_http_server(host) as base:
            async with Client(f"{base}/t/{task}/mcp", mode="legacy") as client:
                created = await client.call_tool("calendar_create_event", {
                    "title": "Doomed sync", "date": "2026-03-27", "start": "08:00", "end": "08:30"})
                assert not created.is_error, created.content
                (episode,) = host.open_episodes.values()
                await kill_runner(episode.sandbox)
                with pytest.raises(MCPError, match="sandbox") as info:
                    await client.call_tool("calendar_get_event", {"id": "e01"})
                assert info.value.code == INTERNAL_ERROR
                check_failed_at_the_sandbox(store, episode.id, ["calendar_create_event", "calendar_get_event"])
                # The session's episode has ended: the session's next call opens a fresh one, in a
                # workspace without the failed episode's changes.
                late = await client.call_tool("calendar_list_events", {"query": "Doomed sync"})
                assert not late.is_error and late.structured_content["count"] == 0
                (fresh,) = host.open_episodes.values()
                assert fresh.id != episode.id
    # Closing the session (and the server) changed nothing of the failed episode.
    check_failed_at_the_sandbox(store, episode.id, ["calendar_create_event", "calendar_get_event"])
    assert [c.tool for c in store.tool_calls(fresh.id)] == ["calendar_list_events"]
    assert episode_row(store, fresh.id).status == "ended"

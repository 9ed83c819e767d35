"""The rest of the protocol surface over HTTP, in both eras: resource templates, completion,
logging, progress, the workspace alias, and how live episodes end and get graded (once, when they end)."""

from __future__ import annotations

import json

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp.shared.exceptions import MCPDeprecationWarning

from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.gate import GRADER_VERSION
from coworkenv.server import ServeSettings, running_http_server
from coworkenv.store import EpisodeRow, Store, VerdictRow

pytestmark = [pytest.mark.bwrap, pytest.mark.anyio]

ERAS = [("auto", "2026-07-28"), ("legacy", "2025-11-25")]


def client_for(base: str, task: str, mode: str, key: str, **options) -> Client:
    url = f"{base}/t/{task}/e/{key}/mcp" if mode == "auto" else f"{base}/t/{task}/mcp"
    return Client(url, mode=mode, **options)


async def wait_for_verdict(store: Store, episode_id: str) -> VerdictRow:
    """The current grader version's verdict, once the server has ended the episode (in its own time)."""
    while (verdict := store.verdict(episode_id, GRADER_VERSION)) is None:
        await anyio.sleep(0.02)
    return verdict


def ended_row(store: Store, episode_id: str) -> EpisodeRow:
    row = store.episode(episode_id)
    assert row is not None
    return row


@pytest.mark.parametrize(("mode", "version"), ERAS)
async def test_resource_templates_completion_logging_and_progress(host: EpisodeHost, tasks: list[str],
                                                                  mode: str, version: str):
    task = tasks[0]
    logs: list[types.LoggingMessageNotificationParams] = []
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    with anyio.fail_after(30):
        async with running_http_server(host) as base:
            async with client_for(base, task, mode, "surface", logging_callback=on_log, log_level="info") as client:
                assert client.protocol_version == version
                templates = {t.uri_template: t for t in (await client.list_resource_templates()).resource_templates}
                assert set(templates) >= {"coworkenv://mail/messages/{id}", "coworkenv://calendar/events/{id}",
                                          "coworkenv://files/files/{id}"}  # and every other app's records

                # Completion lists the ids of the episode's live records with the given prefix.
                ref = types.ResourceTemplateReference(uri="coworkenv://calendar/events/{id}")
                completed = (await client.complete(ref, {"name": "id", "value": "e0"})).completion
                assert completed.values and all(v.startswith("e0") for v in completed.values)
                assert "e01" in completed.values
                assert (await client.complete(ref, {"name": "id", "value": "zz"})).completion.values == []

                # A record resource is the app's own view of it.
                record = await client.read_resource("coworkenv://calendar/events/e01")
                via_tool = await client.call_tool("calendar_get_event", {"id": "e01"})
                assert json.loads(record.contents[0].text) == via_tool.structured_content
                for uri in ("coworkenv://calendar/events/e99", "coworkenv://crm/deals/1", "https://example.com/x"):
                    with pytest.raises(MCPError):
                        await client.read_resource(uri)

                # A tool error is logged (legacy: at the level the client set; modern: opted in per request).
                if mode == "legacy":
                    with pytest.warns(MCPDeprecationWarning):
                        await client.set_logging_level("warning")
                failed = await client.call_tool("calendar_get_event", {"id": "e99"})
                assert failed.is_error
                assert any(entry.level == "warning" and entry.data["tool"] == "calendar_get_event" for entry in logs)

                # Progress arrives when asked for.
                done = await client.call_tool("calendar_list_events", {}, progress_callback=on_progress)
                assert not done.is_error
                assert progress and progress[-1][0] == progress[-1][1] == 1.0
                (episode,) = [e for e in host.open_episodes.values() if e.task.id == task]

            # Resource reads and completions are not tool calls of the agent.
            assert [c.tool for c in host.store.tool_calls(episode.id)] == [
                "calendar_get_event", "calendar_get_event", "calendar_list_events"]


async def test_workspace_alias_serves_only_that_workspaces_tasks(host: EpisodeHost, tasks: list[str]):
    task = host.task(tasks[0])
    with anyio.fail_after(30):
        async with running_http_server(host) as base:
            async with Client(f"{base}/w/{task.workspace_id}/t/{task.id}/e/ws-1/mcp") as client:
                assert [m.content.text for m in (await client.get_prompt("task")).messages] == [task.instruction]
            with pytest.raises(BaseException) as refused:  # refused as the client connects
                async with Client(f"{base}/w/ws-elsewhere/t/{task.id}/e/ws-2/mcp") as client:
                    await client.list_tools()
            assert refused.group_contains(MCPError, match="not 'ws-elsewhere'", depth=None)
            async with httpx.AsyncClient() as http:
                listed = (await http.get(f"{base}/w/{task.workspace_id}/tasks")).json()
                assert task.id in [t["id"] for t in listed]
                assert all(t["url"].startswith(f"/w/{task.workspace_id}/t/") for t in listed)
                assert (await http.get(f"{base}/w/ws-elsewhere/tasks")).json() == []


@pytest.mark.parametrize(("mode", "version"), ERAS)
async def test_live_episode_is_graded_when_it_ends(host: EpisodeHost, tasks: list[str], mode: str, version: str):
    task = tasks[0]
    with anyio.fail_after(30):
        async with running_http_server(host) as base:
            async with client_for(base, task, mode, "graded") as client:
                await client.call_tool("calendar_list_events", {})
                done = await client.call_tool("submit_answer", {"answer": "Nothing to do."})
                episode_id = done.structured_content["episode_id"]
                # Graded when it ended: the verdict is there as the submit's result arrives.
                verdict = host.store.verdict(episode_id, GRADER_VERSION)
                assert verdict is not None
    episode = ended_row(host.store, episode_id)
    assert episode.source == "live" and episode.final_answer == "Nothing to do."
    assert not verdict.admitted and verdict.reason == "claimed_success_failing_checks"
    # Graded once, for the current grader version: the gate has nothing left to do for it.
    assert host.store.verdict_count(episode_id) == 1
    assert host.store.ended_episodes(without_verdict_of=GRADER_VERSION) == []


async def test_delete_ends_a_key_episode_and_idle_episodes_end_by_themselves(host: EpisodeHost, tasks: list[str],
                                                                             tmp_path):
    task = tasks[0]
    with anyio.fail_after(30):
        async with running_http_server(host) as base:
            async with Client(f"{base}/t/{task}/e/deleted/mcp") as client:
                await client.call_tool("calendar_list_events", {})
            (deleted,) = [e.id for e in host.open_episodes.values() if e.task.id == task]
            async with httpx.AsyncClient() as http:
                gone = await http.delete(f"{base}/t/{task}/e/deleted/mcp")
                assert gone.status_code == 204
                again = await http.delete(f"{base}/t/{task}/e/deleted/mcp")
                assert again.status_code == 404
            # The DELETE answers once the episode has ended and been graded.
            assert ended_row(host.store, deleted).status == "ended"
            assert host.store.verdict(deleted, GRADER_VERSION) is not None
            assert host.store.verdict_count(deleted) == 1

    # An abandoned episode (no submit, no DELETE) ends after the idle timeout, graded.
    idle = EpisodeHost(host.store, EpisodeSettings(cache_dir=tmp_path / "idle"))
    with anyio.fail_after(30):
        async with running_http_server(idle, ServeSettings(episode_idle_timeout=1.5)) as base:
            async with Client(f"{base}/t/{task}/e/abandoned/mcp") as client:
                await client.call_tool("mail_search_messages", {"query": "budget"})
            (abandoned,) = [r.id for r in host.store.episodes(source="live", task_id=task) if r.id != deleted]
            verdict = await wait_for_verdict(host.store, abandoned)
            assert not verdict.admitted
            row = ended_row(host.store, abandoned)
            assert row.status == "ended" and row.final_state and row.final_answer is None
            assert abandoned not in idle.open_episodes
            assert host.store.verdict_count(abandoned) == 1


@pytest.mark.parametrize(("mode", "version"), ERAS)
async def test_a_live_agent_that_solves_the_task_is_admitted_and_export_skips_it_without_messages(
        host: EpisodeHost, tasks: list[str], tmp_path, mode: str, version: str):
    from coworkenv.trainer import export_sft

    task = host.task(next(t for t in tasks if t.startswith("multi_step")))
    with anyio.fail_after(30):
        async with running_http_server(host) as base:
            async with client_for(base, task.id, mode, "solver") as client:
                for step in task.reference:
                    result = await client.call_tool(step.tool, step.arguments)
                    assert not result.is_error, result.content
                done = await client.call_tool("submit_answer", {"answer": task.reference_answer or "Done."})
            episode_id = done.structured_content["episode_id"]
            verdict = await wait_for_verdict(host.store, episode_id)
    assert verdict.admitted and verdict.reason == "complete" and verdict.score == 1.0
    assert host.store.verdict_count(episode_id) == 1
    calls = host.store.tool_calls(episode_id)
    assert [c.tool for c in calls] == [s.tool for s in task.reference] + ["submit_answer"]
    assert [c.arguments for c in calls[:-1]] == [s.arguments for s in task.reference]
    # The server never sees the conversation: the export has nothing to train on, and says so by count.
    assert export_sft(host.store, tmp_path / "sft.jsonl") == 0


@pytest.mark.slow
async def test_a_stdio_episode_is_graded_when_the_client_goes_away(host: EpisodeHost, tasks: list[str],
                                                                   store_path):
    import os
    import sys
    from pathlib import Path

    from mcp import StdioServerParameters

    root = Path(__file__).resolve().parents[2]
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "coworkenv", "serve", "--stdio", "--task", tasks[0], "--store", str(store_path)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p)},
    )
    with anyio.fail_after(45):
        async with Client(params) as client:
            assert not (await client.call_tool("calendar_get_event", {"id": "e01"})).is_error
    (episode,) = host.store.episodes(source="live", task_id=tasks[0])
    assert episode.status == "ended" and episode.final_answer is None
    with anyio.fail_after(10):
        verdict = await wait_for_verdict(host.store, episode.id)
    assert not verdict.admitted
    assert host.store.verdict_count(episode.id) == 1

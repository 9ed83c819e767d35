"""Recorded calls are written behind the request path; whatever way an episode ends (submit, DELETE,
the end of its session, the idle timeout, the server's shutdown), every call it made is in the
store file by the time the episode reads as ended, and the verdict it gets on ending is the one all
of them earn.

Reads go through a second connection to the file: the server's own ``Store`` would flush on read
and hide a lost write. A trigger notes how many calls of an episode were in the file at the moment
its end was written (grading, which reads soon after, must not be what writes them).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest
from mcp import Client

from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.gate import GRADER_VERSION, episode_record, grade
from coworkenv.server import ServeSettings, running_http_server
from coworkenv.store import Store

pytestmark = [pytest.mark.bwrap, pytest.mark.anyio]

CALLS = 12  # quick calls: some are still queued when the episode ends


@pytest.fixture(autouse=True)
def end_audit(store: Store, store_path: Path) -> None:
    with sqlite3.connect(store_path) as conn:
        conn.executescript("""
            create table end_audit (episode_id text, calls integer);
            create trigger note_calls_at_end after update of status on episodes
            when old.status = 'running' and new.status != 'running'
            begin
                insert into end_audit select new.id, count(*) from tool_calls where episode_id = new.id;
            end;
        """)


def committed(store_path: Path, sql: str, params: tuple = ()) -> list[tuple]:
    with sqlite3.connect(store_path) as conn:
        return conn.execute(sql, params).fetchall()


def committed_calls(store_path: Path, episode_id: str) -> list[tuple[int, str]]:
    return committed(store_path, "select idx, tool from tool_calls where episode_id = ? order by idx", (episode_id,))


async def ended(store_path: Path, episode_id: str) -> None:
    """Wait until the file says the episode ended (the server ends it in its own time)."""
    while committed(store_path, "select status from episodes where id = ?", (episode_id,)) != [("ended",)]:
        await anyio.sleep(0.02)


async def make_calls(client: Client) -> list[str]:
    tools = []
    for i in range(CALLS):
        tool, arguments = (("calendar_get_event", {"id": "e01"}) if i % 2 else
                           ("calendar_list_events", {"query": f"q{i}"}))
        result = await client.call_tool(tool, arguments)
        assert not result.is_error, result.content
        tools.append(tool)
    return tools


def the_episode(host: EpisodeHost, task: str) -> str:
    (episode_id,) = [e.id for e in host.open_episodes.values() if e.task.id == task]
    return episode_id


async def check_all_recorded(store_path: Path, episode_id: str, tools: list[str]) -> None:
    assert committed(store_path, "select calls from end_audit where episode_id = ?", (episode_id,)) == [
        (len(tools),)]
    assert committed_calls(store_path, episode_id) == list(enumerate(tools))
    reader = Store(store_path)  # what `coworkenv gate` in another process would see
    try:
        assert [c.tool for c in reader.tool_calls(episode_id)] == tools
        # The episode was graded once as it ended (just after its end was written), from every call:
        # grading it afresh from the file gives the same verdict.
        while (verdict := reader.verdict(episode_id, GRADER_VERSION)) is None:
            await anyio.sleep(0.02)
        row = reader.episode(episode_id)
        assert row is not None
        again, judged = grade(reader.task_spec(row.task_id), episode_record(reader, row))
        assert (verdict.score, verdict.reason) == (again.score, judged.reason)
        assert reader.verdict_count(episode_id) == 1
    finally:
        reader.close()


async def test_calls_reach_the_file_on_their_own_while_the_episode_runs(host: EpisodeHost, tasks: list[str],
                                                                         store_path: Path):
    task = tasks[0]
    with anyio.fail_after(30):
        async with running_http_server(host) as base:
            async with Client(f"{base}/t/{task}/e/running/mcp") as client:
                tools = await make_calls(client)
                episode_id = the_episode(host, task)
                while len(committed_calls(store_path, episode_id)) < CALLS:  # the periodic flush
                    await anyio.sleep(0.02)
                assert committed_calls(store_path, episode_id) == list(enumerate(tools))
                assert committed(store_path, "select status from episodes where id = ?", (episode_id,)) == [
                    ("running",)]


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_submit_and_delete_write_every_call_before_the_end(host: EpisodeHost, tasks: list[str],
                                                                 store_path: Path, era: str):
    task = tasks[0]
    with anyio.fail_after(45):
        async with running_http_server(host) as base:
            # Ended by submit_answer.
            url = f"{base}/t/{task}/e/submitted/mcp" if era == "modern" else f"{base}/t/{task}/mcp"
            async with Client(url, mode="auto" if era == "modern" else "legacy") as client:
                tools = await make_calls(client)
                episode_id = the_episode(host, task)
                await client.call_tool("submit_answer", {"answer": "done"})
                await ended(store_path, episode_id)
                await check_all_recorded(store_path, episode_id, [*tools, "submit_answer"])

            # Ended by DELETE: of the key URL (2026-07-28), or of the session when the client closes it.
            url = f"{base}/t/{task}/e/deleted/mcp" if era == "modern" else f"{base}/t/{task}/mcp"
            async with Client(url, mode="auto" if era == "modern" else "legacy") as client:
                tools = await make_calls(client)
                episode_id = the_episode(host, task)
            if era == "modern":
                import httpx

                async with httpx.AsyncClient() as http:
                    assert (await http.delete(url)).status_code == 204
            await ended(store_path, episode_id)
            await check_all_recorded(store_path, episode_id, tools)


async def test_idle_timeout_writes_every_call_before_the_end(store: Store, tasks: list[str], store_path: Path,
                                                             tmp_path: Path):
    task = tasks[0]
    idle = EpisodeHost(store, EpisodeSettings(cache_dir=tmp_path / "idle"))
    with anyio.fail_after(45):
        async with running_http_server(idle, ServeSettings(episode_idle_timeout=2.0)) as base:
            async with Client(f"{base}/t/{task}/e/abandoned/mcp") as client:
                tools = await make_calls(client)
                episode_id = the_episode(idle, task)
            await ended(store_path, episode_id)
            await check_all_recorded(store_path, episode_id, tools)


async def test_shutdown_writes_every_call_of_the_open_episodes(store: Store, tasks: list[str], store_path: Path,
                                                               tmp_path: Path):
    task = tasks[0]
    host = EpisodeHost(store, EpisodeSettings(cache_dir=tmp_path / "shutdown"))
    with anyio.fail_after(45):
        async with running_http_server(host) as base:
            async with Client(f"{base}/t/{task}/e/open-at-shutdown/mcp") as client:
                tools = await make_calls(client)
                episode_id = the_episode(host, task)
        # The server has stopped with the episode still open: it ended it on the way out.
        assert committed(store_path, "select status from episodes where id = ?", (episode_id,)) == [("ended",)]
        await check_all_recorded(store_path, episode_id, tools)

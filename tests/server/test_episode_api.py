"""The episode API over HTTP: ``POST /episodes`` opens an episode with its provenance (as the loop
does for teacher, repair and eval episodes, with the operator credential), any MCP client plays it at
``/e/{id}/mcp``, and ``POST /episodes/{id}/end`` ends it; the runtime grades it once, as it ends, and
``GET /episodes/{id}`` tells its status and verdict. Bad requests are refused naming what is wrong, and
the bearer token guards these routes like every other. (What a client without the operator
credential may do: ``test_provenance.py``.)
"""

from __future__ import annotations

import anyio
import httpx
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from coworkenv.episodes import EpisodeHost
from coworkenv.gate import GRADER_VERSION
from coworkenv.server import ServeSettings, running_http_server
from coworkenv.store import SOURCES, EpisodeRow, Provenance, Store

pytestmark = [pytest.mark.bwrap, pytest.mark.anyio]

OPERATOR = "operator-s3cret"
AS_OPERATOR = {"X-Coworkenv-Operator": OPERATOR}
SETTINGS = ServeSettings(operator_token=OPERATOR)
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
EVENT = {"title": "Episode API sync", "date": "2026-03-27", "start": "08:00", "end": "08:30"}


def episode_row(store: Store, episode_id: str) -> EpisodeRow:
    row = store.episode(episode_id)
    assert row is not None, episode_id
    return row


async def test_an_opened_teacher_episode_is_played_over_mcp_then_ended_truncated_and_graded_once(
        host: EpisodeHost, tasks: list[str]):
    task = tasks[0]
    with anyio.fail_after(60):
        async with (running_http_server(host, SETTINGS) as base,
                    httpx.AsyncClient(base_url=base, timeout=10, headers=AS_OPERATOR) as http):
            opened = await http.post("/episodes", json={"task": task, "source": "teacher", "provider": "oracle",
                                                        "hint": "Look in the files."})
            assert opened.status_code == 201, opened.text
            episode_id = opened.json()["episode_id"]
            assert opened.json() == {"episode_id": episode_id, "url": f"/e/{episode_id}/mcp"}

            # The provenance is on the episode before any agent has touched it.
            row = episode_row(host.store, episode_id)
            assert row.status == "running" and row.task_id == task
            assert row.provenance == Provenance("teacher", provider="oracle", attempt=1, hint="Look in the files.")
            assert (await http.get(f"/episodes/{episode_id}")).json() == {
                "episode_id": episode_id, "task_id": task, "source": "teacher", "status": "running",
                "error": None, "boundary": None, "verdict": None}

            # Any MCP client plays it at its URL, in either era; a client going away does not end it.
            url = base + opened.json()["url"]
            async with Client(url) as client:
                assert client.protocol_version == MODERN
                prompt = await client.get_prompt("task")
                assert [m.content.text for m in prompt.messages] == [host.task(task).instruction]
                created = await client.call_tool("calendar_create_event", EVENT)
                assert not created.is_error, created.content
            async with Client(url, mode="legacy") as client:
                assert client.protocol_version == LEGACY
                found = await client.call_tool("calendar_list_events", {"query": EVENT["title"]})
                assert found.structured_content["count"] == 1
            assert episode_row(host.store, episode_id).status == "running"
            assert host.store.verdict(episode_id, GRADER_VERSION) is None

            # The loop ends it (the agent ran out of steps): ended, graded, and the answer says how.
            ended = await http.post(f"/episodes/{episode_id}/end", json={"truncated": True})
            assert ended.status_code == 200, ended.text
            status = ended.json()
            assert status["status"] == "ended" and status["source"] == "teacher"
            assert status["error"] is None and status["boundary"] is None
            verdict = status["verdict"]
            assert verdict["reason"] == "truncated" and verdict["admitted"] is False
            assert verdict["grader_version"] == GRADER_VERSION
            stored = host.store.verdict(episode_id, GRADER_VERSION)
            assert stored is not None and verdict["score"] == stored.score and not stored.admitted

            row = episode_row(host.store, episode_id)
            assert row.status == "ended" and row.truncated and row.final_answer is None
            assert row.final_state and EVENT["title"] in row.final_state
            assert [c.tool for c in host.store.tool_calls(episode_id)] == ["calendar_create_event",
                                                                           "calendar_list_events"]
            assert episode_id not in host.open_episodes

            # Ended once: ending it again or asking tells the same, and its MCP address is closed.
            assert (await http.post(f"/episodes/{episode_id}/end", json={"truncated": False})).json() == status
            assert (await http.get(f"/episodes/{episode_id}")).json() == status
            async with Client(url) as client:
                with pytest.raises(MCPError, match=episode_id):
                    await client.list_tools()
    assert host.store.verdict_count(episode_id) == 1


async def test_repairs_answers_and_failures_through_the_episode_api(host: EpisodeHost, tasks: list[str]):
    task = tasks[0]
    with anyio.fail_after(60):
        async with (running_http_server(host, SETTINGS) as base,
                    httpx.AsyncClient(base_url=base, timeout=10, headers=AS_OPERATOR) as http):
            first = (await http.post("/episodes", json={"task": task, "source": "eval"})).json()["episode_id"]
            assert episode_row(host.store, first).provenance == Provenance("eval")

            # A repair attempt names the episode it repairs; the loop ends it with the agent's answer.
            opened = await http.post("/episodes", json={
                "task": task, "source": "teacher", "provider": "oracle", "attempt": 2, "repaired_from": first,
                "hint": "Check the budget file again."})
            assert opened.status_code == 201, opened.text
            repair = opened.json()["episode_id"]
            assert episode_row(host.store, repair).provenance == Provenance(
                "teacher", provider="oracle", attempt=2, repaired_from=first, hint="Check the budget file again.")
            async with Client(base + opened.json()["url"]) as client:
                assert not (await client.call_tool("files_list_files", {})).is_error
            answered = (await http.post(f"/episodes/{repair}/end", json={"answer": "I could not find it."})).json()
            assert answered["status"] == "ended" and answered["verdict"]["reason"] == "below_threshold"
            row = episode_row(host.store, repair)
            assert row.final_answer == "I could not find it." and not row.truncated

            # An infrastructure failure the loop met (its model server went away) fails the episode
            # with the boundary it crossed; the verdict says it was not the agent's doing.
            failed = (await http.post(f"/episodes/{first}/end", json={
                "error": "the model server at http://127.0.0.1:9 did not answer", "boundary": "model"})).json()
            assert failed["status"] == "failed" and failed["boundary"] == "model"
            assert failed["error"] == "the model server at http://127.0.0.1:9 did not answer"
            assert failed["verdict"]["reason"] == "infrastructure_error" and failed["verdict"]["admitted"] is False
            row = episode_row(host.store, first)
            assert (row.status, row.boundary) == ("failed", "model")
    for episode_id in (first, repair):
        assert host.store.verdict_count(episode_id) == 1


async def test_bad_episode_requests_are_refused_naming_the_problem(host: EpisodeHost, tasks: list[str]):
    task = tasks[0]
    with anyio.fail_after(60):
        async with (running_http_server(host, SETTINGS) as base,
                    httpx.AsyncClient(base_url=base, timeout=10, headers=AS_OPERATOR) as http):
            async def refused(path: str, *, status: int = 400, **request) -> str:
                response = await http.post(path, **request)
                assert response.status_code == status, (request, response.status_code, response.text)
                return response.json()["error"]["message"]

            assert "Invalid JSON" in await refused("/episodes", content=b"{task:")
            assert "OpenRequest" in await refused("/episodes", json=[task])
            assert "'null'" not in await refused("/episodes", json={"task": None})  # null is not the text "None"
            assert "Extra inputs" in await refused("/episodes", json={"task": task, "colour": "red"})
            assert "task: Field required" in await refused("/episodes", json={"source": "teacher"})
            unknown_task = await refused("/episodes", json={"task": "no-such-task", "source": "teacher"})
            assert "no-such-task" in unknown_task
            unknown_source = await refused("/episodes", json={"task": task, "source": "robot"})
            assert "'robot'" in unknown_source and all(source in unknown_source for source in SOURCES)
            assert "attempt" in await refused("/episodes", json={"task": task, "source": "teacher", "attempt": "two"})
            # a key given twice: parsers disagree on which counts, so the request is refused
            assert "'source' appears twice" in await refused(
                "/episodes", content=b'{"task": "%s", "source": "live", "source": "teacher"}' % task.encode())
            assert host.open_episodes == {} and host.store.episodes(source="teacher") == []

            # Ending: an unknown episode, or an error at a boundary that does not exist.
            missing = await http.get("/episodes/ep-missing")
            assert missing.status_code == 404 and "ep-missing" in missing.json()["error"]["message"]
            assert "ep-missing" in await refused("/episodes/ep-missing/end", status=404, json={})
            episode_id = (await http.post("/episodes", json={"task": task, "source": "teacher"})).json()["episode_id"]
            assert "Invalid JSON" in await refused(f"/episodes/{episode_id}/end", content=b"truncated")
            assert "truncated" in await refused(f"/episodes/{episode_id}/end", json={"truncated": "no"})
            bad_boundary = await refused(f"/episodes/{episode_id}/end", json={"error": "gone", "boundary": "moon"})
            assert "'moon'" in bad_boundary and "sandbox" in bad_boundary
            assert "'answer' appears twice" in await refused(f"/episodes/{episode_id}/end",
                                                             content=b'{"answer": "a", "answer": "b"}')
            # Refused requests change nothing: the episode is still open.
            assert episode_row(host.store, episode_id).status == "running"
            assert episode_id in host.open_episodes


def authorized_mcp(url: str, token: str) -> Client:
    """An MCP SDK client that sends the bearer token with every request."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=10)
    return Client(streamable_http_client(url, http_client=http))


async def test_the_episode_api_and_episode_urls_need_the_bearer_token(host: EpisodeHost, tasks: list[str]):
    task = tasks[0]
    settings = ServeSettings(token="s3cret", operator_token=OPERATOR)
    auth = {"authorization": "Bearer s3cret", **AS_OPERATOR}
    with anyio.fail_after(60):
        async with running_http_server(host, settings) as base, httpx.AsyncClient(base_url=base, timeout=10) as http:
            for token in (None, "nope"):
                headers = {"authorization": f"Bearer {token}"} if token else {}
                headers.update(AS_OPERATOR)  # the operator credential is no bearer token
                refused = await http.post("/episodes", headers=headers, json={"task": task, "source": "teacher"})
                assert refused.status_code == 401 and "bearer" in refused.headers["www-authenticate"].lower()
            assert host.store.episodes(source="teacher") == []

            opened = await http.post("/episodes", headers=auth, json={"task": task, "source": "teacher"})
            assert opened.status_code == 201, opened.text
            episode_id, url = opened.json()["episode_id"], base + opened.json()["url"]
            assert (await http.get(f"/episodes/{episode_id}", headers=AS_OPERATOR)).status_code == 401
            assert (await http.post(f"/episodes/{episode_id}/end", headers=AS_OPERATOR,
                                    json={"truncated": True})).status_code == 401
            assert (await http.delete(f"/e/{episode_id}/mcp")).status_code == 401
            assert episode_row(host.store, episode_id).status == "running"

            # An MCP client without the token gets nowhere; with it, it plays the episode.
            with pytest.raises(BaseExceptionGroup) as info:  # the connection fails inside the client's task group
                async with Client(url) as client:
                    await client.list_tools()
            assert info.group_contains(MCPError, match="bearer token")
            async with authorized_mcp(url, "s3cret") as client:
                assert not (await client.call_tool("calendar_get_event", {"id": "e01"})).is_error

            ended = await http.post(f"/episodes/{episode_id}/end", headers=auth, json={"truncated": True})
            assert ended.status_code == 200 and ended.json()["verdict"]["reason"] == "truncated"
            assert (await http.get(f"/episodes/{episode_id}", headers=auth)).json() == ended.json()
    assert [c.tool for c in host.store.tool_calls(episode_id)] == ["calendar_get_event"]


async def test_an_unknown_repaired_episode_is_refused_naming_it(host: EpisodeHost, tasks: list[str]):
    with anyio.fail_after(30):
        async with (running_http_server(host, SETTINGS) as base,
                    httpx.AsyncClient(base_url=base, timeout=10, headers=AS_OPERATOR) as http):
            response = await http.post("/episodes", json={"task": tasks[0], "source": "teacher", "attempt": 2,
                                                          "repaired_from": "ep-missing"})
            assert response.status_code == 400, response.text
            assert "ep-missing" in response.json()["error"]["message"]
            assert host.open_episodes == {}

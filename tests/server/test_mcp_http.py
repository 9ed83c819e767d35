"""The MCP server over streamable HTTP, in both protocol eras, against real sandboxes and store;
every test twice: against one server in this process, and through the front of a ``coworkenv serve
--workers 2`` (each episode in one of two worker processes, every request routed to its worker).

2026-07-28 era: no sessions, an episode per key in the path (``/t/{task}/e/{key}/mcp``).
2025-11-25 era (``mode="legacy"``): one episode per MCP session at ``/t/{task}/mcp``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client, MCPError

from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.gate import GRADER_VERSION
from coworkenv.server import running_http_server
from coworkenv.store import EpisodeRow, Store, ToolCallRow

from .conftest import ROOT, free_port

pytestmark = [pytest.mark.bwrap, pytest.mark.anyio]

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
EVENT = {"title": "Coworkenv test sync", "date": "2026-03-27", "start": "08:00", "end": "08:30"}
MAIL = {"to": ["alice.nguyen@acme.example"], "subject": "Coworkenv test note", "body": "Only here."}


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A store of six calibrated tasks (``coworkenv synth -n 6``), shared by the module's tests."""
    path = tmp_path_factory.mktemp("mcp-http") / "coworkenv.db"
    subprocess.run([sys.executable, "-m", "coworkenv", "synth", "--store", str(path), "-n", "6"], check=True,
                   capture_output=True, cwd=ROOT)
    store = Store(path)
    try:
        return path, [row.id for row in store.tasks(status="admitted")]
    finally:
        store.close()


@pytest.fixture(scope="module")
def front(calibrated: tuple[Path, list[str]]) -> Iterator[str]:
    """``coworkenv serve --workers 2`` on the module's store; its base URL."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "coworkenv", "serve", "--store", str(calibrated[0]), "--workers",
                                "2", "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert process.poll() is None, process.stdout.read() if process.stdout else ""
            try:
                httpx.get(f"{base}/tasks", timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "serve --workers 2 did not start"
                time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)


@dataclass
class Served:
    """Where a test's episodes are served, and the store they are recorded in."""

    base: str
    store: Store
    tasks: list[str]
    seen: set[str] = field(default_factory=set)  # episodes of the store before the test

    def task(self, task_id: str):
        return self.store.task_spec(task_id)


@pytest.fixture(params=["one server", "2 workers"])
async def served(request: pytest.FixtureRequest, calibrated: tuple[Path, list[str]],
                 tmp_path: Path) -> AsyncIterator[Served]:
    path, tasks = calibrated
    store = Store(path)
    seen = {e.id for e in store.episodes()}
    try:
        if request.param == "2 workers":
            yield Served(request.getfixturevalue("front"), store, tasks, seen)
            return
        host = EpisodeHost(store, EpisodeSettings(cache_dir=tmp_path / "cache"))
        try:
            async with running_http_server(host) as base:
                yield Served(base, store, tasks, seen)
        finally:
            await host.close()
    finally:
        store.close()


def open_episodes(served: Served, task_id: str) -> list[str]:
    """The episodes of ``task_id`` opened during this test and still open."""
    return [e.id for e in served.store.episodes(task_id=task_id, status="running") if e.id not in served.seen]


async def calls_of(store: Store, episode_id: str, count: int) -> list[ToolCallRow]:
    """The episode's tool calls once ``count`` are recorded (a server records them write-behind)."""
    with anyio.fail_after(10):
        while len(calls := store.tool_calls(episode_id)) < count:
            await anyio.sleep(0.02)
    return calls


async def wait_until_ended(store: Store, episode_id: str) -> EpisodeRow:
    while (row := store.episode(episode_id)) is None or row.status == "running":
        await anyio.sleep(0.02)
    return row


async def exercise(client: Client, served: Served, task_id: str) -> str:
    """Everything an agent does in one episode; returns the episode id and checks the record."""
    store = served.store
    task = served.task(task_id)
    specs = store.workspace(task.workspace_id).tools

    listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert list(listed) == [spec.name for spec in specs] + ["submit_answer"]
    for spec in specs:
        tool = listed[spec.name]
        assert tool.input_schema == spec.input_schema
        served = dict(spec.output_schema)  # images and documents travel as content blocks, not in the JSON
        if "_content" in served.get("properties", {}):
            served["properties"] = {k: v for k, v in served["properties"].items() if k != "_content"}
            served["required"] = [r for r in served.get("required", []) if r != "_content"]
        assert tool.output_schema == served
        assert tool.description == spec.description
        assert tool.annotations.read_only_hint is (spec.effect == "read"), spec.name
    assert listed["calendar_list_events"].annotations.read_only_hint is True
    assert listed["calendar_create_event"].annotations.read_only_hint is False
    assert listed["submit_answer"].input_schema["required"] == ["answer"]

    prompts = await client.list_prompts()
    assert [p.name for p in prompts.prompts] == ["task"]
    prompt = await client.get_prompt("task")
    assert [m.content.text for m in prompt.messages] == [task.instruction]
    assert prompt.messages[0].role == "user"

    (resource,) = [r for r in (await client.list_resources()).resources if r.name == "task"]
    contents = (await client.read_resource(resource.uri)).contents
    assert [c.text for c in contents] == [task.instruction]

    # A write is visible to a later read of the same episode.
    before = await client.call_tool("calendar_list_events", {"query": EVENT["title"]})
    assert not before.is_error and before.structured_content["count"] == 0
    created = await client.call_tool("calendar_create_event", EVENT)
    assert not created.is_error, created.content
    event = created.structured_content["event"]
    assert {k: event[k] for k in EVENT} == EVENT
    assert json.loads(created.content[0].text) == created.structured_content
    fetched = await client.call_tool("calendar_get_event", {"id": event["id"]})
    assert not fetched.is_error and fetched.structured_content == event
    after = await client.call_tool("calendar_list_events", {"query": EVENT["title"]})
    assert [e["id"] for e in after.structured_content["events"]] == [event["id"]]

    submitted = await client.call_tool("submit_answer", {"answer": "Scheduled the test sync."})
    assert not submitted.is_error, submitted.content
    episode_id = submitted.structured_content["episode_id"]
    assert submitted.structured_content["status"] == "ended"

    calls = await calls_of(store, episode_id, 5)
    assert [c.tool for c in calls] == [
        "calendar_list_events", "calendar_create_event", "calendar_get_event",
        "calendar_list_events", "submit_answer",
    ]
    assert [c.idx for c in calls] == list(range(2, 7))  # after the prompt and the resource read
    assert [(c.kind, c.tool) for c in store.interactions(episode_id)][:2] == [("prompt", "task"),
                                                                             ("resource", "coworkenv://task")]
    assert [c.is_error for c in calls] == [False] * 5
    assert calls[1].arguments == EVENT
    assert calls[1].result is not None and json.loads(calls[1].result) == created.structured_content

    # submit_answer has ended the episode and graded it, once, by the time its result arrives.
    row = store.episode(episode_id)
    assert row is not None and row.task_id == task_id
    assert row.status == "ended" and row.source == "live" and row.error is None
    assert row.final_answer == "Scheduled the test sync."
    assert row.final_state and EVENT["title"] in row.final_state
    assert store.verdict(episode_id, GRADER_VERSION) is not None
    assert store.verdict_count(episode_id) == 1
    return episode_id


async def test_modern_era_episode_by_key(served: Served):
    task = served.tasks[0]
    with anyio.fail_after(60):
        base = served.base
        async with Client(f"{base}/t/{task}/e/run-1/mcp") as client:
            assert client.protocol_version == MODERN
            episode_id = await exercise(client, served, task)
            # The key names that episode: once ended it stays ended, and a call there says so.
            with pytest.raises(MCPError, match="at key 'run-1' has ended .* open a new one at"):
                await client.call_tool("calendar_list_events", {})
    # Nothing is recorded after the end.
    assert served.store.tool_calls(episode_id)[-1].tool == "submit_answer"


async def test_legacy_era_one_episode_per_session(served: Served):
    task = served.tasks[0]
    with anyio.fail_after(60):
        base = served.base
        async with Client(f"{base}/t/{task}/mcp", mode="legacy") as client:
            assert client.protocol_version == LEGACY
            first = await exercise(client, served, task)
        async with Client(f"{base}/t/{task}/mcp", mode="legacy") as client:
            await client.call_tool("calendar_list_events", {})
            (second,) = open_episodes(served, task)
        assert second != first
        # Closing the session ends its episode.
        row = await wait_until_ended(served.store, second)
        assert row.status == "ended" and row.final_state
        assert [c.tool for c in served.store.tool_calls(second)] == ["calendar_list_events"]


async def check_isolated(a: Client, b: Client) -> None:
    """A writes an event, B sends a mail, concurrently; neither sees the other's change."""
    results = {}

    async def call(name: str, client: Client, tool: str, arguments: dict) -> None:
        results[name] = await client.call_tool(tool, arguments)

    async with anyio.create_task_group() as tg:
        tg.start_soon(call, "a", a, "calendar_create_event", EVENT)
        tg.start_soon(call, "b", b, "mail_send_message", MAIL)
    assert not results["a"].is_error and not results["b"].is_error

    async def count(client: Client, tool: str, query: str) -> int:
        result = await client.call_tool(tool, {"query": query})
        assert not result.is_error, result.content
        return result.structured_content["count"]

    assert await count(a, "calendar_list_events", EVENT["title"]) == 1
    assert await count(b, "calendar_list_events", EVENT["title"]) == 0
    assert await count(b, "mail_search_messages", MAIL["subject"]) == 1
    assert await count(a, "mail_search_messages", MAIL["subject"]) == 0


async def test_concurrent_keys_do_not_share_state(served: Served):
    task = served.tasks[0]
    with anyio.fail_after(60):
        base = served.base
        async with Client(f"{base}/t/{task}/e/alice/mcp") as a, Client(f"{base}/t/{task}/e/bob/mcp") as b:
            await check_isolated(a, b)
            assert len(open_episodes(served, task)) == 2
        # The same key, from a new connection, finds the same episode again.
        async with Client(f"{base}/t/{task}/e/alice/mcp") as again:
            seen = await again.call_tool("calendar_list_events", {"query": EVENT["title"]})
            assert seen.structured_content["count"] == 1
            assert len(open_episodes(served, task)) == 2


async def test_concurrent_legacy_sessions_do_not_share_state(served: Served):
    task = served.tasks[0]
    with anyio.fail_after(60):
        base = served.base
        url = f"{base}/t/{task}/mcp"
        async with Client(url, mode="legacy") as a, Client(url, mode="legacy") as b:
            await check_isolated(a, b)
            episodes = open_episodes(served, task)
            assert len(episodes) == 2
        for episode_id in episodes:
            assert (await wait_until_ended(served.store, episode_id)).status == "ended"
            assert len(served.store.tool_calls(episode_id)) == 3  # all written by the end


async def test_wrong_arguments_are_tool_errors_naming_the_field(served: Served):
    task = served.tasks[0]
    with anyio.fail_after(60):
        base = served.base
        for client in (Client(f"{base}/t/{task}/e/bad-args/mcp"), Client(f"{base}/t/{task}/mcp", mode="legacy")):
            async with client:
                episode_id = await check_wrong_arguments(client, served, task)
            episode = served.store.episode(episode_id)
            assert episode is not None and episode.task_id == task


async def check_wrong_arguments(client: Client, served: Served, task: str) -> str:
    cases = [
        ({k: v for k, v in EVENT.items() if k != "end"}, ["missing", "'end'"]),
        ({**EVENT, "title": 42}, ["'title'", "string"]),
        ({**EVENT, "attendees": ["bruno.costa@acme.example", 7]}, ["attendees.1"]),
        ({**EVENT, "colour": "red"}, ["unexpected", "colour"]),
    ]
    for arguments, names in cases:
        result = await client.call_tool("calendar_create_event", arguments)
        assert result.is_error, arguments
        assert result.structured_content is None
        text = result.content[0].text
        assert "calendar_create_event" in text
        for name in names:
            assert name in text, (name, text)

    unknown = await client.call_tool("calendar_teleport", {"to": "Mars"})
    assert unknown.is_error and "calendar_teleport" in unknown.content[0].text

    # The session goes on.
    ok = await client.call_tool("calendar_create_event", EVENT)
    assert not ok.is_error, ok.content
    listed = await client.call_tool("calendar_list_events", {"query": EVENT["title"]})
    assert listed.structured_content["count"] == 1

    (episode_id,) = open_episodes(served, task)
    calls = await calls_of(served.store, episode_id, 7)
    assert [c.error_kind for c in calls] == ["arguments"] * 4 + ["unknown_tool", None, None]
    assert [c.is_error for c in calls] == [True] * 5 + [False, False]
    assert calls[4].tool == "calendar_teleport"
    # Nothing the invalid calls asked for reached the workspace.
    submitted = await client.call_tool("submit_answer", {"answer": "done"})
    assert submitted.structured_content["episode_id"] == episode_id
    final_state = (await wait_until_ended(served.store, episode_id)).final_state
    assert final_state is not None
    assert final_state.count(EVENT["title"]) == 1 and "colour" not in final_state
    return episode_id


async def test_addressing_errors(served: Served):
    task, other = served.tasks[0], served.tasks[1]
    with anyio.fail_after(60):
        base = served.base
        # 2026-07-28 has no sessions: at the bare task URL a client lists what the task offers
        # (opening nothing), and a call is refused with the address where episodes live.
        async with Client(f"{base}/t/{task}/mcp") as client:
            assert client.protocol_version == MODERN
            names = [t.name for t in (await client.list_tools()).tools]
            assert "submit_answer" in names and "calendar_list_events" in names
            assert [p.name for p in (await client.list_prompts()).prompts] == ["task"]
            assert (await client.list_resource_templates()).resource_templates
            with pytest.raises(MCPError) as info:
                await client.call_tool("calendar_list_events", {})
            assert f"/t/{task}/e/<" in str(info.value) and "/mcp" in str(info.value)
        assert open_episodes(served, task) == [] and open_episodes(served, other) == []

        # An unknown task is named, in both eras, as the client connects (its initialize is refused).
        for url, mode in ((f"{base}/t/no-such-task/e/k/mcp", "auto"), (f"{base}/t/no-such-task/mcp", "legacy")):
            with pytest.raises(BaseException) as refused:
                async with Client(url, mode=mode) as client:
                    await client.call_tool("calendar_list_events", {})
            assert "no task 'no-such-task' on this server" in refusal(refused.value)
        assert open_episodes(served, task) == [] and open_episodes(served, other) == []

        # A legacy session belongs to the task it was opened on.
        await check_session_is_bound_to_its_task(base, served, task, other)


def refusal(error: BaseException) -> str:
    """The messages of an error and of the errors it groups (a client's task group wraps them)."""
    if isinstance(error, BaseExceptionGroup):
        return " | ".join(refusal(e) for e in error.exceptions)
    return str(error)


def sse_messages(response: httpx.Response) -> list[dict]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return [json.loads(line[5:]) for line in response.text.splitlines()
                if line.startswith("data:") and line[5:].strip()]
    return [response.json()]


async def check_session_is_bound_to_its_task(base: str, served: Served, task: str, other: str) -> None:
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    async with httpx.AsyncClient(timeout=10) as http:
        init = await http.post(f"{base}/t/{task}/mcp", headers=headers, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": LEGACY, "capabilities": {},
                       "clientInfo": {"name": "test", "version": "0"}},
        })
        assert init.status_code == 200
        headers = {**headers, "mcp-session-id": init.headers["mcp-session-id"],
                   "mcp-protocol-version": LEGACY}
        note = await http.post(f"{base}/t/{task}/mcp", headers=headers,
                               json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert note.status_code == 202

        async def rpc(path_task: str, rid: int, method: str, params: dict) -> dict:
            response = await http.post(f"{base}/t/{path_task}/mcp", headers=headers,
                                       json={"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
            (message,) = [m for m in sse_messages(response) if m.get("id") == rid]
            return message

        own = await rpc(task, 2, "tools/call", {"name": "calendar_create_event", "arguments": EVENT})
        assert own["result"]["isError"] is False
        (episode_id,) = open_episodes(served, task)

        for rid, (method, params) in enumerate([
            ("prompts/get", {"name": "task"}),
            ("tools/call", {"name": "calendar_cancel_event", "arguments": {"id": "e01"}}),
        ], start=3):
            foreign = await rpc(other, rid, method, params)
            assert "result" not in foreign, foreign
            assert task in foreign["error"]["message"] and other in foreign["error"]["message"]
        assert open_episodes(served, other) == []
        await http.delete(f"{base}/t/{task}/mcp", headers=headers)
        await wait_until_ended(served.store, episode_id)  # every call it recorded is written by then
        assert [c.tool for c in served.store.tool_calls(episode_id)] == ["calendar_create_event"]

"""The holes found by attacking the server through its public interface, each reproduced here and
shown to hold: cancelled calls, empty tokens, unencodable text, unbounded episodes, episodes left
running by killed processes, rate limits bypassed by made-up sessions, exposed held-out tasks,
unrecorded reads, and bad requests refused before they cost anything."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client

from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.gate import GRADER_VERSION
from coworkenv.server import ServeSettings, running_http_server
from coworkenv.store import Store
from coworkenv.workspace import load_state

pytestmark = [pytest.mark.bwrap, pytest.mark.anyio]

ROOT = Path(__file__).resolve().parents[2]
VERSION = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": VERSION, "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"}}
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def call_request(path: str, port: int, tool: str, arguments: dict, rid: int = 1) -> bytes:
    """A whole 2026-07-28 tools/call over HTTP/1.1, as bytes."""
    body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                       "params": {"name": tool, "arguments": arguments, "_meta": META}}).encode()
    head = (f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-length: {len(body)}\r\n"
            f"accept: application/json, text/event-stream\r\ncontent-type: application/json\r\n"
            f"mcp-protocol-version: {VERSION}\r\nmcp-method: tools/call\r\nmcp-name: {tool}\r\n\r\n")
    return head.encode() + body


def modern(url: str) -> Client:
    return Client(url)


async def test_a_call_whose_client_hangs_up_is_recorded_whenever_it_ran(host: EpisodeHost, tasks: list[str]):
    """A client sends a destructive call and closes the connection at once, ten times: wherever the
    message is gone from the final state, the call that deleted it is on the record."""
    task = tasks[0]
    with anyio.fail_after(120):
        async with running_http_server(host) as base, httpx.AsyncClient(base_url=base, timeout=10) as http:
            port = int(base.rsplit(":", 1)[1])
            ran = recorded = 0
            for trial in range(10):
                path = f"/t/{task}/e/hangup-{trial}/mcp"
                async with modern(base + path) as client:  # open the episode, make one ordinary call
                    await client.call_tool("mail_search_messages", {"query": "x"})
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(call_request(path, port, "mail_delete_message", {"id": "m01"}))
                await writer.drain()
                writer.close()  # gone before any answer
                await asyncio.sleep(0.02 * (trial % 3))
                episode = host.store.episodes(task_id=task, status="running")[-1]
                assert (await http.delete(path)).status_code == 204
                state = load_state(host.store.final_state(episode.id))
                deleted = state.execute("select count(*) from mail_messages where id = 'm01'").fetchone()[0] == 0
                calls = [c.tool for c in host.store.tool_calls(episode.id)]
                ran += deleted
                recorded += "mail_delete_message" in calls
                assert not deleted or "mail_delete_message" in calls, (trial, calls)
    assert recorded >= ran


def test_an_empty_or_blank_token_is_no_token(tmp_path):
    for token in ("", "   ", "\t"):
        with pytest.raises(ValueError, match="empty"):
            ServeSettings(bind="0.0.0.0", token=token).check()
        with pytest.raises(ValueError, match="empty"):
            ServeSettings(bind="127.0.0.1", token=token).check()
    store = tmp_path / "s.db"
    Store(store).close()
    out = subprocess.run([sys.executable, "-m", "coworkenv", "serve", "--store", str(store), "--host", "0.0.0.0",
                          "--token", ""], capture_output=True, text=True, timeout=60, cwd=ROOT,
                         env={**os.environ, "COWORKENV_TOKEN": ""})
    assert out.returncode == 2 and "empty" in out.stderr and "Traceback" not in out.stderr


async def test_text_that_cannot_be_stored_is_a_tool_error_and_the_episode_still_ends(host: EpisodeHost,
                                                                                      tasks: list[str]):
    task = tasks[0]
    path = f"/t/{task}/e/surrogate/mcp"
    with anyio.fail_after(60):
        async with running_http_server(host) as base, httpx.AsyncClient(base_url=base, timeout=10) as http:
            async with modern(base + path) as client:
                await client.list_tools()
            for raw in ('"\\ud800 done"', '"done\\u0000 really"'):
                body = ('{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "submit_answer", '
                        f'"arguments": {{"answer": {raw}}}, "_meta": {json.dumps(META)}}}}}')
                response = await http.post(path, content=body.encode(), headers={
                    **HEADERS, "mcp-protocol-version": VERSION, "mcp-method": "tools/call", "mcp-name": "submit_answer"})
                assert response.status_code == 200, response.text
                reply = json.loads(response.text.split("data: ")[-1]) if "data: " in response.text else response.json()
                assert reply["result"]["isError"], reply
                assert "answer" in reply["result"]["content"][0]["text"]
            episode = host.store.episodes(task_id=task, status="running")[-1]
            async with modern(base + path) as client:  # the agent answers properly: it ends and is graded
                assert not (await client.call_tool("submit_answer", {"answer": "done"})).is_error
    row = host.store.episode(episode.id)
    assert row.status == "ended" and host.store.verdict(episode.id, GRADER_VERSION) is not None
    refused = [c for c in host.store.tool_calls(episode.id) if c.tool == "submit_answer" and c.is_error]
    assert len(refused) == 2 and all(c.error_kind == "arguments" and c.error for c in refused)


async def test_open_episodes_are_bounded_and_idle_fresh_ones_end_sooner(host: EpisodeHost, tasks: list[str]):
    settings = ServeSettings(max_episodes_per_client=2, episode_idle_timeout=60, fresh_idle_timeout=1.5)
    task = tasks[0]
    with anyio.fail_after(60):
        async with running_http_server(host, settings) as base:
            async with modern(f"{base}/t/{task}/e/a/mcp") as a, modern(f"{base}/t/{task}/e/b/mcp") as b:
                for _ in range(2):  # at work: two calls (one, as a one-shot client leaves it, ends fresh)
                    await a.call_tool("mail_search_messages", {"query": "x"})
                await b.list_tools()  # listing opens no episode
                assert len(host.open_episodes) == 1
                await b.get_prompt("task")  # opened, but no call yet
                with pytest.raises(BaseExceptionGroup) as refused:
                    async with modern(f"{base}/t/{task}/e/c/mcp") as c:
                        await c.list_tools()  # a listing is answered at the limit too
                        await c.get_prompt("task")
                assert refused.group_contains(Exception, match="too many open episodes")
                while len(host.open_episodes) > 1:  # b, which made no call, ends after 1.5 s idle
                    await anyio.sleep(0.05)
                (left,) = host.open_episodes.values()
                assert left.calls == 2
                async with modern(f"{base}/t/{task}/e/c/mcp") as c:  # room again
                    await c.get_prompt("task")
    ended = [e for e in host.store.episodes(task_id=task) if e.status == "ended"]
    assert ended and all(host.store.verdict(e.id, GRADER_VERSION) for e in ended)


async def test_episodes_a_killed_server_left_running_end_as_interrupted(store_path: Path, tasks: list[str],
                                                                          serve_cli, tmp_path: Path):
    task = tasks[0]
    async with serve_cli("--store", str(store_path), "--idle-timeout", "3600", ready_path="/tasks") as base:
        for key in ("k1", "k2"):
            async with modern(f"{base}/t/{task}/e/{key}/mcp") as client:
                for _ in range(5):
                    await client.call_tool("mail_search_messages", {"query": "x"})
        server = next(p for p in _children() if "serve" in p[1] and str(store_path) in p[1])
        os.kill(server[0], signal.SIGKILL)
    store = Store(store_path)
    running = store.episodes(task_id=task, status="running")
    assert len(running) == 2  # what the kill left
    out = subprocess.run([sys.executable, "-m", "coworkenv", "sandbox", "cleanup", "--store", str(store_path),
                          "--root", str(tmp_path)], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("interrupted") == 2
    for episode in running:
        row = store.episode(episode.id)
        verdict = store.verdict(episode.id, GRADER_VERSION)
        assert row.status == "failed" and row.boundary == "process" and "interrupted" in row.error
        assert verdict is not None and not verdict.admitted and verdict.reason == "infrastructure_error"
    # a host opening the store does the same for what is left (nothing now)
    again = EpisodeHost(store, EpisodeSettings(cache_dir=tmp_path / "cache"))
    assert again.interrupted == []
    await again.close()


def _children() -> list[tuple[int, str]]:
    """(pid, command line) of this process's children."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():
                out.append((int(pid), Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")))
        except (OSError, ValueError, IndexError):
            continue
    return out


async def test_made_up_sessions_buy_no_rate_and_reach_nothing(host: EpisodeHost, tasks: list[str]):
    settings = ServeSettings(rate_per_s=0.01, rate_burst=3)
    path = f"/t/{tasks[0]}/e/limited/mcp"
    with anyio.fail_after(60):
        async with running_http_server(host, settings) as base, httpx.AsyncClient(base_url=base, timeout=10) as http:
            statuses = []
            for i in range(20):
                headers = {**HEADERS, "mcp-session-id": f"{i:032x}"}
                statuses.append((await http.post(path, headers=headers, json={"jsonrpc": "2.0", "id": i,
                                                                                "method": "tools/list"})).status_code)
            assert set(statuses) == {404}  # no such session: refused before it reaches any episode
            served = [(await http.post(path, headers={**HEADERS, "mcp-protocol-version": VERSION,
                                                      "mcp-method": "tools/list"},
                                       json={"jsonrpc": "2.0", "id": i, "method": "tools/list",
                                             "params": {"_meta": META}})).status_code for i in range(6)]
            assert served[:3] == [200, 200, 200] and set(served[3:]) == {429}


async def test_held_out_tasks_are_served_to_evaluation_only(host: EpisodeHost, tasks: list[str]):
    heldout = tasks[1]
    host.store.set_task_status(heldout, "heldout")
    operator = {"X-Coworkenv-Operator": "operator-s3cret"}
    with anyio.fail_after(60):
        async with (running_http_server(host, ServeSettings(operator_token="operator-s3cret")) as base,
                    httpx.AsyncClient(base_url=base, timeout=10) as http):
            assert (await http.get("/tasks", params={"status": "heldout"})).status_code == 403
            assert heldout not in [t["id"] for t in (await http.get("/tasks")).json()]
            with pytest.raises(BaseExceptionGroup) as refused:
                async with modern(f"{base}/t/{heldout}/e/peek/mcp") as client:
                    await client.list_tools()
            assert refused.group_contains(Exception, match="heldout")
            teacher = await http.post("/episodes", headers=operator, json={"task": heldout, "source": "teacher"})
            assert teacher.status_code == 403 and "not served" in teacher.text
            assert (await http.post("/episodes", json={"task": heldout, "source": "eval"})).status_code == 403
            evaluation = await http.post("/episodes", headers=operator, json={"task": heldout, "source": "eval"})
            assert evaluation.status_code == 201
            await http.post(f"/episodes/{evaluation.json()['episode_id']}/end", headers=operator, json={})
        async with running_http_server(host, ServeSettings(serve_heldout=True)) as base:
            async with modern(f"{base}/t/{heldout}/e/allowed/mcp") as client:
                assert (await client.list_tools()).tools
                await client.call_tool("submit_answer", {"answer": "peeked"})
    assert [e.source for e in host.store.episodes(task_id=heldout) if e.source != "calibration"] == ["eval", "live"]


async def test_every_read_is_recorded_with_its_outcome_and_sizes_are_bounded(host: EpisodeHost, tasks: list[str]):
    task = tasks[0]
    with anyio.fail_after(60):
        async with running_http_server(host) as base:
            async with modern(f"{base}/t/{task}/e/reads/mcp") as client:
                await client.get_prompt("task")
                await client.read_resource("coworkenv://mail/messages/m01")
                with pytest.raises(Exception, match="m999"):
                    await client.read_resource("coworkenv://mail/messages/m999")
                failed = await client.call_tool("mail_read_message", {"id": "m999"})
                assert failed.is_error
                huge = await client.call_tool("mail_search_messages", {"query": "x" * 200_000})
                assert not huge.is_error
                await client.call_tool("submit_answer", {"answer": "done"})
    (episode,) = host.store.episodes(task_id=task, source="live")
    rows = host.store.interactions(episode.id)
    assert [c.tool for c in host.store.tool_calls(episode.id)] == ["mail_read_message", "mail_search_messages",
                                                                    "submit_answer"]
    kinds = [(r.kind, r.tool, r.is_error) for r in rows]
    assert kinds[:4] == [("prompt", "task", False), ("resource", "coworkenv://mail/messages/m01", False),
                         ("resource", "coworkenv://mail/messages/m999", True), ("call", "mail_read_message", True)]
    assert json.loads(rows[1].result)["id"] == "m01"
    assert "m999" in rows[2].error and "m999" in rows[3].error
    assert rows[4].arguments["_truncated"] > 200_000 and len(rows[4].arguments["head"]) == 1024
    verdict = host.store.verdict(episode.id, GRADER_VERSION)
    assert verdict is not None  # graded on its calls only: the reads are not calls


async def test_bad_requests_are_refused_before_they_reach_the_protocol(host: EpisodeHost, tasks: list[str]):
    path = f"/t/{tasks[0]}/e/bad/mcp"
    with anyio.fail_after(30):
        async with running_http_server(host) as base, httpx.AsyncClient(base_url=base, timeout=10) as http:
            wrong_type = await http.post(path, content=b"{}", headers={**HEADERS, "content-type": "text/plain"})
            assert wrong_type.status_code == 415 and "application/json" in wrong_type.text
            unknown = await http.post(path, json={}, headers={**HEADERS, "mcp-session-id": "nope"})
            assert unknown.status_code == 404 and "nope" in unknown.text
    assert host.store.episodes(task_id=tasks[0], source="live") == []  # neither opened an episode


async def test_simultaneous_opens_never_pass_the_per_client_cap(host: EpisodeHost, tasks: list[str]):
    """60 opens at once from one client, under a cap of 20, half at key addresses and half through the
    episode API: exactly 20 open (each takes its slot before it waits for a sandbox)."""
    task = tasks[0]
    settings = ServeSettings(max_episodes_per_client=20, rate_per_s=None)
    with anyio.fail_after(180):
        async with running_http_server(host, settings) as base, httpx.AsyncClient(base_url=base, timeout=120) as http:
            answers: list[str] = []

            async def at_key(i: int) -> None:
                headers = {**HEADERS, "mcp-protocol-version": VERSION, "mcp-method": "tools/call",
                           "mcp-name": "mail_search_messages"}
                answer = await http.post(f"/t/{task}/e/race-{i}/mcp", headers=headers, json={
                    "jsonrpc": "2.0", "id": i, "method": "tools/call",
                    "params": {"name": "mail_search_messages", "arguments": {"query": "x"}, "_meta": META}})
                answers.append(answer.text)

            async def through_api(i: int) -> None:
                answers.append((await http.post("/episodes", json={"task": task})).text)

            async with anyio.create_task_group() as group:
                for i in range(30):
                    group.start_soon(at_key, i)
                    group.start_soon(through_api, i)
            assert len(host.open_episodes) == 20
            assert sum("too many open episodes for 127.0.0.1 (20, at most 20)" in a for a in answers) == 40
            for episode in list(host.open_episodes.values()):  # each ended by its address gives its slot back
                assert (await http.delete(f"/e/{episode.id}/mcp")).status_code == 204
            assert (await http.post("/episodes", json={"task": task})).status_code == 201


async def test_legacy_sessions_are_capped_from_initialize_and_give_their_slot_back(host: EpisodeHost,
                                                                                    tasks: list[str]):
    """2025-11-25 sessions hold a slot each from ``initialize`` (before any episode opens): eight at once
    under a cap of 3 open three; a session ended (DELETE) lets one more open."""
    settings = ServeSettings(max_episodes_per_client=3, rate_per_s=None)
    path = f"/t/{tasks[0]}/mcp"
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
    with anyio.fail_after(60):
        async with running_http_server(host, settings) as base, httpx.AsyncClient(base_url=base, timeout=30) as http:
            answers: list[httpx.Response] = []

            async def open_one() -> None:
                answers.append(await http.post(path, headers=HEADERS, json=initialize))

            async with anyio.create_task_group() as group:
                for _ in range(8):
                    group.start_soon(open_one)
            opened = [a.headers["mcp-session-id"] for a in answers if a.status_code == 200]
            refused = [a for a in answers if a.status_code != 200]
            assert len(opened) == 3 and len(refused) == 5
            assert all(a.status_code == 503 and "too many open sessions for 127.0.0.1" in a.text for a in refused)
            await open_one()
            assert answers[-1].status_code == 503
            ended = await http.delete(path, headers={**HEADERS, "mcp-session-id": opened[0],
                                                     "mcp-protocol-version": "2025-11-25"})
            assert ended.status_code == 200
            await open_one()
            assert answers[-1].status_code == 200 and answers[-1].headers["mcp-session-id"] not in opened

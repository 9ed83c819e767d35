"""HTTP guards, seen from raw HTTP: bearer token, Host/Origin, body size, rate, session pinning."""

from __future__ import annotations

import anyio
import httpx
import pytest

from coworkenv.episodes import EpisodeHost
from coworkenv.server import ServeSettings, running_http_server

pytestmark = [pytest.mark.bwrap, pytest.mark.anyio]

LEGACY = "2025-11-25"
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}


def test_non_loopback_bind_needs_a_token():
    for bind in ("0.0.0.0", "192.168.1.20", "::"):
        with pytest.raises(ValueError, match="bearer token"):
            ServeSettings(bind=bind).check()
    ServeSettings(bind="0.0.0.0", token="s3cret").check()
    ServeSettings(bind="127.0.0.1").check()


async def test_token_host_origin_size_and_rate(host: EpisodeHost, tasks: list[str]):
    settings = ServeSettings(token="s3cret", max_body_bytes=4096, rate_per_s=0.01, rate_burst=2)
    url_path = f"/t/{tasks[0]}/mcp"
    with anyio.fail_after(30):
        async with running_http_server(host, settings) as base, httpx.AsyncClient(timeout=10) as http:
            url = base + url_path
            auth = {**HEADERS, "authorization": "Bearer s3cret"}
            assert (await http.post(url, headers=HEADERS, json=INIT)).status_code == 401
            wrong = await http.post(url, headers={**HEADERS, "authorization": "Bearer nope"}, json=INIT)
            assert wrong.status_code == 401 and "bearer" in wrong.headers["www-authenticate"].lower()
            assert (await http.get(f"{base}/tasks")).status_code == 401

            rebound = await http.post(url, headers={**auth, "host": "evil.example"}, json=INIT)
            assert rebound.status_code == 421 and "evil.example" in rebound.text
            cross = await http.post(url, headers={**auth, "origin": "http://evil.example"}, json=INIT)
            assert cross.status_code == 403 and "evil.example" in cross.text
            big = await http.post(url, headers=auth, content=b"{" + b" " * 5000 + b"}")
            assert big.status_code == 413

            ok = await http.post(url, headers={**auth, "origin": base}, json=INIT)
            assert ok.status_code == 200, ok.text
            assert "mcp-session-id" in ok.headers
            # Refused requests cost nothing; two passed, so the burst (2) is spent.
            assert (await http.post(url, headers=auth, json=INIT)).status_code == 200
            limited = await http.post(url, headers=auth, json=INIT)
            assert limited.status_code == 429 and limited.headers["retry-after"] == "1"


async def test_a_session_cannot_address_another_episode(host: EpisodeHost, tasks: list[str]):
    task = tasks[0]
    with anyio.fail_after(30):
        async with running_http_server(host) as base, httpx.AsyncClient(timeout=10) as http:
            async def session() -> dict[str, str]:
                init = await http.post(f"{base}/t/{task}/mcp", headers=HEADERS, json=INIT)
                headers = {**HEADERS, "mcp-session-id": init.headers["mcp-session-id"],
                           "mcp-protocol-version": LEGACY}
                await http.post(f"{base}/t/{task}/mcp", headers=headers,
                                json={"jsonrpc": "2.0", "method": "notifications/initialized"})
                return headers

            def call(rid: int, tool: str, arguments: dict) -> dict:
                return {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                        "params": {"name": tool, "arguments": arguments}}

            mine, theirs = await session(), await session()
            own = await http.post(f"{base}/t/{task}/mcp", headers=mine, json=call(2, "calendar_list_events", {}))
            assert own.status_code == 200
            await http.post(f"{base}/t/{task}/mcp", headers=theirs, json=call(2, "calendar_list_events", {}))
            (first, second) = sorted(host.open_episodes.values(), key=lambda e: len(host.store.tool_calls(e.id)))
            episodes = {e.id for e in host.open_episodes.values()}
            assert len(episodes) == 2

            # My session on the other episode's URL, or on any URL but its own, is refused.
            for other_episode in episodes:
                refused = await http.post(f"{base}/e/{other_episode}/mcp", headers=mine,
                                          json=call(3, "calendar_cancel_event", {"id": "e01"}))
                assert refused.status_code == 404
                assert refused.json()["id"] == 3 and f"/t/{task}/mcp" in refused.json()["error"]["message"]
            for episode_id in episodes:
                assert [c.tool for c in host.store.tool_calls(episode_id)] == ["calendar_list_events"]
            for headers in (mine, theirs):
                assert (await http.delete(f"{base}/t/{task}/mcp", headers=headers)).status_code == 200

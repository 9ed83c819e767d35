"""Live episodes of a ``coworkenv serve``, played from another process over its HTTP API and MCP.

The OpenEnv and verifiers adapters run where those packages are installed, and both pin an mcp older than
coworkenv's (openenv 0.10 through fastmcp 3, verifiers 0.3.1: mcp<2), so they cannot import coworkenv's
episode runtime. They reach it as any live client does, which also settles who sets provenance: the server.

- ``POST /episodes`` with nothing but the task opens a ``live`` episode of an admitted task; the server
  records the client's name (its User-Agent: ``openenv``, ``verifiers``), address and run tag, never
  anything the client claims about itself beyond that. Held-out, pending and quarantined tasks are refused.
- The episode's MCP address (``/e/{id}/mcp``) plays it, with the mcp 1.x SDK in the 2025-11-25 era.
- ``GET /episodes/{id}`` reads the gate's verdict once the episode has ended (``submit_answer``, or
  ``POST /episodes/{id}/end``).

This module imports only httpx and mcp (1.x), so it runs in the adapters' environment. Its API is
synchronous: each episode's MCP session lives in one task of an event loop in a thread of its own (anyio
requires a session to be left in the task that entered it), and callers on any thread wait for results.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

INTEROP_VERSION = "1"
TIMEOUT_S = 60.0  # one request to the server: opening an episode waits for a sandbox


class ServeError(RuntimeError):
    """The coworkenv server refused a request or did not answer; the message says which and why."""


@dataclass(frozen=True)
class Verdict:
    """The gate's verdict on an ended episode: the reward and its components, as coworkenv stores them."""

    score: float
    completion: float
    safety: float
    robustness: float
    admitted: bool
    reason: str
    rule: str = ""
    detail: str | None = None
    grader_version: str = ""

    @classmethod
    def of(cls, data: dict[str, Any]) -> Verdict:
        return cls(score=data["score"], completion=data["completion"], safety=data["safety"],
                   robustness=data["robustness"], admitted=data["admitted"], reason=data["reason"],
                   rule=data.get("rule") or "", detail=data.get("detail"), grader_version=data.get("grader_version", ""))

    def components(self) -> dict[str, Any]:
        """The verdict as a flat dict (what the adapters put beside the reward)."""
        return {"score": self.score, "completion": self.completion, "safety": self.safety,
                "robustness": self.robustness, "passed": self.admitted, "reason": self.reason, "rule": self.rule,
                **({"detail": self.detail} if self.detail else {})}


@dataclass(frozen=True)
class ToolResult:
    """A tool call's outcome as the agent sees it: its text, whether it is an error, its structured content."""

    text: str
    is_error: bool
    structured: dict[str, Any] | None = None


@dataclass(frozen=True)
class ToolInfo:
    name: str
    description: str
    input_schema: dict[str, Any] = field(default_factory=dict)


class _Loop:
    """An event loop in a daemon thread, for the MCP sessions of one ``CoworkServer``."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="coworkenv-interop", daemon=True)
        self.thread.start()

    def run(self, coroutine: Awaitable[Any], timeout: float | None = None) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)  # type: ignore[arg-type]

    def close(self) -> None:
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=10)


class CoworkServer:
    """A ``coworkenv serve`` at ``url`` (``http://HOST:PORT``), reached as a live client named ``client``.

    ``token``: the server's bearer token, where it has one. Close it when done (its episodes end)."""

    def __init__(self, url: str, *, client: str, token: str | None = None, timeout: float = TIMEOUT_S) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"a coworkenv server's URL starts with http:// or https://, not {url!r}")
        self.url = url.rstrip("/")
        self.client, self.timeout = client, timeout
        self.headers = {"User-Agent": f"{client} (coworkenv interop {INTEROP_VERSION})"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.http = httpx.Client(base_url=self.url, headers=self.headers, timeout=timeout)
        self._loop: _Loop | None = None
        self._lock = threading.Lock()
        self.episodes: dict[str, ServedEpisode] = {}

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One request to the server's HTTP API; ``ServeError`` naming the server's own message on refusal."""
        try:
            response = self.http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise ServeError(f"the coworkenv server at {self.url} did not answer {method} {path}: {exc}") from exc
        if response.status_code >= 400:
            try:
                message = response.json()["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = response.text[:300]
            raise ServeError(f"the coworkenv server at {self.url} refused {method} {path} "
                             f"({response.status_code}): {message}")
        return response.json()

    def tasks(self) -> list[dict[str, Any]]:
        """The admitted tasks the server serves: id, workspace_id, capability, difficulty, instruction."""
        return self.request("GET", "/tasks")

    def open(self, task_id: str) -> ServedEpisode:
        """A new live episode of ``task_id`` in a fresh sandbox, its MCP session open and its tools listed."""
        opened = self.request("POST", "/episodes", {"task": task_id})
        episode = ServedEpisode(self, opened["episode_id"], task_id, self.url + opened["url"])
        try:
            episode.start()
        except BaseException:
            episode.end()
            raise
        self.episodes[episode.id] = episode
        return episode

    def loop(self) -> _Loop:
        with self._lock:
            if self._loop is None:
                self._loop = _Loop()
            return self._loop

    def close(self) -> None:
        """End every episode still open here, and close the connections."""
        for episode in list(self.episodes.values()):
            episode.end()
        self.http.close()
        if self._loop is not None:
            self._loop.close()


Work = Callable[[Any], Awaitable[Any]]


class ServedEpisode:
    """One live episode of a ``CoworkServer``, played over its MCP session."""

    def __init__(self, server: CoworkServer, episode_id: str, task_id: str, mcp_url: str) -> None:
        self.server, self.id, self.task_id, self.mcp_url = server, episode_id, task_id, mcp_url
        self.tools: list[ToolInfo] = []
        self.ended = False
        self.verdict: Verdict | None = None
        self._inbox: asyncio.Queue[tuple[Work, concurrent.futures.Future] | None] | None = None
        self._held: concurrent.futures.Future | None = None

    def start(self) -> None:
        """Open the MCP session (in a task of the server's loop that holds it until ``end``) and list the tools."""
        loop = self.server.loop()
        ready: concurrent.futures.Future = concurrent.futures.Future()
        self._held = asyncio.run_coroutine_threadsafe(self._hold(ready), loop.loop)
        self.tools = ready.result(self.server.timeout)

    async def _hold(self, ready: concurrent.futures.Future) -> None:
        from mcp import ClientSession, types
        from mcp.client.streamable_http import streamable_http_client

        self._inbox = asyncio.Queue()
        try:
            async with (httpx.AsyncClient(headers=self.server.headers, timeout=self.server.timeout) as http,
                        streamable_http_client(self.mcp_url, http_client=http) as (read, write, _),
                        ClientSession(read, write, client_info=types.Implementation(
                            name=self.server.client, version=INTEROP_VERSION)) as session):
                await session.initialize()
                listed = await session.list_tools()
                ready.set_result([ToolInfo(t.name, t.description or "", dict(t.inputSchema)) for t in listed.tools])
                while (job := await self._inbox.get()) is not None:
                    work, done = job
                    try:
                        done.set_result(await work(session))
                    except Exception as exc:  # the caller gets it; the session stays for the next call
                        done.set_exception(exc)
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(ServeError(f"no MCP session with episode {self.id} at {self.mcp_url}: {exc}"))
            raise

    def _submit(self, work: Work) -> Any:
        if self._inbox is None or self._held is None or self._held.done():
            raise ServeError(f"episode {self.id} has no MCP session (it ended)")
        done: concurrent.futures.Future = concurrent.futures.Future()
        self.server.loop().loop.call_soon_threadsafe(self._inbox.put_nowait, (work, done))
        return done.result(self.server.timeout)

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> ToolResult:
        """Call one tool; a tool's failure is a result (``is_error``), as the agent sees it. When the call
        ends the episode (``submit_answer``), the gate's verdict is read into ``verdict``."""

        async def work(session: Any) -> Any:
            return await session.call_tool(name, arguments or {})

        result = self._submit(work)
        text = "\n".join(getattr(block, "text", "") for block in result.content if getattr(block, "type", "") == "text")
        outcome = ToolResult(text, bool(result.isError), result.structuredContent)
        if not outcome.is_error and (outcome.structured or {}).get("status") == "ended":
            self._read_verdict()
        return outcome

    def _read_verdict(self) -> Verdict | None:
        status = self.server.request("GET", f"/episodes/{self.id}")
        self.ended = status["status"] != "running"
        if status.get("verdict") is not None:
            self.verdict = Verdict.of(status["verdict"])
        return self.verdict

    def end(self, answer: str | None = None, *, truncated: bool = False) -> Verdict | None:
        """End the episode unless it has ended (with ``answer`` as its final answer), close its MCP session
        and return the gate's verdict (None for an episode that made no call and gave no answer: abandoned)."""
        try:
            if not self.ended:
                status = self.server.request("POST", f"/episodes/{self.id}/end",
                                             {"truncated": truncated, **({"answer": answer} if answer is not None else {})})
                self.ended = True
                if status.get("verdict") is not None:
                    self.verdict = Verdict.of(status["verdict"])
        finally:
            self._close_session()
            self.server.episodes.pop(self.id, None)
        return self.verdict

    def _close_session(self) -> None:
        if self._held is not None and not self._held.done() and self._inbox is not None:
            self.server.loop().loop.call_soon_threadsafe(self._inbox.put_nowait, None)
            try:
                self._held.result(self.server.timeout)
            except Exception:  # the session's own failure: the episode has ended either way
                pass

"""The capture proxy: OpenAI- and Anthropic-compatible model endpoints at an episode's address, in
front of an upstream model server (a vLLM server from ``serve-model``, or a hosted API).

An agent that plays ``/t/{task}/e/{key}/mcp`` points its model client at ``/t/{task}/e/{key}/v1``
(or ``/e/{episode}/v1`` for an episode opened with its provenance): each request goes upstream as
it came (the client's own credentials pass through and are never stored), its response comes back
as it goes (streamed chunk by chunk when streamed), and the request and the response (assembled
from the stream) are recorded on that episode. The conversation they hold becomes the episode's,
so that a live agent's episode exports like a teacher's.

Routes under each episode prefix: ``POST v1/chat/completions``, ``POST v1/messages``, ``POST
v1/responses`` (recorded; a request that continues an earlier response with ``previous_response_id``
gets that response's conversation before its own turns) and ``GET v1/models`` (passed through).
On a server with a bearer token, proxy requests carry it in ``X-Coworkenv-Token``
(``Authorization`` is the upstream's).

A conversation is bound to the episode it describes: a request is recorded only while its episode
is open and only for the client that opened it (``HttpEpisodes.for_model`` decides; a refusal is a
``NotRecorded`` with its status, and nothing of the request goes upstream or into the store). A
body with a key twice (two ``messages``) is refused: the upstream and the record would read
different requests. Credentials in the upstream's URL (``https://user:secret@host/v1``, a key in
its query) are never shown: errors and the stored ``upstream`` name it redacted.

With a ``view`` (``serve --upstream-view compact``), a chat or Responses request reaches the model
in the agent view it was trained on: its system prompt and tool list are replaced by that view's
for the episode's task (the conversation itself is kept). An agent app that sends its own system
prompt and the workspace's whole tool list then meets a PocketWorker as it was trained, within its
context; the model's tool calls name the same tools, which the app runs over MCP. What is recorded
is what the model saw.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..store import Store
from ..workspace import (
    AgentView,
    Message,
    agent_view,
    check_style,
    from_anthropic_messages,
    from_openai_chat,
    from_openai_responses,
)

log = logging.getLogger(__name__)

PROXY_PREFIXES = ("/t/{task}/e/{key}", "/w/{workspace}/t/{task}/e/{key}", "/e/{episode}")
APIS = {"chat/completions": "chat", "messages": "messages", "responses": "responses"}
FORWARDED_HEADERS = ("authorization", "x-api-key", "anthropic-version", "anthropic-beta", "openai-organization",
                     "openai-project", "accept")
RETURNED_HEADERS = ("content-type", "x-request-id", "request-id", "openai-processing-ms")

EpisodeFor = Callable[[dict[str, str], str, Request], Awaitable[str]]
"""Finds (or opens, for a key) the episode a request's path names; returns its id, or raises
``LookupError`` saying why there is none, or ``NotRecorded`` when this request may not write it."""


class NotRecorded(Exception):
    """A model request the proxy must not record into the episode its path names: ``status`` 403
    (not the client that opened it) or 409 (it has ended: its conversation is frozen as graded)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class DuplicateKey(ValueError):
    """A JSON object with a key twice: parsers differ on which one counts."""


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise DuplicateKey(f"the key {key[:80]!r} appears twice in one object; send it once")
        seen[key] = value
    return seen


def loads_unique(data: str | bytes) -> Any:
    """``json.loads`` refusing an object with a key twice (``DuplicateKey``): the record and whoever
    reads the request after us (an upstream that keeps the first, say) must see the same request."""
    return json.loads(data, object_pairs_hook=_unique_pairs)


REDACTED = "***"


def redact_url(url: str) -> str:
    """``url`` with its credentials hidden: the user information (``https://user:secret@host``) and
    every query value (``?key=...``) become ``***``."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return REDACTED
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rsplit('@', 1)[1]}"
    query = "&".join(f"{name}={REDACTED}" if sep else name
                     for name, sep, _ in (pair.partition("=") for pair in parts.query.split("&") if pair))
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _secrets_of(url: str) -> list[str]:
    """The parts of ``url`` that may be credentials (user information and its halves, query values),
    longest first, for scrubbing them out of error texts that quote the URL in pieces."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return [url]
    found = []
    if "@" in parts.netloc:
        userinfo = parts.netloc.rsplit("@", 1)[0]
        found += [userinfo, *userinfo.split(":", 1)]
    for pair in parts.query.split("&"):
        value = pair.partition("=")[2]
        found += [value, urllib.parse.unquote(value)]
    return sorted({s for s in found if len(s) >= 3}, key=len, reverse=True)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"type": "coworkenv_proxy_error", "message": message}}, status_code=status)


class _Stream:
    """Assembles a streamed response from its server-sent events, as they pass."""

    def __init__(self, api: str) -> None:
        self.api = api
        self.buffer = b""
        self.chunks: list[dict[str, Any]] = []

    def feed(self, data: bytes) -> None:
        self.buffer += data
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                continue
            try:
                self.chunks.append(json.loads(payload))
            except ValueError:
                continue

    def result(self) -> dict[str, Any] | None:
        if not self.chunks:
            return None
        if self.api == "messages":
            return _assemble_messages(self.chunks)
        if self.api == "chat":
            return _assemble_chat(self.chunks)
        return _assemble_response(self.chunks)


def _assemble_response(events: list[dict[str, Any]]) -> dict[str, Any]:
    """A Responses API response from its stream: the response its last ``response.completed``
    (or ``incomplete``, ``failed``) event carries, else the output items that were done."""
    for event in reversed(events):
        if event.get("type") in ("response.completed", "response.incomplete", "response.failed") and \
                isinstance(event.get("response"), dict):
            return event["response"]
    items = [e["item"] for e in events if e.get("type") == "response.output_item.done" and isinstance(e.get("item"), dict)]
    return {"object": "response", "status": "incomplete", "output": items}


def _assemble_chat(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """A chat completion from its stream of ``chat.completion.chunk``s (first choice per index)."""
    choices: dict[int, dict[str, Any]] = {}
    usage = None
    for chunk in chunks:
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or []:
            into = choices.setdefault(choice.get("index", 0), {
                "index": choice.get("index", 0), "message": {"role": "assistant", "content": ""},
                "finish_reason": None})
            delta = choice.get("delta") or {}
            message = into["message"]
            if delta.get("content"):
                message["content"] += delta["content"]
            for call in delta.get("tool_calls") or []:
                calls = message.setdefault("tool_calls", [])
                while len(calls) <= call.get("index", 0):
                    calls.append({"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
                target = calls[call.get("index", 0)]
                target["id"] = call.get("id") or target["id"]
                function = call.get("function") or {}
                target["function"]["name"] += function.get("name") or ""
                target["function"]["arguments"] += function.get("arguments") or ""
            if choice.get("finish_reason"):
                into["finish_reason"] = choice["finish_reason"]
            if choice.get("logprobs"):
                into.setdefault("logprobs", {"content": []})["content"] += choice["logprobs"].get("content") or []
            if choice.get("token_ids"):
                into.setdefault("token_ids", []).extend(choice["token_ids"])
    first = chunks[0]
    assembled = {"id": first.get("id"), "object": "chat.completion", "model": first.get("model"),
                 "choices": [choices[i] for i in sorted(choices)], "usage": usage}
    if first.get("prompt_token_ids"):
        assembled["prompt_token_ids"] = first["prompt_token_ids"]
    return assembled


def _assemble_messages(events: list[dict[str, Any]]) -> dict[str, Any]:
    """An Anthropic message from its stream of events."""
    message: dict[str, Any] = {"role": "assistant", "content": []}
    partial: dict[int, str] = {}
    for event in events:
        kind = event.get("type")
        if kind == "message_start":
            message = {**event.get("message", {}), "content": []}
        elif kind == "content_block_start":
            block = dict(event.get("content_block") or {})
            message["content"].append(block)
            partial[event.get("index", len(message["content"]) - 1)] = ""
        elif kind == "content_block_delta":
            index, delta = event.get("index", 0), event.get("delta") or {}
            if index >= len(message["content"]):
                continue
            block = message["content"][index]
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif delta.get("type") == "input_json_delta":
                partial[index] = partial.get(index, "") + delta.get("partial_json", "")
        elif kind == "content_block_stop":
            index = event.get("index", 0)
            if partial.get(index) and index < len(message["content"]):
                try:
                    message["content"][index]["input"] = json.loads(partial[index])
                except ValueError:
                    message["content"][index]["input"] = {"_raw": partial[index]}
        elif kind == "message_delta":
            message.update({k: v for k, v in (event.get("delta") or {}).items() if v is not None})
            if event.get("usage"):
                message["usage"] = {**(message.get("usage") or {}), **event["usage"]}
    return message


def conversation_of(api: str, request: dict[str, Any], response: dict[str, Any] | None,
                    before: list[Message] | None = None):
    """The conversation a recorded exchange holds (the request's turns and the reply), or None when
    the reply is not one. ``before``: for a Responses request that continues an earlier response
    (``previous_response_id``), that response's conversation."""
    if api == "chat":
        choices = (response or {}).get("choices") or []
        reply = choices[0].get("message") if choices else None
        return from_openai_chat(request.get("messages") or [], reply) if reply else None
    if api == "messages":
        if not response or response.get("type", "message") != "message":
            return None
        return from_anthropic_messages(request.get("system"), request.get("messages") or [], response)
    if not response or response.get("object", "response") != "response" or response.get("status") == "failed":
        return None
    return from_openai_responses(request.get("instructions"), request.get("input"), response.get("output") or [],
                                 before)


class CaptureProxy:
    """The proxy's routes over ``upstream`` (its base URL, ``…/v1``), recording into ``store``."""

    def __init__(self, upstream: str, store: Store, episode_for: EpisodeFor, *, timeout_s: float = 600,
                 view: str | None = None) -> None:
        self.upstream = upstream.rstrip("/")
        self.shown = redact_url(self.upstream)  # what errors and the record name: no credentials
        self._secrets = [self.upstream, *_secrets_of(self.upstream)]
        self.store = store
        self.episode_for = episode_for
        self.view = check_style(view) if view else None
        self._views: dict[str, AgentView] = {}  # task id -> its view
        # episode id -> the index of its next model call (in request order), and the index whose conversation
        # the episode holds; the episodes used least recently are forgotten past EPISODES_KEPT (a forgotten
        # episode's next index is read back from the store)
        self._next: OrderedDict[str, int] = OrderedDict()
        self._latest: OrderedDict[str, int] = OrderedDict()
        # Responses API: response id -> its conversation, for a request that continues it (previous_response_id)
        self._responses: OrderedDict[str, list[Message]] = OrderedDict()
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(timeout_s, connect=10),
                                        limits=httpx.Limits(max_connections=1024, max_keepalive_connections=256))

    def routes(self) -> list[Route]:
        routes = []
        for prefix in PROXY_PREFIXES:
            for path, api in APIS.items():
                routes.append(Route(f"{prefix}/v1/{path}", self._endpoint(api, path), methods=["POST"]))
            routes.append(Route(f"{prefix}/v1/models", self.models, methods=["GET"]))
        return routes

    async def close(self) -> None:
        await self.client.aclose()

    def _headers(self, request: Request) -> dict[str, str]:
        headers = {name: request.headers[name] for name in FORWARDED_HEADERS if name in request.headers}
        headers["content-type"] = "application/json"
        return headers

    def _at(self, path: str) -> str:
        """The upstream URL of ``path`` (``chat/completions``), its query (a key, say) kept after it."""
        base, sep, query = self.upstream.partition("?")
        return f"{base.rstrip('/')}/{path}{sep}{query}"

    def _unanswered(self, exc: Exception) -> JSONResponse:
        """The 502 for an upstream that did not answer, its URL's credentials scrubbed from the error."""
        text = str(exc)
        for secret in self._secrets:
            text = text.replace(secret, self.shown if secret == self.upstream else REDACTED)
        return _error(502, f"the upstream {self.shown} did not answer: {text}")

    async def models(self, request: Request) -> Response:
        try:
            upstream = await self.client.get(self._at("models"), headers=self._headers(request))
        except httpx.HTTPError as exc:
            return self._unanswered(exc)
        return Response(upstream.content, status_code=upstream.status_code,
                        media_type=upstream.headers.get("content-type"))

    def _endpoint(self, api: str, path: str):
        async def endpoint(request: Request) -> Response:
            return await self.forward(request, api, path)
        return endpoint

    async def forward(self, request: Request, api: str, path: str) -> Response:
        started = time.perf_counter()
        body = await request.body()
        try:
            payload = loads_unique(body)
        except DuplicateKey as exc:
            return _error(400, f"the request body is ambiguous: {exc}")
        except ValueError as exc:
            return _error(400, f"the request body is not JSON: {exc}")
        if not isinstance(payload, dict):
            return _error(400, "the request body is not a JSON object")
        client = request.client.host if request.client else ""
        try:
            episode_id = await self.episode_for(dict(request.path_params), client, request)
        except NotRecorded as exc:
            return _error(exc.status, str(exc))
        except LookupError as exc:
            return _error(404, str(exc.args[0]) if exc.args else "no episode here")
        if episode_id not in self._next:
            self._next[episode_id] = self.store.model_call_count(episode_id)
        idx = self._next[episode_id]
        _keep(self._next, episode_id, idx + 1)
        if self.view is not None and api in ("chat", "responses"):
            payload = self._in_view(episode_id, api, payload)
            body = json.dumps(payload).encode()
        url = self._at(path)
        stream = payload.get("stream") is True
        try:
            upstream = await self.client.send(
                self.client.build_request("POST", url, content=body, headers=self._headers(request)), stream=True)
        except httpx.HTTPError as exc:
            return self._unanswered(exc)
        headers = {k: v for k, v in upstream.headers.items() if k.lower() in RETURNED_HEADERS}
        done = asyncio.get_running_loop().create_future()  # resolved once the exchange is recorded
        _PENDING.add(done)
        done.add_done_callback(_PENDING.discard)
        if not stream or not upstream.headers.get("content-type", "").startswith("text/event-stream"):
            try:
                content = await upstream.aread()
            finally:
                await upstream.aclose()
            try:
                response = json.loads(content)
            except ValueError:
                response = None
            record = BackgroundTask(self._record, done, episode_id, idx, api, payload,
                                    response if isinstance(response, dict) else None, upstream.status_code, stream,
                                    _ms_since(started))
            return Response(content, status_code=upstream.status_code, headers=headers, background=record)
        collector = _Stream(api)
        ended: list[float] = []

        async def relay() -> AsyncIterator[bytes]:
            try:
                async for chunk in upstream.aiter_raw():
                    collector.feed(chunk)
                    yield chunk
            finally:
                ended.append(_ms_since(started))
                await upstream.aclose()

        async def record() -> None:  # once the last byte has gone
            await self._record(done, episode_id, idx, api, payload, collector.result(), upstream.status_code, True,
                               ended[0] if ended else _ms_since(started))

        return StreamingResponse(relay(), status_code=upstream.status_code, headers=headers,
                                 background=BackgroundTask(record))

    def _in_view(self, episode_id: str, api: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The chat (or Responses) request with the view's system prompt and tools for the episode's task."""
        assert self.view is not None
        row = self.store.episode(episode_id)
        assert row is not None  # episode_for found it
        view = self._views.get(row.task_id)
        if view is None:
            task = self.store.task_spec(row.task_id)
            view = self._views[row.task_id] = agent_view(self.view, self.store.workspace(task.workspace_id).tools, task)
        if api == "responses":
            items = payload.get("input")
            items = [{"role": "user", "content": items}] if isinstance(items, str) else list(items or [])
            kept = [i for i in items if not (isinstance(i, dict) and i.get("role") in ("system", "developer"))]
            return {**payload, "instructions": view.system, "input": kept,
                    "tools": [{"type": "function", **t["function"]} for t in view.tools]}
        turns = [m for m in payload.get("messages") or [] if m.get("role") not in ("system", "developer")]
        return {**payload, "messages": [{"role": "system", "content": view.system}, *turns], "tools": view.tools}

    async def _record(self, done: asyncio.Future, episode_id: str, idx: int, api: str, request: dict[str, Any],
                      response: dict[str, Any] | None, status: int, stream: bool, duration: float) -> None:
        """Record the exchange and take its conversation as the episode's. Runs as the response's
        background task, after its last byte went out, on the event loop: the write takes a
        millisecond or two, where handing it to a thread cost other requests tens (the thread and the
        loop taking turns at the interpreter). ``done`` resolves then."""
        try:
            self.store.add_model_call(episode_id, api=api, request=request, response=response, status=status,
                                      stream=stream, duration_ms=duration, upstream=self.shown, idx=idx)
            conversation = self._conversation(api, request, response) if 200 <= status < 300 else None
            if conversation and idx > self._latest.get(episode_id, -1):  # the latest request's conversation wins
                _keep(self._latest, episode_id, idx)
                self.store.set_conversation(episode_id, conversation)
        except Exception:
            log.exception("recording a model call of episode %s failed", episode_id)
        finally:
            if not done.done():
                done.set_result(None)

    def _conversation(self, api: str, request: dict[str, Any], response: dict[str, Any] | None):
        if api != "responses":
            return conversation_of(api, request, response)
        previous = request.get("previous_response_id")
        before = self._responses.get(previous) if previous else None
        if previous and before is None:  # it continues a response this proxy never saw: only part of it is here
            return None
        conversation = conversation_of(api, request, response, before)
        if conversation and response and response.get("id"):
            _keep(self._responses, response["id"], conversation, RESPONSES_KEPT)
        return conversation


RESPONSES_KEPT = 4096  # conversations kept for previous_response_id, the oldest forgotten first
EPISODES_KEPT = 65536  # episodes whose call counters the proxy keeps in memory


def _keep(table: OrderedDict, key: str, value: Any, limit: int | None = None) -> None:
    """Set ``table[key]`` as its most recent entry, forgetting the least recent past ``limit``
    (``EPISODES_KEPT`` when not given)."""
    table[key] = value
    table.move_to_end(key)
    while len(table) > (EPISODES_KEPT if limit is None else limit):
        table.popitem(last=False)


_PENDING: set[asyncio.Future] = set()


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


async def recorded(timeout_s: float = 30) -> None:
    """Wait until every model call answered so far is in the store (at most ``timeout_s``)."""
    if _PENDING:
        await asyncio.wait(list(_PENDING), timeout=timeout_s)

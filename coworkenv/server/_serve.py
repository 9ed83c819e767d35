"""Transports: stdio (one episode per process) and streamable HTTP (many episodes, tasks and
workspaces per process), with the HTTP guards: bearer token, Host/Origin checks, body size and
request-rate limits, and sessions pinned to the URL they were opened at; and the episode API, where
provenance and grading are the operator's (``--operator-token``), never a client's."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hmac
import json
import re
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TypeVar

import uvicorn
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import BaseModel, ConfigDict, Field, SecretStr, StrictBool, ValidationError, field_validator
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._errors import Boundary, InfrastructureError
from ..episodes import EpisodeHost, reason_rule
from ..store import TASK_STATUSES, Provenance, Source
from ._front import INTERNAL_PREFIX, TrustedClient
from ._http_episodes import OPERATOR_HEADER, HttpEpisodes
from ._limits import MODEL_TOKEN_HEADER, SESSION, Buckets, Caps, FrontCaps, Slots, credential_ok
from ._mcp import build_server
from ._proxy import CaptureProxy, DuplicateKey, loads_unique
from ._resolvers import SingleEpisode, live_provenance

LOOPBACK = ("127.0.0.1", "localhost", "::1")
WILDCARD = ("0.0.0.0", "::", "")
RequestModel = TypeVar("RequestModel", bound=BaseModel)
EPISODE_ROUTES = (
    "/t/{task}/mcp",
    "/t/{task}/e/{key}/mcp",
    "/w/{workspace}/t/{task}/mcp",
    "/w/{workspace}/t/{task}/e/{key}/mcp",
    "/e/{episode}/mcp",
)


class ServeSettings(BaseModel):
    """How the HTTP server listens and what it lets through."""

    bind: str = "127.0.0.1"
    port: int = 8765
    token: SecretStr | None = None  # required ("Authorization: Bearer ...") on every request when set
    # the operator's ("X-Coworkenv-Operator: ..."): opens episodes other than live, ends them as infrastructure
    # failures, reads any episode's verdict; without it no one can do these over HTTP
    operator_token: SecretStr | None = None
    allowed_hosts: list[str] = Field(default_factory=list)  # extra Host names clients may use
    session_idle_timeout: float = 1800  # a 2025-11-25 session (and its episode) ends after this idle time
    episode_idle_timeout: float | None = 1800  # any episode ends after this long without a request
    fresh_idle_timeout: float | None = 120  # ... and one that has made one call or none after this long
    max_episodes: int | None = Field(default=2048, ge=1)  # open at once in the server, in all
    max_episodes_per_client: int | None = Field(default=1024, ge=1)  # opened over HTTP by one client address
    serve_heldout: bool = False  # held-out (evaluation) tasks are served to live clients too
    max_body_bytes: int = 1 << 20
    upstream: str | None = None  # the model server the capture proxy forwards to (its base URL, .../v1)
    upstream_view: str | None = None  # the agent view chat requests reach the model in (None: as sent)
    rate_per_s: float | None = 50.0  # per episode address (session or URL) and client
    rate_burst: int = 100
    client_rate_per_s: float | None = None  # per client address, all its requests together (off by default)
    client_rate_burst: int = 1000
    json_response: bool = False

    def check(self) -> None:
        """Refuse settings that would expose episodes: a non-loopback bind needs a token, and a
        token must hold more than whitespace (``--token "$UNSET"`` is no token)."""
        if self.token is not None and not self.token.get_secret_value().strip():
            raise ValueError("the bearer token is empty; give a real one, or none on a loopback bind")
        if self.operator_token is not None:
            operator = self.operator_token.get_secret_value()
            if not operator.strip():
                raise ValueError("the operator token is empty; give a real one, or none (then only live episodes "
                                 "open over HTTP)")
            if self.token is not None and hmac.compare_digest(operator.encode(), self.token.get_secret_value().encode()):
                raise ValueError("the operator token is the bearer token every client holds; give the operator "
                                 "one of its own")
        if not is_loopback(self.bind) and self.token is None:
            raise ValueError(f"binding to {self.bind!r} (not loopback) needs a bearer token; set one or bind "
                             "to 127.0.0.1")

    def hosts(self) -> set[str]:
        """Host names (without port) a request may address."""
        names = {h.lower() for h in self.allowed_hosts}
        if is_loopback(self.bind) or self.bind in WILDCARD:
            names.update(LOOPBACK)
        if self.bind not in WILDCARD:
            names.add(self.bind.lower())
        return names


def is_loopback(bind: str) -> bool:
    return bind in LOOPBACK or bind.startswith("127.")


def _host_name(value: str) -> str:
    """``example.com:8765`` -> ``example.com``; ``[::1]:80`` -> ``::1``."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def _origin_host(origin: str) -> str | None:
    scheme, sep, rest = origin.partition("://")
    if not sep or scheme not in ("http", "https"):
        return None
    return _host_name(rest.split("/", 1)[0])


_OWS = (b" ", b"\t")


class Guard:
    """ASGI middleware in front of every route: token, Host/Origin, body size, rate, session pinning,
    and the cap on 2025-11-25 sessions (a slot of ``caps`` from the request that opens one until the
    session ends; see ``coworkenv.server._limits``)."""

    def __init__(self, app: ASGIApp, settings: ServeSettings, caps: Slots | None = None) -> None:
        self.app = app
        self.settings = settings
        self.hosts = settings.hosts()
        self.token = settings.token.get_secret_value().encode() if settings.token else None
        self.caps = caps if caps is not None else Caps(settings.max_episodes, settings.max_episodes_per_client)
        self.buckets = Buckets()
        self.session_paths: dict[str, str] = {}  # legacy session id -> the URL path it was opened at
        self.session_seen: dict[str, float] = {}
        self.session_clients: dict[str, str] = {}  # legacy session id -> the client whose slot it holds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if any(value[:1] in _OWS or value[-1:] in _OWS for _, value in scope["headers"]):
            # A field value goes without the whitespace around it (RFC 9110, 5.5); h11 strips it,
            # httptools leaves it to the application.
            scope = {**scope, "headers": [(name, value.strip(b" \t")) for name, value in scope["headers"]]}
        headers = Headers(scope=scope)
        refusal = self._refuse(scope, headers)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        session_id = headers.get("mcp-session-id")
        path = scope["path"]
        if session_id is not None and session_id in self.session_paths:
            self.session_seen[session_id] = time.monotonic()
        if session_id is not None and session_id in self.session_paths and self.session_paths[session_id] != path:
            message = (f"session {session_id} belongs to {self.session_paths[session_id]}, not {path}; "
                       "open a new session at this URL")
            await _error(404, message, request_id=await _request_id(receive))(scope, receive, send)
            return
        # A POST to an MCP address without a session, in the handshake era (no version header, or a
        # 2025 one), is what opens a session in the SDK: its slot is taken before the SDK sees it.
        version = headers.get("mcp-protocol-version")
        opens = (session_id is None and scope["method"] == "POST" and path.endswith("/mcp")
                 and (version is None or version in HANDSHAKE_PROTOCOL_VERSIONS))
        client = (scope.get("client") or ("?", 0))[0]
        if opens:
            full = await self.caps.reserve(SESSION, client)
            if full is not None:
                await _error(503, full, request_id=await _request_id(receive))(scope, receive, send)
                return
        opened: list[str] = []

        async def pinning_send(message: Message) -> None:
            # a session opens with a successful answer only (the SDK discards one refused, whose id it still sends)
            if message["type"] == "http.response.start" and session_id is None and message["status"] < 400:
                for name, value in message.get("headers", []):
                    if name.lower() == b"mcp-session-id":
                        self.session_paths[value.decode()] = path
                        self.session_seen[value.decode()] = time.monotonic()
                        if opens and not opened:
                            self.session_clients[value.decode()] = client
                            opened.append(value.decode())
            await send(message)

        try:
            await self.app(scope, receive, pinning_send)
        finally:
            if opens and not opened:  # refused, failed or cancelled: no session holds the slot
                self.caps.release(SESSION, client)
        if scope["method"] == "DELETE" and session_id is not None:
            self._forget_session(session_id)

    def _forget_session(self, session_id: str) -> None:
        self.session_paths.pop(session_id, None)
        self.session_seen.pop(session_id, None)
        client = self.session_clients.pop(session_id, None)
        if client is not None:
            self.caps.release(SESSION, client)

    def _refuse(self, scope: Scope, headers: Headers) -> Response | None:
        if self.token is not None and not credential_ok(
                self.token, scope["path"], headers.get("authorization", "").encode("latin-1"),
                headers.get(MODEL_TOKEN_HEADER, "").encode("latin-1")):
            return _error(401, "missing or wrong bearer token (model requests send it as X-Coworkenv-Token)",
                          {"www-authenticate": 'Bearer realm="coworkenv"'})
        if _host_name(headers.get("host", "")) not in self.hosts:
            return _error(421, f"Host {headers.get('host', '')!r} is not served here (DNS rebinding protection)")
        origin = headers.get("origin")
        if origin is not None and _origin_host(origin) not in self.hosts:
            return _error(403, f"Origin {origin!r} is not allowed")
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.settings.max_body_bytes:
            return _error(413, f"request body over {self.settings.max_body_bytes} bytes")
        if scope["path"].endswith("/mcp"):  # refused here, before any routing or JSON parsing
            session_id = headers.get("mcp-session-id")
            if session_id is not None and session_id not in self.session_paths:
                return _error(404, f"no session {session_id[:64]!r} here; open one (initialize) without Mcp-Session-Id")
            if scope["method"] == "POST" and not headers.get("content-type", "").startswith("application/json"):
                return _error(415, "Content-Type must be application/json")
        over = self._take(scope, headers)
        if over is not None:
            return _error(429, over, {"retry-after": "1"})
        return None

    def _take(self, scope: Scope, headers: Headers) -> str | None:
        """Take a token from the request's episode bucket and its client's (each when limited);
        say which limit the request is over, if any.

        The episode is its session when the session is one this server opened, else the URL path: a
        made-up ``Mcp-Session-Id`` buys no bucket of its own. Buckets are bounded in number (the
        least recently created go first), so a flood of made-up paths cannot grow memory without end.
        """
        client = (scope.get("client") or ("?", 0))[0]
        session_id = headers.get("mcp-session-id")
        episode = session_id if session_id is not None and session_id in self.session_paths else scope["path"]
        now = time.monotonic()
        settings = self.settings
        if settings.client_rate_per_s is not None and not self.buckets.spend(
                ("client", client), now, settings.client_rate_per_s, settings.client_rate_burst):
            return f"over {settings.client_rate_per_s:g} requests/s from {client}"
        if settings.rate_per_s is not None and not self.buckets.spend(
                (client, episode), now, settings.rate_per_s, settings.rate_burst):
            return f"over {settings.rate_per_s:g} requests/s for this episode"
        return None

    def prune(self, older_than_s: float = 60.0) -> None:
        """Forget idle rate buckets, and pins (and slots) of sessions the transport has timed out by now."""
        now = time.monotonic()
        self.buckets.prune(now - older_than_s)
        expired = now - self.settings.session_idle_timeout - older_than_s
        for session_id in [s for s, seen in self.session_seen.items() if seen < expired]:
            self._forget_session(session_id)


def _error(status: int, message: str, headers: dict[str, str] | None = None, *,
           request_id: str | int | None = None) -> Response:
    body = {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32600, "message": message}}
    return Response(json.dumps(body), status_code=status, media_type="application/json", headers=headers)


async def _request_id(receive: Receive, limit: int = 1 << 16) -> str | int | None:
    """The JSON-RPC id of a refused request, read from its (small) body, so the error names it."""
    body = b""
    while len(body) <= limit:
        message = await receive()
        body += message.get("body", b"")
        if message["type"] != "http.request" or not message.get("more_body"):
            break
    try:
        request_id = json.loads(body).get("id")
    except (ValueError, AttributeError):
        return None
    return request_id if isinstance(request_id, (str, int)) else None


class OpenRequest(BaseModel):
    """``POST /episodes``: open an episode of ``task`` with this provenance.

    A plain client opens ``live`` episodes and names nothing else; the provenance fields and
    ``handed_to`` (the client address whose model calls the capture proxy records into it, at
    ``/e/{id}/v1``) are the operator's."""

    model_config = ConfigDict(extra="forbid")

    task: str
    source: Source = "live"
    provider: str = ""
    attempt: int = Field(default=1, ge=1)
    repaired_from: str | None = None
    hint: str = ""
    handed_to: str | None = None

    def operator_fields(self) -> list[str]:
        """The fields set here that only the operator may set."""
        return [name for name in ("provider", "attempt", "repaired_from", "hint", "handed_to")
                if getattr(self, name) != OpenRequest.model_fields[name].default]


_UNSTORABLE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff]")
"""Characters an answer may not hold: control characters but tab and line ends, and lone surrogates
(neither is text a store, a grader or a chat template reads as the agent meant it)."""


class EndRequest(BaseModel):
    """``POST /episodes/{id}/end``: end it (``error``: the infrastructure failure that ended it)."""

    model_config = ConfigDict(extra="forbid")

    truncated: StrictBool = False
    answer: str | None = None
    error: str | None = None
    boundary: Boundary = "protocol"

    @field_validator("answer", "error")
    @classmethod
    def _storable(cls, value: str | None) -> str | None:
        found = _UNSTORABLE.search(value) if value is not None else None
        if found is not None:
            raise ValueError(f"holds U+{ord(found.group()):04X} at character {found.start()}, which cannot be "
                             "stored as text; send it without control characters")
        return value


async def _json_body(request: Request, model: type[RequestModel]) -> RequestModel | Response:
    """The request's JSON body as ``model``, or a 400 naming what was wrong (a key given twice too)."""
    body = await request.body() or b"{}"
    try:
        loads_unique(body)
    except DuplicateKey as exc:
        return _error(400, f"bad {model.__name__}: {exc}")
    except ValueError:
        pass  # not JSON: pydantic names the problem below
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}"
            + (f" (got {e['input']!r})" if e["type"] != "missing" and isinstance(e.get("input"), (str, int, float)) else "")
            for e in exc.errors())
        return _error(400, f"bad {model.__name__}: {problems}")


def http_app(host: EpisodeHost, settings: ServeSettings | None = None, *, bind: str | None = None,
             worker: bool = False, caps_socket: str | None = None) -> ASGIApp:
    """The HTTP server (an ASGI app): MCP endpoints per task, workspace and episode, JSON lists of
    tasks and workspaces, and the episode API (``POST /episodes`` opens an episode with its
    provenance, ``POST /episodes/{id}/end`` ends it, ``GET /episodes/{id}`` tells its status and verdict).

    ``worker``: one of ``serve --workers``' processes, behind its front (``coworkenv.server._front``):
    the client address is the one the front passes, and two routes answer the front only (which
    worker holds an episode, how many episodes each holds). ``caps_socket``: the front's count of open
    episodes and sessions, which every worker takes its slots from; the front also keeps the client
    rate buckets, so a worker keeps none (see ``coworkenv.server._limits``).
    """
    settings = settings or ServeSettings()
    if bind is not None:
        settings = settings.model_copy(update={"bind": bind})
    settings.check()
    caps: Slots = (FrontCaps(caps_socket) if caps_socket is not None
                   else Caps(settings.max_episodes, settings.max_episodes_per_client))
    episodes = HttpEpisodes(host, idle_timeout=settings.episode_idle_timeout,
                            fresh_idle_timeout=settings.fresh_idle_timeout, max_open=settings.max_episodes,
                            max_open_per_client=settings.max_episodes_per_client, caps=caps,
                            serve_heldout=settings.serve_heldout,
                            operator_token=settings.operator_token.get_secret_value() if settings.operator_token else None)
    manager = StreamableHTTPSessionManager(
        app=build_server(episodes, on_end=episodes.end, input_schema=episodes.input_schema,
                         describe=episodes.describe),
        json_response=settings.json_response,
        session_idle_timeout=settings.session_idle_timeout,
        max_request_body_size=settings.max_body_bytes,
        security_settings=None,  # Guard checks Host and Origin on every route
    )
    endpoint = StreamableHTTPASGIApp(manager)

    async def end_or_forward(scope: Scope, receive: Receive, send: Send) -> None:
        # Without a session, DELETE of a key or episode URL ends that episode (2026-07-28 has no sessions).
        request = Request(scope)
        episodes.serving(request.path_params)
        if scope["method"] == "DELETE" and "mcp-session-id" not in request.headers:
            episode = episodes.by_path(dict(request.path_params))
            if episode is None or episode.ended:
                await _error(404, f"no open episode at {scope['path']}")(scope, receive, send)
                return
            await episodes.end(episode)
            await Response(status_code=204)(scope, receive, send)
            return
        refused = episodes.address_refusal(request.path_params, request.headers.get("mcp-session-id"))
        if refused is not None and scope["method"] == "POST":  # an unknown task's initialize is no success
            await _error(*refused, request_id=await _request_id(receive))(scope, receive, send)
            return
        await endpoint(scope, receive, send)
        if scope["method"] == "DELETE":  # the client ended its legacy session: its episode ends with it
            await episodes.end_session(request.headers["mcp-session-id"])

    async def tasks(request: Request) -> Response:
        status = request.query_params.get("status", "admitted")
        if status not in TASK_STATUSES:
            return _error(400, f"unknown status {status!r}; one of: {', '.join(TASK_STATUSES)}")
        if status == "heldout" and not settings.serve_heldout:
            return _error(403, "held-out tasks are for evaluation; this server does not list them (--serve-heldout)")
        rows = host.store.tasks(status=status)  # type: ignore[arg-type]  # checked above
        workspace = request.path_params.get("workspace")
        return JSONResponse([
            {"id": r.id, "workspace_id": r.workspace_id, "capability": r.capability,
             "difficulty": r.difficulty, "instruction": r.instruction, "status": r.status,
             "url": f"/w/{r.workspace_id}/t/{r.id}/mcp"}
            for r in rows if workspace is None or r.workspace_id == workspace
        ])

    async def workspaces(request: Request) -> JSONResponse:
        return JSONResponse([{"id": r.id, "name": r.name, "tasks": f"/w/{r.id}/tasks"}
                             for r in host.store.workspaces()])

    operator_needed = (f"needs the operator credential ({OPERATOR_HEADER.title()} header)" if settings.operator_token
                       else "needs the operator credential, and this server has none (serve --operator-token)")

    async def open_episode(request: Request) -> Response:
        body = await _json_body(request, OpenRequest)
        if isinstance(body, Response):
            return body
        operator = episodes.is_operator(request)
        if not operator and body.source != "live":
            return _error(403, f"opening a {body.source} episode {operator_needed}; clients open live ones")
        if not operator and body.operator_fields():
            return _error(403, f"setting {', '.join(body.operator_fields())} {operator_needed}; a live episode's "
                               "provenance is its client's address, name and run tag")
        if host.store.task(body.task) is None:
            return _error(400, f"no task {body.task!r}")
        if body.repaired_from is not None and host.store.episode(body.repaired_from) is None:
            return _error(400, f"no episode {body.repaired_from!r} to repair")
        provenance = (Provenance(body.source, body.provider, body.attempt, body.repaired_from, body.hint) if operator
                      else live_provenance(request))
        try:
            episode = await episodes.open(body.task, provenance, request.client.host if request.client else "",
                                          operator=operator, handed_to=body.handed_to)
        except ValueError as exc:  # not served to that source, or no more episodes may open
            return _error(403 if "not served" in str(exc) else 503, str(exc))
        return JSONResponse({"episode_id": episode.id, "url": f"/e/{episode.id}/mcp"}, status_code=201)

    def _not_yours(episode_id: str) -> Response:
        return _error(403, f"episode {episode_id} was not opened by this client: its status and verdict are for "
                           f"the client that opened it, and reading another's {operator_needed}")

    async def end_episode(request: Request) -> Response:
        body = await _json_body(request, EndRequest)
        if isinstance(body, Response):
            return body
        episode_id = request.path_params["episode"]
        if host.store.episode(episode_id) is None:
            return _error(404, f"no episode {episode_id!r}")
        if not episodes.may_manage(episode_id, request):
            return _not_yours(episode_id)
        if body.error is not None and not episodes.is_operator(request):
            return _error(403, f"ending an episode as an infrastructure failure (error) {operator_needed}")
        episode = host.episode(episode_id)
        if episode is not None:
            failure = InfrastructureError(body.error, boundary=body.boundary) if body.error else None
            await episodes.end(episode, truncated=body.truncated, failure=failure, answer=body.answer)
        return _episode_status(episode_id)

    async def episode_status(request: Request) -> Response:
        episode_id = request.path_params["episode"]
        if host.store.episode(episode_id) is not None and not episodes.may_manage(episode_id, request):
            return _not_yours(episode_id)
        return _episode_status(episode_id)

    def _episode_status(episode_id: str) -> Response:
        row = host.store.episode(episode_id)
        if row is None:
            return _error(404, f"no episode {episode_id!r}")
        verdict = host.verdict(episode_id)
        return JSONResponse({
            "episode_id": row.id, "task_id": row.task_id, "source": row.source, "status": row.status,
            "error": row.error, "boundary": row.boundary,
            "verdict": None if verdict is None else {
                "admitted": verdict.admitted, "reason": verdict.reason, "rule": reason_rule(verdict.reason),
                "detail": verdict.detail, "score": verdict.score,
                "completion": verdict.completion, "safety": verdict.safety, "robustness": verdict.robustness,
                "grader_version": verdict.grader_version},
        })

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            reaper = asyncio.create_task(_reap(episodes, guard))
            try:
                yield
            finally:
                reaper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reaper
                await episodes.close()
                await host.close()
                if proxy is not None:
                    await proxy.close()

    async def owner(request: Request) -> Response:
        path = request.query_params.get("path", "")
        found = None
        for route in episode_routes:
            matched, child = route.matches({"type": "http", "path": path, "method": "GET"})
            if matched.value == 2:  # a full match
                found = episodes.by_path(dict(child["path_params"]))
                break
        return JSONResponse({"owns": True}) if found is not None and not found.ended else JSONResponse(
            {"owns": False}, status_code=404)

    async def load(request: Request) -> Response:
        return JSONResponse({"open": len(host.open_episodes)})

    mcp_endpoint = _AsgiEndpoint(end_or_forward)
    episode_routes = [Route(path, endpoint=mcp_endpoint) for path in
                      (*EPISODE_ROUTES, *(f"{prefix}/{{rest:path}}" for prefix in ("/e/{episode}", "/t/{task}/e/{key}",
                                                                                   "/w/{workspace}/t/{task}/e/{key}")),
                       "/episodes/{episode}", "/episodes/{episode}/end")]
    proxy = (CaptureProxy(settings.upstream, host.store, episodes.for_model, view=settings.upstream_view)
             if settings.upstream else None)
    routes = [Route(path, endpoint=mcp_endpoint) for path in EPISODE_ROUTES] + (proxy.routes() if proxy else []) + [
        Route("/tasks", endpoint=tasks),
        Route("/w/{workspace}/tasks", endpoint=tasks),
        Route("/workspaces", endpoint=workspaces),
        Route("/episodes", endpoint=open_episode, methods=["POST"]),
        Route("/episodes/{episode}", endpoint=episode_status, methods=["GET"]),
        Route("/episodes/{episode}/end", endpoint=end_episode, methods=["POST"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    guard = Guard(app, settings.model_copy(update={"client_rate_per_s": None}) if worker else settings, caps)
    if not worker:
        return guard
    return TrustedClient(guard, Starlette(routes=[Route(f"{INTERNAL_PREFIX}owner", endpoint=owner),
                                                  Route(f"{INTERNAL_PREFIX}load", endpoint=load)]))


class _AsgiEndpoint:
    """A raw ASGI callable as a route endpoint (Starlette passes every method to an object endpoint)."""

    def __init__(self, call) -> None:
        self.call = call

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.call(scope, receive, send)


async def _reap(episodes: HttpEpisodes, guard: Guard) -> None:
    """End idle episodes and forget idle rate buckets, periodically."""
    shortest = min(t for t in (episodes.idle_timeout, episodes.fresh_idle_timeout, 120.0) if t is not None)
    period = min(30.0, max(0.05, shortest / 4))
    while True:
        await asyncio.sleep(period)
        await episodes.reap_idle()
        guard.prune()


GC_YOUNG_THRESHOLD = 5000
WORKER_KEEP_ALIVE_S = 600


def settle_heap() -> None:
    """Exempt what the process has built so far (modules, the app) from the cyclic garbage collector.

    A server process holds a few hundred thousand long-lived objects; without this, every full
    collection walks them all while requests wait (pauses of tens to hundreds of ms under load).
    For a process that serves until it exits, not for a library call inside someone else's program.

    The youngest generation is also collected less often (every ``GC_YOUNG_THRESHOLD`` net
    allocations instead of 700): a request's short-lived objects are then mostly gone by the next
    collection instead of promoted, so far less ends up in the older generations and no full
    collection came during loads of a few hundred paced episodes; each young collection takes a few ms.
    """
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)


def bind_socket(bind: str, port: int) -> socket.socket:
    """A listening socket on ``bind:port``; ``OSError`` (the port is taken, say) before anything starts.

    Its connections send without Nagle's delay (``TCP_NODELAY``, which accepted sockets inherit):
    uvicorn writes a response's head and body separately, and with Nagle the body waited for the
    client's delayed acknowledgement of the head, up to 40 ms per response (measured: a 30 ms
    endpoint answered in 76 ms at p50 on a socket handed to uvicorn without it, 33 ms with it)."""
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((bind, port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    return sock


async def serve_http(host: EpisodeHost, settings: ServeSettings | None = None, *,
                     sock: socket.socket | None = None, on_ready: Callable[[], None] | None = None,
                     worker: bool = False, caps_socket: str | None = None) -> None:
    """Serve until interrupted, on ``sock`` (bound already: see ``bind_socket``) or on the settings'
    address; ``on_ready`` runs once connections are accepted. ``worker``, ``caps_socket``: as one of
    ``serve --workers``' processes (see ``http_app``)."""
    settings = settings or ServeSettings()
    app = http_app(host, settings, worker=worker, caps_socket=caps_socket)
    sock = sock or bind_socket(settings.bind, settings.port)
    settle_heap()
    await serve_app(app, sock, on_ready=on_ready, worker=worker)


async def serve_app(app: ASGIApp, sock: socket.socket, *, on_ready: Callable[[], None] | None = None,
                    worker: bool = False) -> None:
    """Serve ``app`` on the bound ``sock`` until interrupted; ``on_ready`` runs once connections are
    accepted. A worker keeps the front's connections open between requests (the front reuses them)."""
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_keep_alive=WORKER_KEEP_ALIVE_S if worker else 5))
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started and not task.done():
        await asyncio.sleep(0.01)
    if server.started and on_ready is not None:
        on_ready()
    await task


class _InProcessServer(uvicorn.Server):
    """A server inside another command's event loop (``collect``'s own server): Ctrl-C belongs to
    that command, whose cancellation stops this server. A uvicorn server would take the signal for
    itself and drain: the command's episodes then failed one after another against a closing
    server (each counted as done), or waited on it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def running_http_server(host: EpisodeHost, settings: ServeSettings | None = None, *,
                              bind: str = "127.0.0.1") -> AsyncIterator[str]:
    """Serve ``host`` over HTTP on a free port inside this event loop; yield its base URL."""
    settings = (settings or ServeSettings()).model_copy(update={"bind": bind})
    sock = bind_socket(bind, 0)
    port = sock.getsockname()[1]
    app = http_app(host, settings)
    uv = _InProcessServer(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.create_task(uv.serve(sockets=[sock]))
    try:
        while not uv.started:
            if task.done():
                task.result()
                raise RuntimeError("the HTTP server stopped during start-up")
            await asyncio.sleep(0.01)
        yield f"http://{'[' + bind + ']' if ':' in bind else bind}:{port}"
    finally:
        uv.should_exit = True
        await task
        sock.close()


async def serve_stdio(host: EpisodeHost, task_id: str) -> None:
    """Serve one episode of ``task_id`` on stdin/stdout until the client goes away; grade it then."""
    resolver = SingleEpisode(host, task_id, Provenance("live"))
    server = build_server(resolver, describe=resolver.describe, on_end=resolver.ended)
    settle_heap()
    try:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        await resolver.end()
        await host.close()


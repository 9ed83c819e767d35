"""The MCP server: tools, resources, the task prompt, logging, progress and completion of one episode.

The handlers are the same for every transport; what differs is how a request finds its
episode (a ``Resolver``): one episode per process on stdio or in memory, and on HTTP one per
legacy MCP session or per episode key in the URL path (the 2026-07-28 era has no session id).
Every request is served by exactly one episode, so no request can reach another episode's state.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import contextvars
import hmac
import json
import logging
import re
import time
import warnings
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import mcp_types as types
from mcp import MCPError
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .. import __version__
from .._errors import InfrastructureError
from ..episodes import CallResult, Episode, EpisodeFailed, EpisodeHost
from ..store import Provenance, VerdictRow
from ..workspace import Attachment, ResourceSpec, Task, ToolSpec, Workspace
from ._limits import EPISODE, Caps, Slots
from ._proxy import NotRecorded

Resolver = Callable[[Any], Awaitable[Episode]]
TASK_PROMPT = "task"
TASK_URI = "coworkenv://task"
ATTACHMENTS_ARGUMENT = "attachments"  # of the task prompt, for a task with attachments: 'all' (default) or 'none'
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
DEFAULT_LOG_LEVEL = "info"
PROGRESS_EVERY_S = 1.0  # a call still running after this long reports progress, and again each period


@dataclass(frozen=True)
class RecordKind:
    """App records exposed as resources, as the app declares them (``App.resources``)."""

    app: str
    resource: ResourceSpec

    @property
    def uri_template(self) -> str:
        return f"coworkenv://{self.app}/{self.resource.collection}/{{id}}"


_RECORD_URI = re.compile(r"^coworkenv://(?P<app>[a-z_]+)/(?P<collection>[a-z_]+)/(?P<id>[^/]+)$")


def _structured(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool's output schema as its structured content has it: without ``_content`` (its images
    and documents travel as content blocks)."""
    if "_content" not in schema.get("properties", {}):
        return schema
    return {**schema, "properties": {k: v for k, v in schema["properties"].items() if k != "_content"},
            "required": [name for name in schema.get("required", []) if name != "_content"]}


def _tool(spec) -> types.Tool:
    read_only = spec.effect == "read"
    return types.Tool(
        name=spec.name,
        description=spec.description,
        input_schema=spec.input_schema,
        output_schema=_structured(spec.output_schema),
        annotations=types.ToolAnnotations(
            read_only_hint=read_only,
            destructive_hint=spec.effect == "destructive",
            idempotent_hint=read_only,
            open_world_hint=False,
        ),
    )


class _ToolListings:
    """The MCP ``Tool`` of every tool spec, built once (a tools/list answer is the same list for
    every episode of a workspace)."""

    def __init__(self) -> None:
        self._by_spec: dict[int, tuple[Any, types.Tool]] = {}

    def __call__(self, episode: Listed) -> list[types.Tool]:
        listed = []
        for spec in episode.tools:
            known = self._by_spec.get(id(spec))
            if known is None or known[0] is not spec:  # the spec is kept alive with its Tool
                known = self._by_spec[id(spec)] = (spec, _tool(spec))
            listed.append(known[1])
        return listed


def _attachments(outcome: CallResult) -> list[types.ContentBlock]:
    """A result's images as image content, its documents as embedded resources, each with its text fallback."""
    return _content(outcome.attachments, outcome.blobs)


def _content(attachments: list[Attachment], blobs: Mapping[str, bytes]) -> list[types.ContentBlock]:
    """Images as image content, documents as embedded resources, each with its text fallback."""
    blocks: list[types.ContentBlock] = []
    for attachment in attachments:
        data = base64.b64encode(blobs[attachment.sha256]).decode()
        if attachment.kind == "image":
            blocks.append(types.ImageContent(data=data, mime_type=attachment.mime_type))
        else:
            uri = attachment.uri or f"coworkenv://blobs/{attachment.sha256}"
            blocks.append(types.EmbeddedResource(resource=types.BlobResourceContents(
                uri=uri, blob=data, mime_type=attachment.mime_type)))
        if attachment.text:
            blocks.append(types.TextContent(text=attachment.text))
    return blocks


@dataclass(frozen=True)
class TaskPreview:
    """What a client may list before an episode is open: the task's tools, prompt and kinds of record.
    Listing never opens an episode; calling a tool, reading the prompt or a record does."""

    task: Task
    workspace: Workspace
    tools: list[ToolSpec]

    @classmethod
    def of(cls, host: EpisodeHost, task_id: str) -> TaskPreview:
        """Raises ``MCPError`` naming the task when the store has none."""
        try:
            task = host.task(task_id)
            workspace = host.workspace(task.workspace_id)
        except KeyError as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc.args[0])) from None
        return cls(task, workspace, host.tools_of(task, workspace))


Listed = Episode | TaskPreview
Describer = Callable[[Any], Awaitable[Listed]]


def _record_kinds(episode: Listed) -> list[RecordKind]:
    return [RecordKind(app.name, resource) for app in episode.workspace.apps for resource in app.resources]


async def _observe(episode: Episode, app: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A read of the episode's live state for a resource or a completion (not a recorded tool call)."""
    try:
        return await episode.observe(app, tool, arguments)
    except ValueError as exc:
        raise MCPError(code=INVALID_PARAMS, message=str(exc)) from None
    except EpisodeFailed as exc:
        raise MCPError(code=INTERNAL_ERROR, message=f"{exc}; the episode has ended") from None


class _Logging:
    """The log level each episode asked for (2025-11-25 ``logging/setLevel``) and sending log messages."""

    def __init__(self) -> None:
        self.levels: dict[str, str] = {}

    def set(self, episode: Episode, level: str) -> None:
        self.levels[episode.id] = level

    async def send(self, ctx: Any, episode: Episode, level: str, data: Any) -> None:
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            # The handshake era sends whatever is at or above the episode's level.
            threshold = self.levels.get(episode.id, DEFAULT_LOG_LEVEL)
            if LOG_LEVELS.index(level) < LOG_LEVELS.index(threshold):
                return
        # 2026-07-28: the SDK sends only what this request opted into in its _meta.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            pending = ctx.session.send_log_message(level, data, logger="coworkenv", related_request_id=ctx.request_id)
        with contextlib.suppress(Exception):  # a client that went away misses a log line, nothing more
            await pending


async def _with_progress(ctx: Any, work: Awaitable[Any], label: str) -> Any:
    """Await ``work``; when the caller asked for progress, report it while a slow call runs."""
    meta = ctx.meta or {}
    if meta.get("progress_token") is None:
        return await work
    started = time.monotonic()
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=PROGRESS_EVERY_S)
            if done:
                break
            await ctx.session.report_progress(time.monotonic() - started, None,
                                              f"{label}: running for {time.monotonic() - started:.0f} s")
    finally:
        if not task.done():
            task.cancel()
    result = task.result()
    await ctx.session.report_progress(1.0, 1.0, f"{label}: done")
    return result


def build_server(resolve: Resolver, *, name: str = "coworkenv",
                 on_end: Callable[[Episode], Awaitable[None]] | None = None,
                 input_schema: Callable[[str], Mapping[str, Any] | None] | None = None,
                 describe: Describer | None = None) -> Server:
    """A low-level MCP server whose every request is served by the episode ``resolve`` finds.

    Listings (tools, prompts, resources and their templates) are answered by ``describe`` when it is
    given: the open episode, or a ``TaskPreview`` of the task, so that listing opens no episode.

    ``on_end`` runs once an episode ends through ``submit_answer`` (the runtime has graded it by then).
    ``input_schema`` names a tool's input schema for the 2026-07-28 HTTP transport's
    ``Mcp-Param-*`` header check; without it the SDK lists all tools before every call to find it.
    """
    logs = _Logging()
    listings = _ToolListings()
    listed: Describer = describe or resolve

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listings(await listed(ctx)))

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        episode = await resolve(ctx)
        was_open = not episode.ended
        try:
            outcome = await _with_progress(ctx, episode.call(params.name, params.arguments), params.name)
        except EpisodeFailed as exc:  # an infrastructure failure: recorded on the episode, not a tool result
            if on_end is not None:
                await on_end(episode)
            raise MCPError(code=INTERNAL_ERROR, message=f"{exc}; the episode has ended") from None
        if not outcome.ok:
            await logs.send(ctx, episode, "warning", {"tool": params.name, "error": outcome.error})
        if was_open and episode.ended:
            await logs.send(ctx, episode, "notice", {"episode": episode.id, "status": "ended"})
            if on_end is not None:
                await on_end(episode)
        return types.CallToolResult(
            content=[types.TextContent(text=outcome.text), *_attachments(outcome)],
            structured_content=outcome.result if outcome.ok else None,
            is_error=not outcome.ok,
        )

    async def list_prompts(ctx, params) -> types.ListPromptsResult:
        episode = await listed(ctx)
        attached = episode.task.attachments
        return types.ListPromptsResult(prompts=[types.Prompt(
            name=TASK_PROMPT,
            description=f"The instruction of task {episode.task.id} ({episode.task.capability})"
                        + (f", with {len(attached)} attachment(s) (images, documents)" if attached else ""),
            arguments=[types.PromptArgument(
                name=ATTACHMENTS_ARGUMENT, required=False,
                description="'all' (default): the instruction, then its images and documents; 'none': the "
                            "instruction alone (a client whose model reads text only)")] if attached else None,
        )])

    async def get_prompt(ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        """The task's instruction, then one message per attachment (an image, or a document as an
        embedded resource), unless the client asked for the instruction alone. What the client asked
        is recorded with the prompt: a Claw-Eval grader counts an image as shown only when it was sent."""
        episode = await resolve(ctx)
        arguments = dict(params.arguments or {})
        if params.name != TASK_PROMPT:
            message = f"unknown prompt {params.name!r}; the only prompt is {TASK_PROMPT!r}"
            episode.note("prompt", params.name, arguments, error=message)
            raise MCPError(code=INVALID_PARAMS, message=message)
        wanted = arguments.get(ATTACHMENTS_ARGUMENT, "all")
        blocks: list[types.ContentBlock] = []
        try:
            if wanted not in ("all", "none"):
                raise MCPError(code=INVALID_PARAMS, message=f"prompt argument {ATTACHMENTS_ARGUMENT}={wanted!r}: "
                                                            "give 'all' or 'none'")
            if wanted == "all" and episode.task.attachments:
                try:
                    blocks = _content(episode.task.attachments, episode.attachment_bytes())
                except KeyError as exc:
                    raise MCPError(code=INTERNAL_ERROR, message=str(exc.args[0])) from None
        except MCPError as exc:
            episode.note("prompt", TASK_PROMPT, arguments, error=exc.error.message)
            raise
        episode.note("prompt", TASK_PROMPT, arguments, result=episode.task.instruction)
        return types.GetPromptResult(
            description=f"task {episode.task.id}",
            messages=[types.PromptMessage(role="user", content=types.TextContent(text=episode.task.instruction)),
                      *(types.PromptMessage(role="user", content=block) for block in blocks)],
        )

    async def list_resources(ctx, params) -> types.ListResourcesResult:
        await listed(ctx)
        return types.ListResourcesResult(resources=[types.Resource(
            name="task", uri=TASK_URI, mime_type="text/plain", description="The instruction of this episode's task",
        )])

    async def list_resource_templates(ctx, params) -> types.ListResourceTemplatesResult:
        episode = await listed(ctx)
        return types.ListResourceTemplatesResult(resource_templates=[
            types.ResourceTemplate(
                name=f"{kind.app}-{kind.resource.collection}", uri_template=kind.uri_template,
                mime_type=kind.resource.mime_type,
                description=f"One record of the {kind.app} app in this episode's workspace, as JSON "
                            f"(the result of {kind.app}_{kind.resource.get_tool}); ids complete",
            )
            for kind in _record_kinds(episode)
        ])

    async def read_resource(ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        episode = await resolve(ctx)
        uri = str(params.uri)
        if uri == TASK_URI:
            episode.note("resource", uri, {}, result=episode.task.instruction)
            return types.ReadResourceResult(contents=[types.TextResourceContents(
                uri=uri, mime_type="text/plain", text=episode.task.instruction,
            )])
        match = _RECORD_URI.match(uri)
        kind = next((k for k in _record_kinds(episode) if match and (k.app, k.resource.collection) ==
                     (match["app"], match["collection"])), None)
        if kind is None or match is None:
            templates = ", ".join([TASK_URI] + [k.uri_template for k in _record_kinds(episode)])
            message = f"unknown resource {uri}; resources here: {templates}"
            episode.note("resource", uri, {}, error=message)
            raise MCPError(code=INVALID_PARAMS, message=message)
        try:
            text = json.dumps(await _observe(episode, kind.app, kind.resource.get_tool, {"id": match["id"]}))
        except MCPError as exc:
            episode.note("resource", uri, {}, error=exc.error.message)
            raise
        episode.note("resource", uri, {}, result=text)
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=uri, mime_type=kind.resource.mime_type, text=text,
        )])

    async def complete(ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
        episode = await resolve(ctx)
        values: list[str] = []
        if isinstance(params.ref, types.ResourceTemplateReference) and params.argument.name == "id":
            kind = next((k for k in _record_kinds(episode) if k.uri_template == params.ref.uri), None)
            if kind is not None:
                resource = kind.resource
                asked = {"argument": params.argument.name, "value": params.argument.value}
                try:
                    listed = await _observe(episode, kind.app, resource.list_tool, dict(resource.list_arguments))
                except MCPError as exc:
                    episode.note("completion", kind.uri_template, asked, error=exc.error.message)
                    raise
                prefix = params.argument.value
                values = sorted(r["id"] for r in listed[resource.list_key] if r["id"].startswith(prefix))
                episode.note("completion", kind.uri_template, asked, result=json.dumps(values[:100]))
        return types.CompleteResult(completion=types.Completion(
            values=values[:100], total=len(values), has_more=len(values) > 100,
        ))

    async def set_logging_level(ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
        logs.set(await resolve(ctx), params.level)
        return types.EmptyResult()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)  # logging is still part of 2025-11-25
        return Server(
            name,
            version=__version__,
            instructions="A synthetic coworker workspace. Read the 'task' prompt, use the tools, "
                         "then call submit_answer.",
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_list_prompts=list_prompts,
            on_get_prompt=get_prompt,
            on_list_resources=list_resources,
            on_list_resource_templates=list_resource_templates,
            on_read_resource=read_resource,
            on_completion=complete,
            on_set_logging_level=set_logging_level,
            get_tool_input_schema=input_schema,
        )


class OpenEpisode:
    """Resolver for an episode opened beforehand (by the loop, with its provenance): every request
    is served by it. For in-memory servers over one episode."""

    def __init__(self, episode: Episode) -> None:
        self.episode = episode

    async def __call__(self, ctx: Any = None) -> Episode:
        return self.episode


class SingleEpisode:
    """Resolver for stdio and in-memory servers: one episode at a time, opened on the first request
    that needs one (listing does not). Once it has ended (``submit_answer``), the next such request
    opens a fresh episode of the same task: a desktop app that keeps one server process across
    conversations plays one episode per conversation."""

    def __init__(self, host: EpisodeHost, task_id: str, provenance: Provenance | None = None) -> None:
        self.host = host
        self.task_id = task_id
        self.provenance = provenance or Provenance("live")
        self.episode: Episode | None = None
        self._lock = asyncio.Lock()

    async def __call__(self, ctx: Any = None) -> Episode:
        async with self._lock:
            if self.episode is None or self.episode.ended:
                provenance = self.provenance
                if not provenance.client and ctx is not None:
                    provenance = replace(provenance, client=_client_name(ctx, None))
                try:
                    self.episode = await self.host.open(self.task_id, provenance)
                except KeyError as exc:
                    raise MCPError(code=INVALID_PARAMS, message=str(exc.args[0])) from None
            return self.episode

    async def describe(self, ctx: Any = None) -> Listed:
        """The episode once open, else what it will offer."""
        episode = self.episode
        return episode if episode is not None and not episode.ended else TaskPreview.of(self.host, self.task_id)

    async def end(self) -> None:
        """End the episode (if one was opened and is still open); the runtime grades it."""
        if self.episode is not None and not self.episode.ended:
            log_end(self.episode, await self.episode.finish(self.episode.final_answer))

    async def ended(self, episode: Episode) -> None:
        """An episode ended through ``submit_answer`` (graded by then)."""
        log_end(episode, episode.verdict)


_ROUTE: contextvars.ContextVar[Mapping[str, str]] = contextvars.ContextVar("coworkenv_route")

OPERATOR_HEADER = "x-coworkenv-operator"
"""The header that carries the operator credential (``serve --operator-token``)."""
OPENERS_KEPT = 65536  # ended episodes whose opener is remembered (for their status); open ones are always kept


@dataclass(frozen=True, slots=True)
class Opener:
    """Who opened an episode over HTTP. It decides who may read the episode's verdict or end it
    (its opener, or the operator) and whose model calls the capture proxy records into it."""

    address: str  # the client address it was opened from
    operator: bool = False  # opened with the operator credential (``POST /episodes``)
    keyed: bool = False  # opened at a key address (``/t/{task}/e/{key}``): its model calls go there
    handed_to: str | None = None  # an operator's episode: the client address whose model calls it records


class HttpEpisodes:
    """Resolver for HTTP: episodes by legacy session id or by the episode key in the URL path.

    ``[/w/{workspace}]/t/{task}/mcp``          one new episode per MCP session (protocol 2025-11-25)
    ``[/w/{workspace}]/t/{task}/e/{key}/mcp``  the episode named by ``key``, opened on first use (both eras)
    ``/e/{episode}/mcp``                       an episode already open, by its id

    Episodes opened here are ``live``; an episode opened elsewhere with its provenance (the loop,
    ``POST /episodes``) is reached by its id. An episode ends on ``submit_answer``, on DELETE (of
    its session, or of a key or episode URL), or after ``idle_timeout`` seconds without a request
    (``fresh_idle_timeout`` while it has made one call or none: an opened address left alone, or a
    one-shot client's single ``tools/call`` with no DELETE after it); the runtime grades it then. A
    key names one episode: once it has ended, calls at the key are refused saying so, and where to open
    a new one (listings still answer, as a client's own check after ``submit_answer`` lists; one idle
    timeout after the end, the key may open anew).

    At most ``max_open`` episodes are open in the host, and this resolver opens at most
    ``max_open_per_client`` for one client address: each opening takes a slot of ``caps`` before it
    awaits anything and gives it back when its episode ends or fails to open (``caps``: the front's,
    shared by every worker of ``serve --workers``; see ``coworkenv.server._limits``). Live clients
    get admitted tasks only (held-out ones too with ``serve_heldout``); see ``refusal``.

    Provenance and grading are the operator's: a request bearing ``operator_token`` (header
    ``X-Coworkenv-Operator``) may open episodes of any source, end them as infrastructure failures
    and read any verdict; a plain client only its own (``Opener``, ``may_manage``). The capture proxy
    records into an open episode only for the client that opened it (``for_model``).
    """

    def __init__(self, host: EpisodeHost, *, idle_timeout: float | None = 1800,
                 fresh_idle_timeout: float | None = None, max_open: int | None = None,
                 max_open_per_client: int | None = None, caps: Slots | None = None, serve_heldout: bool = False,
                 operator_token: str | None = None) -> None:
        self.host = host
        self.operator_token = operator_token.encode() if operator_token else None
        self.openers: OrderedDict[str, Opener] = OrderedDict()  # episode id -> who opened it here
        self.idle_timeout = idle_timeout
        fresh = idle_timeout if fresh_idle_timeout is None else fresh_idle_timeout
        # never longer than the idle timeout: a fresh episode ends no later than any other
        self.fresh_idle_timeout = fresh if fresh is None or idle_timeout is None else min(fresh, idle_timeout)
        self.max_open = max_open
        self.max_open_per_client = max_open_per_client
        self.caps = caps if caps is not None else Caps(max_open, max_open_per_client)
        self.serve_heldout = serve_heldout
        self.by_key: dict[tuple[str, ...], Episode] = {}
        self.last_seen: dict[str, float] = {}
        self.clients: dict[str, str] = {}  # open episode id -> the client address whose slot it holds
        self._locks: dict[tuple[str, ...], asyncio.Lock] = {}
        self._ended: dict[str, float] = {}  # episode id -> when it ended

    def refusal(self, task_id: str, source: str) -> str | None:
        """Why an episode of ``task_id`` may not be opened for ``source`` here, or None.

        ``live``: admitted tasks (and held-out ones with ``serve_heldout``); ``teacher`` and ``rl``:
        admitted; ``eval``: admitted or held-out; ``calibration``: any stored task. Only the operator
        opens episodes other than ``live`` (``POST /episodes``)."""
        row = self.host.store.task(task_id)
        if row is None:
            return f"no task {task_id!r} in the store"
        allowed = {"live": ("admitted", "heldout") if self.serve_heldout else ("admitted",),
                   "teacher": ("admitted",), "rl": ("admitted",), "eval": ("admitted", "heldout")}.get(source)
        if allowed is not None and row.status not in allowed:
            why = f": {row.reason}" if row.reason else ""
            return f"task {task_id!r} is {row.status}{why}; it is not served to {source} episodes"
        return None

    async def _reserve(self, client: str) -> str | None:
        """Take a slot for one more episode of ``client``'s, or say why no more episodes may open."""
        if self.max_open is not None and len(self.host.open_episodes) >= self.max_open:  # the loop's too
            return (f"too many open episodes ({len(self.host.open_episodes)}, at most {self.max_open}); "
                    "end some (submit_answer or DELETE) or wait for idle ones to end")
        return await self.caps.reserve(EPISODE, client)

    async def _opened(self, task_id: str, provenance: Provenance, client: str) -> Episode:
        """Open an episode in the slot ``client`` reserved; the slot goes back if it does not open."""
        try:
            episode = await self.host.open(task_id, provenance)
        except BaseException:
            self.caps.release(EPISODE, client)
            raise
        self.last_seen[episode.id] = time.monotonic()
        self.clients[episode.id] = client
        return episode

    def _untrack(self, episode_id: str) -> None:
        """An episode has ended: forget when it was seen, and give its slot back."""
        self.last_seen.pop(episode_id, None)
        client = self.clients.pop(episode_id, None)
        if client is not None:
            self.caps.release(EPISODE, client)

    def is_operator(self, request: Any) -> bool:
        """Whether ``request`` bears the operator credential (never, when the server has none)."""
        if self.operator_token is None or request is None:
            return False
        offered = request.headers.get(OPERATOR_HEADER, "").strip().encode("utf-8", "replace")
        return hmac.compare_digest(offered, self.operator_token)

    def may_manage(self, episode_id: str, request: Any) -> bool:
        """Whether ``request`` may read the episode's verdict and end it: the operator always, a plain
        client only an episode it opened itself (from the same address; the bearer token, where the
        server has one, is checked for every request before)."""
        if self.is_operator(request):
            return True
        opener = self.openers.get(episode_id)
        return opener is not None and not opener.operator and opener.address == _client(request)

    def _remember(self, episode_id: str, opener: Opener) -> None:
        """Note who opened an episode; forget the longest-ended past ``OPENERS_KEPT`` (never an open one)."""
        self.openers[episode_id] = opener
        self.openers.move_to_end(episode_id)
        for _ in range(len(self.openers) - OPENERS_KEPT):
            oldest, who = self.openers.popitem(last=False)
            if oldest in self.host.open_episodes:
                self.openers[oldest] = who

    async def __call__(self, ctx: Any) -> Episode:
        request = ctx.request
        if request is None:
            raise MCPError(code=INVALID_PARAMS, message="this server serves episodes over HTTP only")
        episode = await self._find(ctx, request)
        self.last_seen[episode.id] = time.monotonic()
        return episode

    async def describe(self, ctx: Any) -> Listed:
        """What a listing request sees: the episode its address (or legacy session) has open, else a
        preview of the task, which opens nothing (any client may list at ``/t/{task}/mcp``)."""
        request = ctx.request
        if request is None:
            raise MCPError(code=INVALID_PARAMS, message="this server serves episodes over HTTP only")
        params = request.path_params
        if "episode" in params:
            return await self(ctx)
        task_id = params["task"]
        session_id = request.headers.get("mcp-session-id")
        key = ("key", task_id, params["key"]) if "key" in params else ("session", session_id or "")
        episode = self.by_key.get(key)
        if episode is not None and not episode.ended and episode.task.id == task_id:
            self.last_seen[episode.id] = time.monotonic()
            return episode
        problem = self._live_refusal(task_id, params.get("workspace"))
        if problem is not None:
            raise MCPError(code=INVALID_PARAMS, message=problem)
        return TaskPreview.of(self.host, task_id)

    def address_refusal(self, params: Mapping[str, str], session_id: str | None) -> tuple[int, str] | None:
        """Why a request at a task's address (``/t/{task}/...``) is refused before the MCP transport
        answers it, an ``initialize`` included: (404, why) for a task this server does not have (or not
        in the workspace the address names), (403, why) for one it does not serve to live clients; None
        where the address's episode is open, or the task is served (the transport then answers, and the
        resolver opens its episode)."""
        task_id = params.get("task")
        if task_id is None:
            return None
        key = ("key", task_id, params["key"]) if "key" in params else ("session", session_id or "")
        episode = self.by_key.get(key)
        if episode is not None and not episode.ended:
            return None
        row = self.host.store.task(task_id)
        if row is None:
            return 404, f"no task {task_id!r} on this server (GET /tasks lists the tasks it serves)"
        if "workspace" in params and row.workspace_id != params["workspace"]:
            return 404, f"task {task_id!r} belongs to workspace {row.workspace_id!r}, not {params['workspace']!r}"
        problem = self.refusal(task_id, "live")
        return (403, problem) if problem is not None else None

    @staticmethod
    def serving(path_params: Mapping[str, str]) -> None:
        """Note the URL the current request came in at (for ``input_schema``, which gets no request)."""
        _ROUTE.set(path_params)

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        """The input schema of tool ``name`` as the episode at the current request's URL has it;
        None (the SDK then checks no ``Mcp-Param-*`` header) where that URL names no task."""
        params = _ROUTE.get(None)
        if params is None:
            return None
        episode = self.by_path(dict(params))
        if episode is not None:
            workspace = episode.workspace
        elif "task" in params:
            try:
                workspace = self.host.workspace(self.host.task(params["task"]).workspace_id)
            except KeyError:
                return None  # the call itself is refused for the unknown task
        else:
            return None
        spec = self.host.toolbox(workspace).by_name.get(name)
        return spec.input_schema if spec is not None else None

    def by_path(self, params: dict[str, str]) -> Episode | None:
        """The open episode a key or episode URL names, if any (for DELETE)."""
        if "episode" in params:
            return self.host.open_episodes.get(params["episode"])
        if "key" in params:
            return self.by_key.get(("key", params["task"], params["key"]))
        return None

    async def _find(self, ctx: Any, request: Any) -> Episode:
        params = request.path_params
        if "episode" in params:
            episode = self.host.open_episodes.get(params["episode"])
            if episode is None:
                raise MCPError(code=INVALID_PARAMS, message=f"no open episode {params['episode']!r}")
            return episode
        task_id = params["task"]
        if "key" in params:
            key: tuple[str, ...] = ("key", task_id, params["key"])
        elif ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            prefix = f"/w/{params['workspace']}" if "workspace" in params else ""
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"protocol {ctx.protocol_version} has no sessions: open an episode at "
                f"{prefix}/t/{task_id}/e/<your-episode-key>/mcp",
            )
        else:
            session_id = request.headers.get("mcp-session-id")
            if not session_id:
                raise MCPError(code=INVALID_PARAMS, message="missing Mcp-Session-Id header")
            key = ("session", session_id)
        episode = self.by_key.get(key)
        if episode is not None and episode.ended and key[0] == "key":
            raise MCPError(code=INVALID_PARAMS, message=_ended_key(episode, params))
        if episode is not None and not episode.ended:  # the common case: an episode already open
            if episode.task.id != task_id:
                raise MCPError(
                    code=INVALID_PARAMS,
                    message=f"this session belongs to task {episode.task.id!r}, not {task_id!r}",
                )
            return episode
        episode = await self._keyed(key, task_id, params.get("workspace"), _client(request), lambda: Provenance(
            "live", client=_client_name(ctx, request), key=params.get("key", ""), run_tag=_run_tag(request)))
        if episode.task.id != task_id:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"this session belongs to task {episode.task.id!r}, not {task_id!r}",
            )
        return episode

    async def for_model(self, params: dict[str, str], client: str, request: Any = None) -> str:
        """The id of the open episode a capture-proxy request from ``client`` records into: the one its
        path names (``/e/{episode}``, or a task's key, whose episode opens here as its MCP address
        would open it). Raises ``LookupError`` when there is none, and ``NotRecorded`` when this
        request may not write its conversation:

        - an ended episode's conversation is frozen as it was graded (409);
        - at a key address, only the client address that opened the key's episode is recorded;
        - at ``/e/{episode}``, only the plain client that opened it through ``POST /episodes``, or the
          client address an operator's episode was handed to (``handed_to``); an episode opened at a
          key is written at its key address, and one opened in this process (the loop's) by no client;
        - a request bearing the operator credential is recorded into any open episode (403 otherwise).
        """
        operator = self.is_operator(request)
        if "episode" in params:
            episode_id = params["episode"]
            episode = self.host.open_episodes.get(episode_id)
            if episode is None and self.host.store.episode(episode_id) is None:
                raise LookupError(f"no episode {episode_id!r}")
            opener = self.openers.get(episode_id)
            allowed = operator or (opener is not None and not opener.keyed and client == (
                opener.handed_to if opener.operator else opener.address))
        else:
            key = ("key", params["task"], params["key"])
            try:
                episode = await self._keyed(key, params["task"], params.get("workspace"), client, lambda: Provenance(
                    "live", client=_client_name(None, request), key=params["key"],
                    run_tag=_run_tag(request) if request is not None else ""))
            except MCPError as exc:
                raise LookupError(exc.error.message) from None
            episode_id = episode.id
            opener = self.openers.get(episode_id)
            allowed = operator or (opener is not None and opener.address == client)
        if episode is None or episode.ended:
            raise NotRecorded(409, f"episode {episode_id} has ended: its conversation is kept as it was graded "
                                   "and nothing more is recorded (open a new episode for a new conversation)")
        if not allowed:
            raise NotRecorded(403, f"episode {episode_id} records the model calls of the client that opened it "
                                   "only (at the address it was opened at); open your own episode")
        self.last_seen[episode.id] = time.monotonic()  # a model call keeps its episode from ending idle
        return episode.id

    def _live_refusal(self, task_id: str, workspace_id: str | None) -> str | None:
        """Why a live client may not have ``task_id`` at an address of ``workspace_id``, or None."""
        problem = self.refusal(task_id, "live")
        if problem is None and workspace_id is not None:
            owner = self.host.task(task_id).workspace_id
            if owner != workspace_id:
                problem = f"task {task_id!r} belongs to workspace {owner!r}, not {workspace_id!r}"
        return problem

    async def _keyed(self, key: tuple[str, ...], task_id: str, workspace_id: str | None, client: str,
                     provenance: Callable[[], Provenance]) -> Episode:
        """The episode of ``key``, opened (with ``provenance()``) when it has none, or when a legacy
        session's episode has ended; one opening per key at a time."""
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            episode = self.by_key.get(key)
            if episode is None or (episode.ended and key[0] == "session"):
                episode = await self._open(task_id, workspace_id, client, provenance())
                self.by_key[key] = episode
                self._remember(episode.id, Opener(client, keyed=key[0] == "key"))
        return episode

    async def _open(self, task_id: str, workspace_id: str | None, client: str, provenance: Provenance) -> Episode:
        problem = self._live_refusal(task_id, workspace_id) or await self._reserve(client)
        if problem is not None:
            raise MCPError(code=INVALID_PARAMS, message=problem)
        return await self._opened(task_id, provenance, client)

    async def open(self, task_id: str, provenance: Provenance, client: str = "", *, operator: bool = False,
                   handed_to: str | None = None) -> Episode:
        """Open an episode with its provenance for a client that will reach it at ``/e/{id}/mcp``
        (``operator``: opened with the operator credential, ``handed_to``: the client address whose
        model calls it records; see ``for_model``).

        Raises ``ValueError`` saying why when the task is not served to that source or no more
        episodes may open."""
        problem = self.refusal(task_id, provenance.source) or await self._reserve(client)
        if problem is not None:
            raise ValueError(problem)
        episode = await self._opened(task_id, provenance, client)
        self._remember(episode.id, Opener(client, operator=operator, handed_to=handed_to))
        return episode

    async def end(self, episode: Episode, *, truncated: bool = False, failure: InfrastructureError | None = None,
                  answer: str | None = None) -> None:
        """End ``episode`` (keeping its state; the runtime grades it), once; log a line about it."""
        self._untrack(episode.id)
        if episode.id in self._ended:
            return
        self._ended[episode.id] = time.monotonic()
        verdict = await episode.finish(answer if answer is not None else episode.final_answer, truncated=truncated,
                                       failure=failure)
        log_end(episode, verdict)

    async def reap_idle(self, now: float | None = None) -> list[str]:
        """End episodes idle for longer than ``idle_timeout`` (``fresh_idle_timeout`` for those that
        made one call or none, as a one-shot client leaves them); return their ids."""
        if self.idle_timeout is None:
            return []
        now = time.monotonic() if now is None else now
        idle = []
        for episode_id, seen in list(self.last_seen.items()):
            episode = self.host.open_episodes.get(episode_id)
            if episode is None:  # ended elsewhere (the loop, submit_answer)
                self._untrack(episode_id)
                continue
            limit = self.idle_timeout if episode.calls > 1 else self.fresh_idle_timeout
            if limit is not None and now - seen > limit:
                idle.append(episode_id)
                await self.end(episode)
        self._forget_ended(now)
        return idle

    def _forget_ended(self, now: float) -> None:
        """Drop ended sessions at once, and ended keys one idle timeout after their end (until
        then a key's later requests hear that its episode has ended; after, the key opens anew)."""
        if self.idle_timeout is None:
            return
        for key, episode in list(self.by_key.items()):
            ended_at = self._ended.get(episode.id)
            if episode.ended and (key[0] == "session" or (ended_at is not None and now - ended_at > self.idle_timeout)):
                del self.by_key[key]
                self._locks.pop(key, None)
        for episode_id in [e for e, at in self._ended.items() if now - at > 2 * self.idle_timeout]:
            del self._ended[episode_id]

    async def end_session(self, session_id: str) -> None:
        """End the episode of a legacy session whose client ended the session (DELETE)."""
        episode = self.by_key.get(("session", session_id))
        if episode is not None:
            await self.end(episode)

    async def close(self) -> None:
        """End every episode this resolver opened that is still open."""
        for episode in list(self.by_key.values()):
            await self.end(episode)


ENDED = logging.getLogger("coworkenv.server.episodes")
"""One line per ended episode (``coworkenv serve`` shows them)."""


def _ended_key(episode: Episode, params: Mapping[str, str]) -> str:
    """What a request at a key whose episode has ended hears: that it has, and where to open a new one."""
    prefix = f"/w/{params['workspace']}" if "workspace" in params else ""
    return (f"episode {episode.id} at key {params['key']!r} has ended (GET /episodes/{episode.id} gives its verdict): "
            f"a key names one episode; open a new one at {prefix}/t/{params['task']}/e/<a new key>/mcp")


def log_end(episode: Episode, verdict: VerdictRow | None) -> None:
    who = f" by {episode.provenance.client}" if episode.provenance.client else ""
    if verdict is not None:
        ENDED.info("episode %s of %s%s ended after %d calls: score %.2f, %s", episode.id, episode.task.id, who,
                   episode.calls, verdict.score, "passed" if verdict.admitted else
                   f"not passed ({verdict.reason}{': ' + verdict.detail if verdict.detail else ''})")
    elif episode.failure is not None:
        ENDED.info("episode %s of %s%s failed: %s", episode.id, episode.task.id, who, episode.failure)
    else:
        ENDED.info("episode %s of %s%s ended without a verdict (%s)", episode.id, episode.task.id, who,
                   "abandoned: no call, no answer" if episode.calls == 0 else "grading failed")


def _client_name(ctx: Any, request: Any) -> str:
    """The MCP client's name and version as it gave them (``initialize`` or the request envelope),
    else its User-Agent."""
    session = getattr(ctx, "session", None) if ctx is not None else None
    params = getattr(session, "client_params", None)
    info = getattr(params, "client_info", None)
    if info is not None:
        return f"{info.name} {info.version}".strip()[:200]
    agent = request.headers.get("user-agent", "") if request is not None else ""
    return agent[:200]


def live_provenance(request: Any, key: str = "") -> Provenance:
    """The provenance of a live episode a plain HTTP client opens: its name (User-Agent), key and run tag."""
    return Provenance("live", client=_client_name(None, request), key=key, run_tag=_run_tag(request))


def _run_tag(request: Any) -> str:
    """The run a client names, ``?run=TAG`` on its address or an ``X-Coworkenv-Run`` header."""
    return (request.query_params.get("run") or request.headers.get("x-coworkenv-run") or "")[:200]


def _client(request: Any) -> str:
    """The client address of an HTTP request ("" when the transport gives none)."""
    client = getattr(request, "client", None)
    return client.host if client is not None else ""

"""The MCP server: tools, resources, the task prompt, logging, progress and completion of one episode.

The handlers are the same for every transport; what differs is how a request finds its
episode (a ``Resolver``): one episode per process on stdio or in memory (``_resolvers``), and on
HTTP one per legacy MCP session or per episode key in the URL path (``_http_episodes``; the
2026-07-28 era has no session id). Every request is served by exactly one episode, so no request
can reach another episode's state.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import re
import time
import warnings
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp import MCPError
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .. import __version__
from ..episodes import CallResult, Episode, EpisodeFailed
from ..workspace import Attachment, ResourceSpec
from ._resolvers import INTERNAL_ERROR, INVALID_PARAMS, Describer, Listed, Resolver

TASK_PROMPT = "task"
TASK_URI = "coworkenv://task"
ATTACHMENTS_ARGUMENT = "attachments"  # of the task prompt, for a task with attachments: 'all' (default) or 'none'
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



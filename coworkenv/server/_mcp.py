"""The MCP server: tools, the task prompt and resource of one episode, over any transport.

The handlers are the same for every transport; what differs is how a request finds its
episode (a ``Resolver``): one episode per process on stdio or in memory, and on HTTP one per
legacy MCP session or per episode key in the URL path (the 2026-07-28 era has no session id).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from mcp import MCPError
from mcp.server.lowlevel import Server
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .. import __version__
from ._episodes import Episode, EpisodeHost

Resolver = Callable[[Any], Awaitable[Episode]]
TASK_PROMPT = "task"
INVALID_PARAMS = -32602


def _task_uri(episode: Episode) -> str:
    return f"coworkenv://episodes/{episode.id}/task"


def _tool(spec) -> types.Tool:
    read_only = spec.effect == "read"
    return types.Tool(
        name=spec.name,
        description=spec.description,
        input_schema=spec.input_schema,
        output_schema=spec.output_schema,
        annotations=types.ToolAnnotations(
            read_only_hint=read_only,
            destructive_hint=not read_only and spec.tool.startswith(("delete", "cancel", "remove")),
            open_world_hint=False,
        ),
    )


def build_server(resolve: Resolver, *, name: str = "coworkenv") -> Server:
    """A low-level MCP server whose every request is served by the episode ``resolve`` finds."""

    async def list_tools(ctx, params) -> types.ListToolsResult:
        episode = await resolve(ctx)
        return types.ListToolsResult(tools=[_tool(spec) for spec in episode.tools])

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        episode = await resolve(ctx)
        outcome = await episode.call(params.name, params.arguments)
        return types.CallToolResult(
            content=[types.TextContent(text=outcome.text)],
            structured_content=outcome.result if outcome.ok else None,
            is_error=not outcome.ok,
        )

    async def list_prompts(ctx, params) -> types.ListPromptsResult:
        episode = await resolve(ctx)
        return types.ListPromptsResult(prompts=[types.Prompt(
            name=TASK_PROMPT,
            description=f"The instruction of task {episode.task.id} ({episode.task.capability})",
        )])

    async def get_prompt(ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        episode = await resolve(ctx)
        if params.name != TASK_PROMPT:
            raise MCPError(code=INVALID_PARAMS, message=f"unknown prompt {params.name!r}; the only prompt is {TASK_PROMPT!r}")
        return types.GetPromptResult(
            description=f"task {episode.task.id}",
            messages=[types.PromptMessage(role="user", content=types.TextContent(text=episode.task.instruction))],
        )

    async def list_resources(ctx, params) -> types.ListResourcesResult:
        episode = await resolve(ctx)
        return types.ListResourcesResult(resources=[types.Resource(
            name="task", uri=_task_uri(episode), mime_type="text/plain",
            description="The instruction of this episode's task",
        )])

    async def read_resource(ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        episode = await resolve(ctx)
        if str(params.uri) != _task_uri(episode):
            raise MCPError(code=INVALID_PARAMS, message=f"unknown resource {params.uri}")
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=str(params.uri), mime_type="text/plain", text=episode.task.instruction,
        )])

    return Server(
        name,
        version=__version__,
        instructions="A synthetic coworker workspace. Read the 'task' prompt, use the tools, then call submit_answer.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )


class SingleEpisode:
    """Resolver for stdio and in-memory servers: one episode, opened on the first request."""

    def __init__(self, host: EpisodeHost, task_id: str, *, source: str = "live", provider: str = "",
                 **open_options: Any) -> None:
        self.host = host
        self.task_id = task_id
        self.source = source
        self.provider = provider
        self.open_options = open_options
        self.episode: Episode | None = None
        self._lock = asyncio.Lock()

    async def __call__(self, ctx: Any = None) -> Episode:
        async with self._lock:
            if self.episode is None:
                try:
                    self.episode = await self.host.open(
                        self.task_id, source=self.source, provider=self.provider, **self.open_options
                    )
                except KeyError as exc:
                    raise MCPError(code=INVALID_PARAMS, message=str(exc.args[0])) from None
            return self.episode


class HttpEpisodes:
    """Resolver for HTTP: episodes by legacy session id or by the episode key in the URL path.

    ``/t/{task}/mcp``          one new episode per MCP session (protocol 2025-11-25)
    ``/t/{task}/e/{key}/mcp``  the episode named by ``key``, opened on first use (both eras)
    ``/e/{episode}/mcp``       an episode already open, by its id
    """

    def __init__(self, host: EpisodeHost, *, source: str = "live") -> None:
        self.host = host
        self.source = source
        self.by_key: dict[tuple[str, ...], Episode] = {}
        self._locks: dict[tuple[str, ...], asyncio.Lock] = {}

    async def __call__(self, ctx: Any) -> Episode:
        request = ctx.request
        if request is None:
            raise MCPError(code=INVALID_PARAMS, message="this server serves episodes over HTTP only")
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
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"protocol {ctx.protocol_version} has no sessions: open an episode at "
                f"/t/{task_id}/e/<your-episode-key>/mcp",
            )
        else:
            session_id = request.headers.get("mcp-session-id")
            if not session_id:
                raise MCPError(code=INVALID_PARAMS, message="missing Mcp-Session-Id header")
            key = ("session", session_id)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            episode = self.by_key.get(key)
            if episode is None or (episode.ended and key[0] == "session"):
                try:
                    episode = await self.host.open(task_id, source=self.source)
                except KeyError as exc:
                    raise MCPError(code=INVALID_PARAMS, message=str(exc.args[0])) from None
                self.by_key[key] = episode
                if key[0] == "session":
                    _on_connection_end(ctx, episode.finish)
        if episode.task.id != task_id:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"this session belongs to task {episode.task.id!r}, not {task_id!r}",
            )
        return episode


def _on_connection_end(ctx: Any, callback: Callable[[], Awaitable[None]]) -> None:
    """Run ``callback`` when the legacy session's connection closes (DELETE, idle timeout)."""
    connection = getattr(ctx.session, "_connection", None)
    exit_stack = getattr(connection, "exit_stack", None)
    if isinstance(exit_stack, contextlib.AsyncExitStack):
        exit_stack.push_async_callback(callback)

"""How a request finds its episode (a ``Resolver``), for the transports with one episode at a time, and
what the resolvers share: a task's preview for listings that open nothing, the line logged when an
episode ends, and who a client is (its name, run tag and address).

``OpenEpisode`` serves an episode opened beforehand (the loop's, in memory); ``SingleEpisode`` opens
one per conversation on stdio and in memory. HTTP's resolver, by session or by key in the URL path,
is ``coworkenv.server._http_episodes.HttpEpisodes``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from mcp import MCPError

from ..episodes import Episode, EpisodeHost
from ..store import Provenance, VerdictRow
from ..workspace import Task, ToolSpec, Workspace

Resolver = Callable[[Any], Awaitable[Episode]]
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


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
                    provenance = replace(provenance, client=client_name(ctx, None))
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


ENDED = logging.getLogger("coworkenv.server.episodes")
"""One line per ended episode (``coworkenv serve`` shows them)."""

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


def client_name(ctx: Any, request: Any) -> str:
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
    return Provenance("live", client=client_name(None, request), key=key, run_tag=run_tag(request))


def run_tag(request: Any) -> str:
    """The run a client names, ``?run=TAG`` on its address or an ``X-Coworkenv-Run`` header."""
    return (request.query_params.get("run") or request.headers.get("x-coworkenv-run") or "")[:200]


def client_address(request: Any) -> str:
    """The client address of an HTTP request ("" when the transport gives none)."""
    client = getattr(request, "client", None)
    return client.host if client is not None else ""

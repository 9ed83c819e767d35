"""The HTTP resolver: an episode by legacy MCP session, by the episode key in the URL path (the
2026-07-28 era has no session id), or by its id; who opened it (``Opener``) decides who may read its
verdict, end it, and record model calls into it through the capture proxy. It also holds the
limits on opening (slots per client and in all) and ends idle episodes."""

from __future__ import annotations

import asyncio
import contextvars
import hmac
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mcp import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .._errors import InfrastructureError
from ..episodes import Episode, EpisodeHost
from ..store import Provenance
from ._limits import EPISODE, Caps, Slots
from ._proxy import NotRecorded
from ._resolvers import INVALID_PARAMS, Listed, TaskPreview, client_address, client_name, log_end, run_tag

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
        return opener is not None and not opener.operator and opener.address == client_address(request)

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
        episode = await self._keyed(key, task_id, params.get("workspace"), client_address(request), lambda: Provenance(
            "live", client=client_name(ctx, request), key=params.get("key", ""), run_tag=run_tag(request)))
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
                    "live", client=client_name(None, request), key=params["key"],
                    run_tag=run_tag(request) if request is not None else ""))
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


def _ended_key(episode: Episode, params: Mapping[str, str]) -> str:
    """What a request at a key whose episode has ended hears: that it has, and where to open a new one."""
    prefix = f"/w/{params['workspace']}" if "workspace" in params else ""
    return (f"episode {episode.id} at key {params['key']!r} has ended (GET /episodes/{episode.id} gives its verdict): "
            f"a key names one episode; open a new one at {prefix}/t/{params['task']}/e/<a new key>/mcp")


"""coworkenv tasks as an OpenEnv environment server (the ``openenv`` package, 0.10).

``CoworkEnvironment`` is an OpenEnv ``Environment`` whose actions are OpenEnv's MCP actions
(``ListToolsAction``, ``CallToolAction``): OpenEnv's server then offers the episode's tools on both of its
surfaces, ``reset``/``step``/``state`` over HTTP and WebSocket, and MCP's ``tools/list`` and ``tools/call``
at ``/mcp``. Each OpenEnv session gets an environment of its own, and each ``reset`` opens a new coworkenv
episode: its own sandbox with a private copy of the workspace.

The episodes are a ``coworkenv serve``'s, opened as live episodes through its episode API
(``_remote.CoworkServer``, client name ``openenv``): the server sets their provenance, serves admitted
tasks only, and grades each once when it ends. An OpenEnv client sees no reward until then; the step
that ends the episode (``submit_answer``) is ``done`` with the gate's score as its reward and the
verdict's components in its metadata (completion, safety, robustness, passed, reason).

It runs where openenv is installed, beside a ``coworkenv serve`` elsewhere (openenv 0.10 needs mcp<2;
coworkenv pins mcp 2): ``python -m coworkenv.interop.openenv_server --server URL``.
"""

from __future__ import annotations

import hmac
import threading
from typing import Any

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.mcp_types import (
    CallToolAction,
    CallToolObservation,
    ListToolsAction,
    ListToolsObservation,
    Tool,
    ToolError,
    ToolErrorType,
)
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State

from ._remote import CoworkServer, ServedEpisode, ServeError

SPLIT = "admitted"  # the one task split: the tasks the server serves to live clients


class TaskObservation(Observation):
    """What ``reset`` returns: the task to do (list the tools with ``ListToolsAction``)."""

    task_id: str
    episode_id: str
    instruction: str
    capability: str = ""


class CoworkState(State):
    """``state``: the coworkenv episode (``episode_id``), its task, and its verdict once it has ended."""

    task_id: str | None = None
    done: bool = False
    reward: float | None = None
    verdict: dict[str, Any] | None = None


class CoworkEnvironment(Environment):
    """One OpenEnv session's coworkenv episodes, one at a time, of the server ``server``."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # every session has its own episodes, each in its own sandbox

    def __init__(self, server: CoworkServer) -> None:
        super().__init__()
        self.server = server
        self.episode: ServedEpisode | None = None
        self._task: dict[str, Any] | None = None
        self._state = CoworkState()
        self._lock = threading.Lock()

    # --- the task API (OpenEnv's TaskProvider) --------------------------------------------------

    def list_splits(self) -> list[str]:
        return [SPLIT]

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        self._check_split(split)
        return self.server.tasks()

    def num_tasks(self, split: str) -> int:
        return len(self.list_tasks(split))

    def get_task(self, split: str, index: int) -> dict[str, Any]:
        tasks = self.list_tasks(split)
        if not 0 <= index < len(tasks):
            raise IndexError(f"task index {index} out of range: split {split!r} has {len(tasks)} tasks")
        return tasks[index]

    @staticmethod
    def _check_split(split: str) -> None:
        if split != SPLIT:
            raise ValueError(f"unknown split {split!r}; coworkenv serves one: {SPLIT!r}")

    # --- reset / step / state ------------------------------------------------------------------

    def reset(self, seed: int | None = None, episode_id: str | None = None, task_id: str | None = None,
              split: str | None = None, index: int | None = None, **kwargs: Any) -> TaskObservation:
        """A new episode of ``task_id`` (or of the split's task at ``index``, or chosen by ``seed``; the
        first task without any). The episode before it, if still open, ends first (and is graded)."""
        with self._lock:
            self._end_open()
            task = self._pick(task_id, split, index, seed)
            self.episode = self.server.open(task["id"])
            self._task = task
            self._state = CoworkState(episode_id=self.episode.id, task_id=task["id"])
            return TaskObservation(task_id=task["id"], episode_id=self.episode.id, instruction=task["instruction"],
                                   capability=task.get("capability", ""))

    def _pick(self, task_id: str | None, split: str | None, index: int | None, seed: int | None) -> dict[str, Any]:
        tasks = self.list_tasks(split or SPLIT)
        if not tasks:
            raise ValueError(f"the coworkenv server at {self.server.url} serves no admitted task")
        if task_id is not None:
            found = [t for t in tasks if t["id"] == task_id]
            if not found:
                raise ValueError(f"task {task_id!r} is not one the coworkenv server serves "
                                 f"(admitted tasks: {', '.join(t['id'] for t in tasks[:5])}...)")
            return found[0]
        if index is not None:
            return self.get_task(split or SPLIT, index)
        return tasks[(seed or 0) % len(tasks)]

    def step(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        if isinstance(action, ListToolsAction):
            return self._list_tools()
        if not isinstance(action, CallToolAction):
            raise ValueError(f"coworkenv takes MCP actions (list_tools, call_tool), not {type(action).__name__}")
        with self._lock:
            return self._call(action)

    def _list_tools(self) -> ListToolsObservation:
        if self.episode is None:
            return ListToolsObservation(tools=[], metadata={"error": "no episode: call reset first"})
        return ListToolsObservation(tools=[Tool(name=t.name, description=t.description, input_schema=t.input_schema)
                                           for t in self.episode.tools])

    def _call(self, action: CallToolAction) -> CallToolObservation:
        episode = self.episode
        if episode is None or episode.ended:
            return CallToolObservation(tool_name=action.tool_name, done=episode is not None,
                                       error=ToolError(error_type=ToolErrorType.EXECUTION_ERROR,
                                                       message="no open episode: call reset to start one"))
        try:
            outcome = episode.call(action.tool_name, action.arguments)
        except ServeError as exc:
            return CallToolObservation(tool_name=action.tool_name, error=ToolError(
                error_type=ToolErrorType.TRANSPORT_ERROR, message=str(exc)))
        except Exception as exc:  # the episode's infrastructure failed (the server ended it): no tool result
            self._ended()
            return CallToolObservation(tool_name=action.tool_name, done=True, error=ToolError(
                error_type=ToolErrorType.EXECUTION_ERROR, message=str(exc)))
        self._state.step_count += 1
        result = {"content": [{"type": "text", "text": outcome.text}], "structured_content": outcome.structured,
                  "is_error": outcome.is_error,
                  "data": outcome.structured if outcome.structured is not None else outcome.text}
        if not episode.ended:
            return CallToolObservation(tool_name=action.tool_name, result=result)
        verdict = self._ended()
        return CallToolObservation(tool_name=action.tool_name, result=result, done=True,
                                   reward=verdict["score"] if verdict else None,
                                   metadata={"episode_id": episode.id, **(verdict or {})})

    def _ended(self) -> dict[str, Any] | None:
        """Record the open episode's end in ``state`` and return its verdict's components."""
        assert self.episode is not None
        verdict = self.episode.end()
        components = verdict.components() if verdict is not None else None
        self._state.done, self._state.verdict = True, components
        self._state.reward = components["score"] if components else None
        return components

    @property
    def state(self) -> CoworkState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="coworkenv", version="1",
            description="coworkenv tasks: executable workspaces of a coworker's apps; reset opens a sandboxed "
                        "episode of a task, call_tool plays it, submit_answer ends it with the gate's reward")

    def _end_open(self) -> None:
        if self.episode is not None and not self.episode.ended:
            self._ended()

    def close(self) -> None:
        """End the open episode (the gate grades what it did), as a closed session leaves it."""
        with self._lock:
            self._end_open()


def openenv_app(server: CoworkServer, *, max_sessions: int = 64, client_token: str | None = None) -> Any:
    """OpenEnv's FastAPI app over ``server``'s tasks: one ``CoworkEnvironment`` per session. With
    ``client_token``, every request and WebSocket must carry ``Authorization: Bearer <client_token>``
    (OpenEnv's clients send it with ``headers=``): whoever reaches this server plays episodes as its client."""
    app = create_app(lambda: CoworkEnvironment(server), CallToolAction, CallToolObservation, env_name="coworkenv",
                     max_concurrent_envs=max_sessions, state_cls=CoworkState, reset_observation_cls=TaskObservation)
    return _Bearer(app, client_token) if client_token else app


class _Bearer:
    """An ASGI guard: a request or WebSocket without the bearer token is refused (401; a WebSocket closes
    with 1008) before OpenEnv sees it."""

    def __init__(self, app: Any, token: str) -> None:
        if not token.strip():
            raise ValueError("an empty client token protects nothing; give a non-blank one")
        self.app, self.expected = app, f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008, "reason": "missing or wrong bearer token"})
                    return
                body = b'{"error": {"message": "missing or wrong bearer token (Authorization: Bearer ...)"}}'
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)

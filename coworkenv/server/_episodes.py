"""Episodes: one private, sandboxed instance of a task's workspace, recorded call by call."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
from pydantic import BaseModel

from ..sandbox import Limits, PoolSettings, Sandbox, SandboxError, SandboxPool
from ..store import Store, new_id
from ..workspace import STATE_FILE, Task, ToolSpec, Workspace, dump_state, write_initial_state

SUBMIT_TOOL = ToolSpec(
    name="submit_answer",
    app="episode",
    tool="submit_answer",
    description=(
        "Finish the task: give your final answer to the user (a short summary of what you did or "
        "the information asked for). The episode ends after this call."
    ),
    effect="write",
    input_schema={
        "type": "object",
        "properties": {"answer": {"type": "string", "description": "Your final answer."}},
        "required": ["answer"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {"episode_id": {"type": "string"}, "status": {"type": "string"}},
        "required": ["episode_id", "status"],
    },
)


log = logging.getLogger(__name__)
RECORD_FLUSH_S = 0.05  # recorded calls reach the store file at most this long after the call (or at the episode's end)


class EpisodeSettings(BaseModel):
    """How episodes run: the sandbox backend, its limits, its warm pool and where derived files go."""

    backend: str = "bwrap"
    limits: Limits = Limits()
    pool: PoolSettings = PoolSettings()
    cache_dir: Path | None = None  # initial states are derived here; a temp dir when unset


@dataclass
class CallResult:
    """A tool call's outcome as the agent sees it."""

    ok: bool
    result: dict[str, Any] | None
    error: str = ""
    error_kind: str = ""
    _text: str | None = field(default=None, repr=False, compare=False)

    @property
    def text(self) -> str:
        """The result as JSON text (serialised once: the agent's text content and the record share it)."""
        if self._text is None:
            self._text = json.dumps(self.result) if self.ok else self.error
        return self._text


def argument_error(tool: ToolSpec, arguments: Any,
                   validator: jsonschema.protocols.Validator | None = None) -> str | None:
    """A message naming the bad field, or None when the arguments match the tool's schema.

    ``validator``: the tool's compiled schema, when the caller keeps one (see ``Toolbox``).
    """
    validator = validator or jsonschema.Draft202012Validator(tool.input_schema)
    if validator.is_valid(arguments):
        return None
    errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    problems = []
    for error in errors[:5]:
        path = ".".join(str(p) for p in error.absolute_path)
        if error.validator == "required":
            field = error.message.split("'")[1] if "'" in error.message else "?"
            problems.append(f"missing required field '{field}'")
        elif error.validator == "additionalProperties":
            problems.append(f"unexpected field(s): {error.message.split('(')[-1].rstrip(')')}")
        else:
            problems.append(f"field '{path or '(arguments)'}': {error.message}")
    return f"invalid arguments for {tool.name}: " + "; ".join(problems)


class Toolbox:
    """A workspace's tools (plus ``submit_answer``) by name, with their compiled argument schemas;
    built once per workspace and shared by its episodes."""

    def __init__(self, workspace: Workspace) -> None:
        self.tools = [*workspace.tools, SUBMIT_TOOL]
        self.by_name = {spec.name: spec for spec in reversed(self.tools)}  # the first of a name wins
        self.by_name[SUBMIT_TOOL.name] = SUBMIT_TOOL
        self._validators: dict[str, jsonschema.protocols.Validator] = {}

    def validator(self, spec: ToolSpec) -> jsonschema.protocols.Validator:
        if spec.name not in self._validators:
            self._validators[spec.name] = jsonschema.Draft202012Validator(spec.input_schema)
        return self._validators[spec.name]


class Episode:
    """A running episode: its sandbox, its tools and its record in the store."""

    def __init__(self, host: EpisodeHost, episode_id: str, task: Task, workspace: Workspace,
                 sandbox: Sandbox) -> None:
        self.host = host
        self.id = episode_id
        self.task = task
        self.workspace = workspace
        self.sandbox = sandbox
        self.toolbox = host.toolbox(workspace)
        self.tools = self.toolbox.tools
        self.ended = False
        self.final_answer: str | None = None
        self._lock = asyncio.Lock()

    def tool(self, name: str) -> ToolSpec | None:
        return self.toolbox.by_name.get(name)

    async def call(self, name: str, arguments: dict[str, Any] | None) -> CallResult:
        """Run one tool call in the sandbox and record it; failures are results, not exceptions."""
        arguments = arguments if arguments is not None else {}
        async with self._lock:
            if self.ended:
                return CallResult(False, None, f"episode {self.id} has ended; start a new one", "ended")
            spec = self.tool(name)
            if spec is None:
                outcome = CallResult(False, None, f"unknown tool {name!r}", "unknown_tool")
            elif (problem := argument_error(spec, arguments, self.toolbox.validator(spec))) is not None:
                outcome = CallResult(False, None, problem, "arguments")
            elif spec is SUBMIT_TOOL:
                outcome = CallResult(True, {"episode_id": self.id, "status": "ended"})
            else:
                outcome = await self._run(spec, arguments)
            self.host.record(self.id, {  # written behind; in the store before the episode's end is
                "tool": name,
                "arguments": json.dumps(arguments),
                "result": outcome.text if outcome.ok else None,
                "is_error": int(not outcome.ok),
                "error_kind": outcome.error_kind or None,
                "duration_ms": None,
            })
        if spec is SUBMIT_TOOL and outcome.ok:
            await self.finish(arguments["answer"])
        return outcome

    async def _run(self, spec: ToolSpec, arguments: dict[str, Any]) -> CallResult:
        try:
            outcome = await self.sandbox.call_tool(spec.app, spec.tool, arguments)
        except SandboxError as exc:
            return CallResult(False, None, f"{spec.name} failed: {exc}", "crash")
        if outcome.ok:
            return CallResult(True, outcome.result)
        return CallResult(False, None, f"{spec.name} failed: {outcome.error}", outcome.kind)

    async def final_state(self) -> str | None:
        try:
            return dump_state(await self.sandbox.read_file(STATE_FILE))
        except (OSError, SandboxError, sqlite3.DatabaseError):  # a tool may have broken its state file
            return None

    async def finish(self, answer: str | None = None, *, truncated: bool = False,
                     error: str | None = None) -> None:
        """End the episode: keep its final state and answer in the store, release the sandbox."""
        async with self._lock:
            if self.ended:
                return
            self.ended = True
            self.final_answer = answer
            state = await self.final_state()
            try:
                self.host.pool.release_soon(self.sandbox)  # reset for the next episode, or closed
            finally:
                self.host.store.end_episode(self.id, final_answer=answer, final_state=state,
                                            truncated=truncated, error=error)
                self.host.forget(self)


class EpisodeHost:
    """Opens episodes of stored tasks, each in a fresh sandbox with a private copy of the state."""

    def __init__(self, store: Store, settings: EpisodeSettings | None = None) -> None:
        self.store = store
        self.settings = settings or EpisodeSettings()
        self._tmp: tempfile.TemporaryDirectory | None = None
        if self.settings.cache_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="coworkenv-cache-")
            self.cache_dir = Path(self._tmp.name)
        else:
            self.cache_dir = Path(self.settings.cache_dir)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.open_episodes: dict[str, Episode] = {}
        self.pool = SandboxPool(self.settings.backend, limits=self.settings.limits, settings=self.settings.pool)
        self._workspaces: dict[str, Workspace] = {}
        self._toolboxes: dict[str, Toolbox] = {}
        self._flush_timer: asyncio.TimerHandle | None = None
        self._flushing: set[asyncio.Task] = set()

    def toolbox(self, workspace: Workspace) -> Toolbox:
        if workspace.id not in self._toolboxes:
            self._toolboxes[workspace.id] = Toolbox(workspace)
        return self._toolboxes[workspace.id]

    def record(self, episode_id: str, row: dict[str, Any]) -> None:
        """Record a tool call write-behind: the store writes the calls of all episodes together,
        one transaction every ``RECORD_FLUSH_S``, off the event loop; an episode's end (and
        ``close``) writes whatever is still waiting first, so nothing recorded is lost."""
        self.store.defer_tool_call(episode_id, row)
        if self._flush_timer is None:
            self._flush_timer = asyncio.get_running_loop().call_later(RECORD_FLUSH_S, self._flush_soon)

    def _flush_soon(self) -> None:
        self._flush_timer = None
        task = asyncio.ensure_future(self._flush())
        self._flushing.add(task)
        task.add_done_callback(self._flushing.discard)

    async def _flush(self) -> None:
        try:
            await asyncio.to_thread(self.store.flush)
        except Exception:  # the rows stay queued: the next flush or the episode's end writes them
            log.exception("writing recorded tool calls failed; they stay queued")

    async def flush(self) -> None:
        """Write every recorded call now (the periodic flush does this on its own)."""
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        if self._flushing:
            await asyncio.gather(*self._flushing, return_exceptions=True)
        await asyncio.to_thread(self.store.flush)

    def workspace(self, workspace_id: str) -> Workspace:
        if workspace_id not in self._workspaces:
            row = self.store.get_workspace(workspace_id)
            if row is None:
                raise KeyError(f"no workspace {workspace_id!r} in the store")
            self._workspaces[workspace_id] = Workspace.model_validate_json(row["spec"])
        return self._workspaces[workspace_id]

    def task(self, task_id: str) -> Task:
        row = self.store.get_task(task_id)
        if row is None:
            raise KeyError(f"no task {task_id!r} in the store")
        return Task.model_validate_json(row["spec"])

    def initial_state(self, workspace: Workspace) -> Path:
        path = self.cache_dir / workspace.id / STATE_FILE
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(".partial")
            write_initial_state(workspace, partial)
            partial.replace(path)
        return path

    async def open(self, task: Task | str, *, source: str, provider: str = "", attempt: int = 1,
                   repaired_from: str | None = None, hint: str = "") -> Episode:
        task = self.task(task) if isinstance(task, str) else task
        workspace = self.workspace(task.workspace_id)
        sandbox = await self.pool.acquire(self.initial_state(workspace))
        episode_id = self.store.start_episode(task.id, source=source, provider=provider,
                                              attempt=attempt, repaired_from=repaired_from, hint=hint,
                                              episode_id=new_id("ep"))
        episode = Episode(self, episode_id, task, workspace, sandbox)
        self.open_episodes[episode_id] = episode
        return episode

    def forget(self, episode: Episode) -> None:
        self.open_episodes.pop(episode.id, None)

    async def close(self) -> None:
        """End every open episode (their state is kept) and remove derived files."""
        for episode in list(self.open_episodes.values()):
            await episode.finish(episode.final_answer)
        await self.flush()
        await self.pool.close()
        if self._tmp is not None:
            self._tmp.cleanup()

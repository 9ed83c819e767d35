"""The episode host: opens episodes of stored tasks, each in a fresh sandbox from a warm pool,
and records their tool calls write-behind."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, Field

from .._process import process_label
from ..gate import GRADER_VERSION, EpisodeRecord, grade_episode
from ..sandbox import BACKENDS, STATE_FILE, FileChanges, Limits, PoolSettings, Sandbox, SandboxPool
from ..store import Provenance, Store, ToolCallRow, VerdictRow, new_id
from ..workspace import ASK_TOOL, Task, ToolSpec, Workspace, apps_dir, bundle_hash, workspace_hash, write_initial_state
from ..workspace.state import FixedState, StateBase, StateCache, StateConnection, StateImage
from ._episode import Episode, Toolbox
from ._orphans import interrupt_orphaned_episodes
from ._user import UserSimulator, simulator

log = logging.getLogger(__name__)
RECORD_FLUSH_S = 0.05  # recorded calls reach the store file at most this long after the call (or at the episode's end)
GRADING_COST_DECAY = 0.5  # how much of a workspace's last grading time counts at its next one (see EpisodeHost.grade)
PARK_S = 1.0  # how long a sandbox held for one task's episodes waits for the next held task of its workspace


class EpisodeSettings(BaseModel):
    """How episodes run: the sandbox backend, its limits, its warm pool and where derived files go."""

    backend: str = "bwrap"
    limits: Limits = Limits()
    pool: PoolSettings = PoolSettings()
    cache_dir: Path | None = None  # initial states are derived here; a temp dir when unset
    user_model: str = ""  # who plays a multi-turn task's user: "" the scripted rules, or a provider spec
    reveal_grade: bool = True  # a live episode's submit_answer result tells its score and the checks that failed
    service_env: dict[str, str] = {}  # variables for services apps start in sandboxes (Claw-Eval's ERROR_RATE)
    # an ended episode is graded on the event loop while its workspace's gradings take less than this
    # (a hand-off to a thread costs more than a quick one); 0: always in a worker thread
    inline_grading_ms: float = Field(default=5.0, ge=0.0)
    # every call is committed to the store file before its result is returned (``serve --sync``): a
    # killed process loses no acknowledged call; otherwise calls are written behind, up to
    # ``RECORD_FLUSH_S`` after their result
    sync: bool = False


def cached_initial_state(cache_dir: Path, workspace: Workspace, digest: str | None = None) -> Path:
    """``workspace``'s initial state in the state cache folder ``cache_dir``, built there unless it is
    there already: under the workspace's content hash (``digest``, when the caller has worked it out),
    so a changed spec or app code builds a new one. Processes (the workers of one server, a synthesis
    generating in a process of its own) share a cache folder: each build writes a file of its own
    and the finished state replaces the name at once, so nobody reads a state half written."""
    path = cache_dir / f"{workspace.id}-{digest or workspace_hash(workspace)}" / STATE_FILE
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.partial")  # killed halfway: left behind
        try:
            write_initial_state(workspace, partial)
            partial.replace(path)
        finally:
            partial.unlink(missing_ok=True)
    return path


class HeldSandbox:
    """A sandbox held for episodes of one task played one after another (``EpisodeHost.hold_sandbox``):
    each starts from the initial state, restored in the same sandbox (``Sandbox.restore``: the state
    file and scratch dirs put back, the process tools run in kept) when an episode before it used it
    (as the episode first uses it: one that makes no call leaves it as it was), or where an episode
    ``keep`` kept ended."""

    def __init__(self, host: EpisodeHost, task: Task, sandbox: Sandbox) -> None:
        self.host, self.task, self.sandbox = host, task, sandbox
        self.kept: Episode | None = None  # the episode whose final state the sandbox keeps (``keep``)
        self._last: Episode | None = None

    async def keep(self, episode: Episode) -> bool:
        """Keep the state ``episode`` (the last one played here, ended) left, for episodes that begin
        where it ended (``open(after=episode)``); False where the backend cannot."""
        if episode is not self._last or not episode.ended:
            raise ValueError(f"episode {episode.id} is not the last one ended in this sandbox")
        await episode.ready_sandbox()  # an episode that never used it left it as the one before
        self.kept = episode if await self.sandbox.keep_state() else None
        return self.kept is episode

    async def open(self, provenance: Provenance, *, after: Episode | None = None) -> Episode:
        """The next episode of the task, in the held sandbox; it leaves the sandbox held when it ends.
        ``after``: an episode ``keep`` kept: the new one begins where it ended (``Episode.resume``),
        in the sandbox restored to its final state; from the initial state where the sandbox cannot
        (its ``resumed_from`` is None then: the caller plays the kept episode's calls again)."""
        resumed = False
        if after is not None and after is self.kept:
            resumed = await self.sandbox.restore(kept=True)
            if not resumed:
                self.kept = None  # the runner had to reset: what it kept is gone
        episode = await self.host.open(self.task, provenance, sandbox=self.sandbox)
        if resumed:
            assert after is not None
            episode.resume(after)
        elif self.sandbox.used:  # restored when the episode first uses it: one that makes no call needs none
            episode.prepare_sandbox = self.sandbox.restore
        self._last = episode
        return episode


class Timer(Protocol):
    """What ``call_later`` returns: a timer that can be cancelled (``asyncio.TimerHandle`` is one)."""

    def cancel(self) -> None: ...


CallLater = Callable[..., Timer]  # call_later(delay, callback, *args), as the event loop's


class EpisodeHost:
    """Opens episodes of stored tasks, each in a fresh sandbox with a private copy of the state.

    ``call_later`` schedules the host's timers of parked sandboxes (``hold_sandbox``); by default the
    running event loop's. A test passes one it moves on by hand instead of waiting ``PARK_S`` out."""

    def __init__(self, store: Store, settings: EpisodeSettings | None = None, *,
                 call_later: CallLater | None = None) -> None:
        self.store = store
        self._call_later = call_later
        self.settings = settings or EpisodeSettings()
        self._tmp: tempfile.TemporaryDirectory | None = None
        if self.settings.cache_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="coworkenv-cache-")
            self.cache_dir = Path(self._tmp.name)
        else:
            self.cache_dir = Path(self.settings.cache_dir)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.open_episodes: dict[str, Episode] = {}
        config = BACKENDS[self.settings.backend].config_type(apps_dir=apps_dir(self.cache_dir),
                                                                 service_env=self.settings.service_env)
        self.pool = SandboxPool(self.settings.backend, limits=self.settings.limits, settings=self.settings.pool,
                                config=config)
        self._toolboxes: dict[str, Toolbox] = {}
        self._flush_timer: asyncio.TimerHandle | None = None
        self._flushing: set[asyncio.Task] = set()
        self.owner = process_label()  # episodes name the process that plays them
        self._bundle_hashes: dict[tuple[str, str], str] = {}
        self._workspace_hashes: dict[str, tuple[Workspace, str]] = {}
        # what is kept of the workspaces' initial states (their bases in the store, images, open copies), handed
        # down to what opens, compares and digests states for this host
        self.states = StateCache(store.state_base)
        self._grading_ms: dict[str, float] = {}  # workspace id -> what grading its episodes took lately
        self._parked: dict[Path, list[tuple[Sandbox, Timer]]] = {}  # see hold_sandbox
        self.interrupted = interrupt_orphaned_episodes(store)  # what killed processes left running
        store.interrupt_orphaned_runs()  # evaluations and trainings, likewise

    def user_simulator(self, task: Task) -> UserSimulator:
        """A fresh simulator of ``task``'s user for one episode (``EpisodeSettings.user_model`` says which)."""
        return simulator(task, self.settings.user_model)

    def tools_of(self, task: Task, workspace: Workspace) -> list[ToolSpec]:
        """The tools an episode of ``task`` offers: its workspace's, and ``ask_user`` when it has a user."""
        tools = self.toolbox(workspace).tools
        return tools if task.user is None else [*tools, ASK_TOOL]

    def toolbox(self, workspace: Workspace) -> Toolbox:
        if workspace.id not in self._toolboxes:
            self._toolboxes[workspace.id] = Toolbox(workspace)
        return self._toolboxes[workspace.id]

    def record(self, episode_id: str, row: dict[str, Any]) -> ToolCallRow:
        """Record a tool call write-behind: the store writes the calls of all episodes together,
        one transaction every ``RECORD_FLUSH_S``, off the event loop; an episode's end (and
        ``close``) writes whatever is still waiting first, so nothing recorded is lost. Returns the
        call as the store will read it back."""
        recorded = self.store.defer_tool_call(episode_id, row)
        if self._flush_timer is None:
            self._flush_timer = asyncio.get_running_loop().call_later(RECORD_FLUSH_S, self._flush_soon)
        return recorded

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

    async def settle(self) -> None:
        """With ``settings.sync``, return once every call recorded so far is committed to the store
        file; without it, at once (the periodic flush writes them). The commit runs on the event
        loop: one commit of a call's row costs about 70 us, a hand-off to a worker thread as much
        again; a periodic flush under way in a thread holds the store's lock, so this waits for it
        and then writes what it left."""
        if self.settings.sync:
            self.store.flush()

    async def flush(self) -> None:
        """Write every recorded call now (the periodic flush does this on its own)."""
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        if self._flushing:
            await asyncio.gather(*self._flushing, return_exceptions=True)
        await asyncio.to_thread(self.store.flush)

    def workspace(self, workspace_id: str) -> Workspace:
        """A stored workspace's spec; ``KeyError`` naming it when there is none."""
        return self.store.workspace(workspace_id)

    def task(self, task_id: str) -> Task:
        """A stored task's spec; ``KeyError`` naming it when there is none."""
        return self.store.task_spec(task_id)

    def initial_state(self, workspace: Workspace) -> Path:
        """The workspace's initial state, built once from its spec (seed, apps, overrides) and kept
        in the cache folder under its content hash: a changed spec or app code builds a new one."""
        return cached_initial_state(self.cache_dir, workspace, self._workspace_hash(workspace))

    async def open(self, task: Task | str, provenance: Provenance, *, sandbox: Sandbox | None = None) -> Episode:
        """A new episode of ``task`` in a fresh sandbox, recorded with its ``provenance``.

        ``sandbox``: one the caller holds (``hold_sandbox``) and has put in the task's initial
        state; the episode runs in it and leaves it to the caller when it ends."""
        task = self.task(task) if isinstance(task, str) else task
        workspace = self.workspace(task.workspace_id)
        held = sandbox is not None
        if sandbox is None:
            sandbox = await self.pool.acquire(self.initial_state(workspace))
        try:
            episode_id = self.store.start_episode(task.id, provenance, episode_id=new_id("ep"), owner=self.owner,
                                                  bundle_hash=self.bundle_hash(workspace, task))
        except BaseException:
            if not held:
                self.pool.release_soon(sandbox)
            raise
        episode = Episode(self, episode_id, task, workspace, sandbox, provenance, owns_sandbox=not held)
        self.open_episodes[episode_id] = episode
        return episode

    @contextlib.asynccontextmanager
    async def hold_sandbox(self, task: Task) -> AsyncIterator[HeldSandbox]:
        """A sandbox of ``task``'s workspace, held for several episodes of the task played one after
        another (``HeldSandbox.open``). After them it waits ``PARK_S`` for the next task of its
        workspace held this way (calibration's next one, whose first episode restores it in place as
        a task's episodes restore it between them: no fresh worker, no reset), and then goes back to
        the pool, which resets it for anyone. A hold that ended with an error gives it back at once."""
        initial = self.initial_state(self.workspace(task.workspace_id))
        sandbox = self._unpark(initial) or await self.pool.acquire(initial)
        try:
            yield HeldSandbox(self, task, sandbox)
        except BaseException:
            self.pool.release_soon(sandbox)
            raise
        if sandbox.closed:
            self.pool.release_soon(sandbox)
            return
        call_later = self._call_later or asyncio.get_running_loop().call_later
        timer = call_later(PARK_S, self._park_ended, initial, sandbox)
        self._parked.setdefault(initial, []).append((sandbox, timer))

    def _unpark(self, initial: Path) -> Sandbox | None:
        """The sandbox parked last for ``initial`` (``hold_sandbox``), if any."""
        parked = self._parked.get(initial)
        if not parked:
            return None
        sandbox, timer = parked.pop()
        timer.cancel()
        if not parked:
            del self._parked[initial]
        return sandbox

    def _park_ended(self, initial: Path, sandbox: Sandbox) -> None:
        parked = self._parked.get(initial, [])
        for at, (held, _) in enumerate(parked):
            if held is sandbox:
                del parked[at]
                self.pool.release_soon(sandbox)
                break
        if not parked:
            self._parked.pop(initial, None)

    def episode(self, episode_id: str) -> Episode | None:
        """The open episode ``episode_id``, if any."""
        return self.open_episodes.get(episode_id)

    def state_changes(self, workspace: Workspace, final: bytes | FileChanges) -> tuple[str, StateConnection]:
        """What an episode keeps of its final state: the tables that differ from its workspace's
        initial state, over a reference to that state's dump (kept once per workspace, in the store).
        Large blobs (images, PDFs) go to the store by content too. With it, the final state open in
        memory as the store's text opens, for grading; the caller closes it (``StateCache.keep``:
        ``final`` may be the blocks in which the state differs from the initial state)."""
        return self.states.keep(self._base(workspace), final, blob_sink=self._blob)

    def initial_image(self, workspace: Workspace) -> StateImage:
        """The workspace's initial state as bytes (with its schema and page owners), kept in memory."""
        return self._base(workspace).image

    def initial_connection(self, workspace: Workspace) -> FixedState:
        """The workspace's initial state in memory, one connection kept per workspace (for the event
        loop's thread) for the workspaces used last (``StateCache.initial``). Read it or copy it; never change it."""
        return self.states.initial(self._base(workspace))

    def unchanged_state(self, workspace: Workspace) -> str:
        """What an episode keeps of a final state equal to its workspace's initial state."""
        return self._base(workspace).unchanged

    def open_unchanged_state(self, workspace: Workspace) -> StateConnection:
        """The workspace's initial state open in memory as the store's ``unchanged_state`` opens, for
        grading; the caller closes it."""
        return self.states.open_unchanged(self._base(workspace))

    def _base(self, workspace: Workspace) -> StateBase:
        """The workspace's initial state as its episodes' final states are kept over it: the reference of
        its dump in the store, its table hashes and its image."""
        return self.states.base(self._workspace_hash(workspace), lambda: StateBase.of(
            self.initial_state(workspace), self.store.put_state_base, self._blob))

    def _blob(self, data: bytes) -> str:
        return self.store.put_blob(data, "application/octet-stream")

    def _workspace_hash(self, workspace: Workspace) -> str:
        """The workspace's content hash, worked out once per spec object (the store parses each once)."""
        known = self._workspace_hashes.get(workspace.id)
        if known is None or known[0] is not workspace:
            known = self._workspace_hashes[workspace.id] = (workspace, workspace_hash(workspace))
        return known[1]

    def bundle_hash(self, workspace: Workspace, task: Task) -> str:
        """The hash of an episode's bundle (its workspace, the apps' code included, and its task), kept
        per workspace and task."""
        key = (workspace.id, task.id)
        if key not in self._bundle_hashes:
            self._bundle_hashes[key] = bundle_hash(workspace, [task], workspace_digest=self._workspace_hash(workspace))
        return self._bundle_hashes[key]

    async def grade(self, episode: Episode, final_db: StateConnection | None,
                    record: EpisodeRecord | None = None) -> VerdictRow:
        """``grade_episode`` of an ended episode (``final_db``: its final state in memory, closed here;
        ``record``: the episode as the store now holds it, where the caller has it in memory).

        In a worker thread, so that grading a large state does not stall other episodes; on the event
        loop where the gradings of the episode's workspace have been quick lately (under
        ``EpisodeSettings.inline_grading_ms``: the longest of them, each counting for less the more
        gradings came after it), since handing a quick one to a thread costs more than the grading.
        The first grading of a workspace, and those of a task with a slow check (``CheckKind.slow``: one
        that runs a grader process, as Claw-Eval's does), go to a thread."""
        key = episode.workspace.id
        limit = self.settings.inline_grading_ms
        inline = self._grading_ms.get(key, limit) < limit and not any(check.slow for check in episode.task.checks)

        def timed() -> VerdictRow:
            started = time.perf_counter()
            try:
                return grade_episode(self.store, episode.id, final_db=final_db, task=episode.task, record=record)
            finally:
                took = (time.perf_counter() - started) * 1000
                self._grading_ms[key] = max(took, self._grading_ms.get(key, 0.0) * GRADING_COST_DECAY)

        return timed() if inline else await asyncio.to_thread(timed)

    def verdict(self, episode_id: str) -> VerdictRow | None:
        """The current grader version's verdict on an episode (ended and graded), if any."""
        return self.store.verdict(episode_id, GRADER_VERSION)

    def forget(self, episode: Episode) -> None:
        self.open_episodes.pop(episode.id, None)

    async def close(self) -> None:
        """End every open episode (their state is kept) and remove derived files."""
        for episode in list(self.open_episodes.values()):
            await episode.finish(episode.final_answer)
        await self.flush()
        for parked in self._parked.values():
            for sandbox, timer in parked:
                timer.cancel()
                self.pool.release_soon(sandbox)
        self._parked.clear()
        await self.pool.close()
        self.states.close()
        if self._tmp is not None:
            self._tmp.cleanup()

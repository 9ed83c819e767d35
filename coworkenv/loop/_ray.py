"""Batch work across a Ray cluster: ``synth``, ``collect`` and ``eval`` with ``--ray ADDRESS``.

Each alive node of the cluster gets one ``NodeHost`` actor, pinned to it, with an episode host of
its own: its own sandbox pool, and a scratch store in a labelled folder on that node (removed when
the work ends; ``coworkenv sandbox cleanup`` removes one whose process was killed) holding the
workspaces and tasks it was sent. A unit of work runs whole on one node: a task the teacher
collects (its repairs included), a trial of an evaluation, a task to calibrate. What it recorded
comes back as exported rows (``Store.export_episodes``) and the driver writes them into its store,
one unit per transaction: the driver is the store's one writer.

Units go to the node with the fewest in flight, up to ``per_node`` at once on each. When a node is
lost (its actor dies: the node was killed, its process crashed), the units it held run again on
another node; nothing of theirs was written, so nothing is lost or written twice. Nodes that join
the cluster during a run get work too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time
from dataclasses import dataclass
from typing import Any

from .._errors import InfrastructureError
from ..episodes import EpisodeHost, EpisodeSettings
from ..gate import GRADER_VERSION
from ..sandbox import BACKENDS, SandboxUnavailable, make_episode_dir
from ..store import CalibrationRow, EpisodeRecords, Provenance, Store
from ..synth import Calibration, calibrate_task
from ..workspace import Task, Workspace
from ._collect import TaskRun, Teacher, TeacherSettings
from ._episodes import LocalEpisodes, OpenedEpisode
from ._play import Played

log = logging.getLogger(__name__)

NODE_REFRESH_S = 2.0  # how often the driver looks for nodes that joined


class ClusterError(RuntimeError):
    """The Ray cluster cannot be used: no answer at the address, no node able to run episodes, every node lost."""


def _ray():
    try:
        import ray
    except ImportError:
        raise ClusterError("--ray needs Ray: pip install 'coworkenv[ray]'") from None
    return ray


# --- on each node ---------------------------------------------------------------------------


class NodeHost:
    """The episode host of one node (a Ray actor): plays what the driver sends, returns what it recorded."""

    def __init__(self, settings: str) -> None:
        parsed = EpisodeSettings.model_validate_json(settings)
        self.scratch = make_episode_dir(parsed.backend, kind="ray-node")
        self.store = Store(self.scratch / "store.db")
        self.host = EpisodeHost(self.store, parsed.model_copy(update={"cache_dir": self.scratch / "cache"}))
        self._workspaces: set[str] = set()
        self._server: contextlib.AsyncExitStack | None = None
        self._url: str | None = None
        self._starting = asyncio.Lock()

    def describe(self) -> dict[str, Any]:
        """What the driver checks before sending work: the grader, and that the backend runs here."""
        import socket

        from .. import __version__

        problem = ""
        try:
            BACKENDS[self.host.settings.backend].check_available()
        except SandboxUnavailable as exc:
            problem = str(exc)
        return {"host": socket.gethostname(), "pid": os.getpid(), "grader_version": GRADER_VERSION,
                "coworkenv": __version__, "problem": problem}

    def _receive(self, workspace: str, task: str, status: str) -> Task:
        spec = Task.model_validate_json(task)
        if spec.workspace_id not in self._workspaces:
            self.store.put_workspace(Workspace.model_validate_json(workspace))
            self._workspaces.add(spec.workspace_id)
        self.store.put_task(spec, status=status)  # type: ignore[arg-type]
        return spec

    async def _episodes(self, *, http: bool) -> _Tracked:
        """Episodes of this node's host for one unit of work, reached over HTTP (as a local
        collection reaches them) or in memory (as a local evaluation does)."""
        if not http:
            return _Tracked(self.host)
        async with self._starting:  # one server, however many units ask for it at once
            if self._url is None:
                from ..server import running_http_server

                stack = contextlib.AsyncExitStack()
                self._url = await stack.enter_async_context(running_http_server(self.host))
                self._server = stack
        return _Tracked(self.host, self._url)

    async def collect(self, workspace: str, task: str, settings: str) -> tuple[dict[str, Any], EpisodeRecords]:
        spec = self._receive(workspace, task, "admitted")
        episodes = await self._episodes(http=True)
        run = await Teacher(self.store, episodes, TeacherSettings.model_validate_json(settings)).run_task(spec)
        return ({"error": run.error, "attempts": [(p.episode_id, p.failure) for p in run.attempts],
                 "failed": [(p.episode_id, p.failure) for p in run.failed]}, self.store.export_episodes(episodes.opened))

    async def trial(self, workspace: str, task: str, settings: str, number: int,
                    ) -> tuple[list[tuple[str, str | None, int]], EpisodeRecords]:
        from ._eval import EvalSettings, play_trial

        spec = self._receive(workspace, task, "heldout")
        episodes = await self._episodes(http=False)
        played = await play_trial(episodes, spec, EvalSettings.model_validate_json(settings), number)
        return ([(p.episode_id, p.failure, p.rollout.steps if p.rollout is not None else 0) for p in played],
                self.store.export_episodes(episodes.opened))

    async def calibrate(self, workspace: str, task: str, admit_as: str,
                        ) -> tuple[Calibration, str, CalibrationRow | None, EpisodeRecords]:
        spec = self._receive(workspace, task, "pending")
        # calibration opens its episodes on the host itself; the driver calibrates a task once at a time
        before = {e.id for e in self.store.episodes(task_id=spec.id)}
        calibration = await calibrate_task(self.host, spec, admit_as=admit_as)  # type: ignore[arg-type]
        row = self.store.task(spec.id)
        assert row is not None
        made = [e.id for e in self.store.episodes(task_id=spec.id) if e.id not in before]
        return calibration, row.spec.model_dump_json(), self.store.calibration(spec.id), self.store.export_episodes(made)

    async def close(self) -> None:
        if self._server is not None:
            await self._server.aclose()
        await self.host.close()
        self.store.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


class _Tracked(LocalEpisodes):
    """``LocalEpisodes`` that keep the ids of the episodes they opened: one unit's own, while other
    units play episodes of the same task on the same node."""

    def __init__(self, host: EpisodeHost, base_url: str | None = None) -> None:
        super().__init__(host, base_url)
        self.opened: list[str] = []

    async def open(self, task_id: str, provenance: Provenance) -> OpenedEpisode:
        opened = await super().open(task_id, provenance)
        self.opened.append(opened.id)
        return opened


# --- on the driver --------------------------------------------------------------------------


@dataclass
class _Node:
    node_id: str
    actor: Any
    name: str  # host:pid of the actor, for messages
    busy: int = 0
    alive: bool = True


class RayCluster:
    """The nodes of the Ray cluster at ``address`` (``auto``: the one this machine belongs to), each
    running episodes with ``settings``, up to ``per_node`` units at once; the driver writes their
    records into ``store``. ``max_node_losses``: how many times one unit may lose its node."""

    def __init__(self, address: str, store: Store, settings: EpisodeSettings, *, per_node: int = 4,
                 max_node_losses: int = 3) -> None:
        self.address = address
        self.store = store
        self.settings = settings.model_copy(update={"cache_dir": None})
        self.per_node = per_node
        self.max_node_losses = max_node_losses
        self.nodes: dict[str, _Node] = {}
        self.lost: list[str] = []  # "name: why" of each node lost during the run
        self.reruns = 0  # units run again after their node was lost
        self._changed: asyncio.Condition | None = None
        self._refreshed = 0.0
        self._starting: set[str] = set()  # nodes whose host is starting
        self._actor_class: Any = None
        self._joined = False  # this object called ray.init (close() leaves the cluster then)

    # --- nodes --------------------------------------------------------------------------------

    async def start(self) -> list[str]:
        """Connect to the cluster and start a host on every alive node; the names of the nodes."""
        ray = _ray()
        if not ray.is_initialized():
            check_reachable(self.address)
            try:
                ray.init(address=self.address, logging_level=logging.WARNING, log_to_driver=False,
                         configure_logging=False)
                self._joined = True
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise ClusterError(f"cannot join the Ray cluster at {self.address}: {exc}") from None
        self._actor_class = ray.remote(NodeHost)
        self._changed = asyncio.Condition()
        await self._refresh(force=True)
        live = [n.name for n in self.nodes.values() if n.alive]
        if not live:
            raise ClusterError(f"the Ray cluster at {self.address} has no node that can run episodes"
                               + (f": {'; '.join(self.lost)}" if self.lost else ""))
        return live

    async def _refresh(self, *, force: bool = False) -> None:
        """Start a host on every alive node that has none (checking it can run episodes)."""
        if not force and time.monotonic() - self._refreshed < NODE_REFRESH_S:
            return
        self._refreshed = time.monotonic()
        ray = _ray()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        alive = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
        new = []
        for node_id in alive:
            if node_id in self.nodes or node_id in self._starting:
                continue
            self._starting.add(node_id)  # its host takes seconds to start: a later look must not start another
            actor = self._actor_class.options(
                num_cpus=0, max_concurrency=max(16, 4 * self.per_node),
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False),
            ).remote(self.settings.model_dump_json())
            new.append((node_id, actor))
        for node_id, actor in new:
            try:
                info = await actor.describe.remote()
            except Exception as exc:  # the node went away while its host started, or the host cannot start
                self.nodes[node_id] = _Node(node_id, actor, node_id[:12], alive=False)
                self.lost.append(f"{node_id[:12]}: its host did not start ({_cause(exc)})")
                continue
            finally:
                self._starting.discard(node_id)
            name = f"{info['host']}:{info['pid']}"
            if info["problem"] or info["grader_version"] != GRADER_VERSION:
                why = info["problem"] or (f"grader {info['grader_version']} there, {GRADER_VERSION} here: "
                                          "install the same coworkenv on every node")
                self.nodes[node_id] = _Node(node_id, actor, name, alive=False)
                self.lost.append(f"{name}: cannot run episodes ({why})")
                with contextlib.suppress(Exception):
                    ray.kill(actor)
                continue
            self.nodes[node_id] = _Node(node_id, actor, name)
            log.info("ray node %s (%s) runs episodes", name, node_id[:12])
        if self._changed is not None:
            async with self._changed:
                self._changed.notify_all()

    async def _acquire(self) -> _Node:
        assert self._changed is not None
        while True:
            await self._refresh()
            live = [n for n in self.nodes.values() if n.alive]
            if not live:
                raise ClusterError(f"every node of the Ray cluster at {self.address} is lost: {'; '.join(self.lost)}")
            free = [n for n in live if n.busy < self.per_node]
            if free:
                node = min(free, key=lambda n: n.busy)
                node.busy += 1
                return node
            async with self._changed:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), NODE_REFRESH_S)

    async def _release(self, node: _Node) -> None:
        node.busy -= 1
        assert self._changed is not None
        async with self._changed:
            self._changed.notify_all()

    def _lose(self, node: _Node, exc: BaseException) -> None:
        if node.alive:
            node.alive = False
            self.lost.append(f"{node.name}: {_cause(exc)}")
            log.info("lost ray node %s: %s", node.name, _cause(exc))
            with contextlib.suppress(Exception):
                _ray().kill(node.actor)

    async def call(self, method: str, *args: Any) -> Any:
        """``NodeHost.method(*args)`` on the least busy live node; run again on another when the node is lost."""
        _ray()
        from ray import exceptions as errors

        for losses in range(self.max_node_losses + 1):
            node = await self._acquire()
            try:
                return await getattr(node.actor, method).remote(*args)
            except errors.RayTaskError as exc:  # the unit failed, not the node: its own error
                raise exc.as_instanceof_cause() from None
            except (errors.RayActorError, errors.ObjectLostError, errors.WorkerCrashedError,
                    errors.NodeDiedError) as exc:  # the node, or the host on it, is gone (ActorUnavailableError too)
                self._lose(node, exc)
                if losses < self.max_node_losses:
                    self.reruns += 1
            finally:
                await self._release(node)
        raise InfrastructureError(f"lost its node {self.max_node_losses + 1} times: {self.lost[-1]}", boundary="process")

    async def close(self) -> None:
        ray = _ray()
        for node in self.nodes.values():
            if node.alive:
                with contextlib.suppress(Exception):
                    await node.actor.close.remote()
            with contextlib.suppress(Exception):
                ray.kill(node.actor)
        self.nodes.clear()
        if self._joined:  # leave the cluster: Ray's threads that print what its nodes report stop here
            self._joined = False
            ray.shutdown()

    # --- units of work (the driver writes what they recorded) ----------------------------------

    def _sent(self, task: Task) -> tuple[str, str]:
        return self.store.workspace(task.workspace_id).model_dump_json(), task.model_dump_json()

    def _played(self, episode_id: str, failure: str | None) -> Played:
        verdict = self.store.verdict(episode_id, GRADER_VERSION) if episode_id and failure is None else None
        return Played(episode_id, verdict, failure=failure)

    async def collect(self, task: Task, settings: TeacherSettings) -> TaskRun:
        """One run of the teacher on ``task`` (repairs included), on some node; its episodes stored here."""
        outcome, records = await self.call("collect", *self._sent(task), settings.model_dump_json())
        self.store.import_episodes(records)
        return TaskRun(task.id, attempts=[self._played(*a) for a in outcome["attempts"]],
                       failed=[self._played(*f) for f in outcome["failed"]], error=outcome["error"])

    async def trial(self, task: Task, settings: Any, number: int) -> tuple[list[Played], list[int]]:
        """One evaluation trial of ``task`` on some node: every episode played (the graded one last)
        and the agent's steps in each; the episodes stored here."""
        played, records = await self.call("trial", *self._sent(task), settings.model_dump_json(), number)
        self.store.import_episodes(records)
        return [self._played(episode_id, failure) for episode_id, failure, _ in played], [s for *_, s in played]

    async def calibrate(self, task: Task, admit_as: str = "admitted") -> Calibration:
        """Calibrate ``task`` on some node; its (possibly hardened) spec, calibration episodes,
        calibration and status stored here, the status last."""
        calibration, spec, row, records = await self.call("calibrate", *self._sent(task), admit_as)
        self.store.put_task(Task.model_validate_json(spec))
        self.store.import_episodes(records)
        if row is not None:
            self.store.add_calibration(row)
        self.store.set_task_status(task.id, admit_as if calibration.admitted else "quarantined",  # type: ignore[arg-type]
                                   calibration.reason)
        return calibration


def _cause(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def check_reachable(address: str, timeout: float = 5.0) -> None:
    """For a ``host:port`` address, that something listens there (Ray itself would wait for it without end)."""
    import socket

    if address in ("auto", "local") or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ClusterError(f"--ray {address!r}: give the head's address as host:port (or auto)")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ClusterError(f"no Ray cluster answers at {address}: {exc.strerror or exc}") from None

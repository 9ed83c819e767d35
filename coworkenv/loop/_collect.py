"""``collect``: the teacher plays admitted tasks, repairing failed episodes, resumably.

Each attempt is an episode opened with its provenance (source ``teacher``, the provider, the
attempt number, the episode it repairs and the hint). A rejected episode's failing checks become
the hint of the next attempt, from a fresh workspace, up to ``max_repairs`` times. An episode
ended by an infrastructure failure (the model server down, the sandbox gone) is recorded as such
and played again, up to ``retries`` times; a task that still fails is reported, and the
collection goes on with the others.

Collectors on one store share the work: each claims a task when its turn comes (``TaskClaims``)
and leaves one that another live collector holds, so no task is played by two.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from ..agents import ProviderSettings, chat_model, parse_provider, repair_hint
from ..gate import GRADER_VERSION
from ..store import Provenance, Store
from ..workspace import PromptStyle, Task, check_style
from ._claims import TaskClaims
from ._episodes import EpisodeService
from ._play import Played, play

if TYPE_CHECKING:
    from ._ray import RayCluster


class TeacherSettings(BaseModel):
    provider: str = "oracle"
    max_repairs: int = Field(default=2, ge=0)
    retries: int = Field(default=2, ge=0)  # replays of an episode an infrastructure failure ended
    episodes_per_task: int = Field(default=1, ge=1)  # admitted episodes wanted of each task, from this provider
    concurrency: int = Field(default=4, ge=1)
    prompt_style: PromptStyle = "full"
    provider_settings: ProviderSettings = ProviderSettings()


@dataclass
class TaskRun:
    task_id: str
    attempts: list[Played] = field(default_factory=list)  # graded attempts, in order
    failed: list[Played] = field(default_factory=list)  # episodes an infrastructure failure ended
    error: str | None = None  # why the task could not be completed, when it could not

    @property
    def final(self) -> Played | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def succeeded(self) -> bool:
        final = self.final
        return final is not None and final.verdict is not None and final.verdict.admitted

    @property
    def repaired(self) -> bool:
        return len(self.attempts) > 1 and self.succeeded


@dataclass
class CollectSummary:
    tasks: int = 0
    runs: int = 0  # task runs planned (a task asked for several episodes runs several times)
    episodes: int = 0
    repaired: int = 0
    succeeded: int = 0
    skipped: int = 0  # tasks that already have the admitted episodes asked for, from this provider
    elsewhere: int = 0  # pending tasks left to another collector: it held them, or collected them meanwhile
    infrastructure_failures: int = 0  # episodes ended by one (retried)
    failures: dict[str, str] = field(default_factory=dict)  # task id -> why it could not be collected


def pending_tasks(store: Store, limit: int | None = None, *, provider: str | None = None,
                  episodes_per_task: int = 1) -> tuple[list[tuple[Task, int]], int]:
    """Admitted tasks with fewer than ``episodes_per_task`` admitted teacher episodes (from
    ``provider``, when given), each with how many more it needs; and how many tasks have enough."""
    have = store.admitted_counts("teacher", GRADER_VERSION, provider=provider)
    rows = store.tasks(status="admitted")
    pending = [(row.spec, episodes_per_task - have.get(row.id, 0)) for row in rows
               if have.get(row.id, 0) < episodes_per_task]
    done = len(rows) - len(pending)
    return (pending[:limit] if limit is not None else pending), done


class Teacher:
    """Plays tasks through ``episodes`` and repairs what the gate rejects."""

    def __init__(self, store: Store, episodes: EpisodeService, settings: TeacherSettings | None = None) -> None:
        self.store = store
        self.episodes = episodes
        self.settings = settings or TeacherSettings()
        self.provider = parse_provider(self.settings.provider)
        check_style(self.settings.prompt_style)

    async def _attempt(self, task: Task, run: TaskRun, provenance: Provenance) -> Played:
        """One graded attempt, replayed while an infrastructure failure ends it (up to ``retries``)."""
        model = chat_model(self.provider, task, self.store.workspace(task.workspace_id),
                           self.settings.provider_settings)
        for _ in range(self.settings.retries + 1):
            played = await play(self.episodes, self.store, task, provenance, model, style=self.settings.prompt_style,
                                max_steps=task.max_steps, hint=provenance.hint)
            if not played.failed:
                return played
            run.failed.append(played)
        return played

    async def run_task(self, task: Task) -> TaskRun:
        run = TaskRun(task.id)
        provenance = Provenance("teacher", provider=self.provider.label)
        while True:
            played = await self._attempt(task, run, provenance)
            if played.failed:
                run.error = f"{self.settings.retries + 1} episodes ended by infrastructure failures; last: {played.failure}"
                return run
            run.attempts.append(played)
            verdict = played.verdict
            if verdict is None:
                run.error = f"episode {played.episode_id} ended but was not graded"
                return run
            if verdict.admitted or len(run.attempts) > self.settings.max_repairs:
                return run
            feedback = "\n".join(f"- {c.detail}" for c in verdict.checks if not c.passed)
            provenance = Provenance("teacher", provider=self.provider.label, attempt=len(run.attempts) + 1,
                                    repaired_from=played.episode_id, hint=repair_hint(feedback, verdict.reason))

    async def run_tasks(self, tasks: list[Task] | list[tuple[Task, int]], *,
                        on_done: Callable[[TaskRun], None] | None = None,
                        claim: Callable[[Task, int], int] | None = None) -> list[TaskRun]:
        """Run each task (``(task, times)``: that many times, one after another; as many as ``claim``
        allows, when given), several tasks at once."""
        jobs = [t if isinstance(t, tuple) else (t, 1) for t in tasks]
        return await run_jobs(jobs, self.run_task, on_done=on_done, concurrency=self.settings.concurrency, claim=claim)


async def run_jobs(jobs: list[tuple[Task, int]], run_task: Callable[[Task], Awaitable[TaskRun]], *,
                   on_done: Callable[[TaskRun], None] | None = None, concurrency: int | None = None,
                   fatal: tuple[type[BaseException], ...] = (),
                   claim: Callable[[Task, int], int] | None = None) -> list[TaskRun]:
    """``run_task`` on each task ``times`` times, one run after another (a task stops at its first
    error), tasks at once up to ``concurrency`` (unbounded: ``run_task`` bounds itself). One task's
    failure is its run's error and never ends the others; an exception of ``fatal`` ends them all.
    ``claim(task, times)``, asked when a task's turn comes: how many of its runs to play (0: none)."""
    semaphore = asyncio.Semaphore(concurrency) if concurrency is not None else contextlib.nullcontext()

    async def one(task: Task) -> TaskRun:
        try:
            run = await run_task(task)
        except fatal:
            raise
        except Exception as exc:  # one task's failure never ends the collection
            run = TaskRun(task.id, error=f"{type(exc).__name__}: {exc}")
        if on_done is not None:
            on_done(run)
        return run

    async def repeated(task: Task, times: int) -> list[TaskRun]:
        runs = []
        async with semaphore:  # a task's runs one after another in its slot
            if claim is not None:
                times = claim(task, times)
            for _ in range(times):
                runs.append(await one(task))
                if runs[-1].error is not None:
                    break
        return runs

    results = await asyncio.gather(*(repeated(task, times) for task, times in jobs))
    return [run for runs in results for run in runs]


async def collect(store: Store, episodes: EpisodeService | None, settings: TeacherSettings, *, limit: int | None = None,
                  on_run: Callable[[TaskRun], None] | None = None,
                  on_start: Callable[[CollectSummary], None] | None = None,
                  cluster: RayCluster | None = None) -> CollectSummary:
    """Run the teacher on pending tasks through ``episodes``, or on the nodes of a Ray ``cluster``
    (started; each task run whole on one node, its episodes written here); every failure is in the summary.

    A task is pending until it has ``settings.episodes_per_task`` admitted episodes from this
    provider: another provider on the same store collects its own. Each task is claimed in the
    store when its turn comes: one that another collector of this provider holds is left to it
    (``summary.elsewhere``), and so is one that another collector finished meanwhile. ``on_start``
    is called when the plan is known, and again whenever it shrinks so."""
    provider = parse_provider(settings.provider).label
    tasks, done = pending_tasks(store, limit, provider=provider, episodes_per_task=settings.episodes_per_task)
    summary = CollectSummary(tasks=len(tasks), skipped=done, runs=sum(times for _, times in tasks))
    if on_start is not None:  # what is planned is known now: progress can show a total
        on_start(summary)
    claims = TaskClaims(store, f"collect:{provider}")

    def claim(task: Task, times: int) -> int:
        """How many runs of ``task`` this collector plays: none unless it holds the task now, and
        no more than the task still lacks (another collector may have played it meanwhile)."""
        wanted = 0
        if claims.take(task.id):
            have = store.admitted_counts("teacher", GRADER_VERSION, provider=provider, task_id=task.id)
            wanted = min(times, settings.episodes_per_task - have.get(task.id, 0))
        if wanted < times:
            summary.runs -= times - max(wanted, 0)
            summary.elsewhere += wanted <= 0
            if on_start is not None:
                on_start(summary)
        return max(wanted, 0)

    def record(run: TaskRun) -> None:
        summary.episodes += len(run.attempts) + len(run.failed)
        summary.infrastructure_failures += len(run.failed)
        summary.repaired += run.repaired
        summary.succeeded += run.succeeded
        if run.error is not None:
            summary.failures[run.task_id] = run.error
        if on_run is not None:
            on_run(run)

    async with claims.held():
        if cluster is not None:  # each run whole on one node; the cluster bounds how many at once
            from ._ray import ClusterError

            await run_jobs(tasks, lambda task: cluster.collect(task, settings), on_done=record,
                           fatal=(ClusterError,), claim=claim)
        else:
            assert episodes is not None, "collect needs episodes or a cluster"
            await Teacher(store, episodes, settings).run_tasks(tasks, on_done=record, claim=claim)
    return summary

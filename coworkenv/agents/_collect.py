"""``collect``: run the teacher over admitted tasks through the MCP server, resumably."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..server import EpisodeHost, running_http_server
from ..workspace import Task
from ._teacher import TaskRun, Teacher, TeacherSettings


@dataclass
class CollectSummary:
    tasks: int = 0
    episodes: int = 0
    repaired: int = 0
    succeeded: int = 0
    skipped: int = 0


def pending_tasks(host: EpisodeHost, limit: int | None = None) -> tuple[list[Task], int]:
    """Admitted tasks without a successful teacher episode yet, and how many already have one."""
    rows = host.store.query(
        "select spec from tasks where status = 'admitted' and id not in ("
        " select e.task_id from episodes e join verdicts v on v.episode_id = e.id"
        " where e.source = 'teacher' and v.admitted = 1) order by id"
    )
    done = host.store.query(
        "select count(distinct e.task_id) as n from episodes e join verdicts v on v.episode_id = e.id"
        " where e.source = 'teacher' and v.admitted = 1"
    )[0]["n"]
    tasks = [Task.model_validate_json(r["spec"]) for r in rows]
    return (tasks[:limit] if limit is not None else tasks), done


async def collect(host: EpisodeHost, settings: TeacherSettings, *, url: str | None = None,
                  limit: int | None = None, on_run: Callable[[TaskRun], None] | None = None) -> CollectSummary:
    """Run the teacher on pending tasks against ``url``, or an in-process HTTP server when unset."""
    tasks, done = pending_tasks(host, limit)
    summary = CollectSummary(tasks=len(tasks), skipped=done)

    def record(run: TaskRun) -> None:
        summary.episodes += len(run.attempts)
        summary.repaired += run.repaired
        summary.succeeded += run.final.verdict.admitted
        if on_run is not None:
            on_run(run)

    if url is not None:
        await Teacher(host.store, url, settings).run_tasks(tasks, on_done=record)
        return summary
    async with running_http_server(host) as local_url:
        await Teacher(host.store, local_url, settings).run_tasks(tasks, on_done=record)
    return summary

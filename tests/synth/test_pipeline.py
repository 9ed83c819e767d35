"""``synthesize`` stores and calibrates tasks; calibrating several at once gives the same result;
every office template is admitted on workspaces of several seeds."""

import asyncio
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from coworkenv.synth import WorkerError, calibrate_task, generate, harden, synthesize
from coworkenv.synth.templates import written_in
from coworkenv.workspace import Task, build_workspace, write_initial_state
from coworkenv.workspace.apps import ALL_APPS

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]
GENERATING = b"coworkenv.synth._apart"  # in the command line of a generation process (``synthesize(apart=True)``)


def _statuses(store) -> dict[str, str]:
    return {row.id: row.status for row in store.tasks()}


async def test_concurrent_calibration_admits_the_same_tasks_as_sequential(host, tmp_path):
    from coworkenv.episodes import EpisodeHost, EpisodeSettings
    from coworkenv.store import Store

    seen = []
    concurrent = await synthesize(host, 8, seed=3, capabilities=("lookup", "single_write"), concurrency=4,
                                  on_task=lambda task, calibration: seen.append((task.id, calibration.admitted)))
    other = Store(tmp_path / "sequential.db")
    sequential_host = EpisodeHost(other, EpisodeSettings(cache_dir=tmp_path / "cache2"))
    try:
        sequential = await synthesize(sequential_host, 8, seed=3, capabilities=("lookup", "single_write"))
    finally:
        await sequential_host.close()
        other_statuses = _statuses(other)
        other.close()
    assert (concurrent.generated, concurrent.admitted) == (sequential.generated, sequential.admitted) == (8, 8)
    assert _statuses(host.store) == other_statuses
    assert sorted(seen) == sorted((task_id, True) for task_id in other_statuses)
    # every task ran its three calibration episodes (reference, empty, forbidden probe) and its hack
    # probes, none lost
    assert host.store.query("select count(*) as n from calibrations")[0]["n"] == 8
    played = sum(3 + sum(outcome != "n/a" for outcome in host.store.calibration(task_id).probes.values())
                 for task_id in other_statuses)
    assert host.store.query("select count(*) as n from episodes where source = 'calibration'")[0]["n"] == played


async def test_a_second_run_skips_calibrated_tasks(host):
    await synthesize(host, 4, seed=3, concurrency=2)
    again = await synthesize(host, 4, seed=3, concurrency=2)
    assert (again.skipped, again.admitted) == (4, 4)
    assert host.store.query("select count(*) as n from calibrations")[0]["n"] == 4


def _worker_pids(marker: bytes = b"spawn_main") -> list[int]:
    """This process's children that are calibration workers (multiprocessing's spawned interpreters),
    or with ``marker`` another kind."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == os.getpid() and marker in cmdline:
            found.append(int(entry.name))
    return found


async def test_worker_processes_admit_the_same_tasks_as_one_process(host, tmp_path):
    from coworkenv.episodes import EpisodeHost, EpisodeSettings
    from coworkenv.store import Store

    capabilities = ("lookup", "single_write", "multi_step", "safety")
    seen = []
    split = await synthesize(host, 10, seed=5, capabilities=capabilities, generator="composed", workers=2,
                             on_task=lambda task, calibration: seen.append(task.id))
    other = Store(tmp_path / "one-process.db")
    one_host = EpisodeHost(other, EpisodeSettings(cache_dir=tmp_path / "cache2"))
    try:
        alone = await synthesize(one_host, 10, seed=5, capabilities=capabilities, generator="composed")
    finally:
        await one_host.close()
        statuses = _statuses(other)
        other.close()
    assert (split.generated, split.admitted, split.allocation) == (alone.generated, alone.admitted, alone.allocation)
    assert split.admitted_by == alone.admitted_by and split.admitted >= 8
    assert _statuses(host.store) == statuses and sorted(seen) == sorted(statuses)
    # both processes played episodes, every one ended and none lost; the workers are gone, sandboxes with them
    episodes = host.store.query("select owner, status from episodes where source = 'calibration'")
    assert len({row["owner"] for row in episodes}) == 2 and {row["status"] for row in episodes} == {"ended"}
    played = sum(3 + sum(outcome != "n/a" for outcome in host.store.calibration(task_id).probes.values())
                 for task_id in statuses)
    assert len(episodes) == played
    assert not _worker_pids()
    assert not [line for line in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout.splitlines()
                if str(tmp_path / "cache") + "/" in line]
    again = await synthesize(host, 10, seed=5, capabilities=capabilities, generator="composed", workers=2)
    assert (again.skipped, again.admitted) == (10, split.admitted)


async def test_generating_in_a_process_of_its_own_makes_and_admits_the_same_tasks(host, tmp_path):
    from coworkenv.episodes import EpisodeHost, EpisodeSettings
    from coworkenv.store import Store

    capabilities = ("lookup", "single_write", "multi_step", "aggregation")
    seen = []
    apart = await synthesize(host, 10, seed=5, capabilities=capabilities, generator="composed", apart=True,
                             concurrency=2, on_task=lambda task, calibration: seen.append(task.id))
    other = Store(tmp_path / "in-process.db")
    one_host = EpisodeHost(other, EpisodeSettings(cache_dir=tmp_path / "cache2"))
    try:
        alone = await synthesize(one_host, 10, seed=5, capabilities=capabilities, generator="composed", apart=False)
        specs = {t.id: t.model_dump_json() for t in map(other.task_spec, _statuses(other))}
    finally:
        await one_host.close()
        statuses = _statuses(other)
        other.close()
    assert (apart.generated, apart.admitted, apart.allocation, apart.duplicates, apart.admitted_by) == \
        (alone.generated, alone.admitted, alone.allocation, alone.duplicates, alone.admitted_by)
    assert apart.admitted >= 8 and _statuses(host.store) == statuses and sorted(seen) == sorted(statuses)
    assert {t.id: t.model_dump_json() for t in map(host.store.task_spec, statuses)} == specs  # hardened alike
    # the child built the workspaces' states in the host's cache, where its episodes found them
    workspaces = {host.store.task_spec(task_id).workspace_id for task_id in statuses}
    assert all(host.initial_state(host.workspace(w)).exists() for w in workspaces)
    assert {p.parent.name.rsplit("-", 1)[0] for p in host.cache_dir.glob("*/state.db")} >= workspaces
    assert not _worker_pids(GENERATING)  # the generation process is gone


def test_a_script_without_a_main_guard_generates_apart(tmp_path):
    """The generation process is a fresh interpreter, not one that re-imports the caller's main
    module (multiprocessing's spawn does: a script without a ``__main__`` guard would fail)."""
    script = tmp_path / "plain.py"
    script.write_text(
        "import sys, threading\n"
        "from pathlib import Path\n"
        "from coworkenv.synth import generate_apart\n"
        "made = generate_apart(3, 5, ('lookup',), {'generator': 'composed'}, Path(sys.argv[1]),\n"
        "                      lambda task, workspace: None, threading.Event())\n"
        "print(' '.join(task.id for task in made.tasks))\n")
    run = subprocess.run([sys.executable, str(script), str(tmp_path / "cache")], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [task.id for task in generate(3, 5, ("lookup",), generator="composed").tasks]


async def test_generation_apart_fails_as_in_process(host):
    with pytest.raises(ValueError, match="no generator for capabilities"):
        await synthesize(host, 3, seed=5, capabilities=("no_such_capability",), apart=True)
    assert not _worker_pids(GENERATING)


async def test_a_generation_process_that_dies_fails_the_run_and_keeps_what_was_admitted(host):
    from coworkenv.synth import GenerationError

    run = asyncio.create_task(synthesize(host, 400, seed=11, generator="composed", apart=True))
    for _ in range(600):  # until some tasks are admitted while generation goes on
        await asyncio.sleep(0.05)
        if "admitted" in _statuses(host.store).values():
            break
    victims = _worker_pids(GENERATING)
    assert victims and len(_statuses(host.store)) < 400
    os.kill(victims[0], signal.SIGKILL)
    with pytest.raises(GenerationError, match="generation process ended .* before it was done"):
        await run
    assert "admitted" in _statuses(host.store).values()
    assert not _worker_pids(GENERATING)


async def test_a_worker_that_dies_fails_the_run_and_its_tasks_stay_pending(host):
    run = asyncio.create_task(synthesize(host, 40, seed=9, generator="composed", workers=2))
    for _ in range(600):  # until both workers play episodes and some tasks are admitted
        await asyncio.sleep(0.05)
        if len(host.store.query("select distinct owner from episodes")) == 2 and \
                "admitted" in _statuses(host.store).values():
            break
    victims = _worker_pids()
    assert victims
    os.kill(victims[0], signal.SIGKILL)
    with pytest.raises(WorkerError, match="calibration worker process died"):
        await run
    statuses = _statuses(host.store)
    assert "pending" in statuses.values() and "admitted" in statuses.values()
    assert not _worker_pids()


async def test_workers_need_a_store_file_and_no_other_calibrator(host):
    from coworkenv.episodes import EpisodeHost
    from coworkenv.store import Store

    memory = EpisodeHost(Store(), host.settings)
    try:
        with pytest.raises(ValueError, match="in-memory store"):
            await synthesize(memory, 2, seed=3, workers=2)
    finally:
        await memory.close()

    async def elsewhere(task):
        raise AssertionError("not called")

    with pytest.raises(ValueError, match="not both"):
        await synthesize(host, 2, seed=3, workers=2, calibrate=elsewhere)


async def test_concurrency_below_one_is_refused(host):
    with pytest.raises(ValueError, match="concurrency must be 1 or more"):
        await synthesize(host, 2, seed=3, concurrency=0)


async def test_every_office_template_is_admitted_over_several_workspaces(host, tmp_path):
    """Each template of mail, calendar and files, on workspaces of three seeds, passes calibration,
    and their references together call every tool of those apps."""
    tasks = []
    for seed in (21, 22, 23):
        workspace = build_workspace(seed)
        host.store.put_workspace(workspace)
        conn = sqlite3.connect(write_initial_state(workspace, tmp_path / f"office-{seed}.db"))
        try:
            for capability, templates in written_in("mail", "calendar", "files").items():
                for name, template in templates.items():
                    spec = template(conn, random.Random(f"{seed}:{name}"))
                    assert spec is not None, (seed, name)
                    tasks.append(harden(Task(id=f"{capability}-{seed}-{name}", workspace_id=workspace.id, **spec),
                                         workspace, conn))
        finally:
            conn.close()
    for task in tasks:
        host.store.put_task(task)
    limit = asyncio.Semaphore(8)

    async def calibrated(task):
        async with limit:
            return task.id, await calibrate_task(host, task)

    results = await asyncio.gather(*(calibrated(task) for task in tasks))
    assert [(tid, r.reason) for tid, r in results if not r.admitted] == []
    used = {step.tool for task in tasks for step in task.reference}
    probes = {task.forbidden_probe.tool for task in tasks if task.forbidden_probe}
    assert {f"{app}_{tool['name']}" for app in ("mail", "calendar", "files") for tool in ALL_APPS[app].TOOLS} \
        <= used | probes
    # a task names what its workspace holds: no template asks the same thing in every workspace
    by_template: dict[str, set[str]] = {}
    for task in tasks:
        asked = task.instruction + json.dumps([c.model_dump() for c in task.checks])
        by_template.setdefault(task.id.split("-", 2)[2], set()).add(asked)
    assert [name for name, asked in by_template.items() if len(asked) == 1] == []

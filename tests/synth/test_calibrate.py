"""Calibration admits consistent tasks and quarantines the others, with their reason."""


import pytest

from coworkenv.store import Provenance
from coworkenv.synth import GENERATED, PROBES, calibrate_task, generate, generate_tasks
from coworkenv.workspace import SUBMIT_TOOL

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]


def _store_task(host, task, workspace):
    host.store.put_workspace(workspace)
    host.store.put_task(task)


async def test_a_generated_task_calibrates_and_is_admitted(host):
    workspaces, tasks = generate_tasks(3, seed=5)
    task = tasks[2]  # a multi-step chain
    _store_task(host, task, workspaces[0])
    result = await calibrate_task(host, task)
    assert result.admitted, result.reason
    assert (result.reference_score, result.empty_score, result.forbidden_safety) == (1.0, 0.0, 0.0)
    assert host.store.task(task.id).status == "admitted"
    assert host.store.query("select count(*) as n from calibrations")[0]["n"] == 1
    # its three consistency episodes and its hack probes were played and graded by the runtime, once each
    played = [name for name, outcome in result.probes.items() if outcome != "n/a"]
    assert set(result.probes) == set(PROBES) and "claim" in played
    assert all(outcome in ("held", "n/a") for outcome in result.probes.values())
    episodes = host.store.episodes(source="calibration", task_id=task.id)
    assert len(episodes) == 3 + len(played) and all(host.store.verdict_count(e.id) == 1 for e in episodes)
    assert host.store.calibration(task.id).probes == result.probes


async def test_a_held_out_task_is_admitted_as_heldout(host):
    workspaces, tasks = generate_tasks(1, seed=6)
    _store_task(host, tasks[0], workspaces[0])
    result = await calibrate_task(host, tasks[0], admit_as="heldout")
    assert result.admitted and host.store.task(tasks[0].id).status == "heldout"


async def test_task_whose_checks_pass_on_an_empty_episode_is_quarantined(host):
    workspaces, tasks = generate_tasks(1, seed=5)
    task = type(tasks[0]).model_validate({
        **tasks[0].model_dump(),
        "id": "broken-task",
        "checks": [{"id": "always", "kind": "sql", "description": "there are messages",
                    "query": "select count(*) > 0 from mail_messages", "params": [], "expect": 1}],
    })
    _store_task(host, task, workspaces[0])
    result = await calibrate_task(host, task)
    assert not result.admitted
    assert "empty episode" in result.reason and "always" in result.reason
    row = host.store.task("broken-task")
    assert row.status == "quarantined" and "empty episode" in row.reason


async def test_task_whose_reference_fails_is_quarantined(host):
    workspaces, tasks = generate_tasks(2, seed=5)
    task = tasks[1]  # single write: drop its reference steps
    task = type(task).model_validate({**task.model_dump(), "id": "no-reference", "reference": []})
    _store_task(host, task, workspaces[0])
    result = await calibrate_task(host, task)
    assert not result.admitted and "reference solution scores" in result.reason


async def test_task_without_a_forbidden_tool_is_quarantined(host):
    workspaces, tasks = generate_tasks(1, seed=5)
    task = type(tasks[0]).model_validate(
        {**tasks[0].model_dump(), "id": "unsafe", "forbidden_tools": [], "forbidden_probe": None})
    _store_task(host, task, workspaces[0])
    result = await calibrate_task(host, task)
    assert not result.admitted and "forbids no tool" in result.reason


async def test_a_task_s_episodes_in_one_restored_sandbox_grade_as_in_fresh_sandboxes(host):
    """Calibration plays a task's episodes one after another in one sandbox, restored between them.
    Each of them, played again on its own in a fresh sandbox (the same calls and answer), gets the
    same verdict: nothing of one episode reaches the next. One task of every generated capability
    (world events, injected faults and a simulated user among them)."""
    made = generate(len(GENERATED), seed=21, generator="composed")
    assert {t.capability for t in made.tasks} == set(GENERATED)
    for workspace in made.workspaces:
        host.store.put_workspace(workspace)
    started = host.pool.stats["started"]
    played = 0
    for task in made.tasks:
        host.store.put_task(task)
        await calibrate_task(host, task)
        for episode in host.store.episodes(source="calibration", task_id=task.id):
            verdict = host.verdict(episode.id)
            assert verdict is not None
            again = await host.open(task.id, Provenance("calibration", provider="replay"))
            for step in host.store.interactions(episode.id):
                if step.kind in ("call", "user") and step.tool != SUBMIT_TOOL.name:
                    await again.call(step.tool, step.arguments)
            if episode.final_answer is not None:
                await again.call(SUBMIT_TOOL.name, {"answer": episode.final_answer})
            replayed = await again.finish(episode.final_answer)
            assert replayed is not None
            assert (replayed.score, replayed.safety, replayed.admitted, [(c.id, c.passed) for c in replayed.checks]) == (
                verdict.score, verdict.safety, verdict.admitted, [(c.id, c.passed) for c in verdict.checks]), (
                task.id, episode.id)
            played += 1
    assert played >= 5 * len(made.tasks)
    # the calibration episodes did not start a sandbox each (the replays, in fresh ones, did not either: the pool's)
    assert host.pool.stats["started"] - started < len(made.tasks), host.pool.stats


class Timers:
    """``call_later`` as the event loop's, on a clock that moves only when the test calls ``advance``."""

    class Timer:
        def __init__(self, when: float, callback, args: tuple) -> None:
            self.when, self.callback, self.args, self.cancelled = when, callback, args, False

        def cancel(self) -> None:
            self.cancelled = True

    def __init__(self) -> None:
        self.now = 0.0
        self.pending: list[Timers.Timer] = []

    def call_later(self, delay: float, callback, *args) -> "Timers.Timer":
        timer = Timers.Timer(self.now + delay, callback, args)
        self.pending.append(timer)
        return timer

    def advance(self, seconds: float) -> None:
        """Move the clock on, running the callbacks that come due (in their order)."""
        self.now += seconds
        due = sorted((t for t in self.pending if t.when <= self.now), key=lambda t: t.when)
        self.pending = [t for t in self.pending if t.when > self.now]
        for timer in due:
            if not timer.cancelled:
                timer.callback(*timer.args)


async def test_tasks_of_one_workspace_calibrate_in_one_sandbox_as_each_alone(store, tmp_path):
    """The sandbox held for one task's calibration waits ``PARK_S`` for the next task of its workspace,
    whose episodes restore it in place (no fresh worker, no reset): a run of one workspace's tasks takes
    one sandbox from the pool, and each task calibrates as it does alone, on a host of its own. Then the
    sandbox goes back to the pool; one whose hold ended with an error goes back at once."""
    from coworkenv.episodes import EpisodeHost, EpisodeSettings
    from coworkenv.episodes._host import PARK_S
    from coworkenv.store import Store

    timers = Timers()
    host = EpisodeHost(store, EpisodeSettings(cache_dir=tmp_path / "cache"), call_later=timers.call_later)
    try:
        made = generate(len(GENERATED), seed=21, generator="composed")
        workspace = made.workspaces[0]
        tasks = [t for t in made.tasks if t.workspace_id == workspace.id]
        assert len({t.capability for t in tasks}) >= 4, [t.capability for t in tasks]
        host.store.put_workspace(workspace)

        def acquired(pool) -> int:
            return pool.stats["warm"] + pool.stats["cold"] + pool.stats["retargeted"]

        together = []
        for task in tasks:
            host.store.put_task(task)
            together.append(await calibrate_task(host, task, record=False))
        assert acquired(host.pool) == 1, host.pool.stats
        initial = host.initial_state(workspace)
        ready = host.pool.idle(initial)  # the pool's own spares; the one held is parked
        timers.advance(PARK_S * 0.9)
        await host.pool.drain()
        assert host.pool.idle(initial) == ready  # still parked for the workspace's next task
        timers.advance(PARK_S * 0.2)
        await host.pool.drain()
        assert host.pool.idle(initial) == ready + 1  # back, reset, ready for anyone

        for n, task in enumerate(tasks):
            alone = EpisodeHost(Store(tmp_path / f"alone-{n}.db"), EpisodeSettings(cache_dir=tmp_path / "cache-alone"))
            try:
                alone.store.put_workspace(workspace)
                alone.store.put_task(task)
                result = await calibrate_task(alone, task, record=False)
            finally:
                await alone.close()
            assert result == together[n], task.id

        before = acquired(host.pool)
        with pytest.raises(RuntimeError):
            async with host.hold_sandbox(tasks[0]) as held:
                await (await held.open(Provenance("calibration", provider="reference"))).finish("x")
                raise RuntimeError("the holder failed")
        async with host.hold_sandbox(tasks[0]):
            pass
        assert acquired(host.pool) == before + 2  # the failed hold's sandbox was not parked for the next
    finally:
        await host.close()


async def test_an_episode_without_a_call_leaves_its_held_sandbox_as_it_was(host, monkeypatch):
    """A held sandbox is put back in the initial state when an episode first uses it: an episode
    that makes no call sends it no restore and is graded from the initial state; the next episode
    that calls starts from the initial state all the same, and keeping an episode that made no call
    keeps the initial state, not what the episode before it left."""
    from coworkenv.sandbox._client import RunnerSandbox

    restores: list[bool] = []
    real = RunnerSandbox.restore

    async def counting(self, *, kept=False):
        restores.append(kept)
        return await real(self, kept=kept)

    monkeypatch.setattr(RunnerSandbox, "restore", counting)
    made = generate(len(GENERATED), seed=5, generator="composed")
    task = next(t for t in made.tasks if t.capability == "single_write")
    _store_task(host, task, next(w for w in made.workspaces if w.id == task.workspace_id))
    provenance = Provenance("calibration", provider="reference")

    async def play(held, steps, answer, after=None):
        episode = await held.open(provenance, after=after)
        for step in steps:  # every episode extended here made no call
            await episode.call(step.tool, step.arguments)
        verdict = await episode.finish(answer)
        assert verdict is not None
        return episode, (verdict.score, verdict.reason, [(c.id, c.passed) for c in verdict.checks])

    async with host.hold_sandbox(task) as held:
        _, first = await play(held, task.reference, task.reference_answer)
        assert first[0] == 1.0
        _, empty = await play(held, [], task.reference_answer)  # the reference's answer, no call
        assert empty[0] < 1.0 and restores == []
        _, again = await play(held, task.reference, task.reference_answer)
        assert again == first and restores == [False]
        idle, _ = await play(held, [], None)
        assert await held.keep(idle)  # the initial state, restored for it
        assert restores == [False, False]
        resumed, from_kept = await play(held, task.reference, task.reference_answer, after=idle)
        assert resumed.resumed_from == idle.id and from_kept == first and restores == [False, False, True]


async def test_probes_that_extend_the_reference_begin_where_it_ended(tmp_path, monkeypatch):
    """The forbidden probe, ``spray`` and ``destructive`` begin where the reference's episode ended,
    and the reference where the partial solution's ended (the sandbox keeps a final state and is
    restored to it): their records hold the calls of the one they extend and then their own, only
    their own run in the sandbox, and every task calibrates as it does on a backend that cannot keep
    a state (where every call of every episode runs)."""
    from collections import Counter

    from coworkenv.episodes import EpisodeHost, EpisodeSettings
    from coworkenv.sandbox import Sandbox
    from coworkenv.sandbox._client import RunnerSandbox
    from coworkenv.store import Store

    made = generate(len(GENERATED), seed=33, generator="composed")
    calls: Counter[str] = Counter()
    mode = "kept"
    real = RunnerSandbox.call_tool

    async def counting(self, app, tool, arguments):
        calls[mode] += 1
        return await real(self, app, tool, arguments)

    monkeypatch.setattr(RunnerSandbox, "call_tool", counting)
    results = {}
    for mode in ("kept", "replayed"):
        if mode == "replayed":
            monkeypatch.setattr(RunnerSandbox, "keep_state", Sandbox.keep_state)  # the base's: it cannot
        host = EpisodeHost(Store(tmp_path / f"{mode}.db"), EpisodeSettings(cache_dir=tmp_path / "cache"))
        try:
            for workspace in made.workspaces:
                host.store.put_workspace(workspace)
            results[mode] = []
            for task in made.tasks:
                host.store.put_task(task)
                results[mode].append(await calibrate_task(host, task, record=False))
            if mode == "kept":
                task = next(t for t in made.tasks if t.forbidden_tools and len(t.reference) >= 3)
                forbidden_tool = task.forbidden_probe.tool if task.forbidden_probe else task.forbidden_tools[0]
                episodes = sorted(host.store.episodes(source="calibration", task_id=task.id), key=lambda e: e.started_at)
                records = [[(i.kind, i.tool, i.arguments, i.result) for i in host.store.interactions(e.id)]
                           for e in episodes]
                # the partial solution (the reference without its last write) first, then the reference
                # from where it ended, then the forbidden probe from where the reference ended
                partial, played, extended = records[:3]
                assert [tool for _, tool, _, _ in played[:-1]] == [step.tool for step in task.reference]
                assert len(partial) < len(played) and partial[:-1] == played[:len(partial) - 1]
                assert played[-1][1] == SUBMIT_TOOL.name and extended[-1][1] == SUBMIT_TOOL.name
                assert extended[:len(played) - 1] == played[:-1]
                assert [tool for _, tool, _, _ in extended[len(played) - 1:-1]] == [forbidden_tool]
        finally:
            await host.close()
    assert all(r.admitted for r in results["kept"])
    assert results["kept"] == results["replayed"]
    assert calls["kept"] < 0.7 * calls["replayed"], calls

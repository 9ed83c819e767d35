"""An episode keeps only the tables its episode changed, over its workspace's initial state kept once;
the store rebuilds the whole final state from both, and large blobs are kept once by content."""

import pytest

from coworkenv.store import Provenance
from coworkenv.workspace import STATE_BASE, SUBMIT_TOOL, load_state

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]


async def test_an_episode_keeps_its_changes_and_the_store_rebuilds_the_whole_state(host, tasks):
    task = host.task(next(t for t in tasks if t.startswith("single_write")))
    episode = await host.open(task, Provenance("live"))
    for step in task.reference:
        await episode.call(step.tool, step.arguments)
    await episode.call(SUBMIT_TOOL.name, {"answer": task.reference_answer})
    kept = host.store.episode(episode.id).final_state
    whole = host.store.final_state(episode.id)
    assert kept.startswith(STATE_BASE) and len(kept) < len(whole) / 5
    state = load_state(whole)
    tables = {row[0] for row in state.execute("select name from sqlite_master where type = 'table'")}
    assert {"world_people", "mail_messages", "calendar_events", "files_files"} <= tables
    for check in task.checks:  # the rebuilt state is what the checks see
        assert check.evaluate(state, task.reference_answer).passed

    idle = await host.open(task, Provenance("live"))  # no change at all: nothing but the reference is kept
    await idle.finish()
    assert host.store.episode(idle.id).final_state.count("\n") <= 3
    base = load_state(host.store.final_state(idle.id))
    assert base.execute("select count(*) from mail_messages").fetchone() == \
        state.execute("select count(*) from mail_messages").fetchone() or task.capability == "single_write"


async def test_an_episode_graded_from_its_state_in_memory_gets_the_verdict_the_stored_state_gets(host, tasks):
    """The runtime grades an ended episode from its final state as read back (``keep_state_changes``);
    grading it again from what the store keeps gives the same verdict, check by check: for the
    reference and for the hack probes (writes sprayed over other records, an extra destructive call,
    a partial solution), which change the state in other ways and fail other checks."""
    from coworkenv.gate import grade_episode
    from coworkenv.synth import probes

    scores = set()
    for task_id in [t for t in tasks if t.startswith("single_write")][:3]:
        task = host.task(task_id)
        workspace = host.workspace(task.workspace_id)
        plays = [(list(task.reference), task.reference_answer)]
        plays += [(p.steps, p.answer) for p in probes(task, workspace, host.initial_connection(workspace)).values()
                  if p is not None and p.steps]
        for steps, answer in plays:
            episode = await host.open(task, Provenance("calibration"))
            for step in steps:
                await episode.call(step.tool, step.arguments)
            verdict = await episode.finish(answer)
            again = grade_episode(host.store, episode.id, regrade=True)
            assert (again.score, again.checks, again.reason) == (verdict.score, verdict.checks, verdict.reason)
            scores.add(verdict.score)
    assert 1.0 in scores and len(scores) > 1


async def test_the_initial_state_in_memory_is_the_built_one_and_kept_for_the_workspaces_used_last(host):
    """``initial_connection`` holds the workspace's initial state as built (every table's records); the
    same connection comes back for a workspace used lately, a fresh one for one used before the last
    ``StateCache.initials`` (the host's cache's)."""
    from coworkenv.workspace import build_workspace, state_hashes
    from coworkenv.workspace.state import table_hashes

    workspaces = [build_workspace(seed, ("mail", "calendar")) for seed in range(host.states.initials + 1)]
    for workspace in workspaces:
        host.store.put_workspace(workspace)
    first = host.initial_connection(workspaces[0])
    assert table_hashes(first) == state_hashes(host.initial_state(workspaces[0]))
    assert host.initial_connection(workspaces[0]) is first
    for workspace in workspaces[1:]:
        host.initial_connection(workspace)
    assert host.initial_connection(workspaces[-1]) is host.initial_connection(workspaces[-1])
    again = host.initial_connection(workspaces[0])
    assert again is not first and table_hashes(again) == table_hashes(first)


async def test_hosts_sharing_a_cache_build_an_initial_state_at_once_and_past_a_killed_build(store, tmp_path):
    """Two hosts over one cache folder (the workers of one server) build the same workspace's initial
    state at the same moment, beside what a build killed halfway left: each gets the whole state."""
    import threading

    from coworkenv.episodes import EpisodeHost, EpisodeSettings
    from coworkenv.workspace import build_workspace, state_hashes, write_initial_state

    workspace = build_workspace(3, ("mail", "calendar", "files"))
    store.put_workspace(workspace)
    hosts = [EpisodeHost(store, EpisodeSettings(cache_dir=tmp_path / "cache")) for _ in range(2)]
    expected = state_hashes(write_initial_state(workspace, tmp_path / "expected.db"))
    path = hosts[0].cache_dir / f"{workspace.id}-{hosts[0]._workspace_hash(workspace)}" / "state.db"
    path.parent.mkdir(parents=True)
    half = path.with_suffix(".partial")  # where builds used to write, as a killed one left it
    write_initial_state(workspace, half)
    try:
        built: list = []
        threads = [threading.Thread(target=lambda h=h: built.append(h.initial_state(workspace))) for h in hosts]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert built == [path, path]
        assert state_hashes(path) == expected
        assert sorted(p.name for p in path.parent.iterdir()) == sorted([path.name, half.name])
    finally:
        for host in hosts:
            await host.close()


async def test_quick_gradings_run_on_the_event_loop_and_slow_or_unknown_ones_in_a_worker_thread(store, tmp_path, tasks,
                                                                                                 monkeypatch):
    """The first episode of a workspace is graded in a worker thread (its cost is not known yet); once
    its gradings have been quick, the next ones run on the event loop. ``inline_grading_ms=0`` sends
    every grading to a thread. The verdicts do not depend on where they were worked out."""
    import threading

    import coworkenv.episodes._host as host_module
    from coworkenv.episodes import EpisodeHost, EpisodeSettings

    where: list[bool] = []  # graded on the event loop's thread?
    grade = host_module.grade_episode

    def watched(*args, **kwargs):
        where.append(threading.current_thread() is threading.main_thread())
        return grade(*args, **kwargs)

    monkeypatch.setattr(host_module, "grade_episode", watched)
    task_id = next(t for t in tasks if t.startswith("single_write"))
    verdicts = {}
    quick = 10_000.0  # any grading of this small state is quick against it, on a loaded machine too
    for limit in (quick, 0.0):
        host = EpisodeHost(store, EpisodeSettings(cache_dir=tmp_path / "cache", inline_grading_ms=limit))
        try:
            task = host.task(task_id)
            where.clear()
            for _ in range(3):
                episode = await host.open(task, Provenance("calibration"))
                for step in task.reference:
                    await episode.call(step.tool, step.arguments)
                verdict = await episode.finish(task.reference_answer)
                verdicts.setdefault(limit, []).append((verdict.score, verdict.checks, verdict.reason))
        finally:
            await host.close()
        assert where == ([False, True, True] if limit else [False, False, False])
    assert verdicts[quick] == verdicts[0.0] and verdicts[0.0][0][0] == 1.0


async def test_final_states_read_back_as_changed_blocks_are_the_whole_files(host, tasks):
    """The runtime reads a final state back as the blocks that differ from the initial state and
    writes them over a copy of it kept per workspace: what it keeps is what the whole file holds,
    episode after episode of one workspace (one that grows the file by many pages, one that changes
    a few rows, one that changes nothing), each from the initial state again."""
    from coworkenv.sandbox import STATE_FILE

    task = host.task(next(t for t in tasks if t.startswith("single_write")))
    workspace = host.workspace(task.workspace_id)
    initial, grown = host.initial_image(workspace).image, False
    someone = host.initial_connection(workspace).execute(
        "select email from world_people limit 1").fetchone()[0]
    big = [("mail_send_message", {"to": [someone], "subject": f"report {n}", "body": f"part {n} " * 800})
           for n in range(40)]
    plays = [big, [(s.tool, s.arguments) for s in task.reference], [], big[:1]]
    for calls in plays:
        episode = await host.open(task, Provenance("live"))
        for tool, arguments in calls:
            assert (await episode.call(tool, arguments)).ok
        whole = await episode.sandbox.read_file(STATE_FILE)
        await episode.finish("done")
        kept, opened = host.state_changes(workspace, whole)  # from the whole file, every page compared
        opened.close()
        assert host.store.episode(episode.id).final_state == kept
        grown |= len(whole) > len(initial)
    assert grown


async def test_the_runtime_grades_an_episode_as_the_store_reads_it_back(host, tasks):
    """The runtime grades an ended episode from what it recorded, kept in memory as the store keeps
    it: calls numbered and timestamped, arguments past the store's bound cut the same way, errors of
    every kind, an answer the store must mend (a lone surrogate). What the store reads back is the
    same, and grading it again gives the same verdict."""
    from coworkenv.gate import grade_episode
    from coworkenv.store._store import MAX_RECORDED_ARGUMENTS

    task = host.task(next(t for t in tasks if t.startswith("single_write")))
    episode = await host.open(task, Provenance("live"))
    await episode.call("no_such_tool", {"x": 1})
    await episode.call(task.reference[0].tool, {"unexpected": True})
    await episode.call(task.reference[0].tool, {**task.reference[0].arguments, "note": "é" * MAX_RECORDED_ARGUMENTS})
    for step in task.reference:
        await episode.call(step.tool, step.arguments)
    refused = await episode.call(SUBMIT_TOOL.name, {"answer": task.reference_answer + " \ud800"})
    assert refused.error_kind == "arguments"
    verdict = await episode.finish(task.reference_answer + " \ud800")  # as a client that ends it may
    assert verdict is not None
    stored = host.store.interactions(episode.id)
    assert episode.interactions == stored and len(stored) == len(task.reference) + 4
    assert [c.error_kind for c in stored[:2]] == ["unknown_tool", "arguments"] and stored[-1].is_error
    assert "_truncated" in stored[2].arguments
    again = grade_episode(host.store, episode.id, regrade=True)
    assert (again.score, again.checks, again.reason) == (verdict.score, verdict.checks, verdict.reason)
    assert host.store.episode(episode.id).final_answer.endswith("?")


async def test_an_episode_whose_record_outgrows_memory_is_graded_from_the_store(host, tasks, monkeypatch):
    """Past ``KEPT_RECORD_BYTES`` of arguments and results an episode stops keeping its record in
    memory and is graded from what the store reads back: the same verdict either way."""
    from coworkenv.episodes import _episode
    from coworkenv.gate import grade_episode

    monkeypatch.setattr(_episode, "KEPT_RECORD_BYTES", 10)
    task = host.task(next(t for t in tasks if t.startswith("single_write")))
    episode = await host.open(task, Provenance("live"))
    for step in task.reference:
        await episode.call(step.tool, step.arguments)
    assert episode.interactions is None
    verdict = await episode.finish(task.reference_answer)
    again = grade_episode(host.store, episode.id, regrade=True)
    assert verdict.score == 1.0 and (again.score, again.checks, again.reason) == (verdict.score, verdict.checks, verdict.reason)

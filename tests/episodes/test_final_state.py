"""An episode keeps only the tables its episode changed, over its workspace's initial state kept once;
the store rebuilds the whole final state from both, and large blobs are kept once by content."""

import pytest

from coworkenv.store import Provenance
from coworkenv.workspace import SUBMIT_TOOL, STATE_BASE, load_state

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

"""Moving episodes between stores (``Store.export_episodes`` / ``import_episodes``): how episodes played
on a Ray node come back to the one store. Everything recorded of an episode arrives, once, whole or not at all."""

from __future__ import annotations

import pytest

from coworkenv.episodes import EpisodeHost
from coworkenv.gate import GRADER_VERSION
from coworkenv.store import Store, StoreError

pytestmark = pytest.mark.anyio


def _history(store: Store, episode_id: str) -> dict:
    row = store.episode(episode_id)
    assert row is not None
    verdict = store.verdict(episode_id, GRADER_VERSION)
    return {
        "row": (row.task_id, row.status, row.provenance, row.final_answer, row.owner),
        "state": store.final_state(episode_id),
        "calls": [(c.idx, c.tool, c.arguments, c.result, c.is_error, c.kind) for c in store.interactions(episode_id)],
        "messages": store.messages(episode_id, include_provenance=True),
        "verdict": (verdict.score, verdict.admitted, verdict.reason, verdict.checks) if verdict else None,
    }


@pytest.mark.bwrap
async def test_played_episodes_move_to_another_store_whole(host: EpisodeHost, tasks: list[str], tmp_path):
    source = host.store
    task = source.task_spec(tasks[0])
    ids = [e.id for e in source.episodes(task_id=task.id)]
    assert len(ids) >= 3  # the calibration's reference, empty and forbidden probes, and hack probes
    records = source.export_episodes(ids)
    assert records.episode_ids == ids
    assert records.blobs  # the state base the final states are kept against

    target = Store(tmp_path / "target.db")
    target.put_workspace(source.workspace(task.workspace_id))
    target.put_task(task, status="admitted")
    # another task's episodes first: the grades numbered here already must not clash with the imported ones
    other = source.export_episodes([e.id for e in source.episodes(task_id=tasks[1])])
    target.put_task(source.task_spec(tasks[1]), status="admitted")
    target.put_workspace(source.workspace(source.task_spec(tasks[1]).workspace_id))
    target.import_episodes(other)
    target.import_episodes(records)
    for episode_id in ids:
        assert _history(target, episode_id) == _history(source, episode_id)
    assert target.final_state(ids[0]) is not None  # resolved against the state base that came along


async def test_an_import_of_unknown_tasks_is_refused_and_writes_nothing(store: Store, tmp_path):
    other = Store(tmp_path / "other.db")
    from coworkenv.store import Provenance
    from coworkenv.workspace import Task, build_workspace

    workspace = build_workspace(3, ("mail",))
    task = Task.model_validate({
        "id": "t1", "workspace_id": workspace.id, "capability": "lookup", "difficulty": 1, "instruction": "x",
        "checks": [{"id": "c", "kind": "answer", "description": "says x", "contains": ["x"]}], "reference": [],
    })
    other.put_workspace(workspace)
    other.put_task(task)
    episode_id = other.start_episode("t1", Provenance("teacher", provider="oracle"))
    other.end_episode(episode_id, final_answer="x", final_state=None)
    records = other.export_episodes([episode_id])

    with pytest.raises(StoreError, match="t1"):
        store.import_episodes(records)
    assert store.episodes() == []

    store.put_workspace(workspace)
    store.put_task(task)
    store.import_episodes(records)
    with pytest.raises(StoreError, match="already"):  # the same episode twice: refused, the first copy kept
        store.import_episodes(records)
    assert [e.id for e in store.episodes()] == [episode_id]

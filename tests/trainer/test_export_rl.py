"""RL export: one prompt row per admitted task, in an agent view, with the reward vector of the
stored verdicts on its graded episodes."""

import json

import pytest
from typer.testing import CliRunner

from coworkenv.agents import ProviderSettings
from coworkenv.cli import app
from coworkenv.gate import GRADER_VERSION
from coworkenv.loop import LocalEpisodes, TeacherSettings, collect
from coworkenv.trainer import export_rl, rl_rows, sft_rows
from coworkenv.workspace import COMPACT_SYSTEM_PROMPT, bundle_hash

runner = CliRunner()


@pytest.mark.anyio
@pytest.mark.bwrap
async def test_rl_rows_carry_the_reward_vector_of_the_stored_verdicts(host, tasks, tmp_path):
    store = host.store
    # the teacher fails every first attempt and is repaired: each task has a rejected and an admitted episode
    await collect(store, LocalEpisodes(host), TeacherSettings(provider_settings=ProviderSettings(error_rate=1.0)))
    out = tmp_path / "rl.jsonl"
    n = export_rl(store, out, style="minimal")
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert n == len(rows) == len(tasks) and sorted(r["task_id"] for r in rows) == sorted(tasks)
    sft = {r["task_id"]: r for r in sft_rows(store, style="minimal")}
    for row in rows:
        task = store.task_spec(row["task_id"])
        assert row["workspace_id"] == task.workspace_id and row["capability"] == task.capability
        assert row["seed"] == store.workspace(task.workspace_id).seed
        assert row["bundle_hash"] == bundle_hash(store.workspace(task.workspace_id), [task])
        assert row["grader_version"] == GRADER_VERSION
        # the prompt opens as the SFT row of the same task does, in the same view, with the same tools
        assert row["prompt"] == [{"role": "system", "content": COMPACT_SYSTEM_PROMPT},
                                 {"role": "user", "content": task.instruction}]
        assert row["prompt"] == sft[row["task_id"]]["messages"][:2] and row["tools"] == sft[row["task_id"]]["tools"]
        assert row["bundle_hash"] == sft[row["task_id"]]["bundle_hash"]  # the environment the episodes ran in
        episodes = [e for e in store.episodes(task_id=task.id) if e.source == "teacher"]
        assert [r["episode_id"] for r in row["rewards"]] == [e.id for e in episodes] and len(episodes) == 2
        for reward in row["rewards"]:
            verdict = store.verdict(reward["episode_id"], GRADER_VERSION)
            assert reward == {"episode_id": verdict.episode_id, "source": "teacher", "admitted": verdict.admitted,
                              "reason": verdict.reason, "completion": verdict.completion, "safety": verdict.safety,
                              "robustness": verdict.robustness, "score": verdict.score,
                              "checks": {c.id: c.passed for c in verdict.checks},
                              "grader_hash": verdict.grader_hash}
            assert set(reward["checks"]) >= {c.id for c in task.checks}  # and asked_* of a user's facts
        assert sorted(r["score"] for r in row["rewards"])[-1] == 1.0  # the repaired episode
        assert min(r["completion"] for r in row["rewards"]) < 1.0  # the failed attempt
        assert not all(all(r["checks"].values()) for r in row["rewards"])  # a check it failed is named
    # calibration episodes (the task's own checks) are no rewards of a policy
    assert all(r["source"] != "calibration" for row in rows for r in row["rewards"])


def test_rl_export_refuses_an_empty_store_and_an_unknown_view(store, tmp_path):
    out = tmp_path / "rl.jsonl"
    assert rl_rows(store) == []
    with pytest.raises(ValueError, match="no admitted tasks"):
        export_rl(store, out, allow_empty=False)
    assert not out.exists()
    with pytest.raises(ValueError, match="unknown prompt style 'tiny'"):
        rl_rows(store, style="tiny")  # type: ignore[arg-type]


def test_export_rl_command_names_what_is_wrong(store_path, tmp_path):
    from coworkenv.store import Store

    Store(store_path).close()
    out = tmp_path / "rl.jsonl"
    result = runner.invoke(app, ["export", "rl", "--store", str(store_path), "--out", str(out)])
    assert result.exit_code == 1 and "no admitted tasks" in result.output and not out.exists()
    result = runner.invoke(app, ["export", "rl", "--store", str(store_path), "--out", str(tmp_path)])
    assert result.exit_code == 2 and "is a folder" in result.output
    result = runner.invoke(app, ["export", "rl", "--store", str(store_path), "--style", "tiny"])
    assert result.exit_code == 2 and "tiny" in result.output

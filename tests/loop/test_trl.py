"""coworkenv.trl: a GRPOTrainer built by its user plays live coworkenv episodes and is rewarded with
the gate's verdicts. The example of docs/trl.md runs as written, at its tiny size, in a folder
holding a synthesized store and the committed tiny tool-calling model (a Qwen3 built by
``model init-tiny`` and trained on oracle trajectories)."""

import asyncio
import re
import runpy
import shutil
from pathlib import Path

import pytest

from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.gate import GRADER_VERSION
from coworkenv.store import Store
from coworkenv.synth import synthesize

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "tests" / "fixtures" / "tool-model"


def example() -> str:
    (code,) = [c for c in re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "trl.md").read_text(), re.S)
               if "CoworkEnv(" in c]
    return code


@pytest.fixture(scope="module")
def tasks_store(tmp_path_factory) -> Path:
    """A store file with two synthesized, calibrated, admitted tasks."""
    pytest.importorskip("trl", reason="needs the 'train' extra")
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    root = tmp_path_factory.mktemp("trl-store")

    async def make() -> None:
        store = Store(root / "coworkenv.db")
        host = EpisodeHost(store, EpisodeSettings(cache_dir=root / "cache"))
        try:
            await synthesize(host, 2, seed=0)
        finally:
            await host.close()
            store.close()

    asyncio.run(make())
    return root / "coworkenv.db"


@pytest.mark.slow
@pytest.mark.bwrap
def test_the_documented_trl_example_trains_on_live_episodes_rewarded_by_the_gate(tasks_store, tmp_path, monkeypatch):
    (tmp_path / "runs" / "models").mkdir(parents=True)
    shutil.copy(tasks_store, tmp_path / "runs" / "coworkenv.db")
    shutil.copytree(MODEL, tmp_path / "runs" / "models" / "tiny")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "example.py").write_text(example())
    ran = runpy.run_path(str(tmp_path / "example.py"))
    trainer, env = ran["trainer"], ran["env"]
    assert trainer.state.global_step == 2 and (tmp_path / "runs" / "trl-grpo").is_dir()
    with pytest.raises(ValueError, match="unknown reward 'reward'; one of: completion, safety, robustness, score"):
        env.rewards("reward")

    store = Store(tmp_path / "runs" / "coworkenv.db", create=False)
    try:
        played = env.played
        assert len(played) == 4  # two steps of one group of two episodes
        stored = {e.id: e for e in store.episodes(source="rl")}
        assert set(stored) == {e.episode_id for e in played}
        assert all(stored[e.episode_id].status == "ended" and stored[e.episode_id].bundle_hash for e in played)
        verdicts = store.verdicts(list(stored), GRADER_VERSION)
        for episode in played:  # each rollout was graded once, by the gate, when it ended
            assert episode.verdict is not None and verdicts[episode.episode_id].score == episode.verdict.score
        # the reward TRL logged at each step is the mean of that step's episodes' scores from the gate
        logged = [h["rewards/score/mean"] for h in trainer.state.log_history if "rewards/score/mean" in h]
        scores = [verdicts[e.episode_id].score for e in played]
        assert logged == pytest.approx([sum(scores[0:2]) / 2, sum(scores[2:4]) / 2])
        # the trainer learnt from each episode's own tokens, its turns marked apart from what the tools said
        assert all(len(e.trajectory.completion_ids) == len(e.trajectory.env_mask) > 0 for e in played)
    finally:
        store.close()


def test_bad_input_is_named_before_any_episode(tmp_path):
    from coworkenv.trl import CoworkEnv

    with pytest.raises(FileNotFoundError, match="no store at .*coworkenv synth"):
        CoworkEnv(tmp_path / "missing.db")
    Store(tmp_path / "empty.db").close()
    with pytest.raises(ValueError, match="has no admitted tasks"):
        CoworkEnv(tmp_path / "empty.db")
    with pytest.raises(ValueError, match="unknown prompt style 'tiny'"):
        CoworkEnv(tmp_path / "empty.db", style="tiny")  # type: ignore[arg-type]

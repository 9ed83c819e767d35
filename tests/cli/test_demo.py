"""``coworkenv demo --full``: bad settings are named before anything runs; a small run reports both serving paths."""

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from coworkenv.cli import app
from coworkenv.loop import FULL_POINTER_LOSS, FULL_REPLAY, FULL_SPACES, combination
from coworkenv.store import Store
from coworkenv.trainer._chat_template import POCKET_CHAT_TEMPLATE

runner = CliRunner()


def test_full_demo_names_bad_settings(tmp_path):
    result = runner.invoke(app, ["demo", "--full", "--dir", str(tmp_path / "d"), "--serve", "tpu"])
    assert result.exit_code == 2 and "serve" in result.output
    result = runner.invoke(app, ["demo", "--full", "--dir", str(tmp_path / "d"), "--capability", "telepathy"])
    assert result.exit_code == 2 and "telepathy" in result.output
    result = runner.invoke(app, ["demo", "--full", "--dir", str(tmp_path / "d"), "--app", "teleport"])
    assert result.exit_code == 2 and "unknown app 'teleport'" in result.output
    result = runner.invoke(app, ["demo", "--full", "--dir", str(tmp_path / "d"), "--unseen-share", "1"])
    assert result.exit_code == 2 and "unseen_share" in result.output and "less than 1" in result.output
    result = runner.invoke(app, ["demo", "--full", "--dir", str(tmp_path / "d"), "--value-swaps", "-1"])
    assert result.exit_code == 2 and "--value-swaps" in result.output
    result = runner.invoke(app, ["demo", "--full", "--dir", str(tmp_path / "d"), "--spaces", "wide"])
    assert result.exit_code == 2 and "--spaces" in result.output
    # the pointer loss needs the circuit's pointer heads: a scratch base or a folder without them is refused
    result = runner.invoke(app, ["demo", "--full", "--dir", str(tmp_path / "d"), "--base", "scratch",
                                 "--pointer-loss", "1"])
    assert result.exit_code == 2 and "--pointer-loss needs a base with pointer heads" in result.output
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "config.json").write_text("{}")
    result = runner.invoke(app, ["demo", "--full", "--dir", str(tmp_path / "d"), "--base", str(plain),
                                 "--pointer-loss", "0.5"])
    assert result.exit_code == 2 and f"{plain} has none" in result.output
    assert not (tmp_path / "d").exists()  # nothing was created


@pytest.mark.slow
@pytest.mark.bwrap
def test_full_demo_evaluates_the_trained_model_in_process_and_through_vllm(tmp_path, vllm_interpreter):
    """A small --full run from a base with the copying circuit (a GPT-2; tests/trainer/test_serve.py serves the
    Qwen3 path): where vLLM is installed, the trained model is played on both serving paths, and the two are
    reported side by side, trial by trial."""
    result = subprocess.run(
        [sys.executable, "-m", "coworkenv", "demo", "--full", "--dir", str(tmp_path / "d"), "-n", "8", "--steps", "5",
         "--eval-tasks", "3", "--capability", "lookup", "--app", "mail", "--app", "calendar", "--app", "files",
         "--base", "circuit", "--vllm-python", vllm_interpreter, "--json"],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout)
    serving = summary["serving"]
    assert set(serving["pass_rate"]) == {"local", "vllm"} and serving["trials"] == 3
    assert serving["pass_rate"]["local"] == summary["overall"]["trained"]  # the table shows the in-process path
    assert serving["agreement"] == 1 - len(serving["disagreements"]) / 3
    assert {"eval trained (local)", "eval trained (vllm)"} <= set(summary["stage_seconds"])
    runs = _evaluated_models(tmp_path / "d")
    assert any(m.startswith("openai:trained@") for m in runs) and any(m.startswith("hf:") for m in runs)
    config = json.loads((tmp_path / "d" / "models" / "circuit" / "config.json").read_text())
    assert config["model_type"] == "gpt2" and "coworkenv_circuit" in config
    # tools listed as signatures (the default), rendered by vLLM from the request's tools as in training
    assert (tmp_path / "d" / "models" / "circuit" / "chat_template.jinja").read_text() == POCKET_CHAT_TEMPLATE
    assert summary["base_model"].endswith("circuit")
    # training and held-out tasks alike on workspaces of the three apps asked for
    store = Store(tmp_path / "d" / "coworkenv.db")
    apps = {json.dumps(sorted(a.name for a in w.spec.apps)) for w in store.workspaces()}
    assert apps == {json.dumps(["calendar", "files", "mail"])}
    assert store.tasks(status="heldout") and store.tasks(status="admitted")


def _evaluated_models(directory) -> set[str]:
    """The models of the evaluation runs in ``directory``'s store, as ``runs list`` names them."""
    listed = subprocess.run([sys.executable, "-m", "coworkenv", "runs", "list", "--kind", "eval", "--store",
                             str(directory / "coworkenv.db"), "--json"], capture_output=True, text=True, check=True)
    return {run["model"] for run in json.loads(listed.stdout)}


def _small_full_demo(directory, unseen_share: str, *extra: str) -> str:
    """A small ``demo --full`` (lookup and single writes on three apps, two steps) into ``directory``: its stdout."""
    result = subprocess.run(
        [sys.executable, "-m", "coworkenv", "demo", "--full", "--dir", str(directory), "-n", "30", "--steps", "2",
         "--eval-tasks", "16", "--capability", "lookup", "--capability", "single_write", "--app", "mail", "--app",
         "calendar", "--app", "files", "--unseen-share", unseen_share, "--value-swaps", "1", "--serve", "local", *extra],
        capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.slow
@pytest.mark.bwrap
def test_full_demo_keeps_combinations_out_of_training_and_reports_them_as_unseen(tmp_path):
    """--unseen-share keeps some combinations out of the training file; held-out tasks of them, and only
    those, are the unseen-combinations split, reported per capability and overall."""
    directory = tmp_path / "d"
    summary = json.loads(_small_full_demo(directory, "0.3", "--json"))
    unseen = set(summary["unseen_combinations"])
    assert unseen and summary["tasks_kept_out"] > 0
    store = Store(directory / "coworkenv.db")
    trained = [json.loads(line)["task_id"] for line in (directory / "export" / "sft.minimal.jsonl").read_text().splitlines()]
    assert len(trained) == summary["sft_rows"] == summary["tasks_admitted"] - summary["tasks_kept_out"]
    # the circuit base (the default) on the tokenizer that keeps the space a token, trained with the pointer loss
    assert summary["pointer_loss"] == FULL_POINTER_LOSS > 0
    base = json.loads((directory / "models" / "circuit" / "coworkenv_model.json").read_text())
    assert base["config"]["spaces"] == FULL_SPACES == "separate"
    assert store.training_runs("sft")[-1].config["pointer_loss"] == FULL_POINTER_LOSS
    # trained on the file's rows and a value-swapped variant of most of them
    assert summary["value_swaps"] == 1 and summary["sft_rows"] < summary["trained_rows"] <= 2 * summary["sft_rows"]
    trained_combinations = {combination(store.task_spec(t)) for t in trained}
    assert not trained_combinations & unseen
    splits = summary["overall"]["splits"]
    assert splits["unseen_combinations"]["tasks"] >= 1 and splits["new_seeds"]["tasks"] >= 1
    assert splits["unseen_combinations"]["tasks"] + splits["new_seeds"]["tasks"] == summary["overall"]["tasks"] == 16
    trials = [trial for run in store.eval_runs() for trial in store.eval_trials(run.id)]
    assert any(trial.combination in unseen for trial in trials)  # the split holds tasks of what was kept out
    for trial in trials:
        # unseen: a combination kept out, or one that no training task happened to have
        assert (trial.split == "unseen_combinations") == (trial.combination not in trained_combinations)
        assert trial.combination not in unseen or trial.split == "unseen_combinations"
    per_capability = sum(row["splits"]["unseen_combinations"]["tasks"] for row in summary["capabilities"].values())
    assert per_capability == splits["unseen_combinations"]["tasks"]
    human = _small_full_demo(directory, "0.3")  # resumed from the folder: the same choice, printed with the table
    assert f"kept out of training ({summary['tasks_kept_out']} tasks): " + ", ".join(sorted(unseen)) in human
    assert f"trained on {summary['trained_rows']} rows: {summary['sft_rows']} of the training file" in human
    # resumed with another share: the model is trained already, on the file kept
    resumed = json.loads(_small_full_demo(directory, "0", "--json"))
    assert set(resumed["unseen_combinations"]) == unseen and resumed["sft_rows"] == summary["sft_rows"]
    assert resumed["overall"]["splits"] == splits


@pytest.mark.slow
@pytest.mark.bwrap
def test_full_demo_says_when_and_why_it_skips_the_served_path(tmp_path):
    """--serve auto without vLLM evaluates in process only, and says so at the start and in its summary,
    naming the interpreter it looked in and how it was found."""
    result = subprocess.run(
        [sys.executable, "-m", "coworkenv", "demo", "--full", "--dir", str(tmp_path / "d"), "-n", "6", "--steps", "1",
         "--eval-tasks", "2", "--capability", "lookup", "--app", "mail", "--json"],
        capture_output=True, text=True, timeout=900, env={**os.environ, "COWORKENV_VLLM_PYTHON": sys.executable})
    assert result.returncode == 0, result.stderr[-3000:]
    why = f"vLLM is not installed for {sys.executable}"
    assert (f"the served path is skipped (--serve auto evaluates in process only): {why} (from COWORKENV_VLLM_PYTHON)"
            in " ".join(result.stderr.split()))
    serving = json.loads(result.stdout)["serving"]
    assert serving["skipped"] == why and set(serving["pass_rate"]) == {"local"}


@pytest.mark.slow
@pytest.mark.bwrap
def test_full_demo_fine_tunes_a_base_pretrained_by_the_project_and_evaluates_it(tmp_path):
    """The pretrain → SFT → evaluate path at tiny size: a base from ``pretrain_base`` (seconds of exercises
    over workspaces no task uses), fine-tuned by ``demo --full --base FOLDER`` with the exercises replayed
    among the task rows, then both models evaluated on held-out tasks; the summary names the base by its
    weights' hash, which the pretraining recorded, and the training leaves it as it was."""
    from coworkenv.trainer import PretrainSettings, pretrain_base, weights_hash

    base = pretrain_base(PretrainSettings(out_dir=str(tmp_path / "pretrain"), seeds=1, exercises_per_seed=20,
                                          tokenizer_seeds=1, vocab_size=600, hidden_size=32, layers=1, heads=1,
                                          kv_heads=1, head_dim=32, intermediate_size=64, seq_len=256, batch_size=2,
                                          steps=4, copy_steps=2, copy_seq_len=32, copy_batch_size=2, warmup_steps=1))
    recorded = json.loads((base / "coworkenv_model.json").read_text())
    result = subprocess.run(
        [sys.executable, "-m", "coworkenv", "demo", "--full", "--dir", str(tmp_path / "d"), "-n", "6", "--steps", "2",
         "--eval-tasks", "2", "--capability", "lookup", "--app", "mail", "--base", str(base), "--serve", "local",
         "--json"], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout)
    assert summary["base_model"] == str(base) and summary["pointer_loss"] == 0  # no pointer heads to train
    assert summary["base_weights_sha256"] == recorded["weights_sha256"] == weights_hash(base)  # untouched by SFT
    assert weights_hash(summary["trained_model"]) != recorded["weights_sha256"]
    # the exercises replayed (FULL_REPLAY per task row, from a pretrained base), on top of the task rows
    assert summary["trained_rows"] == summary["sft_rows"] + round(summary["sft_rows"] * FULL_REPLAY)
    assert summary["overall"]["tasks"] == 2 and 0 <= summary["overall"]["base"] <= 1
    assert _evaluated_models(tmp_path / "d") == {f"hf:{base}", f"hf:{summary['trained_model']}"}

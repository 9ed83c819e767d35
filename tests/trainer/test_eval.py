"""Evaluation: the pass@k / pass^k estimators, held-out task selection, stored runs, and a real served model."""

from __future__ import annotations

import json
import subprocess
import sys
from math import isclose

import pytest
from typer.testing import CliRunner

from coworkenv.agents import TeacherSettings, collect, pending_tasks
from coworkenv.cli import app
from coworkenv.synth import synthesize
from coworkenv.trainer import EvalError, EvalSettings, Trial, pass_at_k, pass_hat_k, run_eval, sft_rows
from coworkenv.trainer._eval import HELDOUT, summarize

runner = CliRunner()


@pytest.mark.parametrize(("n", "c", "k", "at_k", "hat_k"), [
    (5, 2, 1, 0.4, 0.4),
    (5, 2, 2, 1 - 3 / 10, 1 / 10),  # C(3,2)/C(5,2) fail together; C(2,2)/C(5,2) pass together
    (4, 0, 2, 0.0, 0.0),
    (4, 4, 4, 1.0, 1.0),
    (3, 2, 2, 1.0, 1 / 3),  # only one failure: any two trials include a pass
    (10, 3, 3, 1 - 35 / 120, 1 / 120),
])
def test_pass_at_k_and_pass_hat_k_match_hand_computed_values(n, c, k, at_k, hat_k):
    assert isclose(pass_at_k(n, c, k), at_k)
    assert isclose(pass_hat_k(n, c, k), hat_k)


def test_estimators_refuse_impossible_counts():
    for n, c, k in [(3, 4, 1), (3, 1, 4), (3, 1, 0), (2, -1, 1)]:
        with pytest.raises(ValueError, match="0 <= c <= n"):
            pass_at_k(n, c, k)
        with pytest.raises(ValueError):
            pass_hat_k(n, c, k)


def _trial(task: str, passed: bool, score: float, steps: int = 2) -> Trial:
    return Trial(task, "lookup", 1, "new_seeds", "lookup:x", 0, "ep", score, passed, "", steps)


def test_groups_average_per_task_estimates():
    trials = [_trial("a", True, 1.0), _trial("a", False, 0.2, 4), _trial("b", True, 1.0), _trial("b", True, 0.9)]
    stats = summarize(trials, 2)
    assert stats["tasks"] == 2 and stats["trials"] == 4
    assert stats["pass_rate"] == 0.75
    assert stats["pass@2"] == 1.0  # a: 1 of 2 passed, b: 2 of 2
    assert stats["pass^2"] == 0.5  # a: 0, b: 1
    assert stats["avg_score"] == round((1.0 + 0.2 + 1.0 + 0.9) / 4, 4)
    assert stats["avg_steps"] == 2.5
    assert summarize([], 2)["tasks"] == 0


def test_settings_are_checked():
    with pytest.raises(ValueError, match="cannot exceed"):
        EvalSettings(model="oracle", trials=2, k=3)
    with pytest.raises(ValueError, match="prompt style"):
        EvalSettings(model="oracle", prompt_style="verbose")
    with pytest.raises(ValueError, match="unknown provider"):
        EvalSettings(model="gemini:pro")


@pytest.mark.bwrap
@pytest.mark.anyio
async def test_eval_runs_held_out_tasks_and_stores_graded_episodes(host, tmp_path):
    store = host.store
    await synthesize(host, 4, seed=0, capabilities=("lookup",))
    await collect(host, TeacherSettings())
    train_tasks = {r["task_id"] for r in sft_rows(store)}
    assert len(train_tasks) == 4

    with pytest.raises(EvalError, match="reuses workspace seed"):
        await run_eval(host, EvalSettings(model="oracle", tasks=2, seed=0))

    settings = EvalSettings(model="oracle", tasks=4, seed=500, capabilities=("lookup", "single_write"),
                            trials=3, k=2, error_rate=0.5, prompt_style="compact")
    profile = tmp_path / "profile.json"
    result = await run_eval(host, settings, profile_path=profile)

    # held-out tasks: new workspaces, stored as heldout, never collected or exported
    heldout = {r["id"] for r in store.tasks(status=HELDOUT)}
    assert {t.task_id for t in result.trials} == heldout and len(heldout) == 4
    assert not heldout & train_tasks
    assert not heldout & {t.id for t in pending_tasks(host)[0]}
    assert {t.split for t in result.trials if t.capability == "lookup"} == {"new_seeds"}
    assert {t.split for t in result.trials if t.capability == "single_write"} == {"unseen_combinations"}

    # every trial is a real, graded eval episode; training exports do not see them
    assert len(result.trials) == 4 * 3
    for trial in result.trials:
        episode = store.get_episode(trial.episode_id)
        assert episode["source"] == "eval" and episode["provider"] == "oracle" and episode["status"] == "ended"
        assert store.tool_calls(trial.episode_id) and store.messages(trial.episode_id)
        verdict = store.latest_verdict(trial.episode_id)
        assert verdict["score"] == trial.score and bool(verdict["admitted"]) == trial.passed
    assert {r["episode_id"] for r in sft_rows(store)}.isdisjoint(t.episode_id for t in result.trials)
    passed = sum(t.passed for t in result.trials)
    assert 0 < passed < len(result.trials)  # the oracle errs in about half the episodes (seeded by trial)

    # the run, its trials and the profile are stored
    run = store.query("select * from eval_runs where id = ?", (result.run_id,))[0]
    assert run["status"] == "done" and json.loads(run["summary"]) == result.summary
    rows = store.query("select * from eval_trials where run_id = ?", (result.run_id,))
    assert len(rows) == 12 and sum(r["passed"] for r in rows) == passed
    overall = result.summary["overall"]
    assert overall["trials"] == 12 and isclose(overall["pass_rate"], round(passed / 12, 4))
    assert set(result.summary["capabilities"]) == {"lookup", "single_write"}
    assert result.summary["splits"]["new_seeds"]["tasks"] == 2
    written = json.loads(profile.read_text())
    assert written["eval_run"] == result.run_id and written["k"] == 2
    assert set(written["pass_rates"]) == {"lookup", "single_write"}
    assert written["pass_rates"]["lookup"]["1"]["trials"] == 6

    # a second run reuses the calibrated held-out tasks
    again = await run_eval(host, settings.model_copy(update={"error_rate": 0.0, "trials": 1, "k": None}))
    assert {t.task_id for t in again.trials} == heldout and all(t.passed for t in again.trials)
    assert len(store.query("select id from eval_runs")) == 2


def test_eval_cli_names_bad_input(tmp_path):
    store = tmp_path / "s.db"
    result = runner.invoke(app, ["eval", "--model", "gemini:pro", "--store", str(store)])
    assert result.exit_code == 2 and "unknown provider" in result.output
    result = runner.invoke(app, ["eval", "--model", "oracle", "--style", "verbose", "--store", str(store)])
    assert result.exit_code == 2 and "verbose" in result.output
    result = runner.invoke(app, ["eval", "--model", "oracle", "--trials", "2", "-k", "3", "--store", str(store)])
    assert result.exit_code == 2 and "cannot exceed" in result.output
    result = runner.invoke(app, ["eval", "--model", "oracle", "--store", str(store)])
    assert result.exit_code == 2 and "no store" in result.output
    (tmp_path / "train.jsonl").write_text("{\"messages\": []}\n")
    result = runner.invoke(app, ["eval", "--model", "oracle", "--train-data", str(tmp_path / "train.jsonl")])
    assert result.exit_code == 2 and "task_id" in result.output


@pytest.mark.slow
@pytest.mark.bwrap
@pytest.mark.anyio
async def test_eval_drives_a_served_model_end_to_end(host, store_path, tool_model_server):
    await synthesize(host, 3, seed=0)
    await collect(host, TeacherSettings(prompt_style="compact"))
    await host.close()
    host.store.close()
    model = f"openai:tool-model@{tool_model_server}"
    cmd = [sys.executable, "-m", "coworkenv", "eval", "--model", model, "--store", str(store_path), "-n", "3",
           "--trials", "2", "--style", "compact", "--temperature", "0", "--max-tokens", "96", "--max-steps", "3",
           "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["model"] == model and summary["overall"]["trials"] == 6 and summary["overall"]["tasks"] == 3
    assert 0.0 <= summary["overall"]["pass_rate"] <= 1.0
    assert set(summary["capabilities"]) == {"lookup", "single_write", "multi_step"}

    from coworkenv.store import Store

    store = Store(store_path)
    trials = store.query("select * from eval_trials where run_id = ?", (summary["run_id"],))
    assert len(trials) == 6
    for trial in trials:
        episode = store.get_episode(trial["episode_id"])
        assert episode["source"] == "eval" and episode["provider"] == model
        assert store.latest_verdict(trial["episode_id"])["score"] == trial["score"]
        replies = [m for m in store.messages(trial["episode_id"]) if m["role"] == "assistant"]
        assert replies and trial["steps"] == len(replies)
    # the model's own tool calls (greedy: the tools its training trajectories used) reached the MCP server
    calls = [c for t in trials for c in store.tool_calls(t["episode_id"]) if c["tool"] != "submit_answer"]
    assert calls
    assert json.loads((store_path.parent / "profile.json").read_text())["eval_run"] == summary["run_id"]
    store.close()

"""Evaluation: the pass@k / pass^k estimators, held-out task selection, stored runs, and trials that
infrastructure failures end (a real model server that answers ``/models`` but fails every chat)."""

from __future__ import annotations

import json
from collections import Counter
from math import isclose

import anyio
import pytest

from coworkenv.gate import GRADER_VERSION
from coworkenv.loop import (
    EvalError,
    EvalSettings,
    LocalEpisodes,
    TeacherSettings,
    Trial,
    collect,
    combination,
    pass_at_k,
    pass_hat_k,
    pending_tasks,
    run_eval,
    summarize,
    unseen_combinations,
)
from coworkenv.synth import Profile, generate_tasks, load_profile, synthesize
from coworkenv.trainer import sft_rows


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
    return Trial("run", task, "lookup", 1, "new_seeds", "lookup:x", 0, "ep", score, passed, "", steps)


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
    with pytest.raises(ValueError, match="prompt style|prompt_style"):
        EvalSettings(model="oracle", prompt_style="verbose")
    with pytest.raises(ValueError, match="unknown provider"):
        EvalSettings(model="gemini:pro")
    with pytest.raises(ValueError, match="retries"):
        EvalSettings(model="oracle", retries=-1)


@pytest.mark.bwrap
@pytest.mark.anyio
async def test_eval_runs_held_out_tasks_and_stores_graded_episodes(host, tmp_path):
    store = host.store
    await synthesize(host, 4, seed=0, capabilities=("lookup",))
    with anyio.fail_after(120):
        await collect(store, LocalEpisodes(host), TeacherSettings())
    train_tasks = {r["task_id"] for r in sft_rows(store)}
    assert len(train_tasks) == 4

    with pytest.raises(EvalError, match="reuses workspace seed"):
        await run_eval(host, EvalSettings(model="oracle", tasks=2, seed=0))

    settings = EvalSettings(model="oracle", tasks=4, seed=500, capabilities=("lookup", "single_write"),
                            trials=3, k=2, error_rate=0.5, prompt_style="compact")
    profile = tmp_path / "profile.json"
    with anyio.fail_after(300):
        result = await run_eval(host, settings, profile_path=profile)
    assert result.failures == {}

    # held-out tasks: new workspaces, stored as heldout, never collected or exported
    heldout = {r.id for r in store.tasks(status="heldout")}
    assert {t.task_id for t in result.trials} == heldout and len(heldout) == 4
    assert not heldout & train_tasks
    assert not heldout & {t.id for t, _ in pending_tasks(store)[0]}
    assert {t.split for t in result.trials if t.capability == "lookup"} == {"new_seeds"}
    assert {t.split for t in result.trials if t.capability == "single_write"} == {"unseen_combinations"}

    # every trial is a real eval episode, graded once when it ended; training exports do not see them
    assert len(result.trials) == 4 * 3
    for trial in result.trials:
        episode = store.episode(trial.episode_id)
        assert episode.source == "eval" and episode.provider == "oracle" and episode.status == "ended"
        assert store.tool_calls(trial.episode_id) and store.messages(trial.episode_id)
        verdict = store.verdict(trial.episode_id, GRADER_VERSION)
        assert verdict.score == trial.score and verdict.admitted == trial.passed
        assert store.verdict_count(trial.episode_id) == 1
    assert {r["episode_id"] for r in sft_rows(store)}.isdisjoint(t.episode_id for t in result.trials)
    passed = sum(t.passed for t in result.trials)
    assert 0 < passed < len(result.trials)  # the oracle errs in about half the episodes (seeded by trial)

    # the run, its trials and the profile are stored
    run = store.eval_run(result.run_id)
    assert run.status == "done" and run.summary == result.summary and run.profile_path == str(profile)
    rows = store.eval_trials(result.run_id)
    assert len(rows) == 12 and sum(r.passed for r in rows) == passed
    assert {r.episode_id for r in rows} == {t.episode_id for t in result.trials}
    overall = result.summary["overall"]
    assert overall["trials"] == 12 and isclose(overall["pass_rate"], round(passed / 12, 4))
    assert set(result.summary["capabilities"]) == {"lookup", "single_write"}
    assert result.summary["splits"]["new_seeds"]["tasks"] == 2
    assert isinstance(result.profile, Profile) and load_profile(profile) == result.profile
    written = json.loads(profile.read_text())
    assert written["eval_run"] == result.run_id and written["k"] == 2
    assert set(written["pass_rates"]) == {"lookup", "single_write"}
    assert sum(cell.trials for cell in result.profile.pass_rates["lookup"].values()) == 6  # by difficulty
    lookup = [t for t in result.trials if t.capability == "lookup"]
    assert isclose(result.profile.pass_rate("lookup"), sum(t.passed for t in lookup) / len(lookup), abs_tol=1e-4)

    # a second run reuses the calibrated held-out tasks
    with anyio.fail_after(300):
        again = await run_eval(host, settings.model_copy(update={"error_rate": 0.0, "trials": 1, "k": None}))
    assert {t.task_id for t in again.trials} == heldout and all(t.passed for t in again.trials)
    assert len(store.query("select id from eval_runs")) == 2


@pytest.mark.bwrap
@pytest.mark.anyio
async def test_trials_ended_by_infrastructure_failures_are_named_and_left_out(host, failing_model_server):
    store = host.store
    model = f"openai:m@{failing_model_server}"
    settings = EvalSettings(model=model, tasks=2, capabilities=("lookup",), trials=2, retries=1)
    with anyio.fail_after(120):
        result = await run_eval(host, settings)
    heldout = sorted(r.id for r in store.tasks(status="heldout"))
    assert len(heldout) == 2
    assert sorted(result.failures) == sorted(f"{t}#{n}" for t in heldout for n in range(2))
    assert all(why.startswith("model: ") and "the model did not answer" in why for why in result.failures.values())
    assert result.trials == [] and result.summary["overall"]["trials"] == 0  # left out of the figures

    run = store.eval_run(result.run_id)
    assert run.status == "failed" and store.eval_trials(result.run_id) == []
    episodes = store.episodes(source="eval")
    assert len(episodes) == 2 * 2 * (settings.retries + 1)  # every trial was played retries + 1 times
    for episode in episodes:
        assert (episode.status, episode.boundary, episode.provider) == ("failed", "model", model)
        verdict = store.verdict(episode.id, GRADER_VERSION)
        assert verdict.reason == "infrastructure_error" and not verdict.admitted
        assert store.verdict_count(episode.id) == 1


def test_a_model_server_that_does_not_serve_the_model_is_named(failing_model_server):
    from coworkenv.loop import check_model_server

    check_model_server(f"openai:m@{failing_model_server}")
    with pytest.raises(EvalError, match="does not serve 'other'"):
        check_model_server(f"openai:other@{failing_model_server}")


@pytest.mark.bwrap
@pytest.mark.anyio
async def test_held_out_tasks_come_from_the_apps_and_generator_asked_for(host):
    settings = EvalSettings(model="oracle", tasks=4, seed=700, capabilities=("lookup", "single_write"),
                            apps=("mail", "files"), generator="templates", trials=1)
    with anyio.fail_after(300):
        result = await run_eval(host, settings)
    assert result.failures == {} and len(result.trials) == 4 and all(t.passed for t in result.trials)
    heldout = host.store.tasks(status="heldout")
    assert len(heldout) == 4
    for row in heldout:
        workspace = host.store.workspace(row.spec.workspace_id)
        assert {a.name for a in workspace.apps} == {"mail", "files"}
        assert row.spec.shape and not row.spec.shape.startswith("compose")  # a hand-written template's


def test_unseen_combinations_keep_common_ones_of_trained_tools_out_of_training():
    _, tasks = generate_tasks(120, 3, ("lookup", "single_write", "multi_step"), apps=("mail", "calendar", "files"))
    combos: dict[str, Counter[str]] = {}
    for task in tasks:
        combos.setdefault(task.capability, Counter())[combination(task)] += 1
    unseen = unseen_combinations(tasks, 0.2)
    assert unseen == unseen_combinations(list(reversed(tasks)), 0.2)  # the choice follows the names, not the order
    assert unseen and unseen_combinations(tasks, 0.0) == []
    tools = lambda combo: set(combo.split(":", 1)[1].split("+"))
    trained = set().union(*(tools(c) for counts in combos.values() for c in counts if c not in unseen))
    for counts in combos.values():
        held = [c for c in counts if c in unseen]
        if len(counts) < 3:
            assert not held
            continue
        assert 1 <= len(held) <= max(1, int(0.2 * len(counts))) and len(counts) - len(held) >= 2
        for combo in held:  # common enough to give the split tasks, and made of tools trained on
            assert counts[combo] * 2 * len(counts) >= counts.total() and tools(combo) <= trained
    more = unseen_combinations(tasks, 0.6)
    assert len(more) > len(unseen)  # a larger share keeps more out
    with pytest.raises(ValueError, match="share of unseen combinations"):
        unseen_combinations(tasks, 1.0)

"""The capability profile steers where synthesis spends its task budget."""

import json

import pytest

from coworkenv.synth import Profile, ProfileError, allocate, capability_weights, generate_tasks, load_profile


def _profile(rates: dict[str, float]) -> Profile:
    return Profile.model_validate({"pass_rates": {
        c: {"1": {"pass_rate": r, "tasks": 4, "trials": 4}} for c, r in rates.items()}})


def test_weights_follow_what_the_model_still_fails():
    weights = capability_weights(_profile({"lookup": 1.0, "single_write": 0.0}),
                                 ("lookup", "single_write", "multi_step"))
    assert weights["single_write"] > weights["multi_step"] > weights["lookup"] > 0  # unmeasured: in between
    assert capability_weights(None, ("lookup", "single_write")) == {"lookup": 1.0, "single_write": 1.0}


def test_allocation_is_proportional_and_exact():
    assert allocate(10, {"a": 1.0, "b": 1.0}) == {"a": 5, "b": 5}
    counts = allocate(12, {"a": 0.1, "b": 1.1})
    assert sum(counts.values()) == 12 and counts["b"] >= 10
    assert allocate(0, {"a": 1.0}) == {"a": 0}


def test_generation_with_weights_is_deterministic_and_shifted():
    weights = capability_weights(_profile({"lookup": 1.0, "single_write": 0.0}), ("lookup", "single_write"))
    _, tasks = generate_tasks(12, seed=0, capabilities=("lookup", "single_write"), weights=weights)
    counts = {c: sum(t.capability == c for t in tasks) for c in ("lookup", "single_write")}
    assert counts["single_write"] > counts["lookup"] >= 1
    assert generate_tasks(12, 0, ("lookup", "single_write"), weights=weights)[1] == tasks


def test_a_bad_profile_is_named(tmp_path):
    with pytest.raises(ProfileError, match="no such profile"):
        load_profile(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ProfileError, match="bad.json: not a JSON profile"):
        load_profile(bad)
    bad.write_text(json.dumps({"pass_rates": {"lookup": {"1": {"pass_rate": 7}}}}))
    with pytest.raises(ProfileError, match="pass_rates.lookup.1.pass_rate"):
        load_profile(bad)


def test_within_a_capability_the_budget_goes_to_the_difficulties_it_fails_and_moves_up_once_mastered():
    from coworkenv.synth import difficulty_weights, generate

    profile = Profile.model_validate({"pass_rates": {
        "lookup": {"1": {"pass_rate": 1.0, "tasks": 4, "trials": 4}, "2": {"pass_rate": 0.0, "tasks": 4, "trials": 4}},
        "single_write": {"2": {"pass_rate": 0.9, "tasks": 4, "trials": 4}}}})
    weights = difficulty_weights(profile, ("lookup", "single_write", "multi_step"))
    assert weights["lookup"][2] > weights["lookup"][1] > 0  # a floor for what is mastered
    assert set(weights["single_write"]) == {2, 3}  # mastered: the next level up gets a share
    assert "multi_step" not in weights  # unmeasured: any difficulty
    made = generate(12, seed=0, capabilities=("lookup",), difficulty_weights=weights, generator="composed")
    levels = [t.difficulty for t in made.tasks]
    assert len(levels) == 12 and levels.count(2) > levels.count(1) >= 1


def test_near_duplicates_are_dropped_and_the_budget_is_still_met():
    from coworkenv.synth import generate, signature

    made = generate(40, seed=5, capabilities=("aggregation",), generator="composed")
    assert len(made.tasks) == 40
    assert len({signature(t) for t in made.tasks}) == 40
    assert made.duplicates > 0  # counts over a few collections repeat, and were drawn again

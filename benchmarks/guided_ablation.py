"""Profile-guided against uniform synthesis, at an equal task budget, from a student that learns.

    python benchmarks/guided_ablation.py --dir DIR [--seeds 0 1] [--round0 'DIR/seed{seed}']
        [--tasks 1000] [--steps 1200] [--lr 2e-3] [--eval-tasks 60] [--eval-seed 20000]
        [--capability lookup ... --capability safety]

For each seed:

- **Round 0** is a ``coworkenv demo --full`` directory (``--round0``, with ``{seed}`` in it; run here
  when it holds no trained model: ``demo --full --seed S`` on the capabilities, served in process).
  ``benchmarks/gate_ablation.py`` leaves one per seed (its gated arm), so the two experiments can
  share their first round. Round 0's evaluation profile (``eval/trained.local.profile.json``: pass
  rates per capability and difficulty on its held-out tasks, seed 10000) is what guides.
- **Round 1**, two arms of ``--tasks`` new tasks each (synthesis seed ``1000 + S``, workspaces no
  round used), each in its own store: ``coworkenv synth --profile`` (the budget goes where round 0
  is in its frontier band) against ``coworkenv synth`` (the capabilities take turns); each collected
  by the oracle teacher (``--error-rate``, repaired) and exported. Each arm's store is a copy of
  round 0's with its new tasks added (round 0's tasks are not collected again). Each arm trains ``--steps`` more
  steps from round 0's model on round 0's rows plus its own (so the arms differ only in how the
  new budget was spent), with round 0's settings but ``--lr``.
- **Evaluation**: round 0's model and both arms, by the same ``coworkenv eval`` command on the same
  held-out tasks (``--eval-seed``, not the profile's seed: the guide never saw them), greedy, one
  trial, in process, each on its own copy of the store it was trained from. Pass rate overall, on new seeds and
  per capability; each arm's allocation of its tasks.

Every stage is skipped when its output exists, so a run that stops goes on where it stopped. Prints
a Markdown table (each seed, and the mean), writes ``DIR/guided_ablation.json``, and records each
model's figures per seed in ``--results-store`` (experiment ``guided``), where ``coworkenv report``
draws them. The machine's
other load shares the wall times it reports.
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections import Counter
from pathlib import Path

from _arms import add_common, cell, evaluate, kept, record, rows, run, trained_settings

from coworkenv.store import Store

CAPABILITIES = ["lookup", "single_write", "multi_step", "multi_turn", "safety"]
PROFILE = Path("eval") / "trained.local.profile.json"
KEYS = ("pass_rate", "new_seeds", "capabilities")


def arm_data(arm_dir: Path, seed: int, round0: Path, options: argparse.Namespace) -> dict:
    """The arm's store (round 0's, copied) gets its new tasks, collected; its training file is round
    0's rows plus the new tasks' rows."""
    store = arm_dir / "coworkenv.db"
    arm_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(round0 / "coworkenv.db", store)  # a stage that stopped starts again from the copy
    opened = Store(store, create=False)
    try:
        before = {task.id for task in opened.tasks()}
    finally:
        opened.close()
    guide = ["--profile", str(round0 / PROFILE)] if arm_dir.name == "guided" else []
    capabilities = [a for c in options.capability for a in ("--capability", c)]
    synth, synth_s = run(["synth", "--store", str(store), "-n", str(options.tasks), "--seed", str(1000 + seed),
                          *capabilities, *guide])
    _, collect_s = run(["collect", "--store", str(store), "--error-rate", str(options.error_rate), "--seed", str(seed)])
    every = arm_dir / "sft.every.jsonl"
    run(["export", "sft", "--store", str(store), "--style", "minimal", "--out", str(every)])
    own = [row for row in rows(every) if row["task_id"] not in before]
    every.unlink()
    shutil.rmtree(every.with_name(f"{every.stem}.images"), ignore_errors=True)  # the images export writes beside it
    training = rows(round0 / "export" / "sft.minimal.jsonl") + own
    (arm_dir / "sft.jsonl").write_text("".join(json.dumps(row) + "\n" for row in training))
    return {"allocation": synth.get("allocation", {}), "admitted": synth.get("admitted"),
            "own_rows": Counter(row["capability"] for row in own), "rows": len(training),
            "seconds": round(synth_s + collect_s, 1)}


def one_seed(seed: int, options: argparse.Namespace) -> dict:
    seed_dir = options.dir / f"seed{seed}"
    round0 = Path(options.round0.format(seed=seed)) if options.round0 else seed_dir / "round0"
    capabilities = [a for c in options.capability for a in ("--capability", c)]
    if not (round0 / "train" / "sft" / "model" / "config.json").exists() or not (round0 / PROFILE).exists():
        run(["demo", "--full", "--dir", str(round0), "-n", str(options.round0_tasks), "--seed", str(seed),
             "--error-rate", str(options.error_rate), *capabilities, "--serve", "local"])
    config = trained_settings(round0)
    model0 = round0 / "train" / "sft" / "model"

    def evaluated(name: str, model: Path, data: Path, source: Path) -> dict:
        return evaluate(seed_dir / "eval" / f"{name}.db", source, model, data, options.capability, options.eval_seed,
                        options.eval_tasks)
    result: dict = {"seed": seed, "round0": str(round0), "arms": {}}
    result["round0_eval"] = kept(seed_dir / "round0.eval.json", lambda: evaluated(
        "round0", model0, round0 / "export" / "sft.minimal.jsonl", round0 / "coworkenv.db"))
    for arm in ("guided", "uniform"):
        arm_dir = seed_dir / arm
        data = kept(arm_dir / "data.json", lambda arm_dir=arm_dir: arm_data(arm_dir, seed, round0, options))

        def train(arm_dir: Path = arm_dir) -> dict:
            summary, seconds = run([
                "train", "sft", "--model", str(model0), "--data", str(arm_dir / "sft.jsonl"),
                "--out", str(arm_dir / "train"), "--store", str(arm_dir / "coworkenv.db"), "--steps", str(options.steps),
                "--batch-size", str(config["batch_size"]), "--lr", str(options.lr), "--seed", str(seed),
                "--pointer-loss", str(config.get("pointer_loss", 0.0)), "--bf16" if config.get("bf16") else "--fp32"])
            return {"final_loss": summary.get("final_loss"), "seconds": round(seconds, 1)}
        trained = kept(arm_dir / "train.json", train)
        scored = kept(arm_dir / "eval.json", lambda arm_dir=arm_dir: evaluated(
            arm_dir.name, arm_dir / "train" / "model", arm_dir / "sft.jsonl", arm_dir / "coworkenv.db"))
        result["arms"][arm] = {"data": data, "train": trained, "eval": scored}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common(parser, eval_seed=20000)
    parser.add_argument("--round0", help="round 0's demo --full folder, with {seed} (default DIR/seed{seed}/round0)")
    parser.add_argument("--round0-tasks", type=int, default=3000, help="demo --full's tasks where round 0 is run here")
    parser.add_argument("--tasks", type=int, default=1000, help="each arm's new tasks (the budget)")
    parser.add_argument("--steps", type=int, default=1200, help="each arm's SFT steps from round 0's model")
    parser.add_argument("--lr", type=float, default=2e-3, help="each arm's peak learning rate")
    options = parser.parse_args()
    options.capability = options.capability or CAPABILITIES
    options.dir.mkdir(parents=True, exist_ok=True)
    results = [one_seed(seed, options) for seed in options.seeds]
    (options.dir / "guided_ablation.json").write_text(json.dumps(results, indent=2))
    record(options.results_store or options.dir / "experiments.db", "guided",
           {(name, r["seed"]): r["round0_eval"] if name == "round0" else r["arms"][name]["eval"]
            for r in results for name in ("round0", "guided", "uniform")}, KEYS)
    measures = [("pass_rate", "pass rate"), ("new_seeds", "new seeds"), *((c, c) for c in options.capability)]
    print("| model | new tasks per capability | " + " | ".join(label for _, label in measures) + " |")
    print("| --- | --- |" + " --- |" * len(measures))
    for name in ("round0", "guided", "uniform"):
        evals = [r["round0_eval"] if name == "round0" else r["arms"][name]["eval"] for r in results]
        allocation = "—" if name == "round0" else "; ".join(
            ", ".join(f"{c} {n}" for c, n in sorted(r["arms"][name]["data"]["allocation"].items())) for r in results)
        cells = [cell([e["capabilities"].get(k) if k in options.capability else e[k] for e in evals]) for k, _ in measures]
        print(f"| {name} | {allocation} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

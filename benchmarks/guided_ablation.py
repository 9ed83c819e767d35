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
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from statistics import mean

from coworkenv.store import Store

CLI = [sys.executable, "-m", "coworkenv"]
CAPABILITIES = ["lookup", "single_write", "multi_step", "multi_turn", "safety"]
PROFILE = Path("eval") / "trained.local.profile.json"


def run(args: list[str]) -> tuple[dict, float]:
    """A coworkenv command with ``--json``: what it printed, and its wall time."""
    started = time.perf_counter()
    done = subprocess.run([*CLI, *args, "--json"], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"coworkenv {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout), time.perf_counter() - started


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _kept(record: Path, make) -> dict:
    """``make()``'s result, kept in ``record``; read back instead when ``record`` exists."""
    if record.exists():
        return json.loads(record.read_text())
    result = make()
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(result, indent=2))
    return result


def round0_settings(round0: Path) -> dict:
    """Round 0's training settings, as its store recorded them."""
    store = Store(round0 / "coworkenv.db", create=False)
    try:
        target = str(round0 / "train" / "sft" / "model")
        return next(r for r in reversed(store.training_runs("sft")) if r.output_dir == target and r.status == "done").config
    finally:
        store.close()


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
    own = [row for row in _rows(every) if row["task_id"] not in before]
    every.unlink()
    rows = _rows(round0 / "export" / "sft.minimal.jsonl") + own
    (arm_dir / "sft.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return {"allocation": synth.get("allocation", {}), "admitted": synth.get("admitted"),
            "own_rows": Counter(row["capability"] for row in own), "rows": len(rows),
            "seconds": round(synth_s + collect_s, 1)}


def evaluate(seed_dir: Path, name: str, model: Path, data: Path, source: Path, options: argparse.Namespace) -> dict:
    """``model`` on the held-out tasks, on a copy of ``source`` (a store that holds its training tasks)."""
    store = seed_dir / "eval" / f"{name}.db"
    if store.exists():  # an evaluation that stopped: start it again on a fresh copy
        store.unlink()
    store.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, store)
    capabilities = [a for c in options.capability for a in ("--capability", c)]
    report, seconds = run(["eval", "--model", f"hf:{model}", "--store", str(store), "--train-data", str(data),
                           "--seed", str(options.eval_seed), "--tasks", str(options.eval_tasks), *capabilities,
                           "--trials", "1", "--temperature", "0", "--style", "minimal", "--max-tokens", "256",
                           "--concurrency", "2"])
    opened = Store(store, create=False)
    try:
        trials = opened.eval_trials(report["run_id"])
    finally:
        opened.close()

    def rate(chosen: list) -> float | None:
        return round(mean(t.passed for t in chosen), 3) if chosen else None
    return {"model": str(model), "run_id": report["run_id"], "eval_seconds": round(seconds, 1),
            "pass_rate": rate(trials), "new_seeds": rate([t for t in trials if t.split == "new_seeds"]),
            "capabilities": {c: rate([t for t in trials if t.capability == c]) for c in options.capability}}


def one_seed(seed: int, options: argparse.Namespace) -> dict:
    seed_dir = options.dir / f"seed{seed}"
    round0 = Path(options.round0.format(seed=seed)) if options.round0 else seed_dir / "round0"
    capabilities = [a for c in options.capability for a in ("--capability", c)]
    if not (round0 / "train" / "sft" / "model" / "config.json").exists() or not (round0 / PROFILE).exists():
        run(["demo", "--full", "--dir", str(round0), "-n", str(options.round0_tasks), "--seed", str(seed),
             "--error-rate", str(options.error_rate), *capabilities, "--serve", "local"])
    config = round0_settings(round0)
    model0 = round0 / "train" / "sft" / "model"
    result: dict = {"seed": seed, "round0": str(round0), "arms": {}}
    result["round0_eval"] = _kept(seed_dir / "round0.eval.json", lambda: evaluate(
        seed_dir, "round0", model0, round0 / "export" / "sft.minimal.jsonl", round0 / "coworkenv.db", options))
    for arm in ("guided", "uniform"):
        arm_dir = seed_dir / arm
        data = _kept(arm_dir / "data.json", lambda arm_dir=arm_dir: arm_data(arm_dir, seed, round0, options))

        def train(arm_dir: Path = arm_dir) -> dict:
            summary, seconds = run([
                "train", "sft", "--model", str(model0), "--data", str(arm_dir / "sft.jsonl"),
                "--out", str(arm_dir / "train"), "--store", str(arm_dir / "coworkenv.db"), "--steps", str(options.steps),
                "--batch-size", str(config["batch_size"]), "--lr", str(options.lr), "--seed", str(seed),
                "--pointer-loss", str(config.get("pointer_loss", 0.0)), "--bf16" if config.get("bf16") else "--fp32"])
            return {"final_loss": summary.get("final_loss"), "seconds": round(seconds, 1)}
        trained = _kept(arm_dir / "train.json", train)
        evaluated = _kept(arm_dir / "eval.json", lambda arm_dir=arm_dir: evaluate(
            seed_dir, arm_dir.name, arm_dir / "train" / "model", arm_dir / "sft.jsonl", arm_dir / "coworkenv.db", options))
        result["arms"][arm] = {"data": data, "train": trained, "eval": evaluated}
    return result


def record(options: argparse.Namespace, results: list[dict]) -> None:
    store = Store(options.results_store)
    try:
        for result in results:
            evals = {"round0": result["round0_eval"], **{arm: a["eval"] for arm, a in result["arms"].items()}}
            for name, figures in evals.items():
                store.put_experiment_result("guided", name, result["seed"], {
                    k: figures[k] for k in ("pass_rate", "new_seeds", "capabilities")},
                    source=f"{figures['model']}, eval run {figures['run_id']}")
    finally:
        store.close()


def _cell(values: list[float | None]) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return "—"
    each = " / ".join("—" if v is None else f"{v:.2f}" for v in values)
    return f"{mean(known):.2f} ({each})" if len(values) > 1 else each


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--round0", help="round 0's demo --full folder, with {seed} (default DIR/seed{seed}/round0)")
    parser.add_argument("--round0-tasks", type=int, default=3000, help="demo --full's tasks where round 0 is run here")
    parser.add_argument("--tasks", type=int, default=1000, help="each arm's new tasks (the budget)")
    parser.add_argument("--steps", type=int, default=1200, help="each arm's SFT steps from round 0's model")
    parser.add_argument("--lr", type=float, default=2e-3, help="each arm's peak learning rate")
    parser.add_argument("--error-rate", type=float, default=0.3)
    parser.add_argument("--eval-tasks", type=int, default=60)
    parser.add_argument("--eval-seed", type=int, default=20000)
    parser.add_argument("--capability", action="append", default=None)
    parser.add_argument("--results-store", type=Path, help="the store the figures go to (default DIR/experiments.db)")
    options = parser.parse_args()
    options.capability = options.capability or CAPABILITIES
    options.dir.mkdir(parents=True, exist_ok=True)
    options.results_store = options.results_store or options.dir / "experiments.db"
    results = [one_seed(seed, options) for seed in options.seeds]
    (options.dir / "guided_ablation.json").write_text(json.dumps(results, indent=2))
    record(options, results)
    measures = [("pass_rate", "pass rate"), ("new_seeds", "new seeds"), *((c, c) for c in options.capability)]
    print("| model | new tasks per capability | " + " | ".join(label for _, label in measures) + " |")
    print("| --- | --- |" + " --- |" * len(measures))
    for name in ("round0", "guided", "uniform"):
        evals = [r["round0_eval"] if name == "round0" else r["arms"][name]["eval"] for r in results]
        allocation = "—" if name == "round0" else "; ".join(
            ", ".join(f"{c} {n}" for c, n in sorted(r["arms"][name]["data"]["allocation"].items())) for r in results)
        cells = [_cell([e["capabilities"].get(k) if k in options.capability else e[k] for e in evals])
                 for k, _ in measures]
        print(f"| {name} | {allocation} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

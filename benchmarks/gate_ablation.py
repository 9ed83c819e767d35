"""Does the gate matter? The same teacher episodes, trained on the gate's admitted ones only and on all.

    python benchmarks/gate_ablation.py --dir DIR [--seeds 0 1] [--tasks 3000] [--steps 2400]
        [--error-rate 0.3] [--eval-tasks 60] [--capability lookup ... --capability safety]

For each seed (of synthesis, the oracle's mistakes, the base and training), under ``DIR/seed<S>``:

1. ``coworkenv demo --full`` on the capabilities (by default ``demo --full``'s four and ``safety``),
   served in process: synthesis, the oracle teacher (``--error-rate`` of its first attempts carry a
   mistake: a skipped write, a vague answer, or on a ``safety`` task the forbidden call that tempts
   it; each is rejected by the gate and repaired), the gate, the export, the circuit base, and SFT
   on the admitted rows: the **gated** arm.
2. ``coworkenv export sft --ungated``: every graded teacher episode of the same tasks (the rejected
   first attempts beside their repairs), kept to the tasks of the gated arm's rows; then ``coworkenv
   train sft`` from the same base with the gated run's settings (steps, learning rate, pointer loss,
   bf16, seed): the **ungated** arm.
3. Both arms evaluated by the same ``coworkenv eval`` command on the same held-out tasks (``--eval-seed``,
   ``--eval-tasks`` over the capabilities, greedy, one trial, in process), each on its own copy of
   the store: pass rate overall, on new seeds and per capability, and on the ``safety`` tasks the
   mean safety component and the trials with a forbidden call, read from the gate's verdicts.

Every stage is skipped when its output exists, so a run that stops goes on where it stopped; every
command is the CLI a user runs. Prints a Markdown table (each seed, and the mean), writes
``DIR/gate_ablation.json``, and records each arm's figures per seed in ``--results-store`` (experiment
``gate``), where ``coworkenv report`` draws them. The machine's other load shares the wall times it reports.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from statistics import mean

from coworkenv.gate import GRADER_VERSION
from coworkenv.store import Store

CLI = [sys.executable, "-m", "coworkenv"]
CAPABILITIES = ["lookup", "single_write", "multi_step", "multi_turn", "safety"]


def run(args: list[str]) -> tuple[dict, float]:
    """A coworkenv command with ``--json``: what it printed, and its wall time."""
    started = time.perf_counter()
    done = subprocess.run([*CLI, *args, "--json"], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"coworkenv {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout), time.perf_counter() - started


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _timed(record: Path, make) -> dict:
    """``make()``'s result, kept in ``record``; read back instead when ``record`` exists."""
    if record.exists():
        return json.loads(record.read_text())
    result = make()
    record.write_text(json.dumps(result, indent=2))
    return result


def ungated_rows(seed_dir: Path) -> Path:
    """Every graded teacher episode's row, of the tasks the gated arm trained on."""
    out = seed_dir / "export" / "sft.ungated.jsonl"
    if out.exists():
        return out
    gated = {row["task_id"] for row in _rows(seed_dir / "export" / "sft.minimal.jsonl")}
    every = seed_dir / "export" / "sft.ungated.all.jsonl"
    run(["export", "sft", "--store", str(seed_dir / "coworkenv.db"), "--style", "minimal", "--ungated",
         "--out", str(every)])
    kept = [row for row in _rows(every) if row["task_id"] in gated]
    partial = out.with_name(out.name + ".partial")
    partial.write_text("".join(json.dumps(row) + "\n" for row in kept))
    partial.replace(out)
    every.unlink()
    return out


def gated_settings(seed_dir: Path) -> dict:
    """The gated arm's training settings, as the store recorded them."""
    store = Store(seed_dir / "coworkenv.db", create=False)
    try:
        target = str(seed_dir / "train" / "sft" / "model")
        run_row = next(r for r in reversed(store.training_runs("sft")) if r.output_dir == target and r.status == "done")
        return run_row.config
    finally:
        store.close()


def evaluate(seed_dir: Path, arm: str, model: Path, data: Path, options: argparse.Namespace) -> dict:
    store = seed_dir / "eval" / f"{arm}.db"
    if store.exists():  # an evaluation that stopped: start it again on a fresh copy
        store.unlink()
    store.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(seed_dir / "coworkenv.db", store)
    capabilities = [a for c in options.capability for a in ("--capability", c)]
    report, seconds = run(["eval", "--model", f"hf:{model}", "--store", str(store), "--train-data", str(data),
                           "--seed", str(options.eval_seed), "--tasks", str(options.eval_tasks), *capabilities,
                           "--trials", "1", "--temperature", "0", "--style", "minimal", "--max-tokens", "256",
                           "--concurrency", "2"])
    opened = Store(store, create=False)
    try:
        trials = opened.eval_trials(report["run_id"])
        verdicts = opened.verdicts([t.episode_id for t in trials], GRADER_VERSION)
        safety = [t for t in trials if t.capability == "safety"]
        grades = [verdicts[t.episode_id] for t in safety if t.episode_id in verdicts]
    finally:
        opened.close()

    def rate(chosen: list) -> float | None:
        return round(mean(t.passed for t in chosen), 3) if chosen else None
    return {
        "model": str(model), "rows": len(_rows(data)), "run_id": report["run_id"], "eval_seconds": round(seconds, 1),
        "pass_rate": rate(trials), "new_seeds": rate([t for t in trials if t.split == "new_seeds"]),
        "capabilities": {c: rate([t for t in trials if t.capability == c]) for c in options.capability},
        "safety_mean": round(mean(v.safety for v in grades), 3) if grades else None,
        "forbidden_calls": sum(v.reason == "forbidden_call" for v in grades),
        "safety_trials": len(safety),
    }


def one_seed(seed: int, options: argparse.Namespace) -> dict:
    seed_dir = options.dir / f"seed{seed}"
    capabilities = [a for c in options.capability for a in ("--capability", c)]
    demo = _timed(options.dir / f"seed{seed}.demo.json", lambda: dict(zip(("summary", "seconds"), run(
        ["demo", "--full", "--dir", str(seed_dir), "-n", str(options.tasks), "--seed", str(seed),
         "--error-rate", str(options.error_rate), *capabilities, "--steps", str(options.steps),
         "--serve", "local"]), strict=True)))
    data = ungated_rows(seed_dir)
    config = gated_settings(seed_dir)
    ungated_model = seed_dir / "train" / "ungated" / "model"

    def train() -> dict:
        summary, seconds = run([
            "train", "sft", "--model", config["model"], "--data", str(data), "--out", str(ungated_model.parent),
            "--store", str(seed_dir / "coworkenv.db"), "--steps", str(config["max_steps"]),
            "--batch-size", str(config["batch_size"]), "--lr", str(config["learning_rate"]), "--seed",
            str(config["seed"]), "--pointer-loss", str(config.get("pointer_loss", 0.0)),
            "--bf16" if config.get("bf16") else "--fp32", "--loss-on", "assistant" if config["assistant_only_loss"] else "all"])
        return {"summary": summary, "seconds": seconds}
    trained = _timed(options.dir / f"seed{seed}.ungated.json", train)
    arms = {}
    for arm, model, rows in (("gated", seed_dir / "train" / "sft" / "model", seed_dir / "export" / "sft.minimal.jsonl"),
                             ("ungated", ungated_model, data)):
        arms[arm] = _timed(options.dir / f"seed{seed}.eval.{arm}.json",
                           lambda arm=arm, model=model, rows=rows: evaluate(seed_dir, arm, model, rows, options))
    return {"seed": seed, "demo_seconds": round(demo["seconds"], 1), "ungated_train_seconds": round(trained["seconds"], 1),
            "arms": arms}


def record(options: argparse.Namespace, results: list[dict]) -> None:
    store = Store(options.results_store)
    try:
        for result in results:
            for arm, figures in result["arms"].items():
                store.put_experiment_result("gate", arm, result["seed"], {
                    k: figures[k] for k in ("pass_rate", "new_seeds", "capabilities", "safety_mean", "forbidden_calls",
                                            "rows")}, source=f"{figures['model']}, eval run {figures['run_id']}")
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
    parser.add_argument("--tasks", type=int, default=3000)
    parser.add_argument("--steps", type=int, default=2400)
    parser.add_argument("--error-rate", type=float, default=0.3)
    parser.add_argument("--eval-tasks", type=int, default=60)
    parser.add_argument("--eval-seed", type=int, default=10000)
    parser.add_argument("--capability", action="append", default=None)
    parser.add_argument("--results-store", type=Path, help="the store the figures go to (default DIR/experiments.db)")
    options = parser.parse_args()
    options.capability = options.capability or CAPABILITIES
    options.dir.mkdir(parents=True, exist_ok=True)
    options.results_store = options.results_store or options.dir / "experiments.db"
    results = [one_seed(seed, options) for seed in options.seeds]
    (options.dir / "gate_ablation.json").write_text(json.dumps(results, indent=2))
    record(options, results)
    measures = [("rows", "training rows"), ("pass_rate", "pass rate"), ("new_seeds", "new seeds"),
                *((c, c) for c in options.capability), ("safety_mean", "safety on safety tasks"),
                ("forbidden_calls", "forbidden calls")]
    print("| arm | " + " | ".join(label for _, label in measures) + " |")
    print("| --- |" + " --- |" * len(measures))
    for arm in ("gated", "ungated"):
        cells = []
        for key, _ in measures:
            values = [r["arms"][arm]["capabilities"].get(key) if key in options.capability else r["arms"][arm][key]
                      for r in results]
            cells.append(" / ".join(str(v) for v in values) if key in ("rows", "forbidden_calls") else _cell(values))
        print(f"| {arm} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

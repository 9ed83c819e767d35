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
   mean safety component and the trials with a forbidden call, and those trials on every task (other
   capabilities' tasks forbid tools too), read from the gate's verdicts.

Every stage is skipped when its output exists, so a run that stops goes on where it stopped; every
command is the CLI a user runs. Prints a Markdown table (each seed, and the mean), writes
``DIR/gate_ablation.json``, and records each arm's figures per seed in ``--results-store`` (experiment
``gate``), where ``coworkenv report`` draws them. The machine's other load shares the wall times it reports.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from _arms import add_common, cell, evaluate, kept, record, rows, run, trained_settings

CAPABILITIES = ["lookup", "single_write", "multi_step", "multi_turn", "safety"]
KEYS = ("pass_rate", "new_seeds", "capabilities", "safety_mean", "forbidden_calls", "forbidden_calls_all", "rows")


def ungated_rows(seed_dir: Path) -> Path:
    """Every graded teacher episode's row, of the tasks the gated arm trained on."""
    out = seed_dir / "export" / "sft.ungated.jsonl"
    if out.exists():
        return out
    gated = {row["task_id"] for row in rows(seed_dir / "export" / "sft.minimal.jsonl")}
    every = seed_dir / "export" / "sft.ungated.all.jsonl"
    run(["export", "sft", "--store", str(seed_dir / "coworkenv.db"), "--style", "minimal", "--ungated",
         "--out", str(every)])
    partial = out.with_name(out.name + ".partial")
    partial.write_text("".join(json.dumps(row) + "\n" for row in rows(every) if row["task_id"] in gated))
    partial.replace(out)
    every.unlink()
    shutil.rmtree(every.with_name(f"{every.stem}.images"), ignore_errors=True)  # the images export writes beside it
    return out


def one_seed(seed: int, options: argparse.Namespace) -> dict:
    seed_dir = options.dir / f"seed{seed}"
    capabilities = [a for c in options.capability for a in ("--capability", c)]
    demo = kept(options.dir / f"seed{seed}.demo.json", lambda: dict(zip(("summary", "seconds"), run(
        ["demo", "--full", "--dir", str(seed_dir), "-n", str(options.tasks), "--seed", str(seed),
         "--error-rate", str(options.error_rate), *capabilities, "--steps", str(options.steps),
         "--serve", "local"]), strict=True)))
    data = ungated_rows(seed_dir)
    config = trained_settings(seed_dir)
    ungated_model = seed_dir / "train" / "ungated" / "model"

    def train() -> dict:
        summary, seconds = run([
            "train", "sft", "--model", config["model"], "--data", str(data), "--out", str(ungated_model.parent),
            "--store", str(seed_dir / "coworkenv.db"), "--steps", str(config["max_steps"]),
            "--batch-size", str(config["batch_size"]), "--lr", str(config["learning_rate"]), "--seed",
            str(config["seed"]), "--pointer-loss", str(config.get("pointer_loss", 0.0)),
            "--bf16" if config.get("bf16") else "--fp32", "--loss-on", "assistant" if config["assistant_only_loss"] else "all"])
        return {"summary": summary, "seconds": seconds}
    trained = kept(options.dir / f"seed{seed}.ungated.json", train)
    arms = {}
    for arm, model, data_of in (("gated", seed_dir / "train" / "sft" / "model", seed_dir / "export" / "sft.minimal.jsonl"),
                                ("ungated", ungated_model, data)):
        arms[arm] = kept(options.dir / f"seed{seed}.eval.{arm}.json", lambda arm=arm, model=model, data_of=data_of: evaluate(
            seed_dir / "eval" / f"{arm}.db", seed_dir / "coworkenv.db", model, data_of, options.capability,
            options.eval_seed, options.eval_tasks))
    return {"seed": seed, "demo_seconds": round(demo["seconds"], 1), "ungated_train_seconds": round(trained["seconds"], 1),
            "arms": arms}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common(parser, eval_seed=10000)
    parser.add_argument("--tasks", type=int, default=3000)
    parser.add_argument("--steps", type=int, default=2400)
    options = parser.parse_args()
    options.capability = options.capability or CAPABILITIES
    options.dir.mkdir(parents=True, exist_ok=True)
    results = [one_seed(seed, options) for seed in options.seeds]
    (options.dir / "gate_ablation.json").write_text(json.dumps(results, indent=2))
    record(options.results_store or options.dir / "experiments.db", "gate",
           {(arm, r["seed"]): figures for r in results for arm, figures in r["arms"].items()}, KEYS)
    measures = [("rows", "training rows"), ("pass_rate", "pass rate"), ("new_seeds", "new seeds"),
                *((c, c) for c in options.capability), ("safety_mean", "safety on safety tasks"),
                ("forbidden_calls", "forbidden calls on safety tasks"), ("forbidden_calls_all", "on all tasks")]
    print("| arm | " + " | ".join(label for _, label in measures) + " |")
    print("| --- |" + " --- |" * len(measures))
    for arm in ("gated", "ungated"):
        cells = []
        for key, _ in measures:
            values = [r["arms"][arm]["capabilities"].get(key) if key in options.capability else r["arms"][arm][key]
                      for r in results]
            counts = key in ("rows", "forbidden_calls", "forbidden_calls_all")
            cells.append(" / ".join(str(v) for v in values) if counts else cell(values))
        print(f"| {arm} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

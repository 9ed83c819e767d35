"""Continued SFT, GRPO and GDPO from the SFT checkpoint of ``demo --full``, at equal extra wall time.

    python benchmarks/rl_compare.py --dir DIR [--minutes 8] [--tasks 300] [--sft-steps 600]
        [--eval-tasks 24] [--capability lookup --capability safety ...] [--trials 3]

1. ``coworkenv demo --full --dir DIR`` with the given tasks, SFT steps, held-out tasks and
   capabilities (skipped when DIR already holds its trained model): the starting checkpoint
   ``DIR/train/sft/model``, its SFT rows ``DIR/export/sft.minimal.jsonl`` and the store of its
   admitted tasks.
2. Three arms from that checkpoint, each given ``--minutes`` of training wall time (``--max-minutes``,
   so each ends at the first step past it), each on its own copy of the store:
   - ``sft``: ``coworkenv train sft`` on the same rows (``--sft-lr``);
   - ``grpo`` and ``gdpo``: ``coworkenv train grpo|gdpo`` on live episodes of the admitted tasks
     (``--rl-lr``, ``--num-generations``, ``--batch-size``, temperature 1.0).
3. The starting checkpoint and each arm evaluated with ``coworkenv eval`` on the same held-out tasks
   (``--eval-seed``, ``--eval-tasks``, the capabilities), ``--trials`` sampled trials (temperature
   0.7), in process (``hf:PATH``), each on a fresh copy of the store: pass rate (per trial),
   pass@k and pass^k, and the mean safety component on the tasks that tempt a forbidden action
   (capability ``safety``), read from the gate's verdicts.

Prints one JSON document and writes it to ``DIR/rl_compare.json``; records each model's figures in
``--results-store`` (experiment ``rl``, seed ``--seed``; default ``DIR/experiments.db``), where
``coworkenv report`` draws them. ``DIR`` may be a ``demo --full`` folder another benchmark left (the
gate ablation's, per seed). Every command is the CLI a user runs; the machine's other load shares
the wall time, so run it alone.
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


def run(args: list[str]) -> dict:
    started = time.perf_counter()
    print("$ coworkenv " + " ".join(args), file=sys.stderr, flush=True)
    done = subprocess.run([*CLI, *args, "--json"], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"coworkenv {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout)
    result["_wall_s"] = round(time.perf_counter() - started, 1)
    return result


def store_copy(source: Path, target: Path) -> Path:
    target.mkdir(parents=True, exist_ok=True)
    path = target / "coworkenv.db"
    if not path.exists():
        shutil.copy(source, path)
    return path


def _eval_ids(store_path: Path) -> set[str]:
    store = Store(store_path, create=False)
    try:
        return {e.id for e in store.episodes(source="eval")}
    finally:
        store.close()


def evaluate(name: str, model: Path, store_path: Path, options: argparse.Namespace) -> dict:
    capabilities = [a for c in options.capability for a in ("--capability", c)]
    before = _eval_ids(store_path)  # the demo's own evaluations are in the store too
    report = run(["eval", "--model", f"hf:{model}", "--store", str(store_path), "-n", str(options.eval_tasks),
                  "--seed", str(options.eval_seed), *capabilities, "--trials", str(options.trials),
                  "--temperature", "0.7", "--style", "minimal", "--max-steps", str(options.episode_steps)])
    store = Store(store_path, create=False)
    try:
        episodes = [e for e in store.episodes(source="eval") if e.id not in before]
        verdicts = store.verdicts([e.id for e in episodes], GRADER_VERSION)
        by_capability: dict[str, list] = {}
        for episode in episodes:
            verdict = verdicts.get(episode.id)
            if verdict is not None:
                capability = store.task_spec(episode.task_id).capability
                by_capability.setdefault(capability, []).append(verdict)
    finally:
        store.close()
    every = [v for vs in by_capability.values() for v in vs]
    summary = {
        "model": str(model), "episodes": len(every),
        "pass_rate": round(mean(v.score >= 0.75 for v in every), 3) if every else None,
        "mean_score": round(mean(v.score for v in every), 3) if every else None,
        "per_capability": {
            c: {"episodes": len(vs), "pass_rate": round(mean(v.score >= 0.75 for v in vs), 3),
                "completion": round(mean(v.completion for v in vs), 3), "safety": round(mean(v.safety for v in vs), 3)}
            for c, vs in sorted(by_capability.items())},
        "report": {k: report.get(k) for k in ("k", "overall", "capabilities")},
        "wall_s": report["_wall_s"],
    }
    safety = by_capability.get("safety", [])
    summary["safety_on_tempting_tasks"] = round(mean(v.safety for v in safety), 3) if safety else None
    print(f"{name}: {json.dumps({k: summary[k] for k in ('pass_rate', 'mean_score', 'safety_on_tempting_tasks')})}",
          file=sys.stderr, flush=True)
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--sft-steps", type=int, default=600)
    parser.add_argument("--eval-tasks", type=int, default=24)
    parser.add_argument("--eval-seed", type=int, default=10000)
    parser.add_argument("--capability", action="append", default=None)
    parser.add_argument("--minutes", type=float, default=8.0, help="extra training wall time of each arm")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--sft-lr", type=float, default=1e-3)
    parser.add_argument("--rl-lr", type=float, default=1e-4)
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--episode-steps", type=int, default=6, help="policy turns per episode (RL and eval)")
    parser.add_argument("--arms", default="sft,grpo,gdpo")
    parser.add_argument("--seed", type=int, default=0, help="demo --full's seed (where it runs here); the results' seed")
    parser.add_argument("--results-store", type=Path, help="the store the figures go to (default DIR/experiments.db)")
    options = parser.parse_args()
    options.capability = options.capability or ["lookup", "single_write", "safety"]
    directory: Path = options.dir
    capabilities = [a for c in options.capability for a in ("--capability", c)]
    result: dict = {"settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(options).items()}}

    start = directory / "train" / "sft" / "model"
    if not (start / "config.json").exists():
        result["demo"] = run(["demo", "--full", "--dir", str(directory), "--seed", str(options.seed), "-n",
                              str(options.tasks), "--steps",
                              str(options.sft_steps), "--eval-tasks", str(options.eval_tasks), *capabilities])
    store = directory / "coworkenv.db"
    data = directory / "export" / "sft.minimal.jsonl"
    minutes = str(options.minutes)
    arms: dict[str, dict] = {}
    for arm in options.arms.split(","):
        arm_dir = directory / "compare" / arm
        arm_store = store_copy(store, arm_dir)
        out = arm_dir / "run"
        if arm == "sft":
            trained = run(["train", "sft", "--model", str(start), "--data", str(data), "--out", str(out), "--store",
                           str(arm_store), "--steps", "100000", "--max-minutes", minutes, "--lr", str(options.sft_lr),
                           "--save-steps", "100000", "--no-resume"])
        else:
            trained = run(["train", arm, "--model", str(start), "--store", str(arm_store), "--out", str(out),
                           "--steps", "100000", "--max-minutes", minutes, "--lr", str(options.rl_lr),
                           "--num-generations", str(options.num_generations), "--batch-size",
                           str(options.batch_size), "--style", "minimal", "--max-steps-per-episode",
                           str(options.episode_steps), "--temperature", "1.0", "--save-steps", "100000",
                           "--no-resume"])
        keep = ("steps", "seconds", "first_loss", "final_loss", "stopped_by_time_limit", "episodes", "episodes_per_s",
                "time_split", "final_rewards", "rows")
        arms[arm] = {"training": {k: trained[k] for k in keep if k in trained}, "model": str(out / "model")}
        if "reward_curves" in trained:
            arms[arm]["training"]["reward_curve"] = [
                {k: p.get(k) for k in ("step", "reward", "rewards/completion/mean", "rewards/safety/mean",
                                       "rewards/robustness/mean")} for p in trained["reward_curves"]]
    result["arms"] = arms
    evaluations = {"start": evaluate("start", start, store_copy(store, directory / "compare" / "eval-start"), options)}
    for arm, info in arms.items():
        evaluations[arm] = evaluate(arm, Path(info["model"]),
                                    store_copy(store, directory / "compare" / f"eval-{arm}"), options)
    result["eval"] = evaluations
    (directory / "rl_compare.json").write_text(json.dumps(result, indent=2))
    kept = Store(options.results_store or directory / "experiments.db")
    try:
        for name, figures in evaluations.items():
            kept.put_experiment_result("rl", name, options.seed, {
                "pass_rate": figures["pass_rate"], "mean_score": figures["mean_score"],
                "capabilities": {c: v["pass_rate"] for c, v in figures["per_capability"].items()},
                "safety_on_tempting_tasks": figures["safety_on_tempting_tasks"]}, source=figures["model"])
    finally:
        kept.close()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

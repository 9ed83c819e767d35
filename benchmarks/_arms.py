"""What the experiment benchmarks share (gate_ablation.py, guided_ablation.py; multi_turn.py its cell): running a coworkenv
command, keeping a stage's result so that a run that stops goes on where it stopped, evaluating an
arm's model on the held-out tasks, and writing a cell of figures over seeds."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from statistics import mean

from coworkenv.gate import GRADER_VERSION
from coworkenv.store import Store

CLI = [sys.executable, "-m", "coworkenv"]


def add_common(parser: argparse.ArgumentParser, eval_seed: int) -> None:
    """The options every experiment takes: where, which seeds, the teacher's mistakes, the held-out
    tasks and capabilities, and the store the figures go to."""
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--error-rate", type=float, default=0.3)
    parser.add_argument("--eval-tasks", type=int, default=60)
    parser.add_argument("--eval-seed", type=int, default=eval_seed)
    parser.add_argument("--capability", action="append", default=None)
    parser.add_argument("--results-store", type=Path, help="the store the figures go to (default DIR/experiments.db)")


def add_trained_model(parser: argparse.ArgumentParser) -> None:
    """The options of a benchmark that evaluates one trained model in arms: the model, a store holding
    its training rows' tasks, those rows, and where the arms go."""
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--store", type=Path, required=True, help="a store holding the training rows' tasks")
    parser.add_argument("--data", type=Path, required=True, help="the model's training rows (the split of each task)")
    parser.add_argument("--dir", type=Path, required=True)


def trained_settings(demo: Path) -> dict:
    """The settings a ``demo --full`` folder's SFT run was trained with, as its store recorded them."""
    store = Store(demo / "coworkenv.db", create=False)
    try:
        target = str(demo / "train" / "sft" / "model")
        return next(r for r in reversed(store.training_runs("sft")) if r.output_dir == target and r.status == "done").config
    finally:
        store.close()


def run(args: list[str]) -> tuple[dict, float]:
    """A coworkenv command with ``--json``: what it printed, and its wall time."""
    started = time.perf_counter()
    done = subprocess.run([*CLI, *args, "--json"], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"coworkenv {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout), time.perf_counter() - started


def rows(path: Path) -> list[dict]:
    """The rows of a JSON lines file."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def kept(record: Path, make: Callable[[], dict]) -> dict:
    """``make()``'s result, kept in ``record``; read back instead when ``record`` exists."""
    if record.exists():
        return json.loads(record.read_text())
    result = make()
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(result, indent=2))
    return result


def evaluate(store: Path, source: Path, model: Path, data: Path, capabilities: list[str], seed: int,
             tasks: int, extra: tuple[str, ...] = (), provider: str | None = None) -> dict:
    """``model`` (in process) on ``tasks`` held-out tasks of ``seed``, greedy, one trial, on ``store``
    made afresh as a copy of ``source`` (a store that holds the tasks of ``data``, its training rows):
    pass rate overall, on new seeds and per capability; on ``safety`` tasks the mean safety component
    and the trials rejected for a forbidden call, from the gate's verdicts; and those trials on every
    task (tasks of other capabilities forbid tools too: a multi-turn task that must not delete a contact).
    ``extra``: more ``coworkenv eval`` flags; ``provider``: play the model as this spec (a served copy,
    ``openai:NAME@URL``) instead of ``hf:MODEL``."""
    store.unlink(missing_ok=True)  # an evaluation that stopped starts again on a fresh copy
    store.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, store)
    chosen = [a for c in capabilities for a in ("--capability", c)]
    report, seconds = run(["eval", "--model", provider or f"hf:{model}", "--store", str(store), "--train-data", str(data),
                           "--seed", str(seed), "--tasks", str(tasks), *chosen, "--trials", "1", "--temperature", "0",
                           "--style", "minimal", "--max-tokens", "256", "--concurrency", "2", *extra])
    opened = Store(store, create=False)
    try:
        trials = opened.eval_trials(report["run_id"])
        verdicts = opened.verdicts([t.episode_id for t in trials], GRADER_VERSION)
    finally:
        opened.close()
    safety = [verdicts[t.episode_id] for t in trials if t.capability == "safety" and t.episode_id in verdicts]

    def rate(of: list) -> float | None:
        return round(mean(t.passed for t in of), 3) if of else None
    return {
        "model": str(model), "rows": len(rows(data)), "run_id": report["run_id"], "eval_seconds": round(seconds, 1),
        "pass_rate": rate(trials), "new_seeds": rate([t for t in trials if t.split == "new_seeds"]),
        "capabilities": {c: rate([t for t in trials if t.capability == c]) for c in capabilities},
        "safety_mean": round(mean(v.safety for v in safety), 3) if safety else None,
        "forbidden_calls": sum(v.reason == "forbidden_call" for v in safety),
        "forbidden_calls_all": sum(v.reason == "forbidden_call" for v in verdicts.values()),
    }


def record(path: Path, experiment: str, figures: dict[tuple[str, int], dict], keys: tuple[str, ...]) -> None:
    """Record each (arm, seed)'s ``keys`` of its figures in the store at ``path`` (the report draws them)."""
    store = Store(path)
    try:
        for (arm, seed), measured in figures.items():
            store.put_experiment_result(experiment, arm, seed, {k: measured[k] for k in keys},
                                        source=f"{measured['model']}, eval run {measured['run_id']}")
    finally:
        store.close()


def cell(values: list[float | None]) -> str:
    """The mean over seeds, then each seed's figure."""
    known = [v for v in values if v is not None]
    if not known:
        return "—"
    each = " / ".join("—" if v is None else f"{v:.2f}" for v in values)
    return f"{mean(known):.2f} ({each})" if len(values) > 1 else each

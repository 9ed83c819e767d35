"""Multi-turn: the base against the trained model, with the scripted user and a model-backed one.

    python benchmarks/multi_turn.py --base MODEL --trained MODEL --train-data ROWS --dir DIR
        [--store STORE] [--tasks 48] [--seeds 10000 20000] [--user-model PROVIDER ...]

For each eval seed, each model (``--base``, ``--trained``: model folders, played in process as
``hf:PATH``) and each user (the scripted one, then each ``--user-model``; by default the trained
model itself, ``hf:TRAINED``), one ``coworkenv eval`` on ``--tasks`` held-out ``multi_turn`` tasks
(greedy, one trial, the minimal view), all into one store, ``DIR/multi_turn.db`` (a copy of
``--store`` when given, so that the held-out tasks are new to the training store's workspaces;
``--train-data`` splits them into new seeds and unseen combinations). Then, per run, read back from
that store (``coworkenv.gate.conversation_figures``, the gate's rule): the pass rate, the share of
episodes that asked their user anything, the share of the users' facts and confirmations some
message was about (the right questions), and the share of the messages that were redundant.

Prints a table (mean over the seeds, and each seed's figure), writes ``DIR/multi_turn.json``, and
records each model and user's figures per seed in ``--results-store`` (experiment ``multi_turn``;
by default ``DIR/multi_turn.db``, whose report also shows each evaluation's conversations):
``coworkenv report`` draws them. Each eval is the CLI a user
runs; the machine's other load shares the wall time.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from _arms import cell

from coworkenv.gate import conversation_figures
from coworkenv.store import Store

CLI = [sys.executable, "-m", "coworkenv"]
MEASURES = ("pass_rate", "asking_rate", "right_rate", "redundant_rate")


def evaluate(store: Path, model: str, user: str, seed: int, args: argparse.Namespace) -> tuple[str, float]:
    command = [*CLI, "eval", "--model", model, "--store", str(store), "--train-data", str(args.train_data),
               "--seed", str(seed), "--tasks", str(args.tasks), "--capability", "multi_turn", "--trials", "1",
               "--temperature", "0", "--style", args.style, "--max-tokens", str(args.max_tokens),
               "--concurrency", str(args.concurrency), "--json"]
    if user:
        command += ["--user-model", user]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)["run_id"], time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, required=True, help="the untrained model folder")
    parser.add_argument("--trained", type=Path, required=True, help="the trained model folder")
    parser.add_argument("--train-data", type=Path, required=True, help="the trained model's SFT rows")
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--store", type=Path, help="the training store, copied (held-out workspaces stay new)")
    parser.add_argument("--tasks", type=int, default=48)
    parser.add_argument("--seeds", type=int, nargs="+", default=[10000, 20000])
    parser.add_argument("--user-model", action="append", default=None,
                        help="a model-backed user (a provider spec); repeat for several; default hf:TRAINED")
    parser.add_argument("--style", default="minimal")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--results-store", type=Path, help="the store the figures go to (default DIR/multi_turn.db)")
    args = parser.parse_args()
    for folder in (args.base, args.trained):
        if not (folder / "config.json").is_file():
            sys.exit(f"{folder} is not a model folder (no config.json)")
    if not args.train_data.is_file():
        sys.exit(f"--train-data {args.train_data}: no such file")
    args.dir.mkdir(parents=True, exist_ok=True)
    store = args.dir / "multi_turn.db"
    if store.exists():
        sys.exit(f"{store} exists already: give a new --dir")
    if args.store is not None:
        shutil.copy(args.store, store)
    users = ["", *(args.user_model or [f"hf:{args.trained.resolve()}"])]
    models = {"base": f"hf:{args.base.resolve()}", "trained": f"hf:{args.trained.resolve()}"}

    runs: dict[tuple[str, str], list[tuple[int, str, float]]] = {}
    for seed in args.seeds:
        for name, model in models.items():
            for user in users:
                run_id, seconds = evaluate(store, model, user, seed, args)
                runs.setdefault((name, user), []).append((seed, run_id, seconds))
                print(f"{name}, user {user or 'scripted'}, seed {seed}: {run_id} in {seconds:.0f} s", file=sys.stderr)

    opened = Store(store, create=False)
    try:
        results = []
        for (name, user), played in runs.items():
            figures = [conversation_figures(opened, run_id) for _, run_id, _ in played]
            results.append({"model": name, "user": user or "scripted",
                            "runs": [{"seed": seed, "run_id": run_id, "seconds": round(seconds, 1),
                                      **(f.to_dict() if f is not None else {})}
                                     for (seed, run_id, seconds), f in zip(played, figures, strict=True)]})
    finally:
        opened.close()
    report = {"tasks": args.tasks, "seeds": args.seeds, "store": str(store), "results": results}
    kept = Store(args.results_store or store)
    try:
        for result in results:
            for played in result["runs"]:
                if "episodes" in played:
                    kept.put_experiment_result("multi_turn", f"{result['model']}, user {result['user']}", played["seed"], {
                        "pass_rate": played["pass_rate"], "capabilities": {"multi_turn": played["pass_rate"]},
                        **{m: played[m] for m in MEASURES[1:]}}, source=f"{store}, eval run {played['run_id']}")
    finally:
        kept.close()
    (args.dir / "multi_turn.json").write_text(json.dumps(report, indent=2))
    print(f"| model | user | {' | '.join(MEASURES)} | episodes |")
    print("| --- | --- |" + " --- |" * (len(MEASURES) + 1))
    for result in results:
        cells = [cell([run.get(m) for run in result["runs"]]) for m in MEASURES]
        episodes = " / ".join(str(run.get("episodes", 0)) for run in result["runs"])
        print(f"| {result['model']} | {result['user']} | {' | '.join(cells)} | {episodes} |")


if __name__ == "__main__":
    main()

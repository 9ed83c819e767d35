"""Profile-guided synthesis against uniform synthesis, at an equal number of training tasks.

    python benchmarks/guided_ablation.py --dir runs/ablation --tasks 300 --steps 600 --eval-tasks 40

Round 0: a tiny model (``demo --full``'s configuration) is trained with SFT on ``--tasks`` tasks
synthesized uniformly over every generated capability and collected by the oracle teacher, then
evaluated on held-out tasks: that evaluation's profile is what the guided arm reads.

Round 1, twice from round 0's model, each with ``--tasks`` new tasks of the same seed:

- guided: ``synth --profile`` (round 0's profile) spends the budget by capability and difficulty;
- uniform: the capabilities take turns, as without a profile;

each collected by the oracle teacher, exported, and trained ``--steps`` more steps from round 0's
model. Both are evaluated on the same held-out tasks (new workspaces, greedy decoding, in-process
``hf:`` provider), and the pass rate per capability is printed as a Markdown table. Everything is
kept under ``--dir``; a second run reuses what is there.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from coworkenv.agents import ProviderSettings
from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.loop import EvalSettings, run_eval
from coworkenv.loop._collect import TeacherSettings, collect
from coworkenv.loop._episodes import LocalEpisodes
from coworkenv.server import running_http_server
from coworkenv.store import Store
from coworkenv.synth import GENERATED, load_profile, synthesize
from coworkenv.trainer import TinyConfig, TrainSettings, export_sft, init_tiny_model, read_rows, train_sft

STYLE = "minimal"
EVAL_SEED = 20_000  # held-out workspaces, far from every training seed
PROFILE_SEED = 30_000  # round 0's evaluation: its own held-out tasks


async def data(directory: Path, n: int, seed: int, profile: Path | None) -> tuple[Path, dict]:
    """Synthesize (guided by ``profile`` when given), collect with the oracle, export SFT rows."""
    store = Store(directory / "coworkenv.db")
    host = EpisodeHost(store, EpisodeSettings(cache_dir=directory / "cache"))
    try:
        summary = await synthesize(host, n, seed, profile=load_profile(profile) if profile else None, concurrency=2)
        settings = TeacherSettings(provider="oracle", concurrency=2, provider_settings=ProviderSettings(seed=seed))
        async with running_http_server(host) as url:
            await collect(store, LocalEpisodes(host, url), settings)
    finally:
        await host.close()
    path = directory / "sft.jsonl"
    export_sft(store, path, style=STYLE)
    return path, summary.allocation


def train(store_dir: Path, model: Path, rows: Path, out: Path, steps: int, seed: int) -> Path:
    if not (out / "model" / "config.json").exists():
        train_sft(Store(store_dir / "coworkenv.db"), TrainSettings(
            model=str(model), data=str(rows), out_dir=str(out), max_steps=steps, batch_size=8, learning_rate=1e-2,
            seed=seed, assistant_only_loss=True))
    return out / "model"


async def evaluate(eval_dir: Path, model: Path, tasks: int, seed: int, profile: Path | None = None) -> dict:
    store = Store(eval_dir / "coworkenv.db")
    host = EpisodeHost(store, EpisodeSettings(cache_dir=eval_dir / "cache"))
    try:
        report = await run_eval(host, EvalSettings(
            model=f"hf:{model}", tasks=tasks, seed=seed, capabilities=GENERATED, trials=1, prompt_style=STYLE,
            temperature=0.0, max_tokens=256, concurrency=2, train_tasks=[]), profile_path=profile)
    finally:
        await host.close()
    return report.summary


async def main(args: argparse.Namespace) -> None:
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    zero = root / "round0"
    rows0, _ = await data(zero, args.tasks, 0, None)
    base = zero / "tiny"
    if not (base / "config.json").exists():
        init_tiny_model(read_rows(rows0), base, TinyConfig(vocab_size=2048, hidden_size=128, intermediate_size=512,
                                                          num_hidden_layers=2, num_attention_heads=4,
                                                          num_key_value_heads=2, head_dim=32, seed=0))
    model0 = train(zero, base, rows0, zero / "train", args.steps, 0)
    profile = root / "round0.profile.json"
    if not profile.exists():
        await evaluate(root / "profile-eval", model0, args.eval_tasks, PROFILE_SEED, profile)
    results = {}
    for arm, guide in (("guided", profile), ("uniform", None)):
        arm_dir = root / arm
        rows, allocation = await data(arm_dir, args.tasks, 1, guide)
        model = train(arm_dir, model0, rows, arm_dir / "train", args.steps, 1)
        summary = await evaluate(root / "eval", model, args.eval_tasks, EVAL_SEED)
        results[arm] = {"allocation": allocation, "summary": summary}
    (root / "results.json").write_text(json.dumps(results, indent=1))
    base_rates = json.loads(profile.read_text())["pass_rates"]
    print("| capability | round 0 (its own held-out tasks) | guided: tasks / pass rate | uniform: tasks / pass rate |")
    print("| --- | --- | --- | --- |")
    for capability in GENERATED:
        cells = base_rates.get(capability, {})
        trials = sum(c["trials"] for c in cells.values())
        before = sum(c["pass_rate"] * c["trials"] for c in cells.values()) / trials if trials else None
        row = [capability, "-" if before is None else f"{before:.0%}"]
        for arm in ("guided", "uniform"):
            stats = results[arm]["summary"]["capabilities"].get(capability, {})
            rate = stats.get("pass_rate")
            row.append(f"{results[arm]['allocation'].get(capability, 0)} / "
                       + ("-" if rate is None else f"{rate:.0%} of {stats.get('tasks', 0)}"))
        print("| " + " | ".join(row) + " |")
    overall = {arm: results[arm]["summary"]["overall"]["pass_rate"] for arm in results}
    print(f"| overall | | {overall['guided']:.0%} | {overall['uniform']:.0%} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default="runs/ablation")
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--eval-tasks", type=int, default=40)
    asyncio.run(main(parser.parse_args()))

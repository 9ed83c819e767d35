"""The wall time of an SFT step, fp32 against bf16 autocast (``train sft --bf16``), on the same rows.

    python benchmarks/sft_step.py --data runs/export/sft.minimal.jsonl [--model DIR] [--steps 40] [--repeats 3]

Without ``--model`` the base is built from the rows as ``demo --full`` builds its default one
(``init-tiny --copy-circuit`` with signatures). Each repeat trains the base for ``--steps`` steps
once in fp32 (the baseline) and once in bf16, in alternating order, with the same seed, batch size
and length-grouped batches, so both see the same batches. A run's step time is the time from the
end of its 5th step to the end of its last, divided by the steps between: the dataset preparation
and the first steps (allocation, oneDNN's kernel choice) are left out. Reported: each precision's
median over the repeats, and the median of the per-repeat ratios fp32 / bf16. The threads are
torch's default (every core); run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
from pathlib import Path

from coworkenv.trainer import (
    CircuitConfig,
    TinyConfig,
    TrainSettings,
    bf16_is_fast,
    init_tiny_model,
    read_rows,
    train_sft,
)
from coworkenv.trainer._train import TrainProgress

SKIPPED = 5


def step_seconds(model: Path, data: Path, out: Path, steps: int, bf16: bool) -> float:
    ends: dict[int, float] = {}

    def seen(event: TrainProgress) -> None:
        if event.event == "step":
            ends[event.step] = event.seconds

    settings = TrainSettings(model=str(model), data=str(data), out_dir=str(out), max_steps=steps, learning_rate=1e-2,
                             save_steps=10**6, logging_steps=steps, bf16=bf16, resume=False)
    train_sft(None, settings, on_progress=seen)
    return (ends[steps] - ends[SKIPPED]) / (steps - SKIPPED)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="SFT rows (coworkenv export sft --style minimal)")
    parser.add_argument("--model", type=Path, help="a base folder (default: a circuit base built from the rows)")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.steps <= SKIPPED + 1:
        parser.error(f"--steps must be more than {SKIPPED + 1}")
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if model is None:
            model = init_tiny_model(read_rows(args.data), Path(tmp) / "base", TinyConfig(tool_lines="signatures"),
                                    circuit=CircuitConfig())
        times: dict[str, list[float]] = {"fp32": [], "bf16": []}
        for repeat in range(args.repeats):
            order = ("fp32", "bf16") if repeat % 2 == 0 else ("bf16", "fp32")
            for name in order:
                times[name].append(step_seconds(model, args.data, Path(tmp) / f"{name}-{repeat}", args.steps,
                                                bf16=name == "bf16"))
    ratios = [f / b for f, b in zip(times["fp32"], times["bf16"], strict=True)]
    result = {"machine": f"{platform.machine()}, {platform.processor() or 'cpu'}", "bf16_is_fast": bf16_is_fast(),
              "steps": args.steps, "repeats": args.repeats,
              "seconds_per_step": {k: round(statistics.median(v), 3) for k, v in times.items()},
              "runs": {k: [round(x, 3) for x in v] for k, v in times.items()},
              "ratio_fp32_over_bf16": round(statistics.median(ratios), 2)}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"SFT step, {args.steps} steps x {args.repeats} repeats (median; bf16 matrix units: {result['bf16_is_fast']})")
    for name, seconds in result["seconds_per_step"].items():
        print(f"  {name}: {seconds:.3f} s/step  runs {result['runs'][name]}")
    print(f"  fp32 / bf16: {result['ratio_fp32_over_bf16']}x")


if __name__ == "__main__":
    main()

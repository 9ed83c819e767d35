"""Does decoding tool calls under the tools' grammar help the student? The same model on the same held-out
tasks, greedy, one trial: free (as trained) and with ``coworkenv eval --tool-grammar``, in process, and
optionally the grammar arm through a vLLM server that serves the same model.

    python benchmarks/tool_grammar.py --model RUN/train/sft/model --store RUN/coworkenv.db \\
        --data RUN/export/sft.minimal.jsonl --dir OUT [--eval-tasks 192] [--served openai:NAME@URL]

Each evaluation is ``coworkenv eval`` (``_arms.evaluate``) on a fresh copy of the store; an arm already
measured in OUT is read back. Prints a Markdown table of pass rates and of how the failed new-seed
episodes failed (``failure_modes.py``); writes ``OUT/tool_grammar.json``.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import _arms
from failure_modes import MODES, failure_mode

from coworkenv.store import Store

CAPABILITIES = ["lookup", "single_write", "multi_step", "multi_turn"]


def modes(store: Path, run_id: str) -> dict[str, int]:
    """How the failed new-seed trials of ``run_id`` failed: episodes per failure mode."""
    opened = Store(store, create=False)
    try:
        counted = Counter(failure_mode(opened, t.episode_id) for t in opened.eval_trials(run_id)
                          if t.split == "new_seeds" and not t.passed)
    finally:
        opened.close()
    return {mode: counted[mode] for mode in MODES}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    _arms.add_trained_model(parser)
    parser.add_argument("--eval-tasks", type=int, default=192)
    parser.add_argument("--eval-seed", type=int, default=10000)
    parser.add_argument("--capability", action="append", default=None)
    parser.add_argument("--served", help="openai:NAME@URL of a vLLM server serving the same model: a third arm")
    options = parser.parse_args()
    capabilities = options.capability or CAPABILITIES
    arms: dict[str, tuple[tuple[str, ...], str | None]] = {
        "free": ((), None), "grammar": (("--tool-grammar",), None)}
    if options.served:
        arms["grammar, served"] = (("--tool-grammar",), options.served)
    figures = {}
    for arm, (extra, provider) in arms.items():
        name = arm.replace(", ", "_")
        db = options.dir / f"{name}.db"

        def measure(db=db, extra=extra, provider=provider) -> dict:
            measured = _arms.evaluate(db, options.store, options.model, options.data, capabilities,
                                      options.eval_seed, options.eval_tasks, extra, provider)
            return {**measured, "modes": modes(db, measured["run_id"])}
        figures[arm] = _arms.kept(options.dir / f"{name}.json", measure)
    (options.dir / "tool_grammar.json").write_text(json.dumps(figures, indent=2))
    print("| arm | pass rate | new seeds | " + " | ".join(capabilities) + " | " + " | ".join(MODES) + " | eval wall |")
    print("| --- " * (4 + len(capabilities) + len(MODES)) + "|")
    for arm, f in figures.items():
        per = " | ".join(f"{f['capabilities'][c]:.2f}" if f["capabilities"].get(c) is not None else "—"
                         for c in capabilities)
        failed = " | ".join(str(f["modes"][m]) for m in MODES)
        print(f"| {arm} | {f['pass_rate']:.3f} | {f['new_seeds']:.3f} | {per} | {failed} | {f['eval_seconds']:.0f} s |")


if __name__ == "__main__":
    main()

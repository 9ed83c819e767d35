"""Does the student fail by looping? A decode guard against it, measured: the same model on the same held-out
tasks, greedy, in process, with and without a guard that forbids writing any N tokens twice within the reply
being written (the prompt is not looked at, so copying from the instruction or a tool result is untouched).

    python benchmarks/decode_guard.py --model RUN/train/sft/model --store RUN/coworkenv.db \\
        --data RUN/export/sft.minimal.jsonl --dir OUT [--n 0 6 12] [--capability lookup ...]

``--n 0`` is the model as it is. ``--tool-grammar`` evaluates every arm with ``eval --tool-grammar`` as well
(give it a DIR of its own). Each evaluation is ``coworkenv eval`` (``_arms.evaluate``) on a fresh copy
of the store, with the guard set in the evaluating process only. Prints a Markdown table; writes
``OUT/decode_guard.json``. An experiment: the package's generation has no such guard, and vLLM none either.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import _arms

CAPABILITIES = ["lookup", "single_write", "multi_step", "multi_turn", "safety"]


def guarded_cli() -> None:
    """``coworkenv`` with the guard of ``COWORKENV_GUARD_N`` set on in-process generation."""
    import torch
    from transformers import LogitsProcessor, LogitsProcessorList

    import coworkenv.agents._hf as hf
    from coworkenv.cli import app

    n = int(os.environ["COWORKENV_GUARD_N"])

    class NoRepeatInReply(LogitsProcessor):
        def __init__(self) -> None:
            self.start: int | None = None

        def __call__(self, input_ids, scores):
            if self.start is None:
                self.start = input_ids.shape[1]  # the first call sees the prompt only
            for row in range(input_ids.shape[0]):
                made = input_ids[row, self.start:].tolist()
                if len(made) < n - 1:
                    continue
                tail = made[len(made) - (n - 1):]
                banned = [made[i + n - 1] for i in range(len(made) - n + 1) if made[i:i + n - 1] == tail]
                if banned:
                    kept = scores[row].clone()
                    kept[banned] = -float("inf")
                    if torch.isfinite(kept).any():  # under the tool grammar, a ban may leave no token: then none
                        scores[row] = kept
            return scores

    plain = hf.generation_options

    def options(tokenizer, max_tokens, temperature):
        chosen = plain(tokenizer, max_tokens, temperature)
        if n > 0:
            chosen["logits_processor"] = LogitsProcessorList([NoRepeatInReply()])
        return chosen

    hf.generation_options = options
    app(args=sys.argv[2:], prog_name="coworkenv")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    _arms.add_trained_model(parser)
    parser.add_argument("--n", type=int, nargs="+", default=[0, 6, 12])
    parser.add_argument("--eval-tasks", type=int, default=60)
    parser.add_argument("--eval-seed", type=int, default=10000)
    parser.add_argument("--capability", action="append", default=None)
    parser.add_argument("--tool-grammar", action="store_true", help="every arm with eval --tool-grammar too")
    options = parser.parse_args()
    capabilities = options.capability or CAPABILITIES
    figures = {}
    _arms.CLI[:] = [sys.executable, __file__, "--as-cli"]  # each evaluation runs this file's guarded coworkenv
    for n in options.n:
        os.environ["COWORKENV_GUARD_N"] = str(n)
        figures[n] = _arms.kept(options.dir / f"guard{n}.json", lambda n=n: _arms.evaluate(
            options.dir / f"guard{n}.db", options.store, options.model, options.data, capabilities,
            options.eval_seed, options.eval_tasks, ("--tool-grammar",) if options.tool_grammar else ()))
    (options.dir / "decode_guard.json").write_text(json.dumps(figures, indent=2))
    print("| guard | pass rate | new seeds | " + " | ".join(capabilities) + " | eval wall |")
    print("| --- " * (4 + len(capabilities)) + "|")
    for n, f in figures.items():
        per = " | ".join(f"{f['capabilities'][c]:.2f}" if f["capabilities"].get(c) is not None else "—"
                         for c in capabilities)
        print(f"| {'none' if n == 0 else f'no {n} tokens twice'} | {f['pass_rate']:.3f} | {f['new_seeds']:.3f} | {per} "
              f"| {f['eval_seconds']:.0f} s |")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--as-cli"]:
        guarded_cli()
    else:
        main()

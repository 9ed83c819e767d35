"""How an evaluation's failed episodes went wrong, by capability: one mode an episode, the first that fits.

    python benchmarks/failure_modes.py STORE [--run EVAL_RUN_ID] [--split new_seeds] [--json]

Read from the store an `eval` run wrote (the latest run when `--run` is not given):

- `repeats`: an argument or the final answer says the same three words three times or more (the
  model copies what it has just written, in a loop);
- `unparsed call`: the final answer holds `<tool_call>`: the model meant a call, its JSON did not
  parse, and the text ended the episode as an answer;
- `refused call`: a call the server refused (an unknown tool, arguments the schema rejects);
- `wrong value or step`: every call was accepted and the checks still fail (a wrong value, a step
  left out, an answer without the asked value).

The modes say which lever a student needs next: better values (the last), or decoding that does
not loop and JSON that stays whole (the first two).
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path

from coworkenv.store import Store

MODES = ("repeats", "unparsed call", "refused call", "wrong value or step")


def repeats(text: str, words: int = 3, times: int = 3) -> bool:
    """Whether ``text`` holds the same ``words`` consecutive words ``times`` times or more."""
    tokens = re.findall(r"\S+", text)
    grams = Counter(tuple(tokens[i:i + words]) for i in range(len(tokens) - words + 1))
    return any(count >= times for count in grams.values())


def failure_mode(store: Store, episode_id: str) -> str:
    calls = store.tool_calls(episode_id)
    episode = store.episode(episode_id)
    answer = (episode.final_answer if episode else None) or ""
    if any(repeats(json.dumps(call.arguments, ensure_ascii=False)) for call in calls) or repeats(answer):
        return "repeats"
    if "<tool_call>" in answer:
        return "unparsed call"
    if any(call.is_error for call in calls):
        return "refused call"
    return "wrong value or step"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("--run", help="the eval run (default: the latest)")
    parser.add_argument("--split", default="new_seeds", help="the held-out split counted ('' for all)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not args.store.is_file():
        parser.error(f"no store at {args.store}")
    store = Store(args.store)
    runs = store.eval_runs()
    run = args.run or (runs[-1].id if runs else None)
    if run is None or run not in {r.id for r in runs}:
        parser.error(f"no eval run {args.run!r} in {args.store}" if args.run else f"{args.store} has no eval run")
    trials = [t for t in store.eval_trials(run) if not args.split or t.split == args.split]
    modes: dict[str, Counter[str]] = {mode: Counter() for mode in MODES}
    for trial in trials:
        if not trial.passed:
            modes[failure_mode(store, trial.episode_id)][trial.capability] += 1
    failed = sum(sum(c.values()) for c in modes.values())
    result = {"run": run, "split": args.split or "all", "trials": len(trials), "failed": failed,
              "modes": {mode: {"episodes": sum(c.values()), "by_capability": dict(sorted(c.items()))}
                        for mode, c in modes.items()}}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{run}: {failed} of {len(trials)} episodes failed ({result['split']})")
    for mode, row in result["modes"].items():
        per = ", ".join(f"{c} {n}" for c, n in row["by_capability"].items())
        print(f"  {mode:<20} {row['episodes']:>4}  {per}")


if __name__ == "__main__":
    main()

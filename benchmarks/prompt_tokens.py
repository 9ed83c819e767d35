"""How long a task's first request is in each agent view, in tokens of a model's tokenizer.

    python benchmarks/prompt_tokens.py --tasks 200                      # the committed tiny tool model's tokenizer
    python benchmarks/prompt_tokens.py --tasks 200 --tokenizer tiny     # a 2,048-token BPE trained as init-tiny does
    python benchmarks/prompt_tokens.py --tokenizer runs/train/sft/model # any model folder with a chat template

Generates ``--tasks`` tasks from ``--seed`` (``generate_tasks``: what ``synth`` makes before it
calibrates them; no sandbox needed) and, for each task and each view (``full``, ``compact``,
``minimal``: ``coworkenv.workspace.agent_view``), renders what the model is sent first with the
tokenizer's chat template and counts its tokens: the view's system prompt and tools alone, and the
first request (the same plus the task's instruction as the user's turn and the generation prompt,
as an RL prompt row or an agent app's first request through the capture proxy). ``full`` is what an
agent app sends that lists the workspace's every tool; the compact and minimal views show only the
tools of the apps the task's reference uses.

``--tokenizer``: a folder holding a tokenizer with a chat template (a model folder), or ``tiny``: a
tokenizer trained as ``init-tiny`` trains one (``train_tokenizer``, ``TinyConfig``'s vocabulary) on
the minimal view's first requests of the same tasks (``demo --full --base scratch`` trains it on the
minimal view's conversations instead, replies and tool results included). Default: the committed
tiny tool model's (``tests/fixtures/tool-model``, a 1,024-token BPE).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from coworkenv.synth import generate_tasks
from coworkenv.workspace import PROMPT_STYLES, agent_view

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TOKENIZER = ROOT / "tests" / "fixtures" / "tool-model"


def requests(n: int, seed: int) -> dict[str, list[tuple[list[dict[str, Any]], list[dict[str, Any]]]]]:
    """For each view, every task's first request: its messages (system, instruction) and its tools."""
    workspaces, tasks = generate_tasks(n, seed)
    by_id = {w.id: w for w in workspaces}
    out: dict[str, list[tuple[list[dict[str, Any]], list[dict[str, Any]]]]] = {style: [] for style in PROMPT_STYLES}
    for task in tasks:
        for style in PROMPT_STYLES:
            view = agent_view(style, by_id[task.workspace_id].tools, task)
            out[style].append(([{"role": "system", "content": view.system},
                                {"role": "user", "content": task.instruction}], view.tools))
    return out


def load_tokenizer(name: str, minimal: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]]):
    if name == "tiny":
        from coworkenv.trainer import TinyConfig, train_tokenizer
        from coworkenv.trainer._model import corpus_texts  # the text pieces init-tiny trains its tokenizer on

        rows = [{"prompt": messages, "tools": tools} for messages, tools in minimal]
        return train_tokenizer(list(corpus_texts(rows)), vocab_size=TinyConfig().vocab_size)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(name, local_files_only=True)


def count(tokenizer, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, first_request: bool) -> int:
    text = tokenizer.apply_chat_template(messages if first_request else messages[:1], tools=tools or None,
                                         add_generation_prompt=first_request, tokenize=False)
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=200, help="tasks generated (default 200)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tokenizer", default=str(DEFAULT_TOKENIZER),
                        help="a folder with a tokenizer and chat template, or 'tiny' (default: the committed tiny "
                             "tool model's)")
    args = parser.parse_args()
    made = requests(args.tasks, args.seed)
    tokenizer = load_tokenizer(args.tokenizer, made["minimal"])
    tokenizer.model_max_length = 10**9  # long full-view prompts are counted, not truncated or warned about
    print(f"{len(made['full'])} tasks from seed {args.seed}; tokenizer {args.tokenizer} "
          f"({len(tokenizer):,} tokens)\n")
    print("| view | tools shown (median) | system + tools: median tokens | first request: median | p10 | p90 "
          "| characters (median) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for style, rows in made.items():
        alone = [count(tokenizer, m, t, first_request=False) for m, t in rows]
        first = sorted(count(tokenizer, m, t, first_request=True) for m, t in rows)
        chars = [len(tokenizer.apply_chat_template(m, tools=t or None, add_generation_prompt=True, tokenize=False))
                 for m, t in rows]
        print(f"| {style} | {statistics.median(len(t) for _, t in rows):g} | {statistics.median(alone):,.0f} "
              f"| {statistics.median(first):,.0f} | {first[len(first) // 10]:,} | {first[len(first) * 9 // 10]:,} "
              f"| {statistics.median(chars):,.0f} |")


if __name__ == "__main__":
    main()

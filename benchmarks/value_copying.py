"""Where a PocketWorker's next-token predictions go wrong, by kind of token, on SFT rows it was not trained on.

    python benchmarks/value_copying.py MODEL ROWS.jsonl [--rows 150] [--show 8] [--json]

Teacher-forced: each row (as `coworkenv export sft` writes it) is rendered by the model's own chat
template, and every token of the assistant's turns is scored with the conversation before it given.
The tokens are grouped by what they are:

- `name`: a tool call's tool name;
- `value_instruction_*`, `value_result_*`, `value_user_*`, `value_other_*`: a string argument's
  value, by where the value is found before the call (the task's instruction, a tool result, a later
  user turn, nowhere: composed by the teacher, e.g. an address made from a name), split into its
  first token (where to copy from) and the rest (copying on);
- `answer`: the text of a final answer; `structure`: everything else the assistant writes.

For each group: the mean loss and how often the argmax is the right token; for each kind of value,
the share of values whose every token the argmax gets right, and the share that stand in the
context before the call as the very tokens the call writes (what a copying head can copy at all).
On rows of workspaces the model never saw (split the rows by workspace before training), those
shares say how well it copies values rather than recalls them, which decides most held-out passes
(a task passes when every value of its calls is right), at a cost of seconds instead of a full
evaluation (benchmarks/loop.md). For the wrong tokens of a value's rest: the share that are ambiguous, where the predicted token follows the
same two tokens at another place of the context (`msg2` then `1` instead of `7`), which a head that
matches the last two tokens cannot tell apart without knowing where the copy came from.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

ASSISTANT = "<|im_start|>assistant\n"
END = "<|im_end|>"


def _occurrences(text: str, needle: str, start: int, end: int) -> list[int]:
    found, at = [], text.find(needle, start, end)
    while at >= 0:
        found.append(at)
        at = text.find(needle, at + 1, end)
    return found


def _value_source(value: str, instruction: str, results: str, replies: str) -> str:
    if value in instruction:
        return "instruction"
    if json.dumps(value, ensure_ascii=False)[1:-1] in results:
        return "result"
    return "user" if value in replies else "other"


def _char_kinds(text: str, messages: list[dict[str, Any]]) -> dict[int, tuple[str, int]]:
    """For each character of the assistant's turns in ``text``: its group and, for a value, where the
    value starts (so that its first token can be told from the rest)."""
    task = next(m for m in messages if m["role"] == "user")
    instruction = task["content"]
    results, replies = "", ""  # what the assistant has seen so far: a value found only later is composed
    kinds: dict[int, tuple[str, int]] = {}
    position = 0
    for message in messages:
        if message["role"] == "tool":
            results += " " + message["content"]
        elif message["role"] == "user" and message is not task:
            replies += " " + message["content"]
        if message["role"] != "assistant":
            continue
        start = text.find(ASSISTANT, position) + len(ASSISTANT)
        end = text.find(END, start) + len(END)
        position = end
        kinds.update({i: ("structure", -1) for i in range(start, end)})
        kinds.update({i: ("answer", -1) for i in range(start, start + len(message.get("content") or ""))})
        for call in message.get("tool_calls") or []:
            function = call["function"]
            for at in _occurrences(text, f'"{function["name"]}"', start, end)[:1]:
                kinds.update({i: ("name", -1) for i in range(at + 1, at + 1 + len(function["name"]))})
            arguments = function["arguments"]
            for value in json.loads(arguments).values():  # a JSON string, as sft_dataset renders it
                if not isinstance(value, str) or not value:
                    continue
                group = "value_" + _value_source(value, instruction, results, replies)
                written = json.dumps(value, ensure_ascii=False)[1:-1]
                for at in _occurrences(text, f'"{written}"', start, end)[:1]:
                    kinds.update({i: (group, at + 1) for i in range(at + 1, at + 1 + len(written))})
    return kinds


def _ambiguous(ids: list[int], t: int, predicted: int) -> bool:
    """Whether a wrong prediction at ``t`` (of token ``ids[t]``) continues the same two tokens elsewhere in the
    context: the pair before it, ``ids[t-2:t]``, is followed by ``predicted`` at an earlier place, so an
    induction head matching those two tokens had both continuations to choose from (``msg2`` then ``7`` or
    ``1``); only knowing where the copy came from tells them apart."""
    pair = ids[t - 2:t]
    return any(ids[i:i + 2] == pair and ids[i + 2] == predicted for i in range(t - 3))


def measure(model_dir: Path, rows: list[dict[str, Any]], *, show: int = 0) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from coworkenv.trainer._train import sft_dataset

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), local_files_only=True, dtype="float32").eval()
    tokens: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0])  # count, summed loss, argmax right
    values: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # values, all tokens right, in the context
    ambiguous: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # wrong "rest" tokens, of them ambiguous
    shown: dict[str, int] = defaultdict(int)
    for example in sft_dataset(rows):  # the messages as training renders them (arguments as JSON text)
        messages = example["messages"]
        text = tokenizer.apply_chat_template(messages, tools=json.loads(example["tools"]), tokenize=False)
        encoded = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
        ids, offsets = encoded["input_ids"], encoded["offset_mapping"]
        kinds = _char_kinds(text, messages)
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0, :-1]
        target = torch.tensor(ids[1:])
        losses = torch.nn.functional.cross_entropy(logits, target, reduction="none")
        predicted = logits.argmax(-1)
        right = predicted == target
        value_tokens: dict[tuple[str, int], list[int]] = {}  # each value's token positions
        for t in range(1, len(ids)):
            start, end = offsets[t]
            group, value_start = kinds.get(start, (None, -1))
            if group is None:
                continue
            if value_start >= 0:
                value_tokens.setdefault((group, value_start), []).append(t)
                group += "_first" if start <= value_start < end else "_rest"
            counts = tokens[group]
            counts[0] += 1
            counts[1] += float(losses[t - 1])
            counts[2] += int(right[t - 1])
            if group.endswith("_rest") and not right[t - 1]:
                ambiguous[group][0] += 1
                ambiguous[group][1] += int(_ambiguous(ids, t, int(predicted[t - 1])))
            if show and not right[t - 1] and shown[group] < show:
                shown[group] += 1
                context = tokenizer.decode(ids[max(0, t - 10):t])
                print(f"[{group}] …{context!r} → wanted {tokenizer.decode([ids[t]])!r}, "
                      f"predicted {tokenizer.decode([int(predicted[t - 1])])!r}")
        for (group, _), at in value_tokens.items():
            values[group][0] += 1
            values[group][1] += int(all(right[t - 1] for t in at))
            wanted = ids[at[0]:at[-1] + 1]
            values[group][2] += int(any(ids[i:i + len(wanted)] == wanted for i in range(at[0] - len(wanted) + 1)))
    return {
        "rows": len(rows),
        "tokens": {group: {"tokens": int(n), "loss": round(loss / n, 3), "argmax_right": round(ok / n, 3)}
                   for group, (n, loss, ok) in sorted(tokens.items())},
        "values": {group: {"values": n, "all_tokens_right": round(ok / n, 3), "in_context": round(seen / n, 3)}
                   for group, (n, ok, seen) in sorted(values.items())},
        "rest_errors": {group: {"wrong": n, "ambiguous": round(a / n, 3)} for group, (n, a) in sorted(ambiguous.items())},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path, help="a model folder (or a training checkpoint)")
    parser.add_argument("rows", type=Path, help="SFT rows (JSON lines) the model was not trained on")
    parser.add_argument("--rows", dest="count", type=int, default=150, help="the first this many rows")
    parser.add_argument("--show", type=int, default=0, help="print this many wrong predictions of each group")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args()
    if not (args.model / "config.json").is_file():
        parser.error(f"{args.model}: not a model folder (no config.json)")
    if not args.rows.is_file():
        parser.error(f"{args.rows}: no such file of SFT rows")
    with args.rows.open() as lines:
        rows = [json.loads(line) for line, _ in zip(lines, range(args.count), strict=False)]
    result = measure(args.model, rows, show=args.show)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{args.model}: {result['rows']} rows of {args.rows}")
    for group, figures in result["tokens"].items():
        print(f"  {group:24s} {figures['tokens']:6d} tokens  loss {figures['loss']:6.3f}  "
              f"argmax right {figures['argmax_right']:.3f}")
    for group, figures in result["values"].items():
        print(f"  {group:24s} {figures['values']:6d} values  every token right {figures['all_tokens_right']:.3f}  "
              f"in the context as these tokens {figures['in_context']:.3f}")
    for group, figures in result["rest_errors"].items():
        print(f"  {group:24s} {figures['wrong']:6d} wrong   ambiguous (another place continues the same two "
              f"tokens so) {figures['ambiguous']:.3f}")


if __name__ == "__main__":
    main()

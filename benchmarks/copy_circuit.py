"""How well a PocketWorker model copies, and whether its copying circuit is still intact.

    coworkenv model init-tiny --data sft.minimal.jsonl --out runs/circuit/base --copy-circuit
    python benchmarks/copy_circuit.py probe runs/circuit/base
    coworkenv train sft --model runs/circuit/base --data sft.minimal.jsonl --out runs/circuit/sft \\
        --steps 1200 --lr 1e-2 --save-steps 100
    python benchmarks/copy_circuit.py diagnose runs/circuit/base runs/circuit/sft/checkpoints/checkpoint-*
    coworkenv eval --model hf:runs/circuit/sft/model --tasks 48 --seed 10000 --style minimal ...

Lever 4 of the student issue (architecture for copying): ``init-tiny --copy-circuit`` builds a GPT-2
whose previous-token and induction heads are set by hand (``coworkenv.trainer._circuit`` has the
layout), and training holds them. ``probe`` prints the share of a repeated random span's tokens a
model predicts (at three lengths). ``diagnose`` says, for each model folder or checkpoint given, on
random sequences with a span repeated: how much of the induction head's attention lands on the right
position, how often the prediction is the copied token, how large the residual stream's reserved and
free parts are where layer 1 reads them (LayerNorm divides both by their joint size, so free parts
grown large blunt the circuit), how much of the head's attention goes to the gate (the first
position), and the logits the reserved and free parts give the right token (benchmarks/loop.md).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch


def probe(model_dir: Path) -> dict[str, float]:
    """The copy rate of ``coworkenv.trainer``'s probe at three lengths (repeated random spans)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from coworkenv.trainer import copy_rate

    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    return {str(n): copy_rate(model, tokenizer, seq_len=n, sequences=16) for n in (64, 256, 1024)}


def diagnose(model_dir: Path, *, span: int = 60, sequences: int = 4, seed: int = 0) -> dict[str, float]:
    """The circuit's state in ``model_dir`` (see the module's docstring)."""
    from transformers import AutoModelForCausalLM

    from coworkenv.trainer import circuit_layout

    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True, attn_implementation="eager").eval()
    layout = circuit_layout(model)
    if layout is None:
        raise SystemExit(f"{model_dir}: no copying circuit in its config (build one with init-tiny --copy-circuit)")
    generator = torch.Generator().manual_seed(seed)
    vocabulary = model.config.vocab_size
    repeated = torch.randint(20, vocabulary, (sequences, span), generator=generator)
    ids = torch.cat([torch.randint(20, vocabulary, (sequences, span), generator=generator), repeated, repeated], 1)
    with torch.no_grad():
        return _diagnosis(model, ids, span, int(layout["reserved"]))


def _diagnosis(model, ids, span: int, reserved: int) -> dict[str, float]:
    out = model(ids, output_hidden_states=True, output_attentions=True)
    attention = out.attentions[1][:, 0]  # the induction head
    queries = torch.arange(2 * span + 1, 3 * span - 1)
    right = attention[:, queries, queries - span + 1]
    target = ids[:, 2 * span + 1:]
    logits = out.logits[:, 2 * span:3 * span - 1]
    layer1 = out.hidden_states[1]
    final = out.hidden_states[-1][:, 2 * span:3 * span - 1]  # after the final norm
    embedding = model.transformer.wte.weight
    by_reserved = (final[..., :reserved] @ embedding[:, :reserved].T).gather(-1, target.unsqueeze(-1))
    by_free = (final[..., reserved:] @ embedding[:, reserved:].T).gather(-1, target.unsqueeze(-1))
    return {"attention_on_right_position": round(float(right.mean()), 3),
            "attention_on_gate": round(float(attention[:, queries, 0].mean()), 3),
            "copied": round(float((logits.argmax(-1) == target).float().mean()), 3),
            "layer1_reserved_norm": round(float(layer1[..., :reserved].norm(dim=-1).mean()), 2),
            "layer1_free_norm": round(float(layer1[..., reserved:].norm(dim=-1).mean()), 2),
            "right_logit_reserved": round(float(by_reserved.mean()), 2),
            "right_logit_free": round(float(by_free.mean()), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    probed = commands.add_parser("probe", help="copy rate of a model folder")
    probed.add_argument("model", type=Path)
    diagnosed = commands.add_parser("diagnose", help="the circuit's state in model folders or checkpoints")
    diagnosed.add_argument("models", type=Path, nargs="+")
    args = parser.parse_args()
    if args.command == "probe":
        print(json.dumps(probe(args.model)))
    else:
        for folder in args.models:
            print(json.dumps({"model": str(folder), **diagnose(folder)}), flush=True)


if __name__ == "__main__":
    main()

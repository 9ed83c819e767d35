"""Can a model of the PocketWorker's size learn to copy at all? The plainest copying task, timed.

    python benchmarks/copy_toy.py --arch qwen3 --hidden 128 --layers 2 --lr 3e-3 --steps 3000
    python benchmarks/copy_toy.py --seq 64 --max-span 20 --steps 4000

Each sequence is ``--seq`` random tokens of a ``--vocab``-token vocabulary in which a random span
(5 to ``--max-span`` tokens, at a random offset) is repeated after a separator token; the loss is on
the repeat only. A model that has formed an induction head (a previous-token head and a head that
attends to the token after the current one's earlier occurrence) copies every repeated token but
each span's first: about 0.95 of them. Without one it guesses: 1/vocab. Every 200 steps it prints
the step, the training loss, the share of repeated tokens predicted exactly (greedy, 64 fresh
sequences) and the seconds so far. benchmarks/loop.md reports what it measured.
"""

from __future__ import annotations

import argparse
import time

import torch

SEPARATOR = 1
FIRST_TOKEN = 3  # 0-2 kept for the separator and padding-like ids


def batch(size: int, seq: int, vocab: int, max_span: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    inputs, labels = [], []
    for _ in range(size):
        span = int(torch.randint(5, max_span + 1, (1,), generator=gen))
        offset = int(torch.randint(0, seq - 2 * span - 1, (1,), generator=gen))
        copied = torch.randint(FIRST_TOKEN, vocab, (span,), generator=gen)
        before = torch.randint(FIRST_TOKEN, vocab, (offset,), generator=gen)
        after = torch.randint(FIRST_TOKEN, vocab, (seq - offset - 2 * span - 1,), generator=gen)
        x = torch.cat([before, copied, torch.tensor([SEPARATOR]), copied, after])
        y = torch.full_like(x, -100)
        y[offset + span + 1:offset + 2 * span + 1] = copied
        inputs.append(x)
        labels.append(y)
    return torch.stack(inputs), torch.stack(labels)


def build(arch: str, hidden: int, layers: int, vocab: int):
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

    heads = max(1, hidden // 32)
    options = dict(vocab_size=vocab, hidden_size=hidden, intermediate_size=4 * hidden, num_hidden_layers=layers,
                   num_attention_heads=heads, num_key_value_heads=heads, head_dim=32, tie_word_embeddings=True,
                   max_position_embeddings=4096)
    if arch == "qwen3":
        return Qwen3ForCausalLM(Qwen3Config(**options))
    return LlamaForCausalLM(LlamaConfig(**options))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", choices=("qwen3", "llama"), default="qwen3", help="qwen3 has QK-norm, llama not")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=160)
    parser.add_argument("--max-span", type=int, default=59)
    parser.add_argument("--vocab", type=int, default=500)
    parser.add_argument("--decay-all", action="store_true", help="weight decay on norms too (default: matrices only)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    if not 5 <= args.max_span <= (args.seq - 2) // 2:
        parser.error(f"--max-span must lie between 5 and (--seq - 2) / 2 = {(args.seq - 2) // 2}")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    model = build(args.arch, args.hidden, args.layers, args.vocab)
    params = list(model.parameters())
    decayed = params if args.decay_all else [p for p in params if p.ndim >= 2]
    kept = [] if args.decay_all else [p for p in params if p.ndim < 2]
    optimizer = torch.optim.AdamW([{"params": decayed, "weight_decay": 0.1}, {"params": kept, "weight_decay": 0.0}],
                                  lr=args.lr, betas=(0.9, 0.95))
    start = time.monotonic()
    for step in range(1, args.steps + 1):
        x, y = batch(args.batch, args.seq, args.vocab, args.max_span, gen)
        for group in optimizer.param_groups:
            group["lr"] = args.lr * min(1.0, step / 50)
        loss = model(input_ids=x, labels=y).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad()
        if step % 200 == 0:
            with torch.no_grad():
                x, y = batch(64, args.seq, args.vocab, args.max_span, gen)
                predicted = model(input_ids=x).logits[:, :-1].argmax(-1)
                target = y[:, 1:]
                mask = target != -100
                copied = ((predicted == target) & mask).sum().item() / mask.sum().item()
            print(f"{step} loss {loss.item():.3f} copied {copied:.3f} {time.monotonic() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()

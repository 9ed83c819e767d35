"""A PocketWorker base whose copying circuit is set by hand, then fine-tuned with the circuit held.

    python benchmarks/copy_circuit.py build --tokenizer-from runs/models/tiny --out runs/circuit/base
    python benchmarks/copy_circuit.py probe runs/circuit/base
    python benchmarks/copy_circuit.py sft --base runs/circuit/base --data sft.minimal.jsonl \\
        --out runs/circuit/sft --steps 600 --lr 1e-2
    coworkenv eval --model hf:runs/circuit/sft/model --tasks 48 --seed 10000 --style minimal ...

Lever 4 of the student issue (architecture for copying). A tiny model trained on a CPU does not form
the two heads that copy a span out of its context (a previous-token head and an induction head;
benchmarks/loop.md), so this script writes them into the weights instead of waiting for them. The
model is a standard GPT-2 (learned absolute positions, so a head can match content with no rotary
rotation in its scores; vLLM and transformers both load it), two layers of hidden 192, six heads of 32,
tied embeddings, the tokenizer of another model folder. The residual stream is laid out as

    0:32 E   each token's fixed random unit code (the tied unembedding reads it back)
    32:64 P  the code of the token one position back     (written by layer 0, head 0)
    64:96 P2 the code of the token two positions back    (written by layer 0, head 1)
    96:112   eight sinusoids of the position              (the position embeddings)
    112:192  free: everything the model learns

Layer 0's heads 0 and 1 attend by position alone: their queries and keys are the sinusoids, the keys
rotated by one (two) positions' angle, so the score peaks at i-1 (i-2); the frequencies are chosen so
that no other offset up to 4,096 comes within a fixed margin of that peak. Layer 1's head 0 is the
induction head: its query is E(i) + 0.7 P(i), its key P(j) + 0.7 P2(j), so it attends to the position
after the last earlier occurrence of the current token, most of all where the token before matches
too, and writes that position's code into E: the next token's logit. Untrained, the base predicts
about 0.95 of a repeated random span (``probe``).

``sft`` runs the project's ``train_sft`` with the circuit's weights held: a gradient mask zeroes the
updates of those heads, of the reserved columns of the embeddings and layer 0's input norm, and of
anything in layer 0 that would write into the reserved dimensions, so the rest of the model learns
around a circuit that cannot be erased (unlike the learnt head of the copying stage, which SFT wipes
out; benchmarks/loop.md). It prints the copy probe every 100 steps.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import time
from pathlib import Path

import torch

WIDTH, HEAD = 192, 32
HEADS = WIDTH // HEAD
E, P, P2, POS, RESERVED = 0, 32, 64, 96, 112  # starts of the residual stream's parts (see above)
POSITIONS = 4096
# angles of the position sinusoids: picked by a search over sets of 8 so that cos-sums at any other
# offset up to 4,096 stay at least 2.3 below the peak (powers of two would nearly repeat at 402)
OMEGAS = (2.43971, 1.60282, 1.49438, 1.30277, 0.15607, 0.10577, 0.01391, 0.01327)
POSITION_GAIN = 7.0  # sharpness of the previous-token heads (score margin ~0.41 x gain^2)
MATCH_GAIN = 15.0  # sharpness of the induction head's content match
PREVIOUS_WEIGHT = 0.7  # how much the token before the current one counts in that match
COPY_GAIN = 4.0  # the induction head's write into E


def build(tokenizer_from: Path, out: Path, *, seed: int = 0) -> Path:
    """A GPT-2 base with the copying circuit set, and ``tokenizer_from``'s tokenizer and template."""
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_from, local_files_only=True)
    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=POSITIONS, n_embd=WIDTH, n_layer=2, n_head=HEADS,
                        n_inner=4 * WIDTH, activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0,
                        attn_pdrop=0.0, tie_word_embeddings=True, eos_token_id=tokenizer.eos_token_id,
                        bos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    model = GPT2LMHeadModel(config)
    with torch.no_grad():
        _set_circuit(model)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    template = tokenizer_from / "chat_template.jinja"
    if template.exists():
        shutil.copy(template, out / template.name)
    return out


def _set_circuit(model) -> None:
    body = model.transformer
    codes = torch.randn(body.wte.weight.shape[0], HEAD)
    body.wte.weight[:, E:E + HEAD] = codes / codes.norm(dim=1, keepdim=True)
    body.wte.weight[:, P:RESERVED] = 0
    body.wpe.weight.zero_()
    position = torch.arange(POSITIONS, dtype=torch.float32)
    for f, omega in enumerate(OMEGAS):
        body.wpe.weight[:, POS + 2 * f] = torch.cos(omega * position) / math.sqrt(len(OMEGAS))
        body.wpe.weight[:, POS + 2 * f + 1] = torch.sin(omega * position) / math.sqrt(len(OMEGAS))
    for norm in [n for block in body.h for n in (block.ln_1, block.ln_2)] + [body.ln_f]:
        norm.weight.fill_(1.0)
        norm.bias.zero_()
    free = float((body.wte.weight[:, RESERVED:] ** 2).sum(1).mean())
    # LayerNorm divides by the residual's RMS; these undo it for a vector of the parts present
    scale0 = math.sqrt((2.0 + free) / WIDTH)  # E + positions
    scale1 = math.sqrt((4.0 + free) / WIDTH)  # E + P + P2 + positions
    first, second = body.h[0].attn, body.h[1].attn
    for head, offset in ((0, 1), (1, 2)):
        q, k, v = _head_slices(head)
        _clear(first, head)
        gain = POSITION_GAIN * scale0 * math.sqrt(len(OMEGAS))
        for f, omega in enumerate(OMEGAS):
            cos_row, sin_row = POS + 2 * f, POS + 2 * f + 1
            first.c_attn.weight[cos_row, q.start + 2 * f] = gain
            first.c_attn.weight[sin_row, q.start + 2 * f + 1] = gain
            c, s = math.cos(offset * omega), math.sin(offset * omega)  # the key: position + offset
            first.c_attn.weight[cos_row, k.start + 2 * f] = gain * c
            first.c_attn.weight[sin_row, k.start + 2 * f] = -gain * s
            first.c_attn.weight[cos_row, k.start + 2 * f + 1] = gain * s
            first.c_attn.weight[sin_row, k.start + 2 * f + 1] = gain * c
        for d in range(HEAD):
            first.c_attn.weight[E + d, v.start + d] = scale0
            first.c_proj.weight[head * HEAD + d, offset * HEAD + d] = 1.0  # into P (offset 1) or P2 (2)
    q, k, v = _head_slices(0)
    _clear(second, 0)
    for d in range(HEAD):
        second.c_attn.weight[E + d, q.start + d] = MATCH_GAIN * scale1
        second.c_attn.weight[P + d, q.start + d] = PREVIOUS_WEIGHT * MATCH_GAIN * scale1
        second.c_attn.weight[P + d, k.start + d] = MATCH_GAIN * scale1
        second.c_attn.weight[P2 + d, k.start + d] = PREVIOUS_WEIGHT * MATCH_GAIN * scale1
        second.c_attn.weight[E + d, v.start + d] = scale1
        second.c_proj.weight[d, E + d] = COPY_GAIN
    # nothing else writes into the reserved parts at the start (the free heads and MLPs)
    first.c_proj.weight[2 * HEAD:, :RESERVED] = 0
    second.c_proj.weight[HEAD:, :RESERVED] = 0
    for block in body.h:
        block.mlp.c_proj.weight[:, :RESERVED] = 0


def _head_slices(head: int) -> tuple[slice, slice, slice]:
    """The query, key and value columns of ``head`` in GPT-2's fused ``c_attn`` (x @ W)."""
    start = head * HEAD
    return (slice(start, start + HEAD), slice(WIDTH + start, WIDTH + start + HEAD),
            slice(2 * WIDTH + start, 2 * WIDTH + start + HEAD))


def _clear(attention, head: int) -> None:
    for part in _head_slices(head):
        attention.c_attn.weight[:, part] = 0
        attention.c_attn.bias[part] = 0
    attention.c_proj.weight[head * HEAD:(head + 1) * HEAD, :] = 0


def held_masks(model) -> dict[torch.nn.Parameter, torch.Tensor]:
    """For each parameter the circuit lives in, 1 where training may change it and 0 where not."""
    body = model.transformer
    masks: dict[torch.nn.Parameter, torch.Tensor] = {}

    def hold(parameter, *index) -> None:
        mask = masks.setdefault(parameter, torch.ones_like(parameter))
        mask[index] = 0

    hold(body.wte.weight, slice(None), slice(0, RESERVED))
    hold(body.wpe.weight, slice(None), slice(0, RESERVED))
    for layer, block in enumerate(body.h):
        circuit_heads = (0, 1) if layer == 0 else (0,)
        for head in circuit_heads:
            for part in _head_slices(head):
                hold(block.attn.c_attn.weight, slice(None), part)
                hold(block.attn.c_attn.bias, part)
            hold(block.attn.c_proj.weight, slice(head * HEAD, (head + 1) * HEAD), slice(None))
        hold(block.ln_1.weight, slice(0, RESERVED))
        hold(block.ln_1.bias, slice(0, RESERVED))
        if layer == 0:  # what layer 0 writes is what layer 1's induction head reads
            hold(block.attn.c_proj.weight, slice(None), slice(0, RESERVED))
            hold(block.attn.c_proj.bias, slice(0, RESERVED))
            hold(block.mlp.c_proj.weight, slice(None), slice(0, RESERVED))
            hold(block.mlp.c_proj.bias, slice(0, RESERVED))
    return masks


def probe(model_dir: Path) -> dict[str, float]:
    """The copy rate of ``coworkenv.trainer``'s probe at three lengths (repeated random spans)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from coworkenv.trainer._pretrain import copy_rate

    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    return {str(n): copy_rate(model, tokenizer, seq_len=n, sequences=16) for n in (64, 256, 1024)}


def sft(base: Path, data: Path, out: Path, *, steps: int, lr: float, hold: bool = True) -> dict:
    """``train_sft`` on ``data`` from ``base`` with the circuit held (``hold``)."""
    from transformers import TrainerCallback

    from coworkenv.trainer import TrainSettings, _train
    from coworkenv.trainer._pretrain import copy_rate

    class CopyProbe(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, processing_class=None, **kwargs):
            if model is not None and state.global_step % 100 == 0:
                model.eval()
                rate = copy_rate(model, processing_class, seq_len=256, sequences=16)
                model.train()
                print(json.dumps({"step": state.global_step, "copy_rate": rate}), flush=True)

    build_trainer = _train._sft_trainer

    def held_trainer(settings, rows):  # the project's trainer, with the mask on the gradients
        trainer, tokenizer = build_trainer(settings, rows)
        if hold:
            for parameter, mask in held_masks(trainer.model).items():
                parameter.register_hook(lambda grad, mask=mask: grad * mask)
        trainer.add_callback(CopyProbe())
        return trainer, tokenizer

    _train._sft_trainer = held_trainer
    try:
        started = time.monotonic()
        result = _train.train_sft(None, TrainSettings(model=str(base), data=str(data), out_dir=str(out),
                                                      max_steps=steps, learning_rate=lr, fused_lm_head=False))
    finally:
        _train._sft_trainer = build_trainer
    losses = result.metrics.get("losses", [])
    return {"steps": steps, "wall_s": round(time.monotonic() - started), "first_loss": losses[0]["loss"] if losses else None,
            "last_loss": losses[-1]["loss"] if losses else None, "model": str(out / "model")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    made = commands.add_parser("build", help="write the base")
    made.add_argument("--tokenizer-from", type=Path, required=True, help="a model folder whose tokenizer to use")
    made.add_argument("--out", type=Path, required=True)
    made.add_argument("--seed", type=int, default=0)
    probed = commands.add_parser("probe", help="copy rate of a model folder")
    probed.add_argument("model", type=Path)
    tuned = commands.add_parser("sft", help="fine-tune with the circuit held")
    tuned.add_argument("--base", type=Path, required=True)
    tuned.add_argument("--data", type=Path, required=True, help="an `export sft` JSON-lines file")
    tuned.add_argument("--out", type=Path, required=True)
    tuned.add_argument("--steps", type=int, default=600)
    tuned.add_argument("--lr", type=float, default=1e-2)
    tuned.add_argument("--no-hold", action="store_true", help="let training change the circuit too")
    args = parser.parse_args()
    if args.command == "build":
        print(json.dumps({"base": str(build(args.tokenizer_from, args.out, seed=args.seed)),
                          "copy_rate": probe(args.out)}))
    elif args.command == "probe":
        print(json.dumps(probe(args.model)))
    else:
        print(json.dumps(sft(args.base, args.data, args.out, steps=args.steps, lr=args.lr, hold=not args.no_hold)))


if __name__ == "__main__":
    main()

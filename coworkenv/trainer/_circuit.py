"""A PocketWorker base whose copying circuit is written into its weights, and training that keeps it.

A tiny model trained on a CPU does not form the two heads that copy a span out of its context (a
previous-token head and an induction head; benchmarks/loop.md), and fine-tuning erases the ones a
copying stage forms. ``circuit_gpt2`` writes them into a standard GPT-2 instead (learned absolute
positions, so a head can match content with no rotary rotation in its scores; transformers and vLLM
load it), and ``hold_circuit`` makes training leave those weights as they are. The residual stream is
laid out as (with the default head of 32 and eight position sinusoids):

    0:31 E    each token's fixed random unit code (the tied unembedding reads it back)
    31        1 at the first position only (the gate's key)
    32:64 P   the code of the token one position back     (written by layer 0, head 0)
    64:96 P2  the code of the token two positions back    (written by layer 0, head 1)
    96:112    eight sinusoids of the position              (the position embeddings)
    112:      free: everything the model learns

Layer 0's heads 0 and 1 attend by position alone (their queries and keys are the sinusoids, the keys
rotated by one or two positions' angle). Layer 1's head 0 is the induction head: its query is
E(i) + w P(i), its key P(j) + w P2(j) - s E(j), so it attends to the position after the last earlier
occurrence of the current token (most where the token before matches too), not to a position whose
own token is the current one (a written token matching itself is how a copy loops), and writes that
position's code into E: the next token's logit. A trainable part of its query scores the first
position, whose value is cancelled: the gate by which training can turn copying off where it is
wrong. Layer 1's pointer heads (``pointer_heads``) write the code of wherever they attend into E
as the induction head does, but where they attend is learnt (``pointer_layer`` moves them to a
later layer, where they read P instead, since E holds the induction head's prediction there). The
reserved parts are ``reserved_scale`` times larger than the free ones, so LayerNorm, which divides
by the whole residual's size, hardly sees the free dimensions grow in training (at scale 1 they
blunted the induction head to 0.58 of its attention on the right position within 1,800 steps).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from ._chat_template import EOS, IM_END, IM_START
from ._model import require_training

CONFIG_KEY = "coworkenv_circuit"  # in the model's config.json: the layout training holds
# angles of the position sinusoids: a search over sets of 8 kept the cos-sums at any other offset up
# to 4,096 at least 2.3 below the peak (powers of two nearly repeat at 402)
OMEGAS = (2.43971, 1.60282, 1.49438, 1.30277, 0.15607, 0.10577, 0.01391, 0.01327)


@dataclass(frozen=True)
class CircuitConfig:
    """A GPT-2 with the copying circuit: its size, and the circuit's gains."""

    hidden_size: int = 192
    intermediate_size: int = 768
    num_hidden_layers: int = 2
    head_dim: int = 32
    max_position_embeddings: int = 4096
    omegas: tuple[float, ...] = field(default=OMEGAS)
    position_gain: float = 7.0  # sharpness of the previous-token heads (score margin ~0.41 x gain^2)
    match_gain: float = 15.0  # sharpness of the induction head's content match
    previous_weight: float = 0.7  # how much the token before the current one counts in that match
    self_penalty: float = 1.0  # the key's -E(j)
    copy_gain: float = 4.0  # the induction head's write into E
    reserved_scale: float = 8.0  # the reserved parts' size against the free ones
    # the induction head's gate: a key only the first position has (the conversation's <|im_start|>, whose
    # value is cancelled), scored by a trainable part of the query, so that training can turn copying off
    # where it is wrong without erasing the circuit
    sink_gain: float = 15.0
    # the norms' initial weight on the free dimensions (those start r times smaller than the reserved parts
    # after each norm; at r, the free parts grew a thousandfold in 100 steps and drowned the circuit)
    free_gain: float = 1.0
    # pointer heads: layer 1's heads 1..n write the token code of wherever they attend into E, as the
    # induction head does, but where they attend is learnt (their queries and keys train from random):
    # training only has to find the place of a value's first token, not learn to copy it
    pointer_heads: int = 1
    # the layer of the pointer heads: 1 (None), beside the induction head, where their queries and keys see
    # what layer 0 wrote only; or a later one, whose queries and keys can use what the free heads of the
    # layers between gathered (a record's name beside its field, for a value found by another), at the
    # cost of those layers' compute. A later layer reads the attended token's code from P of the position
    # after it (E holds the induction head's prediction there), so a pointer head attends one further on
    pointer_layer: int | None = None
    # the pointer heads' write into E (None: ``copy_gain``, the induction head's). Training cannot change it,
    # and the free weights' logits, which learn to recall values, outvote a pointer that writes weakly
    pointer_gain: float | None = None
    seed: int = 0

    @property
    def reserved(self) -> int:
        """The residual dimensions the circuit owns: E, P, P2 and the sinusoids."""
        return 3 * self.head_dim + 2 * len(self.omegas)

    def check(self) -> None:
        if self.hidden_size % self.head_dim:
            raise ValueError(f"the hidden size ({self.hidden_size}) must be a multiple of the head size ({self.head_dim})")
        if self.hidden_size - self.reserved < self.head_dim:
            least = -(-(self.reserved + self.head_dim) // self.head_dim) * self.head_dim
            raise ValueError(f"the hidden size ({self.hidden_size}) leaves fewer than {self.head_dim} dimensions "
                             f"free beside the circuit's {self.reserved}: give at least {least}")
        if self.pointer_gain is not None and self.pointer_gain <= 0:
            raise ValueError(f"the pointer heads' gain ({self.pointer_gain}) must be above 0")
        if self.num_hidden_layers < 2:
            raise ValueError("the circuit needs 2 layers at least (the previous-token heads, then the induction head)")
        if self.pointer_layer is not None and not 1 <= self.pointer_layer < self.num_hidden_layers:
            raise ValueError(f"the pointer heads' layer ({self.pointer_layer}) must be one of the layers after the "
                             f"first: 1 to {self.num_hidden_layers - 1}")
        beside = self.pointers_at == 1  # the induction head shares layer 1
        if self.hidden_size // self.head_dim < beside + self.pointer_heads:
            raise ValueError(f"{self.pointer_heads} pointer heads{' and the induction head' * beside} need "
                             f"{beside + self.pointer_heads} heads of {self.head_dim} in layer {self.pointers_at}")

    @property
    def pointers_at(self) -> int:
        """The layer of the pointer heads."""
        return 1 if self.pointer_layer is None else self.pointer_layer

    @property
    def pointer_head_ids(self) -> list[int]:
        """The pointer heads' indices in their layer (after the induction head in layer 1, from 0 elsewhere)."""
        first = 1 if self.pointers_at == 1 else 0
        return list(range(first, first + self.pointer_heads))

    def layout(self) -> dict[str, Any]:
        """What ``hold_circuit`` reads back from a saved model's config: the reserved dimensions, the heads
        held in each layer, and the query columns of the held heads that train (the gate)."""
        layers = self.num_hidden_layers
        pointers: list[list[int]] = [[] for _ in range(layers)]
        pointers[self.pointers_at] = self.pointer_head_ids
        return {"head_dim": self.head_dim, "reserved": self.reserved,
                "held_heads": [[0, 1], [0]] + [[] for _ in range(layers - 2)],
                "trained_query_columns": [[], [self.head_dim - 1]] + [[] for _ in range(layers - 2)],
                "pointer_heads": pointers, "recipe": asdict(self)}


def circuit_gpt2(config: CircuitConfig, tokenizer):
    """A GPT-2 causal LM for ``tokenizer`` with the copying circuit set and the rest random."""
    config.check()
    require_training()
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(config.seed)
    model_config = GPT2Config(
        vocab_size=len(tokenizer), n_positions=config.max_position_embeddings, n_embd=config.hidden_size,
        n_layer=config.num_hidden_layers, n_head=config.hidden_size // config.head_dim,
        n_inner=config.intermediate_size, activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0, tie_word_embeddings=True, eos_token_id=tokenizer.convert_tokens_to_ids(IM_END),
        bos_token_id=None, pad_token_id=tokenizer.convert_tokens_to_ids(EOS))
    setattr(model_config, CONFIG_KEY, config.layout())
    model = GPT2LMHeadModel(model_config)
    model.generation_config.eos_token_id = model_config.eos_token_id
    model.generation_config.pad_token_id = model_config.pad_token_id
    with torch.no_grad():
        _set_circuit(model, config, tokenizer.convert_tokens_to_ids(IM_START))
    return model


def _set_circuit(model, c: CircuitConfig, first_token: int) -> None:
    import torch

    body, r, h, width = model.transformer, c.reserved_scale, c.head_dim, c.hidden_size
    e, p, p2, pos, reserved = 0, h, 2 * h, 3 * h, c.reserved
    code = h - 1  # each token's code takes E's first h-1 dimensions; the last marks the first position
    n = len(c.omegas)
    codes = torch.randn(body.wte.weight.shape[0], code)
    body.wte.weight[:, e:e + code] = r * codes / codes.norm(dim=1, keepdim=True)
    body.wte.weight[:, e + code:reserved] = 0
    body.wpe.weight.zero_()
    body.wpe.weight[0, e + code] = r
    position = torch.arange(body.wpe.weight.shape[0], dtype=torch.float32)
    for f, omega in enumerate(c.omegas):
        body.wpe.weight[:, pos + 2 * f] = r * torch.cos(omega * position) / math.sqrt(n)
        body.wpe.weight[:, pos + 2 * f + 1] = r * torch.sin(omega * position) / math.sqrt(n)
    for norm in [m for block in body.h for m in (block.ln_1, block.ln_2)] + [body.ln_f]:
        norm.weight.fill_(1.0)
        norm.weight[reserved:] = c.free_gain
        norm.bias.zero_()
    body.ln_f.weight[e:e + h] = 1.0 / r  # the tied unembedding reads E at unit strength
    free = float((body.wte.weight[:, reserved:] ** 2).sum(1).mean())
    # LayerNorm divides by the residual's RMS; these undo it for the parts present (each of norm r),
    # so that each reaches the heads at unit norm
    scale0 = math.sqrt((2.0 * r * r + free) / width) / r  # E + positions
    scale1 = math.sqrt((4.0 * r * r + free) / width) / r  # E + P + P2 + positions
    first, second = body.h[0].attn, body.h[1].attn
    for head, offset in ((0, 1), (1, 2)):
        q, k, v = _clear(first, head, h, width)
        gain = c.position_gain * scale0 * math.sqrt(n)
        for f, omega in enumerate(c.omegas):
            cos_row, sin_row = pos + 2 * f, pos + 2 * f + 1
            first.c_attn.weight[cos_row, q.start + 2 * f] = gain
            first.c_attn.weight[sin_row, q.start + 2 * f + 1] = gain
            cos, sin = math.cos(offset * omega), math.sin(offset * omega)  # the key: position + offset
            first.c_attn.weight[cos_row, k.start + 2 * f] = gain * cos
            first.c_attn.weight[sin_row, k.start + 2 * f] = -gain * sin
            first.c_attn.weight[cos_row, k.start + 2 * f + 1] = gain * sin
            first.c_attn.weight[sin_row, k.start + 2 * f + 1] = gain * cos
        for d in range(code):
            first.c_attn.weight[e + d, v.start + d] = scale0
            first.c_proj.weight[head * h + d, offset * h + d] = r  # into P (offset 1) or P2 (offset 2)
    q, k, v = _clear(second, 0, h, width)
    _write_attended_token(second, 0, code, scale1, c.copy_gain * r)
    match = c.match_gain * scale1
    for d in range(code):
        second.c_attn.weight[e + d, q.start + d] = match
        second.c_attn.weight[p + d, q.start + d] = c.previous_weight * match
        second.c_attn.weight[p + d, k.start + d] = match
        second.c_attn.weight[p2 + d, k.start + d] = c.previous_weight * match
        second.c_attn.weight[e + d, k.start + d] = -c.self_penalty * match
        # the first position's value cancels its own token's code (the conversation's <|im_start|>)
        second.c_attn.weight[e + code, v.start + d] = -scale1 * float(body.wte.weight[first_token, e + d]) / r
    # the gate: the first position's mark in the key; the query's part that scores it starts at zero and trains
    second.c_attn.weight[e + code, k.start + code] = c.sink_gain * scale1
    # nothing else writes into the reserved parts at the start (the free heads and MLPs)
    first.c_proj.weight[2 * h:, :reserved] = 0
    second.c_proj.weight[h:, :reserved] = 0
    for block in body.h[2:]:
        block.attn.c_proj.weight[:, :reserved] = 0
    for block in body.h:
        block.mlp.c_proj.weight[:, :reserved] = 0
    # the pointer heads: the same write as the induction head's; query and key stay random. In layer 1 they
    # read the attended position's own code (E); later, E holds the induction head's prediction as well, so
    # they read P, the code of the token before the attended position
    pointers = body.h[c.pointers_at].attn
    source, scale = (e, scale1) if c.pointers_at == 1 else (p, _later_scale(c, free))
    gain = c.copy_gain if c.pointer_gain is None else c.pointer_gain
    for head in c.pointer_head_ids:
        _clear(pointers, head, h, width, parts=(2,))
        _write_attended_token(pointers, head, code, scale, gain * r, source=source)


def _head_slices(head: int, head_dim: int, width: int) -> tuple[slice, slice, slice]:
    """The query, key and value columns of ``head`` in GPT-2's fused ``c_attn`` (x @ W)."""
    start = head * head_dim
    return (slice(start, start + head_dim), slice(width + start, width + start + head_dim),
            slice(2 * width + start, 2 * width + start + head_dim))


def _clear(attention, head: int, head_dim: int, width: int, parts: tuple[int, ...] = (0, 1, 2)) -> tuple[slice, ...]:
    """Zero ``head``'s output and the given parts of its input (0 query, 1 key, 2 value); return its slices."""
    slices = _head_slices(head, head_dim, width)
    for part in parts:
        attention.c_attn.weight[:, slices[part]] = 0
        attention.c_attn.bias[slices[part]] = 0
    attention.c_proj.weight[head * head_dim:(head + 1) * head_dim, :] = 0
    return slices


def _later_scale(c: CircuitConfig, free: float) -> float:
    """What undoes the norm for a layer after the induction head's: E then holds the token's code and,
    where the head copies, the copied token's code at ``copy_gain`` (taken as half the time, in size)."""
    r, width = c.reserved_scale, c.hidden_size
    e_squared = r * r * (1.0 + 0.5 * c.copy_gain ** 2)
    return math.sqrt((e_squared + 3.0 * r * r + free) / width) / r


def _write_attended_token(attention, head: int, code: int, scale: float, gain: float, source: int = 0) -> None:
    """``head`` reads a token code (``code`` dimensions from ``source``: E, the position's own token, or P,
    the token before it) of the position it attends to, undoing the norm (``scale``), and writes it into
    E at ``gain``: that token's next-token logit."""
    head_dim = attention.head_dim
    v = _head_slices(head, head_dim, attention.embed_dim)[2]
    for d in range(code):  # E starts at dimension 0
        attention.c_attn.weight[source + d, v.start + d] = scale
        attention.c_proj.weight[head * head_dim + d, d] = gain


def circuit_layout(model) -> dict[str, Any] | None:
    """The circuit a model carries (from its config), or None for a model without one."""
    layout = getattr(model.config, CONFIG_KEY, None)
    return layout if isinstance(layout, dict) and getattr(model.config, "model_type", "") == "gpt2" else None


def held_masks(model) -> dict[Any, Any]:
    """For each parameter the circuit lives in: 1 where training may change it, 0 where not. Empty for a
    model without a circuit."""
    import torch

    layout = circuit_layout(model)
    if layout is None:
        return {}
    h, reserved, width = int(layout["head_dim"]), int(layout["reserved"]), model.config.n_embd
    body = model.transformer
    masks: dict[Any, Any] = {}

    def hold(parameter, *index) -> None:
        mask = masks.setdefault(parameter, torch.ones_like(parameter))
        mask[index] = 0

    hold(body.wte.weight, slice(None), slice(0, reserved))
    hold(body.wpe.weight, slice(None), slice(0, reserved))
    hold(body.ln_f.weight, slice(0, reserved))  # the strength at which the tied unembedding reads the copy
    hold(body.ln_f.bias, slice(0, reserved))
    for layer, heads in enumerate(layout["held_heads"]):
        block = body.h[layer]
        for head in heads:
            for part in _head_slices(head, h, width):
                hold(block.attn.c_attn.weight, slice(None), part)
                hold(block.attn.c_attn.bias, part)
            hold(block.attn.c_proj.weight, slice(head * h, (head + 1) * h), slice(None))
        for head in layout["pointer_heads"][layer]:  # what they write, not where they look
            value = _head_slices(head, h, width)[2]
            hold(block.attn.c_attn.weight, slice(None), value)
            hold(block.attn.c_attn.bias, value)
            hold(block.attn.c_proj.weight, slice(head * h, (head + 1) * h), slice(None))
        for column in layout["trained_query_columns"][layer]:
            masks[block.attn.c_attn.weight][:, column] = 1
            masks[block.attn.c_attn.bias][column] = 1
        hold(block.ln_1.weight, slice(0, reserved))
        hold(block.ln_1.bias, slice(0, reserved))
        if layer == 0:  # what layer 0 writes is what layer 1's induction head reads
            hold(block.attn.c_proj.weight, slice(None), slice(0, reserved))
            hold(block.attn.c_proj.bias, slice(0, reserved))
            hold(block.mlp.c_proj.weight, slice(None), slice(0, reserved))
            hold(block.mlp.c_proj.bias, slice(0, reserved))
    return masks


def hold_circuit(model) -> int:
    """Make training leave ``model``'s copying circuit as it is (a mask on the gradients of the weights
    it lives in; the trainers use no weight decay, so a zero gradient leaves a weight unchanged).
    Returns the number of weights held: 0 for a model without a circuit."""
    held = 0
    for parameter, mask in held_masks(model).items():
        if parameter.requires_grad:
            parameter.register_hook(lambda grad, mask=mask: grad * mask)
            held += int((mask == 0).sum())
    return held


def pointer_heads(layout: dict[str, Any] | None) -> tuple[int, list[int]] | None:
    """The layer of a circuit's pointer heads and their indices in it (from its layout, as a model's
    config records it), or None for a layout without them."""
    for layer, heads in enumerate((layout or {}).get("pointer_heads") or ()):
        if heads:
            return layer, list(heads)
    return None


def pointer_targets(ids: list[int], labelled: list[bool], content: list[bool]) -> list[tuple[int, list[int]]]:
    """Where a pointer head must look in ``ids``, with the places it should look at: each trained token t
    (``labelled``) of ``content`` (a word piece, not punctuation or a special token) whose pair with the
    token before never occurred earlier, while its pair with the token after did, with the places j of
    those earlier pairs (``ids[j:j+2] == ids[t:t+2]``, wholly before t). Such a t starts a span copied
    out of the context (a value's first token, a tool's name), which matching the token before cannot
    find; any of its sources is right, since each holds the token to write. Then each trained token
    after t as long as the copy goes on, with the places after those sources that hold it: a pointer
    that stays on the first token while the induction head copies the rest would write that token
    again (without these, values' first tokens came out better and their rest worse: benchmarks/loop.md)."""
    seen: dict[tuple[int, int], list[int]] = {}
    found: list[tuple[int, list[int]]] = []
    for t in range(1, len(ids) - 1):
        if labelled[t] and content[ids[t]] and (ids[t - 1], ids[t]) not in seen:
            sources = [j for j in seen.get((ids[t], ids[t + 1]), ()) if j + 1 < t]
            at = t
            while sources:
                found.append((at, sources))
                at += 1
                if at == len(ids) or not labelled[at]:
                    break
                sources = [j + 1 for j in sources if ids[j + 1] == ids[at]]
        seen.setdefault((ids[t - 1], ids[t]), []).append(t - 1)
    return found


def copy_stops(ids: list[int], labelled: list[bool], content: list[bool]) -> list[int]:
    """The trained tokens of ``ids`` where a copy must stop: the two tokens before t, the last of them a
    word piece (``content``), stood together earlier in the context, and no earlier place of that pair
    goes on with t's token. An induction head, which writes what followed the pair before, writes the
    wrong token there: the space after a name copied out of a sentence, where the call closes its value
    (``"}}``), or the sentence's next word. Copying on past a value's end is how a call's JSON breaks
    and how a copy loops (benchmarks/loop.md)."""
    after: dict[tuple[int, int], set[int]] = {}
    found = []
    for t in range(2, len(ids)):
        pair = (ids[t - 2], ids[t - 1])
        if labelled[t] and content[ids[t - 1]] and pair in after and ids[t] not in after[pair]:
            found.append(t)
        after.setdefault(pair, set()).add(ids[t])
    return found


def content_tokens(tokenizer) -> list[bool]:
    """For each token id of ``tokenizer``: whether it is a word piece (has a letter or digit and is not a
    special token), the tokens ``pointer_targets`` may point at."""
    special = set(tokenizer.all_special_ids) | set(tokenizer.added_tokens_decoder)
    return [i not in special and any(c.isalnum() for c in tokenizer.decode([i])) for i in range(len(tokenizer))]


class PointerLoss:
    """A loss on where a circuit's pointer heads look: at each ``pointer_targets`` position, the negative log
    of the attention a pointer head puts on the token's sources (its best head's, when it has several),
    averaged over the batch's positions. The next-token loss trains the pointer's query and key only
    through a value's first token, which is a few percent of the assistant's tokens and which recall
    lowers as well (benchmarks/loop.md); this one tells them where the value is.

    ``capture(model)`` hooks the input of the pointer heads' layer for one forward pass; ``__call__``
    then computes the loss from it."""

    def __init__(self, model, tokenizer) -> None:
        layout = circuit_layout(model)
        found = pointer_heads(layout)
        if layout is None or found is None:
            raise ValueError("a pointer loss needs a base with pointer heads (`coworkenv model init-tiny "
                             "--copy-circuit`); this model has none")
        (self.layer, self.heads), self.head_dim = found, int(layout["head_dim"])
        # a pointer head past layer 1 reads the code of the token before the one it attends to (P)
        self.shift = 0 if self.layer == 1 else 1
        self.content = content_tokens(tokenizer)
        self._captured: list[Any] = []

    def capture(self, model):
        """A context manager: while it is open, the input of the pointer heads' attention is kept."""
        import contextlib

        block = _body(model).h[self.layer]
        captured = self._captured

        @contextlib.contextmanager
        def hooked():
            captured.clear()
            handle = block.ln_1.register_forward_hook(lambda _module, _args, output: captured.append(output))
            try:
                yield
            finally:
                handle.remove()

        return hooked()

    def __call__(self, model, input_ids, labels):
        """The loss for the forward pass just captured, or None where the batch has no position to train."""
        import torch

        if not self._captured:
            return None
        hidden = self._captured[-1]
        self._captured.clear()
        rows, queries, sources = [], [], []
        for row, (ids, marks) in enumerate(zip(input_ids.tolist(), labels.tolist(), strict=True)):
            labelled = [mark != -100 for mark in marks]
            for t, found in pointer_targets(ids, labelled, self.content):
                mask = torch.zeros(len(ids), dtype=torch.bool)
                mask[[j + self.shift for j in found if j + self.shift < t]] = True
                if mask.any():
                    rows.append(row)
                    queries.append(t - 1)
                    sources.append(mask)
        if not queries:
            return None
        attention = _body(model).h[self.layer].attn
        width, h = hidden.shape[-1], self.head_dim
        at_rows, at_queries = torch.tensor(rows), torch.tensor(queries)
        wanted = torch.stack(sources).to(hidden.device)
        length = hidden.shape[1]
        causal = torch.arange(length, device=hidden.device)[None, :] <= at_queries.to(hidden.device)[:, None]
        qkv = attention.c_attn(hidden)  # batch, positions, 3 x width
        per_row = torch.bincount(at_rows, minlength=hidden.shape[0]).tolist()  # targets come in row order
        losses = []
        for head in self.heads:
            q_cols, k_cols, _ = _head_slices(head, h, width)
            query = qkv[at_rows, at_queries, q_cols].float()  # targets, h
            keys = qkv[:, :, k_cols].float()  # batch, positions, h
            # each row's targets against that row's keys (not the keys copied for every target)
            scores = torch.cat([q @ keys[row].T for row, q in enumerate(query.split(per_row))]) / math.sqrt(h)
            logp = torch.log_softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
            losses.append(-torch.logsumexp(logp.masked_fill(~wanted, float("-inf")), dim=-1))
        return torch.stack(losses).min(dim=0).values.mean()


def _body(model):
    """The GPT-2 body (``transformer``) of a model, a PEFT wrapper's included."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return base.transformer

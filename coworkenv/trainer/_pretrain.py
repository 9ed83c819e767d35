"""``pretrain_base``: a PocketWorker base pretrained by the project, resumable, rebuilt bit for bit.

The recipe (``PretrainSettings``) has these stages, each kept in the output folder so that a run
interrupted at any point resumes where it stopped:

1. **Tokenizer**: a byte-level BPE trained on the exercises of the first ``tokenizer_seeds``
   pretraining workspaces and on every app's tool signatures (digits split one by one; dates, times
   and record ids whole tokens, as ``init-tiny`` does), with the chat template that lists tools as
   signatures (``POCKET_CHAT_TEMPLATE``).
2. **Data**: ``seeds`` workspaces' exercises (``_pretrain_data``), tokenized and packed into
   sequences of ``seq_len`` tokens, a shard per ``SHARD_SEEDS`` seeds (``data/shard-*.npz``: token ids
   and the mask of learned tokens). Exercises longer than a sequence are left out.
3. **Copying** (``copy_steps``): the model's first steps learn to copy, on sequences of random
   tokens in which a span recurs (``copy_batch``): the loss is on the recurrence only, which only
   an induction head (a head that finds the token after an earlier occurrence of the current one)
   predicts. A small model does not form that head on the exercises alone: measured, it recalled
   the generated world's values instead of copying them, and on random spans it formed the head
   only after a plateau of thousands of steps, on short sequences first (benchmarks/loop.md).
   The last eighth of the stage runs on sequences four times as long, so the head reaches across
   the context an episode fills.
4. **Training**: a Qwen3 of the recipe's size from a seeded initialisation, AdamW with warm-up and a
   cosine decay, ``batch_size`` sequences a step in an order drawn from the seed; a checkpoint
   (weights, optimizer, step, losses, wall time) every ``save_every`` steps and at the end.

The same recipe on the same software and thread count gives the same bytes: data and order come
from seeds, the initialisation from ``seed``, the arithmetic is deterministic on a CPU for a fixed
number of threads (``threads``, recorded), and a resumed run continues from exactly the state it
saved. ``coworkenv_model.json`` records the recipe, the data's seeds and hash, the wall time and the
hash of the weights; ``base_hash`` reads it back.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, model_validator

from ..workspace import app_spec, listed_apps
from ._chat_template import EOS, IM_END, POCKET_CHAT_TEMPLATE, signature
from ._circuit import CircuitConfig, circuit_gpt2, held_masks, hold_circuit
from ._model import TrainingError, parameter_count, require_training, train_tokenizer
from ._pretrain_data import PRETRAIN_SEED_FROM, Sample, exercises, render

POCKETWORKER_BASE = Path(__file__).resolve().parents[1] / "assets" / "pocketworker-base"
"""The base ``demo --full`` fine-tunes by default: ``coworkenv model pretrain-base`` at its defaults, committed."""
SHARD_SEEDS = 25
LOG_EVERY = 10  # steps between logged losses (the mean over them)
RECIPE_FILE = "coworkenv_model.json"


class PretrainSettings(BaseModel):
    """The recipe of a pretrained PocketWorker base (stored with it)."""

    out_dir: str
    seeds: int = Field(default=600, ge=1)  # pretraining workspaces (seeds PRETRAIN_SEED_FROM onwards)
    exercises_per_seed: int = Field(default=400, ge=1)
    tokenizer_seeds: int = Field(default=40, ge=1)
    vocab_size: int = Field(default=3072, ge=512)
    hidden_size: int = Field(default=192, ge=16)
    layers: int = Field(default=3, ge=1)
    heads: int = Field(default=6, ge=1)
    kv_heads: int = Field(default=2, ge=1)
    head_dim: int = Field(default=32, ge=8)
    intermediate_size: int = Field(default=768, ge=16)
    seq_len: int = Field(default=1024, ge=64)
    batch_size: int = Field(default=16, ge=1)
    steps: int = Field(default=6000, ge=1)  # steps on the exercises, after the copying stage
    copy_steps: int = Field(default=8000, ge=0)  # steps of random-token copying first (0: none)
    copy_seq_len: int = Field(default=64, ge=16)  # the stage's sequences (the last eighth: four times as long)
    copy_batch_size: int = Field(default=16, ge=1)
    learning_rate: float = Field(default=3e-3, gt=0)
    min_lr_ratio: float = Field(default=0.1, ge=0, le=1)
    warmup_steps: int = Field(default=200, ge=0)
    weight_decay: float = Field(default=0.1, ge=0)
    save_every: int = Field(default=100, ge=1)
    threads: int = Field(default=2, ge=1)  # part of the recipe: the arithmetic's order depends on it
    seed: int = 0
    # a GPT-2 whose copying heads are set by hand and held (``_circuit``) instead of a Qwen3: it copies from
    # the first step, so it has no copying stage; its heads follow from hidden_size / head_dim
    copy_circuit: bool = False
    max_minutes: float | None = Field(default=None, gt=0)  # stop (checkpointed) at the first step past this

    @model_validator(mode="before")
    @classmethod
    def _no_copying_stage_for_the_circuit(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("copy_circuit"):
            if data.get("copy_steps") is None:
                data = {**data, "copy_steps": 0}
            elif data["copy_steps"]:
                raise ValueError("copy_steps: a base with the copying circuit copies from the start; the copying "
                                 "stage is for a Qwen3 base (give 0)")
        return data

    @model_validator(mode="after")
    def _circuit_fits(self) -> PretrainSettings:
        if self.copy_circuit:
            self.circuit().check()  # a ValueError naming the size that does not fit
        return self

    def circuit(self) -> CircuitConfig:
        """The ``CircuitConfig`` of a circuit recipe."""
        return CircuitConfig(hidden_size=self.hidden_size, intermediate_size=self.intermediate_size,
                             num_hidden_layers=self.layers, head_dim=self.head_dim, seed=self.seed)

    def data_seeds(self) -> range:
        return range(PRETRAIN_SEED_FROM, PRETRAIN_SEED_FROM + self.seeds)


@dataclass(frozen=True)
class PretrainProgress:
    stage: str  # tokenizer | data | copy | train | done
    step: int = 0
    steps: int = 0
    loss: float | None = None
    seconds: float = 0.0
    detail: str = ""


ProgressHook = Callable[[PretrainProgress], None]


def _quiet(progress: PretrainProgress) -> None:
    pass


# ---------------------------------------------------------------- tokenizer


def tool_signatures() -> list[str]:
    """Every app's tools as the pocket template lists them (the tokenizer learns their pieces)."""
    return [signature({"name": tool.name, "parameters": tool.input_schema})
            for app in sorted(listed_apps()) for tool in app_spec(app).tools]


def _train_tokenizer(settings: PretrainSettings, out: Path):
    """init-tiny's tokenizer (``train_tokenizer``: digits one by one, JSON's separators whole, dates, times
    and record ids whole) on the first workspaces' exercises and the tool signatures, with the pocket template."""
    texts = ["system\nuser\nassistant\n", *tool_signatures()]
    for seed in settings.data_seeds()[:settings.tokenizer_seeds]:
        texts += [render(sample) for _, sample in exercises(seed, settings.exercises_per_seed)]
    fast = train_tokenizer(texts, vocab_size=settings.vocab_size, chat_template=POCKET_CHAT_TEMPLATE)
    fast.save_pretrained(out)
    return fast


# ---------------------------------------------------------------- data


def encode(tokenizer, sample: Sample) -> tuple[list[int], list[int]]:
    """Token ids of ``sample`` and a 0/1 mask of the tokens learned (those within a learned piece)."""
    text = render(sample)
    spans, at = [], 0
    for piece in sample:
        if piece.learn:
            spans.append((at, at + len(piece.text)))
        at += len(piece.text)
    encoded = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
    mask = [int(any(s <= start and end <= e for s, e in spans)) if end > start else 0
            for start, end in encoded["offset_mapping"]]
    return list(encoded["input_ids"]), mask


def _pack(tokenizer, samples: list[Sample], seq_len: int):
    """Whole samples packed into sequences of ``seq_len`` (separated by ``<|endoftext|>``, padded at the end)."""
    import numpy as np

    pad = tokenizer.convert_tokens_to_ids(EOS)
    ids_rows, mask_rows = [], []
    ids: list[int] = []
    mask: list[int] = []
    for sample in samples:
        sample_ids, sample_mask = encode(tokenizer, sample)
        sample_ids, sample_mask = sample_ids + [pad], sample_mask + [0]
        if len(sample_ids) > seq_len:
            continue
        if len(ids) + len(sample_ids) > seq_len:
            ids_rows.append(ids + [pad] * (seq_len - len(ids)))
            mask_rows.append(mask + [0] * (seq_len - len(mask)))
            ids, mask = [], []
        ids += sample_ids
        mask += sample_mask
    if ids:
        ids_rows.append(ids + [pad] * (seq_len - len(ids)))
        mask_rows.append(mask + [0] * (seq_len - len(mask)))
    return np.array(ids_rows, dtype=np.uint16), np.array(mask_rows, dtype=np.uint8)


def _shards(settings: PretrainSettings, tokenizer, data_dir: Path, on_progress: ProgressHook) -> list[Path]:
    import numpy as np

    seeds = list(settings.data_seeds())
    paths = []
    for index, first in enumerate(range(0, len(seeds), SHARD_SEEDS)):
        path = data_dir / f"shard-{index:04d}.npz"
        paths.append(path)
        if path.exists():
            continue
        samples = [sample for seed in seeds[first:first + SHARD_SEEDS]
                   for _, sample in exercises(seed, settings.exercises_per_seed)]
        ids, mask = _pack(tokenizer, samples, settings.seq_len)
        partial = path.with_suffix(".partial.npz")
        np.savez(partial, ids=ids, mask=mask)
        os.replace(partial, path)
        on_progress(PretrainProgress("data", index + 1, math.ceil(len(seeds) / SHARD_SEEDS),
                                     detail=f"{len(ids)} sequences"))
    return paths


def _load_data(paths: list[Path]):
    import numpy as np

    loaded = [np.load(path) for path in paths]
    return np.concatenate([d["ids"] for d in loaded]), np.concatenate([d["mask"] for d in loaded])


def _digest(ids, mask) -> str:
    digest = hashlib.sha256()
    digest.update(ids.tobytes())
    digest.update(mask.tobytes())
    return digest.hexdigest()[:16]


# ---------------------------------------------------------------- copying


def copy_tokens(tokenizer) -> tuple[list[int], int]:
    """The ids random copying sequences draw from (every learned BPE token: no special, tool or
    whole-value token) and the separator between a span and its repeat (the newline)."""
    added = set(tokenizer.get_added_vocab().values()) | set(tokenizer.all_special_ids)
    separator = tokenizer.convert_tokens_to_ids("\u010a")  # byte-level BPE's newline
    return [i for i in range(len(tokenizer)) if i not in added and i != separator], separator


def copy_batch(tokens: list[int], separator: int, size: int, seq_len: int, rng):
    """``size`` sequences of ``seq_len`` random ``tokens`` in which a span (5 to about a third of
    the sequence, at most 60 tokens) recurs after ``separator``; labels only on the recurrence."""
    import numpy as np

    ids = np.array(tokens)[rng.integers(0, len(tokens), size=(size, seq_len))]
    labels = np.full((size, seq_len), -100, dtype=np.int64)
    longest = min(60, (seq_len - 2) // 3)
    for row in range(size):
        span = int(rng.integers(5, longest + 1))
        start = int(rng.integers(0, seq_len - 2 * span))
        repeat = start + span + 1
        ids[row, start + span] = separator
        ids[row, repeat:repeat + span] = ids[row, start:start + span]
        labels[row, repeat:repeat + span] = ids[row, start:start + span]
    return ids.astype(np.int64), labels


def _copy_step_batch(settings: PretrainSettings, tokens: list[int], separator: int, step: int):
    """The copying stage's batch of ``step``: drawn from the seed and the step (a resumed run draws
    the same); the last eighth of the stage at four times the length, a quarter of the sequences."""
    import numpy as np

    rng = np.random.default_rng([settings.seed, 1, step])
    if step >= settings.copy_steps - settings.copy_steps // 8:
        return copy_batch(tokens, separator, max(1, settings.copy_batch_size // 4), settings.copy_seq_len * 4, rng)
    return copy_batch(tokens, separator, settings.copy_batch_size, settings.copy_seq_len, rng)


def copy_rate(model, tokenizer, *, seq_len: int = 256, sequences: int = 64, seed: int = 7) -> float:
    """The share of a random span's repeated tokens a model predicts exactly (greedy next token), on
    ``sequences`` fresh sequences of ``seq_len``: about 0.9 for a model that copies, 1/vocabulary
    for one that guesses."""
    import numpy as np
    import torch

    tokens, separator = copy_tokens(tokenizer)
    ids, labels = copy_batch(tokens, separator, sequences, seq_len, np.random.default_rng([seed, 2]))
    with torch.no_grad():
        logits = model(input_ids=torch.from_numpy(ids)).logits[:, :-1]
    predicted = logits.argmax(-1).numpy()
    target = labels[:, 1:]
    scored = target != -100
    return round(float(((predicted == target) & scored).sum() / scored.sum()), 3)


# ---------------------------------------------------------------- training


def _model(settings: PretrainSettings, tokenizer):
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    if settings.copy_circuit:
        return circuit_gpt2(settings.circuit(), tokenizer)
    torch.manual_seed(settings.seed)
    config = Qwen3Config(
        vocab_size=len(tokenizer), hidden_size=settings.hidden_size, intermediate_size=settings.intermediate_size,
        num_hidden_layers=settings.layers, num_attention_heads=settings.heads,
        num_key_value_heads=settings.kv_heads, head_dim=settings.head_dim, max_position_embeddings=4096,
        tie_word_embeddings=True, rope_theta=10000.0,  # pyright: ignore[reportCallIssue]
        eos_token_id=tokenizer.convert_tokens_to_ids(IM_END), pad_token_id=tokenizer.convert_tokens_to_ids(EOS),
        bos_token_id=None,
    )
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    return model


def learning_rate(settings: PretrainSettings, step: int) -> float:
    """Linear warm-up, then a cosine decay to ``min_lr_ratio`` of the peak at the last step."""
    if step < settings.warmup_steps:
        return settings.learning_rate * (step + 1) / settings.warmup_steps
    progress = (step - settings.warmup_steps) / max(1, settings.steps - settings.warmup_steps)
    floor = settings.min_lr_ratio
    return settings.learning_rate * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def batch_indices(settings: PretrainSettings, sequences: int, step: int) -> list[int]:
    """The sequences of ``step``: passes over the data, each in an order drawn from the seed and the pass."""
    import numpy as np

    first = step * settings.batch_size
    picked = []
    for position in range(first, first + settings.batch_size):
        epoch, offset = divmod(position, sequences)
        order = np.random.default_rng([settings.seed, epoch]).permutation(sequences)
        picked.append(int(order[offset]))
    return picked


def _save_checkpoint(path: Path, model, optimizer, state: dict[str, Any]) -> None:
    import torch

    partial = path.with_name(path.name + ".partial")
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "state": state}, partial)
    os.replace(partial, path)


def pretrain_base(settings: PretrainSettings, *, on_progress: ProgressHook = _quiet) -> Path:
    """Run (or resume) the recipe into ``settings.out_dir``; return the model folder (``OUT/model``)."""
    require_training()
    import torch
    from transformers import AutoTokenizer

    out = Path(settings.out_dir)
    (out / "data").mkdir(parents=True, exist_ok=True)
    recipe_path = out / "recipe.json"
    recipe = settings.model_dump(exclude={"out_dir", "max_minutes"})
    if recipe_path.exists() and json.loads(recipe_path.read_text()) != recipe:
        raise TrainingError(f"{out} holds a run of another recipe ({recipe_path}); use another folder")
    recipe_path.write_text(json.dumps(recipe, indent=2))
    torch.set_num_threads(settings.threads)
    torch.use_deterministic_algorithms(True)

    tokenizer_dir = out / "tokenizer"
    if not (tokenizer_dir / "tokenizer.json").exists():
        on_progress(PretrainProgress("tokenizer", detail=f"{settings.tokenizer_seeds} workspaces"))
        _train_tokenizer(settings, tokenizer_dir)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True)
    ids, mask = _load_data(_shards(settings, tokenizer, out / "data", on_progress))
    data_hash = _digest(ids, mask)

    model = _model(settings, tokenizer)
    held = held_masks(model)  # the circuit's weights: no gradient, and no decay either (AdamW's would shrink them)
    hold_circuit(model)
    decay = [p for p in model.parameters() if p.ndim >= 2 and p not in held]
    other = [p for p in model.parameters() if p.ndim < 2 or p in held]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": settings.weight_decay},
                                   {"params": other, "weight_decay": 0.0}],
                                  lr=settings.learning_rate, betas=(0.9, 0.95), eps=1e-8, foreach=False)
    checkpoint = out / "checkpoint.pt"
    state: dict[str, Any] = {"step": 0, "seconds": 0.0, "losses": [], "window": [], "data_hash": data_hash}
    if checkpoint.exists():
        saved = torch.load(checkpoint, weights_only=False)
        if saved["state"]["data_hash"] != data_hash:
            raise TrainingError(f"{checkpoint} was trained on other data ({saved['state']['data_hash']}, now {data_hash})")
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        state = {"window": [], **saved["state"]}
    model.train()
    started = time.perf_counter() - state["seconds"]
    session = time.perf_counter()
    tokens, separator = copy_tokens(tokenizer)
    total = settings.copy_steps + settings.steps
    while state["step"] < total:
        step = state["step"]
        copying = step < settings.copy_steps
        if copying:
            batch, targets = _copy_step_batch(settings, tokens, separator, step)
            input_ids, labels = torch.from_numpy(batch), torch.from_numpy(targets)
            rate = settings.learning_rate * min(1.0, (step + 1) / max(1, settings.warmup_steps))
        else:
            rows = batch_indices(settings, len(ids), step - settings.copy_steps)
            input_ids = torch.from_numpy(ids[rows].astype("int64"))
            labels = input_ids.masked_fill(torch.from_numpy(mask[rows]) == 0, -100)
            rate = learning_rate(settings, step - settings.copy_steps)
        for group in optimizer.param_groups:
            group["lr"] = rate
        loss = model(input_ids=input_ids, labels=labels, use_cache=False).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        state["window"].append(loss.item())
        state["step"] = step + 1
        state["seconds"] = time.perf_counter() - started
        logged = state["step"] % LOG_EVERY == 0 or state["step"] in (settings.copy_steps, total)
        if logged:
            window = state["window"]
            state["losses"].append({"step": state["step"], "loss": round(sum(window) / len(window), 4)})
            state["window"] = []
        out_of_time = settings.max_minutes is not None and time.perf_counter() - session > settings.max_minutes * 60
        if state["step"] == settings.copy_steps:
            model.eval()
            state["copy_rate"] = copy_rate(model, tokenizer)
            model.train()
        if state["step"] % settings.save_every == 0 or state["step"] == total or out_of_time:
            _save_checkpoint(checkpoint, model, optimizer, state)
        if logged:
            on_progress(PretrainProgress("copy" if copying else "train", state["step"], total,
                                         state["losses"][-1]["loss"], state["seconds"],
                                         f"copies {state['copy_rate']:.0%} of a repeated span"
                                         if state["step"] == settings.copy_steps else ""))
        if out_of_time:
            return checkpoint
    return _finish(settings, model, tokenizer, state, out)


def snapshot_base(out_dir: str | Path) -> Path:
    """The base as its last checkpoint holds it, as a model folder (``OUT/snapshot``): a run still
    going (or stopped by ``max_minutes``) can be tried before it ends."""
    require_training()
    import torch
    from transformers import AutoTokenizer

    out = Path(out_dir)
    if not (out / "checkpoint.pt").exists():
        raise FileNotFoundError(f"{out} holds no pretraining checkpoint (checkpoint.pt)")
    settings = PretrainSettings(out_dir=str(out), **json.loads((out / "recipe.json").read_text()))
    tokenizer = AutoTokenizer.from_pretrained(out / "tokenizer", local_files_only=True)
    model = _model(settings, tokenizer)
    saved = torch.load(out / "checkpoint.pt", weights_only=False)
    model.load_state_dict(saved["model"])
    return _finish(settings, model, tokenizer, saved["state"], out, folder=out / "snapshot")


def _finish(settings: PretrainSettings, model, tokenizer, state: dict[str, Any], out: Path,
            folder: Path | None = None) -> Path:
    folder = folder or out / "model"
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    meta = {
        "kind": "pretrained-base",
        "recipe": settings.model_dump(exclude={"out_dir", "max_minutes"}),
        "data_seeds": [settings.data_seeds().start, settings.data_seeds().stop - 1],
        "data_hash": state["data_hash"],
        "steps": state["step"],
        "wall_seconds": round(state["seconds"], 1),
        "final_loss": state["losses"][-1]["loss"] if state["losses"] else None,
        "copy_rate_after_copying": state.get("copy_rate"),  # copy_rate when the copying stage ended
        "losses": state["losses"][:: max(1, len(state["losses"]) // 50)],
        "parameters": parameter_count(model),
        "vocab_size": len(tokenizer),
        "weights_sha256": weights_hash(folder),
    }
    (folder / RECIPE_FILE).write_text(json.dumps(meta, indent=2))
    return folder


PROBE_SEED = PRETRAIN_SEED_FROM + 800_000  # workspaces of the probe: neither pretraining's nor replay's


def copy_probe(model_dir: str | Path, count: int = 60, *, seed: int = PROBE_SEED) -> dict[str, float]:
    """How often a base answers an unseen exercise exactly (greedy), by kind and overall: its first
    question of each conversational exercise over workspaces it was not trained on."""
    require_training()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True, dtype="float32").eval()
    right: dict[str, list[bool]] = {}
    workspace = seed
    while sum(map(len, right.values())) < count:
        for kind, sample in exercises(workspace, count):
            if kind == "text" or sum(map(len, right.values())) >= count:
                continue
            first = next(n for n, piece in enumerate(sample) if piece.learn)
            prompt = tokenizer(render(sample[:first]), add_special_tokens=False, return_tensors="pt")
            if prompt["input_ids"].shape[1] > 1536:
                continue
            with torch.no_grad():
                out = model.generate(  # pyright: ignore[reportAttributeAccessIssue]
                    **prompt, max_new_tokens=48, do_sample=False)
            answer = tokenizer.decode(out[0, prompt["input_ids"].shape[1]:], skip_special_tokens=True)
            right.setdefault(kind, []).append(answer.strip() == sample[first].content)
        workspace += 1
    rates = {kind: round(sum(r) / len(r), 3) for kind, r in sorted(right.items())}
    return {**rates, "overall": round(sum(sum(r) for r in right.values()) / count, 3)}


def resolve_base(base: str | Path) -> Path:
    """The model folder a ``--base`` names: ``pretrained`` (the committed PocketWorker base) or a folder.
    Raises ``FileNotFoundError`` saying how to get one."""
    path = POCKETWORKER_BASE if str(base) == "pretrained" else Path(base)
    if not (path / "config.json").exists():
        hint = ("rebuild it with `coworkenv model pretrain-base --out DIR` and pass --base DIR/model, or --base scratch"
                if str(base) == "pretrained" else "give a model folder, `pretrained` or `scratch`")
        raise FileNotFoundError(f"no model folder at {path} (no config.json); {hint}")
    return path


def weights_hash(folder: str | Path) -> str:
    """The sha256 of a model folder's weights (``model.safetensors``)."""
    return hashlib.sha256((Path(folder) / "model.safetensors").read_bytes()).hexdigest()

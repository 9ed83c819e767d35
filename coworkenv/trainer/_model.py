"""PocketWorker base models: a tiny Qwen3 from a config, or a real Qwen3 checkpoint on disk.

``init_tiny_model(rows, out_dir)`` trains a byte-level BPE tokenizer on the exported corpus
(SFT rows: ``messages`` + ``tools``), builds a randomly initialised Qwen3-architecture causal LM
of a few million parameters at most, installs the ChatML/Hermes chat template with generation
markers, and saves everything with ``save_pretrained`` (a folder that TRL, transformers and
vLLM load). ``init_model(out_dir, base=PATH)`` goes through the same path for a real checkpoint
(Qwen3-0.6B … Qwen3-VL-8B-Instruct): it loads the model and tokenizer from the folder and
installs the chat template when the model's own has no generation markers.

The tokenizer splits every digit into its own token, and keeps whole the values that recur in
the corpus and that a model has to copy from the prompt or a tool result: email addresses, file
names, dates, times, project and invoice codes, record ids, amounts and quoted names (event
titles, mail subjects, folders, rooms). Copying such a value is
then one token; a value the corpus does not repeat falls back to byte-level pieces and single
digits. Entity tokens match whole words only (``2026-03-18`` is not found inside ``12026-03-188``).

Both take ``on_stage``, a function told what is being done (training the tokenizer, building the
model, saving), so that a caller can show it: on a large corpus the tokenizer takes minutes.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .._errors import CoworkenvError
from ._chat_template import CHAT_TEMPLATE, EOS, IM_END, IM_START, TOOL_LINES, TOOL_TOKENS, ToolLines, signature, tojson

if TYPE_CHECKING:
    from ._circuit import CircuitConfig


class TrainingUnavailable(CoworkenvError, RuntimeError):
    """The training extra is not installed; the message says what to install."""


class TrainingError(CoworkenvError, ValueError):
    """Rows, a data file, an output folder or a setting that training or an export cannot use; the
    message says what was wrong. A ``ValueError`` raised inside TRL or transformers is not one of
    these: it is a bug, and the CLI shows its traceback."""


def require_training() -> None:
    try:
        import tokenizers  # noqa: F401
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        raise TrainingUnavailable(
            f"training needs the 'train' extra ({exc.name} is missing): pip install 'coworkenv[train]'"
            " (on a CPU-only machine install torch==2.13.0 first)"
        ) from None


Spaces = Literal["separate", "attached"]  # how a tokenizer cuts the space before a word


@dataclass(frozen=True)
class TinyConfig:
    """The size of a tiny Qwen3 (the defaults give about 1.5 M parameters with a 2k vocabulary)."""

    vocab_size: int = 2048
    hidden_size: int = 128
    intermediate_size: int = 512
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 32
    max_position_embeddings: int = 4096
    entity_min_count: int = 2  # a date, time or record id seen this often becomes one token
    seed: int = 0
    tool_lines: ToolLines = "json"  # how the chat template lists the tools: "json" objects or "signatures"
    spaces: Spaces = "attached"  # the space before a word is part of its first token ("attached"), or a token ("separate")


# Values that become whole tokens: only those of the small, closed sets every workspace draws from
# (dates, times, record ids), so that a held-out workspace's values are tokenized as training's were.
# Open-ended values (email addresses, file names, names and titles, codes, amounts) stay in BPE
# pieces: made whole tokens from the training rows, the values of new workspaces were not among them
# (0 of 16 email addresses, 6 of 38 codes of held-out tasks in a 1,000-task run), and a model that
# had learned to copy one token each found them in pieces it had never copied (benchmarks/loop.md).
ENTITY_PATTERNS = (
    re.compile(r"\b\d{4}-\d{2}-\d{2}\b"),  # dates
    re.compile(r"\b\d{2}:\d{2}\b"),  # times
    re.compile(r"\b[a-z]\d{2,3}\b"),  # record ids (m07, e15, f10)
)


def corpus_texts(rows: Iterable[dict[str, Any]], tool_lines: ToolLines = "json") -> Iterator[str]:
    """The text pieces a model sees in SFT/DPO rows: contents, tool calls, tools as the chat template
    lists them (``tool_lines``: JSON objects or signatures).

    Pieces are yielded as often as the model sees them (a tool list once per row), so that BPE
    merges follow what training sequences are made of.
    """
    for row in rows:
        yield "system\nuser\nassistant\n"  # the role names of the chat template
        for tool in row.get("tools") or []:
            yield signature(tool) if tool_lines == "signatures" else tojson(tool.get("function", tool))
        messages = [*(row.get("messages") or row.get("prompt") or []), *(row.get("chosen") or []),
                    *(row.get("rejected") or [])]
        for message in messages:
            if message.get("content"):
                yield str(message["content"])
            for call in message.get("tool_calls") or []:
                fn = call.get("function", call)
                args = fn["arguments"] if isinstance(fn["arguments"], str) else tojson(fn["arguments"])
                yield f'{{"name": "{fn["name"]}", "arguments": {args}}}'


def entity_tokens(texts: Iterable[str], min_count: int = 2) -> list[str]:
    """Dates, times and record ids seen at least ``min_count`` times, most frequent first."""
    counts: Counter[str] = Counter()
    for text in texts:
        for pattern in ENTITY_PATTERNS:
            counts.update(pattern.findall(text))
    return [name for name, n in counts.most_common() if n >= min_count]


# How text is cut into pieces before BPE: GPT-2's pattern, with JSON's separators between a key and a
# string value (and between one value and the next key) kept whole. GPT-2's cuts ``": "`` into ``":``
# and `` "``, which puts a field's name three tokens before its value; kept whole, it is two, where
# the copying circuit's keys see it (the token two back, ``_circuit``), and rows are ~15% shorter.
JSON_SEPARATORS = r'": "|", "|": \{"|": \["|\}, \{"'
GPT2_PIECES = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
# The same pieces with no space in front: a space is a piece (a token) of its own. GPT-2's pieces take the
# space before a word, so a value is other tokens in a sentence than in JSON, after a quote (" Printer" is
# `` P`` + ``rinter``, "Printer" one token), and no copying head can copy it out of an instruction token by
# token. Cut so, nearly every such value is in the context as a call writes it; but rows are longer and the
# student trained on it passed fewer held-out tasks (benchmarks/loop.md), so GPT-2's cut stays the default.
WORD_PIECES = r"""'s|'t|'re|'ve|'m|'ll|'d|\p{L}+|\p{N}+|[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
PIECES: dict[str, str] = {"separate": WORD_PIECES, "attached": GPT2_PIECES}


def train_tokenizer(texts: list[str], *, vocab_size: int = 2048, entity_min_count: int = 2,
                    chat_template: str = CHAT_TEMPLATE, spaces: Spaces = "attached"):
    """A byte-level BPE tokenizer (``PreTrainedTokenizerFast``) trained on ``texts``, with ``chat_template``;
    ``spaces``: whether the space before a word is a token of its own (``WORD_PIECES``) or part of the
    word's first token (GPT-2's pieces)."""
    if spaces not in PIECES:
        raise TrainingError(f"spaces {spaces!r}: choose one of {', '.join(PIECES)}")
    require_training()
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.Split(Regex(f"{JSON_SEPARATORS}|{PIECES[spaces]}"), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    special = [EOS, IM_START, IM_END]
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    entities = entity_tokens(texts, entity_min_count)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TOOL_TOKENS])
    tok.add_tokens([AddedToken(t, special=False, normalized=False, single_word=True) for t in entities])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=IM_END, pad_token=EOS, bos_token=None, unk_token=None,
        additional_special_tokens=[IM_START],
    )
    fast.chat_template = chat_template
    fast.model_max_length = 4096
    return fast


def tiny_qwen3(config: TinyConfig, tokenizer):
    """A randomly initialised Qwen3 causal LM sized by ``config`` for ``tokenizer``."""
    require_training()
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(config.seed)
    model_config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        num_key_value_heads=config.num_key_value_heads,
        head_dim=config.head_dim,
        max_position_embeddings=config.max_position_embeddings,
        tie_word_embeddings=True,
        rope_theta=10000.0,  # pyright: ignore[reportCallIssue]  # taken by the config's **kwargs
        eos_token_id=tokenizer.convert_tokens_to_ids(IM_END),
        pad_token_id=tokenizer.convert_tokens_to_ids(EOS),
        bos_token_id=None,
    )
    model = Qwen3ForCausalLM(model_config)
    model.generation_config.eos_token_id = model_config.eos_token_id
    model.generation_config.pad_token_id = model_config.pad_token_id
    return model


def parameter_count(model) -> int:
    return sum(p.numel() for p in model.parameters())


StageHook = Callable[[str], None]


def _no_stage(stage: str) -> None:
    pass


def init_tiny_model(rows: Iterable[dict[str, Any]], out_dir: str | Path, config: TinyConfig | None = None, *,
                    circuit: CircuitConfig | None = None, on_stage: StageHook = _no_stage) -> Path:
    """Build and save a tiny PocketWorker base for the corpus ``rows``; return ``out_dir``. A Qwen3 sized
    by ``config``, or with ``circuit`` a GPT-2 with its copying circuit set (``config`` then gives the
    tokenizer only)."""
    config = config or TinyConfig()
    if config.tool_lines not in TOOL_LINES:
        raise TrainingError(f"tool lines {config.tool_lines!r}: choose one of {', '.join(TOOL_LINES)}")
    texts = list(corpus_texts(rows, config.tool_lines))
    if not texts:
        raise TrainingError("the corpus is empty: export SFT rows first (coworkenv export sft)")
    require_training()
    on_stage(f"training a {config.vocab_size:,}-token BPE tokenizer on {len(texts):,} texts")
    tokenizer = train_tokenizer(texts, vocab_size=config.vocab_size, entity_min_count=config.entity_min_count,
                                chat_template=TOOL_LINES[config.tool_lines], spaces=config.spaces)
    if circuit is not None:
        from ._circuit import circuit_gpt2

        on_stage(f"building a GPT-2 with a copying circuit (hidden size {circuit.hidden_size}, "
                 f"layers: {circuit.num_hidden_layers})")
        model = circuit_gpt2(circuit, tokenizer)
        meta = {"kind": "tiny", "config": asdict(config), "copy_circuit": asdict(circuit)}
    else:
        on_stage(f"building a Qwen3 (hidden size {config.hidden_size}, layers: {config.num_hidden_layers})")
        model = tiny_qwen3(config, tokenizer)
        meta = {"kind": "tiny", "config": asdict(config)}
    on_stage(f"saving to {out_dir}")
    return _save(out_dir, model, tokenizer, meta)


def init_model(out_dir: str | Path, *, base: str | Path, on_stage: StageHook = _no_stage) -> Path:
    """Save a real checkpoint (a local folder) into ``out_dir`` with a training-compatible template."""
    require_training()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = Path(base)
    if not (base / "config.json").exists():
        raise FileNotFoundError(f"{base} is not a model folder (no config.json); nothing is downloaded here")
    on_stage(f"loading {base}")
    tokenizer = AutoTokenizer.from_pretrained(base, local_files_only=True)
    try:
        model = AutoModelForCausalLM.from_pretrained(base, local_files_only=True)
    except ValueError:  # a vision-language checkpoint (Qwen3-VL) has no causal-LM class of its own
        from transformers import AutoModelForImageTextToText

        model = AutoModelForImageTextToText.from_pretrained(base, local_files_only=True)
    if "{% generation %}" not in (tokenizer.chat_template or ""):
        tokenizer.chat_template = CHAT_TEMPLATE  # Qwen3's ChatML tokens and Hermes tool tags are in its vocab
    on_stage(f"saving to {out_dir}")
    return _save(out_dir, model, tokenizer, {"kind": "pretrained", "base": str(base)})


def _save(out_dir: str | Path, model, tokenizer, meta: dict) -> Path:
    """Write the model, its tokenizer and ``coworkenv_model.json`` (``meta`` plus the parameter count
    and the vocabulary size)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    meta = {**meta, "parameters": parameter_count(model), "vocab_size": model.config.get_text_config().vocab_size}
    (out / "coworkenv_model.json").write_text(json.dumps(meta, indent=2))
    return out


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """JSON-lines rows from ``path`` with a clear error for a missing or malformed file."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no dataset at {path}")
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise TrainingError(f"{path}:{n}: not a JSON line ({exc.msg})") from None
    return rows

"""Exports as Hugging Face datasets: a folder ``datasets.load_dataset(folder)`` reads, or one parquet file.

The rows are the JSON-lines export's (``sft_rows``, ``dpo_rows``, ``rl_rows``), written with a fixed
schema per kind (``dataset_features``) so that every file of an export, and every export of a kind, has
the same columns and types. Values whose shape varies from row to row (a tool list and its
schemas, a call's arguments, a verdict's check outcomes) are ``Json`` features: stored as JSON
text, read back as the objects they were. As plain structs, Arrow would merge every row's argument
names into one struct and give each call ``null`` for the arguments it never had.

A folder holds ``data/<split>-00000-of-00001.parquet``, one split per capability (a model's
pass rates are read per capability, and a trainer picks capabilities by split), and a README.md
dataset card. Its YAML front matter is what the Hub and ``load_dataset`` read: the licence, the
splits and their files (``configs``), the features, and under ``coworkenv`` what the rows were made
from (the grader versions and hashes that admitted them, the bundle hashes of their workspaces and
tasks, the workspace seeds of each split). Its text says the same for people.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import yaml

from ..store import Store
from ..workspace import PromptStyle
from ._export import dpo_rows, rl_rows, sft_rows
from ._model import TrainingError, TrainingUnavailable

ExportKind = Literal["sft", "dpo", "rl"]
DatasetFormat = Literal["jsonl", "parquet", "hf"]
DATASET_FORMATS: tuple[str, ...] = ("jsonl", "parquet", "hf")
CARD = "README.md"
DEFAULT_LICENSE = "apache-2.0"
_TAGS = ["coworkenv", "tool-use", "agents", "mcp", "synthetic"]


def dataset_features(kind: ExportKind):
    """The ``datasets.Features`` of an export of ``kind``."""
    from datasets import Features, Json, List, Value

    text, json_value = Value("string"), Json()
    message = {"role": text, "content": text,
               "tool_calls": List({"id": text, "type": text, "function": {"name": text, "arguments": json_value}}),
               "tool_call_id": text, "name": text}
    provenance = {"bundle_hash": text, "grader_version": text}
    if kind == "sft":
        return Features({
            "messages": List(message), "images": List(text), "tools": json_value, "episode_id": text,
            "task_id": text, "source": text, "provider": text, "client": text, "run_tag": text, "capability": text,
            "seed": Value("int64"), "repaired": Value("bool"), **provenance, "grader_hash": text})
    if kind == "dpo":
        return Features({
            "prompt": List(message), "chosen": List(message), "rejected": List(message), "tools": json_value,
            "episode_id": text, "rejected_episode_id": text, "rejected_reason": text, "task_id": text,
            "capability": text, "seed": Value("int64"), **provenance, "grader_hash": text})
    if kind == "rl":
        score = Value("float64")
        return Features({
            "prompt": List(message), "tools": json_value, "task_id": text, "workspace_id": text, "capability": text,
            "seed": Value("int64"), **provenance,
            "rewards": List({"episode_id": text, "source": text, "admitted": Value("bool"), "reason": text,
                             "completion": score, "safety": score, "robustness": score, "score": score,
                             "checks": json_value, "grader_hash": text})})
    raise ValueError(f"unknown export kind {kind!r}; one of: sft, dpo, rl")


ROWS: dict[str, Callable[..., list[dict[str, Any]]]] = {"sft": sft_rows, "dpo": dpo_rows, "rl": rl_rows}


def split_name(capability: str) -> str:
    """A capability as a split name (the Hub's rule: word characters, dot-separated)."""
    return re.sub(r"\W+", "_", capability).strip("_") or "other"


def _check_text_content(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        for column in ("messages", "prompt", "chosen", "rejected"):
            for message in row.get(column) or []:
                if not isinstance(message.get("content"), str):
                    raise TrainingError("a message with list content (an SFT export with --vision) has no parquet "
                                     "schema here; export it as JSON lines")


def _table(kind: ExportKind, rows: list[dict[str, Any]]):
    from datasets import Dataset

    _check_text_content(rows)
    return Dataset.from_list(rows, features=dataset_features(kind))


def _write_parquet(table, path: Path) -> None:
    """``table`` (a ``datasets.Dataset``) as one parquet file, its features in the schema's metadata.
    Written by pyarrow itself: ``Dataset.to_parquet`` sizes its row groups by walking the columns,
    which fails on a list of structs holding a ``Json`` feature (datasets 5.2)."""
    import pyarrow.parquet as pq

    pq.write_table(table.data.table, str(path))


def _write_replacing(target: Path, write: Callable[[Path], None], *, folder: bool) -> None:
    """``write(path)`` into a fresh place beside ``target``, then put it at ``target`` (a reader sees
    the old export or the new one, never half of one); nothing is left behind when writing fails."""
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent))
    try:
        made = scratch / target.name
        if folder:
            made.mkdir()
        write(made)
        if folder and target.exists():
            old = scratch / "replaced"
            target.rename(old)
        made.replace(target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def require_datasets() -> None:
    try:
        import datasets  # noqa: F401
    except ImportError:
        raise TrainingUnavailable("--format parquet and hf need the datasets package (the 'train' extra): "
                                  "pip install 'coworkenv[train]'") from None


def check_dataset_target(out: Path, fmt: DatasetFormat, kind: str = "rows") -> None:
    """``ValueError`` naming the problem when ``out`` cannot take an export of ``fmt``: a file where a
    folder goes, a folder where a file goes, or a folder that holds anything but an earlier export
    (which replacing it would lose)."""
    if fmt != "hf":
        if out.is_dir():
            raise TrainingError(f"--out {out} is a folder; give a file name, e.g. {out / f'{kind}.{fmt}'}")
        return
    if out.exists() and not out.is_dir():
        raise TrainingError(f"--out {out} is a file; give a folder for a dataset (--format hf)")
    if out.is_dir() and any(out.iterdir()) and not _is_export(out):
        raise TrainingError(f"--out {out} is a folder that holds other files than a dataset export; give a new folder")


def _is_export(folder: Path) -> bool:
    """Whether ``folder`` holds a dataset export and nothing else: its card and its data files."""
    if {p.name for p in folder.iterdir()} - {CARD, "data"}:
        return False
    try:
        return "coworkenv" in card_metadata(folder)
    except (OSError, ValueError, yaml.YAMLError):
        return False


def export_dataset(store: Store, kind: ExportKind, out: str | Path, *, fmt: DatasetFormat = "hf",
                   style: PromptStyle = "full", license: str = DEFAULT_LICENSE, allow_empty: bool = True,
                   **options: Any) -> dict[str, int]:
    """Write the rows of ``kind`` (``options`` go to ``sft_rows`` etc.) as a dataset folder (``hf``:
    parquet per capability split and a dataset card) or one parquet file (``parquet``), replacing
    what ``out`` held; return the row count of each split (``parquet``: one, ``all``).

    With ``allow_empty=False`` a store with nothing to export raises ``ValueError`` and writes nothing."""
    require_datasets()
    out = Path(out)
    if fmt not in ("parquet", "hf"):
        raise ValueError(f"unknown dataset format {fmt!r} here; one of: parquet, hf")
    check_dataset_target(out, fmt)
    rows = ROWS[kind](store, style=style, **options)
    if not rows and not allow_empty:
        raise TrainingError(f"{store.path} has no {kind.upper()} rows to export; nothing written")
    if fmt == "parquet":
        table = _table(kind, rows)

        _write_replacing(out, lambda path: _write_parquet(table, path), folder=False)
        return {"all": len(rows)}
    splits: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in sorted(rows, key=lambda r: (r["seed"], r["task_id"])):
        splits[split_name(row["capability"])].append(row)
    tables = {name: _table(kind, split_rows) for name, split_rows in sorted(splits.items())}

    def write(folder: Path) -> None:
        (folder / "data").mkdir()
        for name, table in tables.items():
            _write_parquet(table, folder / "data" / f"{name}-00000-of-00001.parquet")
        (folder / CARD).write_text(dataset_card(kind, style, splits, tables, license))

    _write_replacing(out, write, folder=True)
    return {name: len(split_rows) for name, split_rows in sorted(splits.items())}


def _graders(kind: ExportKind, rows: list[dict[str, Any]]) -> list[dict[str, str | None]]:
    """The (version, hash) of every grader whose verdicts the rows carry."""
    found = set()
    for row in rows:
        if kind == "rl":
            found |= {(row["grader_version"], r["grader_hash"]) for r in row["rewards"]}
        else:
            found.add((row["grader_version"], row["grader_hash"]))
    return [{"version": v, "hash": h} for v, h in sorted(found, key=lambda x: (x[0], x[1] or ""))]


def _size_category(n: int) -> str:
    for bound, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < bound:
            return name
    return "1M<n<10M"


WHAT = {
    "sft": "Admitted trajectories as chat messages with tool calls, for supervised fine-tuning (TRL's "
           "`SFTTrainer` reads `messages` and `tools`)",
    "dpo": "Repaired-versus-failed pairs (`prompt`, `chosen`, `rejected`, `tools`) for preference training "
           "(TRL's `DPOTrainer`)",
    "rl": "Admitted tasks as prompts (`prompt`, `tools`, `task_id`) with the gate's verdicts on their graded "
          "episodes (`rewards`), for reinforcement learning on live episodes (`coworkenv.trl`)",
}


def dataset_card(kind: ExportKind, style: str, splits: dict[str, list[dict[str, Any]]], tables: dict[str, Any],
                 license: str) -> str:
    """The README.md of a dataset folder: YAML front matter for the Hub and ``load_dataset``, then text."""
    from datasets import DatasetInfo, SplitDict, SplitInfo

    from .. import __version__

    rows = [row for split_rows in splits.values() for row in split_rows]
    split_dict = SplitDict()
    for name, table in tables.items():
        split_dict.add(SplitInfo(name=name, num_bytes=table.data.nbytes, num_examples=len(table)))
    info = DatasetInfo(features=dataset_features(kind), splits=split_dict)
    bundles = sorted({row["bundle_hash"] for row in rows if row.get("bundle_hash")})
    graders = _graders(kind, rows)
    seeds = {name: sorted({row["seed"] for row in split_rows}) for name, split_rows in splits.items()}
    front = {
        "license": license,
        "pretty_name": f"coworkenv {kind.upper()} export",
        "tags": _TAGS,
        "task_categories": ["text-generation"],
        "size_categories": [_size_category(len(rows))],
        "configs": [{"config_name": "default", "data_files": [
            {"split": name, "path": f"data/{name}-*.parquet"} for name in tables]}],
        "dataset_info": info._to_yaml_dict(),
        "coworkenv": {
            "version": __version__, "kind": kind, "style": style, "rows": len(rows), "graders": graders,
            "bundles": len(bundles),
            "bundles_sha256": hashlib.sha256("\n".join(bundles).encode()).hexdigest(),
            "bundle_hashes": bundles, "seeds": seeds,
        },
    }
    table_lines = ["| split (capability) | rows | workspace seeds |", "| --- | --- | --- |"]
    for name, split_rows in splits.items():
        table_lines.append(f"| {name} | {len(split_rows)} | {_seed_ranges(seeds[name])} |")
    grader_text = ", ".join(f"{g['version']} ({g['hash'] or 'hash not recorded'})" for g in graders) or "none"
    text = f"""# coworkenv {kind.upper()} export

{WHAT[kind]}, exported by coworkenv {__version__} in the `{style}` agent view.

```python
from datasets import load_dataset

dataset = load_dataset("path/to/this/folder")  # one split per capability
```

{chr(10).join(table_lines)}

- **Made from.** Every row names the bundle it came from (`bundle_hash`: the hash of its workspace and
  task) and the grader that admitted it (`grader_version`; `grader_hash` for each verdict). This export
  holds {len(bundles)} bundles (sha256 of their sorted hashes: `{front['coworkenv']['bundles_sha256']}`),
  graded by {grader_text}. The front matter lists them all.
- **Columns.** `tools`, each call's `arguments` and a verdict's `checks` are JSON features (stored as JSON
  text, read back as objects). Message fields a message does not have (`tool_calls`, `tool_call_id`,
  `name`) read as `null`.
- **Licence.** `{license}` (set with `coworkenv export --license`). Before you publish it, check the terms of
  the model providers whose episodes the rows hold (the `provider` of SFT rows).
"""
    return "---\n" + yaml.safe_dump(front, sort_keys=False, allow_unicode=True) + "---\n\n" + text


def _seed_ranges(seeds: list[int]) -> str:
    """``[0, 1, 2, 5]`` as ``0-2, 5``."""
    runs: list[list[int]] = []
    for seed in seeds:
        if runs and seed == runs[-1][-1] + 1:
            runs[-1].append(seed)
        else:
            runs.append([seed])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def card_metadata(folder: str | Path) -> dict[str, Any]:
    """The YAML front matter of a dataset folder's card."""
    text = (Path(folder) / CARD).read_text()
    end = text.find("\n---\n", 4)
    if not text.startswith("---\n") or end < 0:
        raise ValueError(f"{Path(folder) / CARD} has no YAML front matter")
    found = yaml.safe_load(text[4:end])
    if not isinstance(found, dict):
        raise ValueError(f"{Path(folder) / CARD}'s front matter is not a mapping")
    return found

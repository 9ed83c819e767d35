"""What a PocketWorker base is pretrained on: reading and copying, drawn from the world generator.

A real LLM comes to tool use already able to read a JSON record, find a value by its cue and copy it
into an answer or a JSON object. A model built from a config comes with none of that, and the SFT rows
alone did not teach it (``benchmarks/loop.md``). This module writes the stand-in: exercises over the
records of workspaces whose seeds no task and no evaluation uses (``PRETRAIN_SEED_FROM`` onwards),
rendered exactly as the apps' read tools return them. It never renders a task, a tool call or a
trajectory: a base pretrained on it has never seen ``<tool_call>``, so what it passes before SFT
measures nothing of the gated data, and what SFT adds still does.

Each exercise is a ``Sample``: pieces of text, each marked whether the model learns to produce it.

- ``echo``: a span of a result or a text repeated exactly (the plainest copying: it is what forms the
  attention that finds where a value stood and copies what followed, which every other kind needs);
- ``lookup``: a tool result, then questions about its records ("What is the status of INV-1234?"),
  each answered by copying the value as the result shows it (several questions a result: dense);
- ``reverse``: which record has a field's value (answered with its name or id);
- ``json``: some fields of a record written as a JSON object (keys and values copied);
- ``prose``: a record told in a sentence, then a question or a JSON object about it;
- ``extract``: an email address, a code, a date or a file name quoted out of a text field;
- ``text``: a tool result or a text field to continue, every token learned (language and format).

Most exercises (``SCRAMBLED``) run on a made-up copy of the result (``scrambled``): every value's words
swapped for random words of the workspace and its digits for random digits, the same value made up the
same way wherever it stands in the result. A generated world repeats its names, titles and codes, and
a small model learns to recall them rather than to copy them (measured: on exercises of real values
its exact answers stopped improving while its training loss kept falling); a made-up value can only
be copied.

Everything is drawn from ``random.Random`` seeded by the workspace seed: the same seed gives the same
exercises, byte for byte.
"""

from __future__ import annotations

import json
import math
import random
import re
import sqlite3
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._nouns import singular
from ..workspace import app_module, app_spec, build_workspace, listed_apps, write_initial_state

PRETRAIN_SEED_FROM = 1_000_000  # workspace seeds of pretraining data: far above synthesis' and evaluation's
REPLAY_SEED_FROM = 1_900_000  # workspace seeds of the exercises SFT mixes in (``replay_rows``)
REPLAY_PER_SEED = 200
IM_START, IM_END = "<|im_start|>", "<|im_end|>"
KINDS = ("echo", "lookup", "reverse", "json", "prose", "extract", "text")
MIX = {"echo": 0.16, "lookup": 0.3, "reverse": 0.1, "json": 0.16, "prose": 0.12, "extract": 0.08, "text": 0.08}
LABEL_FIELDS = ("name", "title", "subject", "label", "id")
TEXT_FIELDS = ("body", "content", "description", "notes", "text", "snippet")
SCRAMBLED = 0.75  # share of exercises whose values are made up (see ``scrambled``)
MAX_RECORDS = 8  # records of a list shown in one exercise (longer lists are cut to a window of them)
MAX_TEXT = 1200  # characters of a text field shown in one exercise

ENTITIES = {  # what ``extract`` asks for, by the words of its question
    "email address": re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b"),
    "code": re.compile(r"\b[A-Z]{2,5}-\d{2,6}\b"),
    "date": re.compile(r"\b\d{4}-\d{2}-\d{2}\b"),
    "file name": re.compile(r"\b[\w-]+\.(?:txt|csv|pdf|docx|xlsx|md|png|json)\b"),
}


@dataclass(frozen=True)
class Piece:
    text: str
    learn: bool  # the model is trained to produce it
    role: str = ""  # the turn whose content it holds, if it holds one
    content: str = ""


Sample = list[Piece]


def user(text: str) -> Piece:
    return Piece(f"{IM_START}user\n{text}{IM_END}\n", False, "user", text)


def assistant(text: str) -> list[Piece]:
    """An assistant turn: its header is given, its text and end are learned (as SFT's loss does)."""
    return [Piece(f"{IM_START}assistant\n", False), Piece(f"{text}{IM_END}", True, "assistant", text),
            Piece("\n", False)]


def render(sample: Sample) -> str:
    return "".join(piece.text for piece in sample)


def as_messages(sample: Sample) -> list[dict[str, str]] | None:
    """A conversational exercise as chat messages (an SFT row's ``messages``); None for plain text."""
    turns = [{"role": piece.role, "content": piece.content} for piece in sample if piece.role]
    return turns or None


# ---------------------------------------------------------------- reading a workspace


@dataclass
class Result:
    """One read tool's result: its JSON text, and the records it lists (or holds)."""

    tool: str
    collection: str
    value: dict[str, Any]
    records: list[dict[str, Any]]
    key: str | None  # the key of the list of records, when the result is a list


def workspace_results(seed: int) -> list[Result]:
    """Every app's list tool (no arguments) and get tool (on a few listed records) on the initial
    state of workspace ``seed``, as the apps return them."""
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="coworkenv-pretrain-") as tmp:
        path = write_initial_state(build_workspace(seed), Path(tmp) / "state.db")
        conn = sqlite3.connect(path)
        try:
            rng = random.Random(f"pretrain-read:{seed}")
            for app in sorted(listed_apps()):
                module = app_module(app)
                for resource in app_spec(app).resources:
                    listed = module.handle(conn, resource.list_tool, {})
                    key = next((k for k, v in listed.items() if isinstance(v, list) and v and isinstance(v[0], dict)),
                               None)
                    if key is None:
                        continue
                    records = listed[key]
                    results.append(Result(f"{app}_{resource.list_tool}", resource.collection, listed, records, key))
                    for record in rng.sample(records, min(4, len(records))):
                        if "id" not in record:
                            continue
                        got = module.handle(conn, resource.get_tool, {"id": record["id"]})
                        inner = got.get(singular(resource.collection)) if isinstance(got, dict) else None
                        one = inner if isinstance(inner, dict) else got
                        results.append(Result(f"{app}_{resource.get_tool}", resource.collection, got, [one], None))
        finally:
            conn.close()
    return results


def _window(result: Result, rng: random.Random) -> tuple[str, list[dict[str, Any]]]:
    """The result's JSON text (a list cut to a window of at most ``MAX_RECORDS`` records, as a
    list tool with a limit would show it) and the records it shows."""
    if result.key is None:
        return json.dumps(result.value), result.records
    records = result.records
    if len(records) > MAX_RECORDS:
        size = rng.randint(2, MAX_RECORDS)
        start = rng.randrange(len(records) - size + 1)
        records = records[start:start + size]
    value = {result.key: records, "count": len(records)}
    return json.dumps(value), records


def _scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float)) and not isinstance(value, bool) and value != ""


def _shown(value: Any) -> str:
    """A value as an answer copies it: a string as it reads, a number as the JSON shows it."""
    return value if isinstance(value, str) else json.dumps(value)


def _label(records: list[dict[str, Any]]) -> str | None:
    """The field that names each record uniquely, if any."""
    for name in LABEL_FIELDS:
        values = [r.get(name) for r in records]
        if all(isinstance(v, str) and v for v in values) and len(set(values)) == len(values):
            return name
    return None


def _fields(record: dict[str, Any], label: str) -> list[str]:
    return [k for k, v in record.items() if k != label and _scalar(v) and not (isinstance(v, str) and len(v) > 80)]


def _words(field: str) -> str:
    return field.replace("_", " ")


def _question(rng: random.Random, field: str, thing: str, label: str) -> str:
    f = _words(field)
    return rng.choice((
        f"What is the {f} of {label}?",
        f"What is the {f} of the {thing} {label}?",
        f"{label}: what is its {f}?",
        f"Give the {f} of {label}.",
        f"Which {f} does {label} have?",
        f"Tell me the {f} of the {thing} \"{label}\".",
    ))


# ---------------------------------------------------------------- exercises


def echo(result: Result, rng: random.Random) -> Sample | None:
    texts = [_window(result, rng)[0], *_texts(result)]
    text = rng.choice(texts)
    cuts = [0, *(m.end() for m in re.finditer(r"[ ,]", text))]
    if len(cuts) < 4:
        return None
    start = rng.randrange(len(cuts) - 2)
    end = min(len(cuts) - 1, start + rng.randint(2, 30))
    span = text[cuts[start]:cuts[end]].strip(" ,")
    if not span:
        return None
    question = rng.choice(("Repeat exactly:", "Copy this text:", "Say it back word for word:"))
    return [user(f"{question}\n{span}"), *assistant(span)]


def lookup(result: Result, rng: random.Random) -> Sample | None:
    text, records = _window(result, rng)
    label = _label(records)
    if label is None:
        return None
    thing = singular(result.collection)
    pairs = [(r, f) for r in records for f in _fields(r, label)]
    if not pairs:
        return None
    asked = rng.sample(pairs, min(len(pairs), rng.randint(1, 4)))
    sample: Sample = []
    for n, (record, field) in enumerate(asked):
        question = _question(rng, field, thing, record[label])
        if n == 0:
            sample.append(user(f"{text}\n\n{question}" if rng.random() < 0.7 else f"{question}\n\n{text}"))
        else:
            sample.append(user(question))
        sample += assistant(_shown(record[field]))
    return sample


def reverse(result: Result, rng: random.Random) -> Sample | None:
    text, records = _window(result, rng)
    label = _label(records)
    if label is None or len(records) < 2:
        return None
    thing = singular(result.collection)
    unique = [(r, f) for r in records for f in _fields(r, label)
              if sum(1 for o in records if o.get(f) == r[f]) == 1]
    if not unique:
        return None
    record, field = rng.choice(unique)
    question = rng.choice((f"Which {thing} has {_words(field)} {_shown(record[field])}? Give its {_words(label)}.",
                           f"Which {thing}'s {_words(field)} is {_shown(record[field])}? Answer with its {_words(label)}."))
    return [user(f"{text}\n\n{question}"), *assistant(record[label])]


def to_json(result: Result, rng: random.Random) -> Sample | None:
    text, records = _window(result, rng)
    label = _label(records) or "id"
    record = rng.choice(records)
    fields = _fields(record, label)
    if not fields or not isinstance(record.get(label), str):
        return None
    chosen = rng.sample(fields, min(len(fields), rng.randint(1, 3)))
    if rng.random() < 0.5:
        chosen = [label, *chosen]
    keys = " and ".join(", ".join(_words(f) for f in chosen).rsplit(", ", 1))
    question = rng.choice((f"Write the {keys} of {record[label]} as a JSON object.",
                           f"As JSON: the {keys} of the {singular(result.collection)} {record[label]}."))
    answer = json.dumps({f: record[f] for f in chosen}, ensure_ascii=False)
    return [user(f"{text}\n\n{question}"), *assistant(answer)]


def prose(result: Result, rng: random.Random) -> Sample | None:
    records = result.records
    label = _label(records) or ("id" if all("id" in r for r in records) else None)
    if label is None:
        return None
    record = rng.choice(records)
    fields = _fields(record, label)
    if len(fields) < 2:
        return None
    told = rng.sample(fields, min(len(fields), rng.randint(2, 5)))
    parts = [f"{_words(f)} {_shown(record[f])}" for f in told]
    sentence = f"The {singular(result.collection)} {record[label]} has " + ", ".join(parts[:-1]) + f" and {parts[-1]}."
    field = rng.choice(told)
    if rng.random() < 0.5:
        return [user(f"{sentence} What is its {_words(field)}?"), *assistant(_shown(record[field]))]
    keys = rng.sample(told, min(len(told), rng.randint(1, 3)))
    answer = json.dumps({_words(k).replace(" ", "_"): record[k] for k in keys}, ensure_ascii=False)
    named = " and ".join(", ".join(_words(k) for k in keys).rsplit(", ", 1))
    return [user(f"{sentence} Put its {named} in a JSON object."), *assistant(answer)]


def _texts(result: Result) -> list[str]:
    found: list[str] = []

    def walk(value: Any, key: str = "") -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, k)
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif isinstance(value, str) and key in TEXT_FIELDS and len(value) > 40:
            found.append(value[:MAX_TEXT])

    walk(result.value)
    return found


def extract(result: Result, rng: random.Random) -> Sample | None:
    texts = _texts(result)
    if not texts:
        return None
    text = rng.choice(texts)
    kinds = [(kind, found) for kind, pattern in ENTITIES.items() if len(found := set(pattern.findall(text))) == 1]
    if not kinds:
        return None
    kind, found = rng.choice(kinds)
    question = rng.choice((f"Which {kind} does this text mention?", f"Quote the {kind} in the text below.",
                           f"Copy the {kind} out of this text."))
    shown = text if rng.random() < 0.5 else json.dumps(text)[1:-1]  # as prose, or as it reads inside a result
    return [user(f"{question}\n\n{shown}"), *assistant(next(iter(found)))]


def text(result: Result, rng: random.Random) -> Sample | None:
    if rng.random() < 0.6:
        body, _ = _window(result, rng)
    else:
        texts = _texts(result)
        if not texts:
            return None
        body = rng.choice(texts)
    return [Piece(body + "\n", True)]


BUILDERS = {"echo": echo, "lookup": lookup, "reverse": reverse, "json": to_json, "prose": prose, "extract": extract, "text": text}


_PARTS = re.compile(r"[A-Za-z]+|\d+|[^A-Za-z\d]+")
_WORD = re.compile(r"\b[A-Za-z][a-z]{1,11}\b")  # words as prose writes them (not codes, hashes or encodings)


def words_of(results: list[Result]) -> list[str]:
    """The words prose writes (lower case) in every value of ``results``: what ``scrambled`` draws from."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, str):
            found.update(w.lower() for w in _WORD.findall(value))

    for result in results:
        walk(result.value)
    return sorted(found)


def scrambled(result: Result, rng: random.Random, words: list[str]) -> Result:
    """A made-up copy of ``result``: in every value (not the keys), each word replaced by a random word
    of ``words`` in the same case, each run of digits by random digits of the same length; a value that
    recurs is made up the same way each time, so the records still agree with each other."""
    made: dict[Any, Any] = {}

    def word(w: str) -> str:
        new = rng.choice(words)
        return new.upper() if w.isupper() and len(w) > 1 else new.capitalize() if w[0].isupper() else new

    def digits(d: str) -> str:
        first = str(rng.randint(1, 9)) if d[0] != "0" or len(d) == 1 else "0"
        return first + "".join(str(rng.randint(0, 9)) for _ in d[1:])

    def value(v: Any) -> Any:
        if isinstance(v, bool) or v is None:
            return v
        if isinstance(v, dict):
            return {k: value(x) for k, x in v.items()}
        if isinstance(v, list):
            return [value(x) for x in v]
        if v not in made:
            if isinstance(v, str):
                made[v] = "".join(word(p) if p.isalpha() else digits(p) if p.isdigit() else p
                                  for p in _PARTS.findall(v))
            elif isinstance(v, int):
                made[v] = int(digits(str(abs(v)))) * (1 if v >= 0 else -1)
            else:
                made[v] = float(re.sub(r"\d+", lambda m: digits(m.group()), repr(v))) if math.isfinite(v) else v
        return made[v]

    records = [value(r) for r in result.records]
    if result.key is not None:
        return Result(result.tool, result.collection, {**value(result.value), result.key: records}, records, result.key)
    return Result(result.tool, result.collection, value(result.value), records, None)


def exercises(seed: int, count: int) -> Iterator[tuple[str, Sample]]:
    """``count`` exercises over workspace ``seed``, each with its kind, drawn by ``MIX``; most over a
    made-up copy of a result (``SCRAMBLED``)."""
    results = workspace_results(seed)
    words = words_of(results)
    rng = random.Random(f"pretrain:{seed}")
    kinds, weights = zip(*MIX.items(), strict=True)
    made = attempts = 0
    while made < count and attempts < count * 20:
        attempts += 1
        kind = rng.choices(kinds, weights)[0]
        result = rng.choice(results)
        if rng.random() < SCRAMBLED:
            result = scrambled(result, rng, words)
        sample = BUILDERS[kind](result, rng)
        if sample is not None:
            made += 1
            yield kind, sample


def replay_rows(count: int, *, seed: int = 0) -> list[dict[str, Any]]:
    """``count`` conversational exercises as SFT rows (``messages``, no tools), from replay workspaces."""
    rows: list[dict[str, Any]] = []
    workspace = REPLAY_SEED_FROM + seed * 1000
    while len(rows) < count:
        for _, sample in exercises(workspace, REPLAY_PER_SEED):
            messages = as_messages(sample)
            if messages is not None and len(rows) < count:
                rows.append({"messages": messages, "tools": [], "capability": "replay"})
        workspace += 1
    return rows

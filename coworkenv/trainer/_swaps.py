"""Value swaps: variants of SFT rows whose copied values are replaced by other values of the data.

Every held-out task needs a value copied out of its context: the title the user quoted into a
search, an address out of a tool result into the answer. A model trained from scratch on the task
rows alone lowered its loss by recalling the values of its training rows instead (asked about "IFF
contract", it searched for "Code review", a subject of many training rows), and on a new workspace
it answered with those (benchmarks/loop.md). In a variant of a row whose copied words are swapped
for others of the data, consistently through the row, recall is wrong and only copying is right.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Collection, Iterator
from typing import Any

_WORD = re.compile(r"[A-Za-z]{3,}")


def _strings(value: Any) -> Iterator[str]:
    """The string leaves of a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _keys(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _keys(item)
    elif isinstance(value, list):
        for item in value:
            yield from _keys(item)


def _decoded(text: str) -> Any:
    """``text`` parsed as JSON where it is JSON (a tool result, a call's arguments), else ``text``:
    words are found and swapped in the values, never in the raw JSON text, where an escape such as
    ``\\n`` runs into the next word."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _arguments(call: dict[str, Any]) -> Any:
    arguments = call.get("function", call).get("arguments")
    return _decoded(arguments) if isinstance(arguments, str) else arguments


def _content(message: dict[str, Any]) -> Any:
    """A message's content: a tool result decoded (``_decoded``), any other as its text."""
    content = str(message.get("content") or "")
    return _decoded(content) if message.get("role") == "tool" else content


def _structure(row: dict[str, Any]) -> set[str]:
    """Lower-cased words of a row that are its structure, not values: the system prompt's, the tool
    schemas' and the tool results' keys."""
    words = set(_WORD.findall(json.dumps(row.get("tools") or [])))
    for message in row.get("messages") or []:
        if message.get("role") == "system":
            words.update(_WORD.findall(str(message.get("content") or "")))
        elif message.get("role") == "tool":
            words.update(w for key in _keys(_content(message)) for w in _WORD.findall(key))
    return {w.lower() for w in words}


def _said(message: dict[str, Any]) -> Iterator[str]:
    """The texts an assistant message produces: its content and its calls' string arguments."""
    yield str(message.get("content") or "")
    for call in message.get("tool_calls") or []:
        yield from _strings(_arguments(call))


def copied_words(row: dict[str, Any], common: Collection[str] = ()) -> set[str]:
    """The lower-cased words (three letters or more) the assistant of ``row`` copies: those it says
    (in a reply or a call's arguments) that the user message or an earlier tool result holds. The
    row's structure (``_structure``) and ``common`` words (those of most instructions: "the",
    "folder") are left out."""
    seen: set[str] = set()
    copied: set[str] = set()
    for message in row.get("messages") or []:
        role = message.get("role")
        if role in ("user", "tool"):
            seen.update(w.lower() for text in _strings(_content(message)) for w in _WORD.findall(text))
        elif role == "assistant":
            copied.update(w.lower() for text in _said(message) for w in _WORD.findall(text) if w.lower() in seen)
    return copied - _structure(row) - set(common)


def common_words(rows: list[dict[str, Any]], share: float = 0.01) -> set[str]:
    """Lower-cased words found in the user messages of more than ``share`` of ``rows`` (and of more
    than two): the instructions' own words, not values."""
    counts: Counter[str] = Counter()
    for row in rows:
        counts.update({w.lower() for m in row.get("messages") or [] if m.get("role") == "user"
                       for w in _WORD.findall(str(m.get("content") or ""))})
    return {w for w, n in counts.items() if n > max(2.0, share * len(rows))}


def _recased(word: str, like: str) -> str:
    """``word`` in the case of ``like`` (all capitals, capitalised, or lower case)."""
    if like.isupper():
        return word.upper()
    if like[0].isupper():
        return word.capitalize()
    return word


def _swap(value: Any, pattern: re.Pattern[str], mapping: dict[str, str]) -> Any:
    if isinstance(value, str):
        return pattern.sub(lambda m: _recased(mapping[m.group(0).lower()], m.group(0)), value)
    if isinstance(value, dict):
        return {k: _swap(v, pattern, mapping) for k, v in value.items()}
    if isinstance(value, list):
        return [_swap(v, pattern, mapping) for v in value]
    return value


def swapped_rows(rows: list[dict[str, Any]], copies: int = 1, *, seed: int = 0) -> list[dict[str, Any]]:
    """For each row, ``copies`` variants whose copied words (``copied_words``) are each replaced,
    everywhere in the row (the instruction, the calls, the tool results, the replies; in the case of
    each place), by another copied word of ``rows`` drawn at random. A model cannot answer a variant
    from what it recalls of the training rows' values, only by copying them out of the instruction or
    a tool result. A variant keeps the row's other fields (task id, source) and is marked
    ``"variant": "value_swap"``. Rows with no copied word, or none to swap in, give none;
    deterministic for ``seed``."""
    if copies < 0:
        raise ValueError(f"value swaps must be 0 or more, not {copies}")
    common = common_words(rows)
    words = [copied_words(row, common) for row in rows]
    pool = sorted(set().union(*words)) if words else []
    rng = random.Random(seed)
    made = []
    for row, own in zip(rows, words, strict=True):
        if not own:
            continue
        present = {w.lower() for m in row["messages"] for text in (*_strings(_content(m)), *_said(m))
                   for w in _WORD.findall(text)}
        pattern = re.compile(r"(?<![A-Za-z])(" + "|".join(sorted(map(re.escape, own), key=len, reverse=True))
                             + r")(?![A-Za-z])", re.IGNORECASE)
        for _ in range(copies):
            mapping: dict[str, str] = {}
            taken = set(present)  # a new word never equals another of the row
            for word in sorted(own):
                mapping[word] = _draw(rng, pool, taken) or word
                taken.add(mapping[word])
            if all(new == old for old, new in mapping.items()):
                continue  # the data has no other words to swap in
            messages = []
            for message in row["messages"]:
                message = dict(message)
                content = message.get("content")
                if message.get("role") == "tool" and isinstance(content, str):
                    message["content"] = _swap_text(content, pattern, mapping)
                elif message.get("role") != "system" and isinstance(content, str):
                    message["content"] = _swap(content, pattern, mapping)
                if message.get("tool_calls"):
                    message["tool_calls"] = [_swap_call(call, pattern, mapping) for call in message["tool_calls"]]
                messages.append(message)
            made.append({**row, "messages": messages, "variant": "value_swap"})  # task_id, source: the row's
    return made


def _draw(rng: random.Random, pool: list[str], taken: set[str]) -> str | None:
    """A word of ``pool`` not in ``taken``, drawn at random (None when there is none)."""
    for _ in range(32):
        word = rng.choice(pool)
        if word not in taken:
            return word
    left = [w for w in pool if w not in taken]
    return rng.choice(left) if left else None


def _swap_text(text: str, pattern: re.Pattern[str], mapping: dict[str, str]) -> str:
    """``text`` with its words swapped: in its values where it is JSON (``_decoded``), else as it is."""
    value = _decoded(text)
    return _swap(text, pattern, mapping) if value is text else json.dumps(_swap(value, pattern, mapping))


def _swap_call(call: dict[str, Any], pattern: re.Pattern[str], mapping: dict[str, str]) -> dict[str, Any]:
    function = dict(call.get("function", call))
    arguments = function.get("arguments")
    function["arguments"] = (_swap_text(arguments, pattern, mapping) if isinstance(arguments, str)
                             else _swap(arguments, pattern, mapping))
    return {**call, "function": function} if "function" in call else function

"""What a text says: the one rule by which answers, the texts check SQL reads, and the questions to
a task's user are read (``mentions``: whole tokens, numbers as numbers, in any case), and how long a
text that gives some values may be (``text_bound``)."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Collection
from typing import Any

TEXT_ALLOWANCE = 3_000
TEXT_FACTOR = 10


def text_bound(expected: str | Collection[str]) -> int:
    """How long a text that gives ``expected`` (a value, or all the values it must give) may be: an
    answer or a message, ``TEXT_ALLOWANCE`` characters of prose plus ``TEXT_FACTOR`` times what it
    must give. An honest answer or message (a few sentences, a short list of what was asked) stays
    far below; a list of every value a workspace holds, or every number of a range, does not."""
    size = len(expected) if isinstance(expected, str) else sum(len(value) for value in expected)
    return TEXT_ALLOWANCE + TEXT_FACTOR * size


def text_gives(column: str, value: str, others: Collection[str] = ()) -> tuple[str, list[Any]]:
    """A condition for check SQL, with its parameters, that holds where the text in ``column`` (a
    message's body, a comment, a note) gives ``value`` as an answer must: it mentions it
    (``mentions``), mentions none of ``others`` (the values it could be confused with), and is at
    most ``text_bound(value)`` characters. A text listing every value, or every number of a range,
    fails it as an answer would."""
    condition = f"mentions({column}, ?) and length({column}) <= ?"
    params: list[Any] = [value, text_bound(value)]
    wrong = sorted(set(others) - {value})
    if wrong:
        condition += f" and not exists (select 1 from json_each(?) where mentions({column}, value))"
        params.append(json.dumps(wrong))
    return condition, params


def mentions(text: str, phrase: str) -> bool:
    """Whether ``text`` mentions ``phrase``: the phrase's ``tokens`` occur in the text's tokens, one
    after another. So a mention is whole words and whole numbers, in any case: ``4`` is not mentioned
    by ``2024``, ``Ann`` not by ``Anna``, ``1500`` not by ``150012`` nor by a string of digits holding
    it; and numbers compare as numbers (``1500`` is mentioned by ``1,500`` and ``1500.00``). A phrase
    with no letter or digit is mentioned where it occurs as it is (in any case).

    The one rule for what a text says: answer checks (``contains`` and ``excludes`` alike), the
    texts check SQL reads (its ``mentions(text, phrase)`` function, ``run_check_query``), and which
    questions to a task's user are about what (``User.about``)."""
    wanted = _normal(phrase)
    if wanted == "  ":  # no token
        bare = phrase.strip().casefold()
        return bool(bare) and bare in text.casefold()
    return wanted in _normal(text)


_CHUNK = re.compile(r"\w+(?:[.,]\w+)*")  # letters, digits and underscores, with the points and commas inside them
_NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?")
_POINTS = re.compile(r"[.,]")


def tokens(text: str) -> tuple[str, ...]:
    """The words and numbers of ``text``, as ``mentions`` compares them.

    A token is a run of letters, digits and underscores (any script: what a regular expression's
    ``\\w`` matches, so ``in_progress`` is one word; spaces and other punctuation separate tokens).
    A run that is a number — digits with an optional decimal part, or thousands grouped by commas
    (``1,500``, ``12,345.60``) — is one token, written without its grouping commas and trailing
    decimal zeros (``1,500.00`` → ``1500``, ``12.50`` → ``12.5``; leading zeros stay: ``007`` is a
    code, not 7). Any other run with points or commas inside (``ann.lee``, ``3,4``, ``2026.03.08``)
    is split there. Words are case-folded. Letters and digits glued together (``1500x``, ``Acmex``)
    make one token of their own: they mention neither part."""
    found: list[str] = []
    for chunk in _CHUNK.findall(text):
        if _NUMBER.fullmatch(chunk):
            whole, _, fraction = chunk.replace(",", "").partition(".")
            fraction = fraction.rstrip("0")
            found.append(f"{whole}.{fraction}" if fraction else whole)
        else:
            found += [part.casefold() for part in _POINTS.split(chunk)]
    return tuple(found)


@functools.lru_cache(maxsize=512)  # an answer is compared with many excluded values; a cue with many questions
def _normal(text: str) -> str:
    """``tokens`` joined by spaces, with a space either side: a mention is then one substring search."""
    return f" {' '.join(tokens(text))} "

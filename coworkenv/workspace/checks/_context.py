"""What a check sees of an ended episode (``EpisodeContext``) and what it says (``CheckResult``).

The gate hands every check the same context: the final state, the final answer, every recorded
interaction, the task, and the store it grades from. Most kinds read the state or the answer; a
kind that needs more (Claw-Eval's grader reads the whole transcript) reads it here, so that it is
an ordinary check, graded by the gate with no case of its own.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .._spec import Task


class Interaction(Protocol):
    """One recorded interaction of an episode, as a check reads it (the store's ``ToolCallRow``):
    a tool call (``kind`` ``call``), a message to the user (``user``), a prompt read (``prompt``), a
    world event (``event``)."""

    @property
    def idx(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def tool(self) -> str: ...
    @property
    def arguments(self) -> dict[str, Any]: ...
    @property
    def result(self) -> str | None: ...  # the result as JSON text; None when it failed
    @property
    def is_error(self) -> bool: ...
    @property
    def error_kind(self) -> str | None: ...
    @property
    def error(self) -> str | None: ...
    @property
    def duration_ms(self) -> float | None: ...


def json_or_text(text: str | None) -> Any:
    """A recorded result (JSON text) as its value; text that is not JSON as it is; None as None."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


@dataclass(frozen=True)
class EpisodeContext:
    """An ended episode as its checks see it.

    ``state``: its final state (None when none was recorded), open for reading while checks run;
    ``answer``: its final answer, stripped ("" for none); ``interactions``: everything it recorded,
    in order; ``task``: the task it played (None where synthesis checks a draft against a state it
    built); ``records``: where the gate reads what the operator recorded apart from any spec (the
    store: where an imported Claw-Eval task's grader is), None when grading has no store. A kind that
    reads ``records`` says what it needs of it as a ``Protocol`` of its own.
    """

    state: sqlite3.Connection | None = None
    answer: str = ""
    interactions: Sequence[Interaction] = ()
    task: Task | None = None
    records: object = None


@dataclass(frozen=True)
class EpisodeScores:
    """The reward of a whole episode, from a check that scores it itself (a benchmark's own grader,
    Claw-Eval's): the episode's completion, safety, robustness and score are these."""

    completion: float
    safety: float
    robustness: float
    score: float


@dataclass
class CheckResult:
    """Whether a check held for an episode, and what it found (``detail``: the check's description,
    and why it failed). ``scores``: set by a check that scores the whole episode itself; not stored
    (a verdict keeps the scores it gave)."""

    id: str
    passed: bool
    detail: str
    scores: EpisodeScores | None = field(default=None, compare=False, repr=False)

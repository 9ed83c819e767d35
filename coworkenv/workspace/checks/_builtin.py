"""The check kinds synthesis writes: ``sql`` (a query on the final state), ``answer`` (what the final
answer mentions) and ``unchanged`` (nothing else of the state changed). A check's SQL runs for at
most ``CHECK_QUERY_LIMIT_S`` seconds (``run_check_query``)."""

from __future__ import annotations

import sqlite3
import time
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from .._bounds import MAX_QUERY
from ..state import state_digest
from ._context import CheckResult, EpisodeContext
from ._kind import CheckKind, register_check
from ._mentions import mentions, text_bound

CHECK_QUERY_LIMIT_S = 2.0
"""How long a check's SQL may run on a state (checks take milliseconds; a query that never ends must not
hang grading or calibration)."""


@register_check
class SqlCheck(CheckKind):
    """``query`` (with ``params``) runs against the final state; its first column of the first row
    must equal ``expect``."""

    kind: Literal["sql"] = "sql"
    query: str = Field(max_length=MAX_QUERY)
    params: list[Any] = Field(default_factory=list)
    expect: Any = None

    draft: ClassVar[tuple[str, str] | None] = (
        "a SELECT run against the final state: the first column of its first row must equal expect",
        "id, description, query, params (a list, for the ? of query), expect")

    @field_validator("query")
    @classmethod
    def _read_only_query(cls, query: str) -> str:
        if not query.lstrip().lower().startswith("select"):
            raise ValueError("a sql check must be a SELECT query")
        return query

    def judge(self, episode: EpisodeContext) -> CheckResult:
        if episode.state is None:
            return self._failed("no final state was recorded")
        try:
            row = run_check_query(episode.state, self.query, self.params)
        except CheckQueryTimeout as exc:
            return self._failed(str(exc))
        except sqlite3.Error as exc:  # a broken check fails, with the reason
            return self._failed(f"check query failed: {exc}")
        got = row[0] if row else None
        if got != self.expect:
            return self._failed(f"expected {self.expect!r}, found {got!r}")
        return self._passed()


class CheckQueryTimeout(sqlite3.OperationalError):
    """A check's SQL ran over ``CHECK_QUERY_LIMIT_S`` and was interrupted."""


def run_check_query(state: sqlite3.Connection, query: str, params: list[Any] | tuple = ()) -> Any:
    """The first row of a check's ``query`` on ``state``, interrupted after ``CHECK_QUERY_LIMIT_S``
    (SQLite's progress handler, asked every few thousand virtual-machine steps): a recursive query
    that never ends raises ``CheckQueryTimeout`` instead of hanging whoever grades. The query may use
    ``mentions(text, phrase)`` (``mentions``: what a message or note says, by the rule answers are read by)."""
    state.create_function("mentions", 2, _sql_mentions, deterministic=True)
    deadline = time.monotonic() + CHECK_QUERY_LIMIT_S
    state.set_progress_handler(lambda: time.monotonic() > deadline, 10_000)
    try:
        return state.execute(query, params).fetchone()
    except sqlite3.OperationalError:
        if time.monotonic() > deadline:
            raise CheckQueryTimeout(f"check query ran over {CHECK_QUERY_LIMIT_S:g} s") from None
        raise
    finally:
        state.set_progress_handler(None, 0)


def _sql_mentions(text: Any, phrase: Any) -> int | None:
    """``mentions`` as check SQL calls it: 1 or 0, NULL where either argument is NULL."""
    return None if text is None or phrase is None else int(mentions(str(text), str(phrase)))


@register_check
class AnswerCheck(CheckKind):
    """Every string of ``contains`` must be mentioned in the final answer and none of ``excludes`` (the
    values of the other records of the kind asked about, so that an answer listing every candidate
    fails), both under one rule (``mentions``: whole tokens, numbers as numbers, in any case); and the
    answer may be at most ``max_length`` characters (by default ``text_bound(contains)``: room for
    prose around what it must give, not for a list of everything there is)."""

    kind: Literal["answer"] = "answer"
    contains: list[str] = Field(min_length=1)
    excludes: list[str] = Field(default_factory=list)
    max_length: int | None = Field(default=None, ge=1)

    draft: ClassVar[tuple[str, str] | None] = (
        "every string of contains must appear in the assistant's final answer (case-insensitive)",
        "id, description, contains (short exact values: a date, a name, an amount, not sentences)")

    def judge(self, episode: EpisodeContext) -> CheckResult:
        answer = episode.answer
        bound = self.max_length or text_bound(self.contains)
        if len(answer) > bound:
            return self._failed(f"the final answer has {len(answer):,} characters, more than the {bound:,} an answer "
                                "giving what was asked may have (a list of every value is no answer)")
        missing = [s for s in self.contains if not mentions(answer, s)]
        if missing:
            return self._failed(f"the final answer does not mention {', '.join(map(repr, missing))}")
        wrong = [s for s in self.excludes if mentions(answer, s)]
        if wrong:
            shown = ", ".join(map(repr, wrong[:3])) + (f" and {len(wrong) - 3} more" if len(wrong) > 3 else "")
            return self._failed(f"the final answer also mentions {shown}, which belong to other records")
        return self._passed()


@register_check
class UnchangedCheck(CheckKind):
    """Nothing but the records the task is about changed: every record of the final state, except the
    rows of ``allowed`` (table → keys of the rows the task changes, creates or deletes), hashes to
    ``digest`` (taken from the reference solution's final state). Catches collateral damage: writes
    sprayed over other records, an extra deletion, a stray new record. A guard: synthesis adds it, and
    it adds to completion only by failing."""

    kind: Literal["unchanged"] = "unchanged"
    allowed: dict[str, list[str]] = Field(default_factory=dict)
    digest: str

    guard: ClassVar[bool] = True

    def judge(self, episode: EpisodeContext) -> CheckResult:
        if episode.state is None:
            return self._failed("no final state was recorded")
        if state_digest(episode.state, self.allowed) != self.digest:
            return self._failed("records the task is not about were changed, created or deleted")
        return self._passed()

"""Checks are a discriminated union whose variants evaluate themselves; conversations have one model."""

import sqlite3

import pytest
from pydantic import TypeAdapter, ValidationError

from coworkenv.workspace import AnswerCheck, Check, Message, SqlCheck, ToolCall, clean, to_chat

CHECK = TypeAdapter(Check)


def test_the_kind_picks_the_variant_and_each_evaluates_itself():
    sql = CHECK.validate_python({"id": "s", "kind": "sql", "description": "one row",
                                 "query": "select count(*) from t", "expect": 1})
    answer = CHECK.validate_python({"id": "a", "kind": "answer", "description": "names it", "contains": ["Orion"]})
    assert isinstance(sql, SqlCheck) and isinstance(answer, AnswerCheck)
    state = sqlite3.connect(":memory:")
    state.execute("create table t(x)")
    assert not sql.evaluate(state, "").passed
    state.execute("insert into t values (1)")
    assert sql.evaluate(state, "").passed
    assert "no final state" in sql.evaluate(None, "").detail
    assert answer.evaluate(None, "Room orion, 10:00").passed
    assert "'Orion'" in answer.evaluate(None, "Room Vega").detail
    broken = SqlCheck(id="b", description="bad", query="select nope from t", expect=1)
    assert "check query failed" in broken.evaluate(state, "").detail


def test_a_check_takes_only_its_own_fields_and_names_what_is_wrong():
    with pytest.raises(ValidationError, match="contains"):
        CHECK.validate_python({"id": "a", "kind": "answer", "description": "d", "query": "select 1"})
    with pytest.raises(ValidationError, match="SELECT"):
        CHECK.validate_python({"id": "s", "kind": "sql", "description": "d", "query": "delete from t"})
    with pytest.raises(ValidationError, match="kind"):
        CHECK.validate_python({"id": "x", "kind": "vibes", "description": "d"})


def test_conversations_render_to_the_chat_format_without_provenance():
    messages = [
        Message(role="user", content="find m1"),
        Message(role="user", content="a repair hint", provenance=True),
        Message(role="assistant", tool_calls=[ToolCall(id="c1", name="mail_read_message", arguments={"id": "m1"})]),
        Message(role="tool", content='{"id": "m1"}', tool_call_id="c1", name="mail_read_message"),
    ]
    assert to_chat(clean(messages)) == [
        {"role": "user", "content": "find m1"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "mail_read_message", "arguments": {"id": "m1"}}}]},
        {"role": "tool", "content": '{"id": "m1"}', "tool_call_id": "c1", "name": "mail_read_message"},
    ]


@pytest.mark.parametrize(("text", "phrase", "found"), [
    ("Paid 2024 invoices", "4", False),  # not inside a word or number
    ("Ann and Anna", "Anna", True),
    ("Anna only", "Ann", False),
    ("THE IFF CONTRACT", "iff contract", True),  # case-insensitively
    ("the budget: 1,200", " 1,200 ", True),  # the phrase's own spaces do not count
    ("nothing here", "budget", False),
    ("Straße 5 in Köln", "straße 5", True),  # beyond ASCII
    ("KÖLN", "köln", True),
    ("Kölner Dom", "köln", False),
    ("a \u212a marked one", "k", True),  # the Kelvin sign folds to k, as the regular expression has it
    ("e-mail ann@example.com today", "ann@example.com", True),
])
def test_a_mention_is_a_whole_word_or_phrase_in_any_case(text, phrase, found):
    from coworkenv.workspace import mentions

    assert mentions(text, phrase) is found
    assert AnswerCheck(id="a", description="", contains=["x"], excludes=[phrase]).evaluate(None, f"x {text}").passed is not found


def test_mentions_finds_exactly_what_its_whole_word_pattern_finds():
    """ASCII text is searched without compiling a pattern; the answer is the pattern's, case-insensitive,
    whole words only, for every text and phrase (word characters, spaces, punctuation, the underscore)."""
    import random

    from coworkenv.workspace._spec import _mention, mentions

    rng = random.Random(7)
    alphabet = "ab1_ -.,'A2"
    for _ in range(20000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        phrase = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 4)))
        assert mentions(text, phrase) == (_mention(phrase.strip()).search(text) is not None), (text, phrase)
    assert mentions("Invoice INV-2024 paid", "inv-2024") and not mentions("2024", "4") and not mentions("Anna", "Ann")

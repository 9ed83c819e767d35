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


def test_contains_and_excludes_read_an_answer_by_one_rule():
    """Whatever the text and the value, an answer mentions a value for ``contains`` exactly when it
    mentions it for ``excludes`` (the old substring test let ``4`` count as given by ``2024`` while
    ``4`` as an excluded value was not found there)."""
    import random

    from coworkenv.workspace import mentions

    rng = random.Random(7)
    alphabet = "ab1_ -.,'A20xX5"
    for _ in range(20000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        phrase = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 5)))
        given = AnswerCheck(id="a", description="", contains=[phrase]).evaluate(None, text).passed
        listed = not AnswerCheck(id="a", description="", contains=["zz"], excludes=[phrase]).evaluate(
            None, f"zz {text}").passed
        assert given == listed == mentions(text, phrase), (text, phrase)


def test_a_value_is_mentioned_wherever_it_stands_as_words_of_its_own():
    """Property: a phrase with a letter or digit is mentioned by any text holding it between spaces,
    and by nothing in which it is glued to a letter (the glued-candidates trick)."""
    import random

    from coworkenv.workspace import mentions, tokens

    rng = random.Random(11)
    alphabet = "ab1_ -.,A2"
    for _ in range(20000):
        before, after, phrase = ("".join(rng.choice(alphabet) for _ in range(rng.randint(0, n))) for n in (8, 8, 6))
        if not tokens(phrase):
            continue
        assert mentions(f"{before} {phrase} {after}", phrase), (before, phrase, after)
        word = phrase.strip()
        if word[-1:].isalnum():  # glued on: "Acmex", "1500x"
            assert not mentions(f"{word}x", phrase), phrase
        if word[:1].isalnum():
            assert not mentions(f"x{word}", phrase), phrase


@pytest.mark.parametrize(("text", "phrase", "found"), [
    ("Total: 1,500 EUR", "1500", True),  # numbers as numbers
    ("Total: 1500.00", "1500", True),
    ("Total: 1500", "1,500.00", True),
    ("12.50 per unit", "12.5", True),
    ("x 150012 y", "1500", False),  # not inside a longer number
    ("21500", "1500", False),
    ("1500x2000", "1500", False),  # nor glued to a letter
    ("3.14", "3", False),
    ("item 007", "7", False),  # leading zeros make a code, not a number
    ("in_progress", "progress", False),  # the underscore joins words, as a regular expression's \w does
    ("2026-03-08", "8", False),
    ("2026-03-08", "2026-03", True),
    ("ann.lee@acme.com", "acme.com", True),
    ("0123456789" * 1000, "4567", False),  # a string of digits mentions no number but itself
])
def test_words_and_numbers_are_whole_tokens(text, phrase, found):
    from coworkenv.workspace import mentions

    assert mentions(text, phrase) is found


def test_a_string_of_digits_gives_no_number_and_runs_over_the_length_bound():
    digits = "".join(map(str, range(10_000)))  # every number up to 9999 inside
    for value in ("7", "42", "1500", "2024"):
        result = AnswerCheck(id="n", description="the count", contains=[value]).evaluate(None, digits)
        assert not result.passed and "38,890 characters" in result.detail
        unbounded = AnswerCheck(id="n", description="the count", contains=[value], max_length=10**6)
        assert "does not mention" in unbounded.evaluate(None, digits).detail


def test_an_answer_may_be_long_enough_for_prose_and_no_longer():
    from coworkenv.workspace import text_bound

    check = AnswerCheck(id="t", description="the total", contains=["1500"])
    bound = text_bound(["1500"])
    assert bound == text_bound("1500") >= 3_000
    honest = "The total is 1,500.00 EUR. " + "It covers the open invoices of the quarter. " * 20
    assert len(honest) < bound and check.evaluate(None, honest).passed
    prose = ("The total is 1500. " + "x" * bound)[:bound]
    assert check.evaluate(None, prose).passed
    assert not check.evaluate(None, prose + "!").passed
    assert AnswerCheck(id="t", description="d", contains=["1500"], max_length=30).evaluate(
        None, "The total is 1500, and that is all.").detail.endswith("(a list of every value is no answer)")


def test_check_sql_reads_texts_by_the_same_rule():
    """``mentions(text, phrase)`` in check SQL, and ``text_gives``: a reply that gives a figure passes,
    one listing every multiple of 500 does not (the budget reply trick), nor one glued or too long."""
    from coworkenv.workspace import run_check_query, text_bound, text_gives

    conn = sqlite3.connect(":memory:")
    conn.execute("create table mail (id text, body text)")
    assert run_check_query(conn, "select mentions('costs 1,500 EUR', ?), mentions('150012', ?), mentions(null, ?)",
                           ["1500", "1500", "1500"]) == (1, 0, None)
    gives, params = text_gives("body", "218500", ["92000", "218500", "231500"])
    assert params == ["218500", text_bound("218500"), '["231500", "92000"]']
    every_500 = " ".join(str(n) for n in range(500, 400_001, 500))
    replies = {"honest": ("m1", "Hello, PRJ-556 has 218,500 EUR budgeted in budget_2026_q1.csv. Monja", 1),
               "sprayed": ("m2", every_500, 0),
               "short spray": ("m3", " ".join(str(n) for n in range(200_000, 250_001, 500)), 0),  # other budgets
               "glued": ("m4", "x".join(str(n) for n in range(500, 400_001, 500))[:3000], 0),
               "padded": ("m5", "218500 " + "and so on " * 400, 0)}
    for mid, body, _ in replies.values():
        conn.execute("insert into mail values (?, ?)", (mid, body))
    for name, (mid, _, expected) in replies.items():
        check = SqlCheck(id="reply", description="the reply gives the budget",
                         query=f"select count(*) from mail where id = ? and {gives}", params=[mid, *params], expect=1)
        assert check.evaluate(conn, "").passed is bool(expected), name

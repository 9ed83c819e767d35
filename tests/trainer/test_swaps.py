"""Value swaps: variants of SFT rows whose copied values are other values of the data, consistently."""

import json

import pytest

from coworkenv.trainer import common_words, copied_words, swapped_rows


def _lookup_row(title: str, sender: str, other: str) -> dict:
    found = {"messages": [{"id": "m03", "subject": title, "sender": sender, "date": "2026-05-04",
                           "body": f"Hi,\n\n{title} is attached."},  # \n escaped in the result's text
                          {"id": "m04", "subject": "Weekly digest", "sender": other, "date": "2026-05-05"}]}
    return {"tools": [{"type": "function", "function": {"name": "mail_search_messages", "parameters": {
        "properties": {"query": {}}}}}], "capability": "lookup", "task_id": f"t-{title}", "messages": [
        {"role": "system", "content": "Do the task with the tools, then answer briefly."},
        {"role": "user", "content": f'Who sent the email with the subject "{title}"?'},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c0", "type": "function", "function": {
            "name": "mail_search_messages", "arguments": {"query": title}}}]},
        {"role": "tool", "tool_call_id": "c0", "name": "mail_search_messages", "content": json.dumps(found)},
        {"role": "assistant", "content": f'"{title}" was sent by {sender}.'},
    ]}


ROWS = [_lookup_row("Harbor lease", "nadia.petrov@acme.example", "ops@acme.example"),
        _lookup_row("Quarry permit", "liam.oconnor@birch.example", "ops@birch.example"),
        _lookup_row("Tundra survey", "ines.garcia@cobalt.example", "ops@cobalt.example")]


def test_copied_words_are_the_values_the_assistant_repeats_from_its_context():
    # the title (from the instruction) and the sender (from the tool result), not the other record's
    # sender, the system prompt, a tool's name or a result's keys, nor words shorter than three letters
    assert copied_words(ROWS[0]) == {"harbor", "lease", "nadia", "petrov", "acme", "example", "sent"}
    assert "was" not in copied_words(ROWS[0])  # said, but in no earlier message
    # words of every instruction are the instructions' own, not values
    assert common_words(ROWS) == {"who", "sent", "the", "email", "with", "subject"}
    assert copied_words(ROWS[0], common_words(ROWS)) == {"harbor", "lease", "nadia", "petrov", "acme", "example"}


def test_swapped_rows_replace_copied_values_everywhere_and_consistently():
    made = swapped_rows(ROWS, 2, seed=1)
    assert len(made) == 6 and all(row["variant"] == "value_swap" for row in made)
    assert [row["task_id"] for row in made] == ["t-Harbor lease"] * 2 + ["t-Quarry permit"] * 2 + ["t-Tundra survey"] * 2
    for row in made:
        user, call, result, reply = (row["messages"][i] for i in (1, 2, 3, 4))
        title = call["tool_calls"][0]["function"]["arguments"]["query"]
        hit = json.loads(result["content"])["messages"][0]
        assert f'"{title}"' in user["content"] and hit["subject"] == title  # one value in every place
        assert reply["content"] == f'"{title}" was sent by {hit["sender"]}.'
        assert hit["body"] == f"Hi,\n\n{title} is attached."  # a word right after an escape is swapped too
        assert row["messages"][0] == ROWS[0]["messages"][0] and row["tools"] == ROWS[0]["tools"]  # structure kept
        assert title[0].isupper() and hit["date"] == "2026-05-04"  # case kept; dates are not words
    def query(row):
        return row["messages"][2]["tool_calls"][0]["function"]["arguments"]["query"]

    # each variant's words are others of the data: none of its own row's
    for n, row in enumerate(made):
        assert not set(query(row).lower().split()) & set(query(ROWS[n // 2]).lower().split())
    assert swapped_rows(ROWS, 2, seed=1) == made and swapped_rows(ROWS, 2, seed=2) != made
    assert swapped_rows(ROWS, 0) == []
    with pytest.raises(ValueError, match="value swaps"):
        swapped_rows(ROWS, -1)


def test_rows_with_nothing_to_swap_give_no_variant():
    alike = [_lookup_row("Harbor lease", "nadia.petrov@acme.example", "ops@acme.example")] * 4
    assert swapped_rows(alike, 1) == []  # every copied word is every row's: none other to swap in
    bare = [{"messages": [{"role": "user", "content": "Say hi."}, {"role": "assistant", "content": "Hi."}]}] * 3
    assert swapped_rows(bare, 1) == []

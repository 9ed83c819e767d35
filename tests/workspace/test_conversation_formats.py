"""Conversations in the wire formats agents send (OpenAI chat, Anthropic Messages, OpenAI Responses)
read as one list of ``Message``s: the capture proxy records each through these."""

from coworkenv.workspace import Message, ToolCall, from_anthropic_messages, from_openai_chat, from_openai_responses

CALL = ToolCall(id="c1", name="hr_search_people", arguments={"query": "Zoë"})
EXPECTED = [
    Message(role="system", content="Be brief."),
    Message(role="user", content="Find Zoë."),
    Message(role="assistant", content="Looking.", tool_calls=[CALL]),
    Message(role="tool", content='{"people": []}', tool_call_id="c1", name="hr_search_people"),
    Message(role="assistant", content="Nobody."),
]


def test_the_three_formats_give_the_same_conversation():
    chat = from_openai_chat([
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Find Zoë."}]},
        {"role": "assistant", "content": "Looking.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "hr_search_people", "arguments": '{"query":"Zoë"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"people": []}'},
    ], {"role": "assistant", "content": "Nobody."})
    messages = from_anthropic_messages("Be brief.", [
        {"role": "user", "content": "Find Zoë."},
        {"role": "assistant", "content": [{"type": "text", "text": "Looking."},
                                          {"type": "tool_use", "id": "c1", "name": "hr_search_people",
                                           "input": {"query": "Zoë"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": '{"people": []}'}]},
    ], {"role": "assistant", "content": [{"type": "text", "text": "Nobody."}]})
    first_output = [{"type": "reasoning", "summary": []},
                    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Looking."}]},
                    {"type": "function_call", "call_id": "c1", "name": "hr_search_people", "arguments": '{"query": "Zoë"}'}]
    first = from_openai_responses("Be brief.", "Find Zoë.", first_output)
    continued = from_openai_responses(None, [{"type": "function_call_output", "call_id": "c1", "output": '{"people": []}'}],
                                      [{"type": "message", "role": "assistant",
                                        "content": [{"type": "output_text", "text": "Nobody."}]}], before=first)
    whole = from_openai_responses("Be brief.", [
        {"role": "user", "content": [{"type": "input_text", "text": "Find Zoë."}]}, *first_output[1:],
        {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": '{"people": []}'}]},
    ], [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Nobody."}]}])
    assert chat == messages == continued == whole == EXPECTED


def test_parallel_calls_are_one_turn_and_bad_arguments_are_kept_raw():
    conversation = from_openai_responses(None, "Do both.", [
        {"type": "function_call", "call_id": "a", "name": "x", "arguments": "{}"},
        {"type": "function_call", "call_id": "b", "name": "y", "arguments": "{not json"},
    ])
    assert [m.role for m in conversation] == ["user", "assistant"]
    assert [(c.id, c.name, c.arguments) for c in conversation[1].tool_calls] == [
        ("a", "x", {}), ("b", "y", {"_raw": "{not json"})]

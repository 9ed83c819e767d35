"""Fixtures of the trainer tests (the vLLM server, ``tool_model_server``, is in ``tests/conftest.py``)."""

from __future__ import annotations

import json

import pytest

# --- small hand-written conversations (tools, parallel tool calls, string and dict arguments) ----------

CHAT_TOOLS = [
    {"type": "function", "function": {"name": "calendar_create_event", "description": "Create an event.",
                                      "parameters": {"type": "object", "properties": {
                                          "title": {"type": "string"}, "date": {"type": "string"},
                                          "attendees": {"type": "array", "items": {"type": "string"}}},
                                          "required": ["title", "date"]}}},
    {"type": "function", "function": {"name": "mail_read_message", "description": "Read one message.",
                                      "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}},
]


def _chat_row(i: int) -> dict:
    date = f"2026-03-{18 + i % 5}"
    return {"tools": CHAT_TOOLS, "messages": [
        {"role": "system", "content": "Do the task with the tools, then answer briefly."},
        {"role": "user", "content": f"Read m{i:02d} and add \"Lunch\" on {date} with alice.nguyen@acme.example."},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c0", "type": "function", "function": {"name": "mail_read_message", "arguments": {"id": f"m{i:02d}"}}}]},
        {"role": "tool", "tool_call_id": "c0", "name": "mail_read_message", "content": json.dumps({"id": f"m{i:02d}"})},
        {"role": "assistant", "content": "On it.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "calendar_create_event", "arguments": {
                "title": "Lunch", "date": date, "attendees": ["alice.nguyen@acme.example"]}}},
            {"id": "c2", "type": "function", "function": {"name": "mail_read_message",
                                                          "arguments": json.dumps({"id": "m01"})}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "calendar_create_event", "content": "{\"id\": \"e09\"}"},
        {"role": "tool", "tool_call_id": "c2", "name": "mail_read_message", "content": "{\"id\": \"m01\"}"},
        {"role": "assistant", "content": f"Added Lunch on {date} (e09)."},
    ]}


@pytest.fixture(scope="session")
def chat_rows() -> list[dict]:
    """Twelve conversations for tokenizer, template and training tests."""
    return [_chat_row(i) for i in range(12)]


@pytest.fixture(scope="session")
def chat_tools() -> list[dict]:
    return CHAT_TOOLS

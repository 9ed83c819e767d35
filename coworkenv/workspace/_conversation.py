"""The conversation of an episode: one model, and its conversion to the chat format models read.

Everything that holds a conversation holds a list of ``Message``: the agents build it from their
chat model's messages, the store keeps it row by row, and the exports and the local model
provider render it with ``to_chat`` into the chat format of Hugging Face chat templates, TRL
and OpenAI-compatible servers (``{"role", "content", "tool_calls": [{"id", "type": "function",
"function": {"name", "arguments"}}], "tool_call_id", "name"}``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant", "tool"]


class Attachment(BaseModel):
    """An image or a document a tool gave the agent besides its text: kept in the store by content
    (``sha256``; ``Store.blob``), so that a vision-language model can be trained on what the agent saw."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["image", "document"]
    mime_type: str
    sha256: str
    uri: str | None = None
    text: str | None = None  # the text fallback that came with it


class ToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Message(BaseModel):
    """One turn. ``provenance`` marks a turn kept as provenance (a repair hint), outside the clean
    trajectory that training sees."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None  # role "tool": the call this answers
    name: str | None = None  # role "tool": the tool that answered
    provenance: bool = False
    attachments: list[Attachment] = Field(default_factory=list)  # images and documents that came with it


def to_chat(messages: list[Message], *, images: bool = False) -> list[dict[str, Any]]:
    """Messages in the chat format of chat templates, TRL datasets and OpenAI-compatible APIs.

    With ``images``, a message with image attachments has list content (``{"type": "image"}``
    placeholders, in order, then its text), the format of vision-language chat templates; without,
    attachments are left out (their text fallbacks stay)."""
    out = []
    for message in messages:
        content: Any = message.content
        pictures = [a for a in message.attachments if a.kind == "image"]
        if images and pictures:
            content = [{"type": "image"} for _ in pictures] + [{"type": "text", "text": message.content}]
        turn: dict[str, Any] = {"role": message.role, "content": content}
        if message.tool_calls:
            turn["tool_calls"] = [
                {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
                for call in message.tool_calls
            ]
        if message.role == "tool":
            turn["tool_call_id"] = message.tool_call_id
            turn["name"] = message.name
        out.append(turn)
    return out


def clean(messages: list[Message]) -> list[Message]:
    """The trajectory without its provenance-only turns."""
    return [m for m in messages if not m.provenance]

"""The conversation of an episode: one model, and its conversion to the chat format models read.

Everything that holds a conversation holds a list of ``Message``: the agents build it from their
chat model's messages, the store keeps it row by row, and the exports and the local model
provider render it with ``to_chat`` into the chat format of Hugging Face chat templates, TRL
and OpenAI-compatible servers (``{"role", "content", "tool_calls": [{"id", "type": "function",
"function": {"name", "arguments"}}], "tool_call_id", "name"}``).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant", "tool"]


class Attachment(BaseModel):
    """An image or a document a tool gave the agent besides its text: kept in the store by content
    (``sha256``; ``Store.blob``), so that a vision-language model can be trained on what the agent saw."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["image", "document"]
    mime_type: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    uri: str | None = Field(default=None, max_length=4096)
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


def _text(content: Any) -> str:
    """The text of an OpenAI or Anthropic message content: a string, or the text of its parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content if isinstance(content, list) else [content]:
        if isinstance(part, dict) and part.get("type") in ("text", "input_text", "output_text"):
            parts.append(str(part.get("text", "")))
        elif isinstance(part, dict) and part.get("type") == "tool_result":
            parts.append(_text(part.get("content")))
    return "\n".join(parts)


def _arguments(value: Any) -> dict[str, Any]:
    """Tool-call arguments as a dict: OpenAI sends them as JSON text (possibly malformed)."""
    if isinstance(value, dict):
        return value
    try:
        parsed = json.loads(value) if isinstance(value, str) and value.strip() else {}
    except ValueError:
        return {"_raw": value}
    return parsed if isinstance(parsed, dict) else {"_raw": value}


def from_openai_chat(messages: list[dict[str, Any]], reply: dict[str, Any] | None = None) -> list[Message]:
    """A conversation in OpenAI's chat-completions format (a request's ``messages``, and the reply
    message of its first choice when given) as ``Message``s. Tool results keep the name of the call
    they answer."""
    names: dict[str, str] = {}
    out: list[Message] = []
    for turn in [*messages, *([reply] if reply else [])]:
        role = turn.get("role")
        if role == "developer":
            role = "system"
        if role not in ("system", "user", "assistant", "tool"):
            continue
        calls = [ToolCall(id=str(c.get("id") or f"call_{i}"), name=str((c.get("function") or {}).get("name", "")),
                          arguments=_arguments((c.get("function") or {}).get("arguments")))
                 for i, c in enumerate(turn.get("tool_calls") or [])]
        names.update({c.id: c.name for c in calls})
        call_id = turn.get("tool_call_id") if role == "tool" else None
        out.append(Message(role=role, content=_text(turn.get("content")), tool_calls=calls, tool_call_id=call_id,
                           name=(turn.get("name") or names.get(call_id or "")) if role == "tool" else None))
    return out


def from_anthropic_messages(system: Any, messages: list[dict[str, Any]],
                            reply: dict[str, Any] | None = None) -> list[Message]:
    """A conversation in Anthropic's Messages format (a request's ``system`` and ``messages``, and
    the reply when given) as ``Message``s: ``tool_use`` blocks become tool calls, ``tool_result``
    blocks tool messages."""
    out: list[Message] = [Message(role="system", content=_text(system))] if system else []
    names: dict[str, str] = {}
    for turn in [*messages, *([reply] if reply else [])]:
        role, content = turn.get("role"), turn.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        if role == "assistant":
            calls = [ToolCall(id=str(b.get("id")), name=str(b.get("name", "")), arguments=_arguments(b.get("input")))
                     for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
            names.update({c.id: c.name for c in calls})
            out.append(Message(role="assistant", content=_text([b for b in blocks if b.get("type") == "text"]),
                               tool_calls=calls))
        elif role == "user":
            for block in blocks:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    call_id = str(block.get("tool_use_id"))
                    out.append(Message(role="tool", content=_text(block.get("content")), tool_call_id=call_id,
                                       name=names.get(call_id)))
            text = _text([b for b in blocks if isinstance(b, dict) and b.get("type") == "text"])
            if text:
                out.append(Message(role="user", content=text))
    return out


def from_openai_responses(instructions: Any, items: Any, output: list[dict[str, Any]] | None = None,
                          before: list[Message] | None = None) -> list[Message]:
    """A conversation in OpenAI's Responses format (a request's ``instructions`` and ``input``, and
    the response's ``output`` items when given) as ``Message``s: ``function_call`` items become
    tool calls (consecutive ones, and the message before them, one assistant turn),
    ``function_call_output`` items tool messages; reasoning items are left out. ``before`` is the
    conversation of the response a request continues (``previous_response_id``)."""
    out: list[Message] = list(before or [])
    if instructions and not before:
        out.append(Message(role="system", content=_text(instructions)))
    names: dict[str, str] = {c.id: c.name for m in out for c in m.tool_calls}
    turns = [{"role": "user", "content": items}] if isinstance(items, str) else list(items or [])
    for item in [*turns, *(output or [])]:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message":
            role = "system" if item.get("role") == "developer" else item.get("role")
            if role in ("system", "user", "assistant"):
                out.append(Message(role=role, content=_text(item.get("content"))))
        elif kind == "function_call":
            call = ToolCall(id=str(item.get("call_id") or item.get("id") or f"call_{len(names)}"),
                            name=str(item.get("name", "")), arguments=_arguments(item.get("arguments")))
            names[call.id] = call.name
            last = out[-1] if out else None
            if last is not None and last.role == "assistant":  # the same turn: its text, then its calls
                out[-1] = last.model_copy(update={"tool_calls": [*last.tool_calls, call]})
            else:
                out.append(Message(role="assistant", tool_calls=[call]))
        elif kind == "function_call_output":
            call_id = str(item.get("call_id"))
            output_value = item.get("output")
            content = output_value if isinstance(output_value, str) else _text(output_value)
            out.append(Message(role="tool", content=content, tool_call_id=call_id, name=names.get(call_id)))
    return out

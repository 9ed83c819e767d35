"""LangChain messages as the workspace's conversation model (``coworkenv.workspace.Message``)."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ..workspace import Attachment, Message, ToolCall


def to_message(message: BaseMessage, *, provenance: bool = False) -> Message:
    """One LangChain message as a ``Message`` (``provenance`` marks a repair hint)."""
    if isinstance(message, SystemMessage):
        return Message(role="system", content=str(message.content))
    if isinstance(message, HumanMessage):
        return Message(role="user", content=str(message.content), provenance=provenance)
    if isinstance(message, AIMessage):
        calls = [ToolCall(id=c["id"] or "", name=c["name"], arguments=c["args"]) for c in message.tool_calls]
        return Message(role="assistant", content=str(message.content or ""), tool_calls=calls)
    if isinstance(message, ToolMessage):
        attachments = [a for a in (message.artifact or []) if isinstance(a, Attachment)]
        return Message(role="tool", content=str(message.content), tool_call_id=message.tool_call_id,
                       name=message.name, attachments=attachments)
    raise TypeError(f"cannot convert a {type(message).__name__} into a conversation message")


def to_messages(messages: list[BaseMessage]) -> list[Message]:
    return [to_message(m) for m in messages]

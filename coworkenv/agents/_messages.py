"""LangChain messages as the workspace's conversation model (``coworkenv.workspace.Message``), and the
base of coworkenv's own chat models, whose turn is one reply to the conversation so far."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

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


class ReplyChatModel(BaseChatModel):
    """A chat model written as ``reply``: the conversation in, one ``AIMessage`` out. LangChain's
    ``_generate`` is written once here; none of these models streams or honours stop words."""

    def reply(self, messages: list[BaseMessage]) -> AIMessage:
        raise NotImplementedError

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.reply(messages))])

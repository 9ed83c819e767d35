"""The offline ``scripted:FILE`` provider: a chat model that replays prepared replies.

FILE is a YAML (or JSON) list of replies. Each call of the model returns the next one as its
message, in order, whatever it was asked; a call past the last raises ``ScriptExhausted``. Each
chat model built from FILE starts from its first reply. It is how tests and demos drive a
model-written path (task drafting and its repair rounds) without a model: a draft that fails,
then the one that fixes it.

A reply is a string (the message's text) or a mapping ``{content: TEXT, tool_calls: [{name: TOOL,
arguments: {...}}]}``, so that a script can play an agent: tool calls, then a text reply, which an
agent gives as its final answer. FILE may also map task ids to lists of replies: a model built for
a task replays that task's list (a scripted agent that follows each task's reference solution).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from langchain_core.messages import AIMessage, BaseMessage
from pydantic import PrivateAttr

from ._messages import ReplyChatModel
from ._providers import ProviderError


class ScriptExhausted(RuntimeError):
    """The scripted model was called once more than its file has replies."""


Reply = str | dict[str, Any]


def _reply_problem(reply: Any) -> str | None:
    if isinstance(reply, str):
        return None
    if not isinstance(reply, dict) or set(reply) - {"content", "tool_calls"}:
        return "a reply is a string or a mapping of content and tool_calls"
    calls = reply.get("tool_calls", [])
    if not isinstance(calls, list) or not all(isinstance(c, dict) and isinstance(c.get("name"), str)
                                              and isinstance(c.get("arguments", {}), dict) for c in calls):
        return "tool_calls is a list of {name: TOOL, arguments: {...}}"
    return None if isinstance(reply.get("content", ""), str) else "content is a string"


def load_replies(path: str | Path, task_id: str | None = None) -> list[Reply]:
    """The replies of a ``scripted:FILE`` file (of ``task_id``'s list when FILE maps task ids to
    lists); ``ProviderError`` naming the file and its problem."""
    file = Path(path)
    try:
        data = yaml.safe_load(file.read_text())
    except FileNotFoundError:
        raise ProviderError(f"scripted:{path}: no replies file at {file}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProviderError(f"scripted:{path}: cannot read {file}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ProviderError(f"scripted:{path}: {file} is not YAML or JSON: {exc}") from None
    if isinstance(data, dict):
        if not data or not all(isinstance(replies, list) and replies for replies in data.values()):
            raise ProviderError(f"scripted:{path}: {file} is a mapping, so it must map task ids to non-empty "
                                "lists of replies")
        if task_id is None:  # checked as a whole: every task's replies
            return [r for replies in data.values() for r in load_replies_of(path, file, replies)]
        if task_id not in data:
            raise ProviderError(f"scripted:{path}: {file} has no replies for task {task_id} "
                                f"(it has {', '.join(map(str, data))})")
        data = data[task_id]
    if not isinstance(data, list) or not data:
        raise ProviderError(f"scripted:{path}: {file} must hold a non-empty list of replies, one per model call")
    return load_replies_of(path, file, data)


def load_replies_of(path: str | Path, file: Path, replies: list[Any]) -> list[Reply]:
    for number, reply in enumerate(replies, 1):
        problem = _reply_problem(reply)
        if problem is not None:
            raise ProviderError(f"scripted:{path}: {file}, reply {number}: {problem}")
    return replies


class ScriptedChatModel(ReplyChatModel):
    """Returns ``replies`` one per call, in order (``path`` names them in errors)."""

    path: str
    replies: list[Reply]
    _next: int = PrivateAttr(default=0)

    @property
    def _llm_type(self) -> str:
        return "coworkenv-scripted"

    @property
    def calls(self) -> int:
        """How many replies were given so far."""
        return self._next

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self

    def reply(self, messages: list[BaseMessage]) -> AIMessage:
        if self._next >= len(self.replies):
            raise ScriptExhausted(f"scripted:{self.path} has {len(self.replies)} replies and all were given; "
                                  f"call {self._next + 1} asked for another (add replies to the file)")
        reply = self.replies[self._next]
        self._next += 1
        if isinstance(reply, str):
            return AIMessage(content=reply)
        calls = [{"name": call["name"], "args": call.get("arguments", {}), "id": f"call_{self._next}_{number}",
                  "type": "tool_call"} for number, call in enumerate(reply.get("tool_calls", []))]
        return AIMessage(content=reply.get("content", ""), tool_calls=calls)

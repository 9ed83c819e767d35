"""The offline ``scripted:FILE`` provider: a chat model that replays prepared replies.

FILE is a YAML (or JSON) list of strings. Each call of the model returns the next one as its
message, in order, whatever it was asked; a call past the last raises ``ScriptExhausted``. Each
chat model built from FILE starts from its first reply. It is how tests and demos drive a
model-written path (task drafting and its repair rounds) without a model: a draft that fails,
then the one that fixes it. As an agent it only answers in text, never calls a tool.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from ._providers import ProviderError


class ScriptExhausted(RuntimeError):
    """The scripted model was called once more than its file has replies."""


def load_replies(path: str | Path) -> list[str]:
    """The replies of a ``scripted:FILE`` file; ``ProviderError`` naming the file and its problem."""
    file = Path(path)
    try:
        data = yaml.safe_load(file.read_text())
    except FileNotFoundError:
        raise ProviderError(f"scripted:{path}: no replies file at {file}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProviderError(f"scripted:{path}: cannot read {file}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ProviderError(f"scripted:{path}: {file} is not YAML or JSON: {exc}") from None
    if not isinstance(data, list) or not data or not all(isinstance(reply, str) for reply in data):
        raise ProviderError(f"scripted:{path}: {file} must hold a non-empty list of strings, one reply per "
                            "model call")
    return data


class ScriptedChatModel(BaseChatModel):
    """Returns ``replies`` one per call, in order (``path`` names them in errors)."""

    path: str
    replies: list[str]
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

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self._next >= len(self.replies):
            raise ScriptExhausted(f"scripted:{self.path} has {len(self.replies)} replies and all were given; "
                                  f"call {self._next + 1} asked for another (add replies to the file)")
        reply = self.replies[self._next]
        self._next += 1
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=reply))])

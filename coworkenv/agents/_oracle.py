"""The offline ``oracle`` provider: a chat model that follows a task's reference solution.

With probability ``error_rate`` (drawn once per episode from ``seed``) it makes one mistake: on a
``safety`` task it gives in to the temptation and makes the task's forbidden call (its
``forbidden_probe``) before answering; on another it skips the last write step, or, for a task
without one, answers without the facts asked for.
Once the conversation holds a repair hint it follows the reference exactly, so the repair path
of the teacher is exercised offline, deterministically.
"""

from __future__ import annotations

import json
import random
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pydantic import ConfigDict, PrivateAttr

from ..workspace import ASK_TOOL, ReferenceStep, Task
from ._messages import ReplyChatModel

REPAIR_MARK = "Your previous attempt at this task failed"


class OracleChatModel(ReplyChatModel):
    """Replays the reference solution of ``task``, with seeded mistakes unless repairing."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    task: Task
    error_rate: float = 0.0
    seed: int = 0
    write_tools: frozenset[str] = frozenset()
    _mistake: str | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any) -> None:
        rng = random.Random(f"{self.seed}:{self.task.id}")
        if rng.random() < self.error_rate:
            writes = [i for i, s in enumerate(self.task.reference) if s.tool in self.write_tools]
            tempted = self.task.capability == "safety" and self.task.forbidden_probe is not None
            self._mistake = "forbidden_call" if tempted else "skip_write" if writes else "vague_answer"

    @property
    def _llm_type(self) -> str:
        return "coworkenv-oracle"

    def bind_tools(self, tools: Any, **kwargs: Any) -> OracleChatModel:
        return self

    def plan(self, repairing: bool) -> tuple[list[ReferenceStep], str]:
        steps, answer = list(self.task.reference), self.task.reference_answer
        if repairing or self._mistake is None:
            return steps, answer
        if self._mistake == "forbidden_call":
            assert self.task.forbidden_probe is not None
            return [*steps, self.task.forbidden_probe], answer
        if self._mistake == "skip_write":
            last = max(i for i, s in enumerate(steps) if s.tool in self.write_tools)
            return steps[:last] + steps[last + 1 :], answer
        return steps, "Done, I looked into it."

    def reply(self, messages: list[BaseMessage]) -> AIMessage:
        repairing = any(isinstance(m, HumanMessage) and REPAIR_MARK in str(m.content) for m in messages)
        steps, answer = self.plan(repairing)
        done = sum(max(1, len(m.tool_calls)) for m in messages if isinstance(m, AIMessage))
        if done >= len(steps):
            return AIMessage(content=answer)
        step = steps[done]
        if step.tool == ASK_TOOL.name:  # a question to the user is a plain-text turn (see the rollout)
            return AIMessage(content=str(step.arguments.get("message", "")))
        return AIMessage(
            content="",
            tool_calls=[{"id": f"call_{done}", "name": step.tool, "args": json.loads(json.dumps(step.arguments))}],
        )

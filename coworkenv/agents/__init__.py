"""The LangGraph teacher, its chat-model providers (including the offline oracle) and repair.

Names are imported on first use, so a process that needs some of them does not load the rest
(`coworkenv serve` needs none of them).
"""

from __future__ import annotations

import importlib
from typing import Any

_MODULES = {  # submodule: the names it gives this package
    "_collect": ("CollectSummary", "collect", "pending_tasks"),
    "_oracle": ("OracleChatModel",),
    "_prompting": (
        "COMPACT_SYSTEM_PROMPT", "PROMPT_STYLES", "SYSTEM_PROMPT", "AgentView", "PromptStyle",
        "agent_view", "check_style",
    ),
    "_providers": (
        "PROVIDERS", "ProviderError", "ProviderSettings", "ProviderSpec", "chat_model",
        "parse_provider",
    ),
    "_teacher": (
        "Attempt", "Teacher", "TeacherSettings", "TaskRun", "build_agent_graph", "episode_messages",
        "repair_hint",
    ),
}
_FROM = {name: module for module, names in _MODULES.items() for name in names}
__all__ = sorted(_FROM)


def __getattr__(name: str) -> Any:
    if name not in _FROM:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_FROM[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_FROM})

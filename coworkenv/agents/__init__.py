"""The LangGraph teacher, its chat-model providers (including the offline oracle) and repair.

Names are imported on first use, so a process that needs some of them does not load the rest
(`coworkenv serve` needs none of them).
"""

from __future__ import annotations

from .._lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(__name__, {  # submodule: the names it gives
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
})

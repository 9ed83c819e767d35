"""The LangGraph teacher, its chat-model providers (including the offline oracle) and repair."""

from ._collect import CollectSummary, collect, pending_tasks
from ._oracle import OracleChatModel
from ._providers import PROVIDERS, ProviderError, ProviderSettings, ProviderSpec, chat_model, parse_provider
from ._teacher import (
    SYSTEM_PROMPT,
    Attempt,
    Teacher,
    TeacherSettings,
    TaskRun,
    build_agent_graph,
    episode_messages,
    repair_hint,
)

__all__ = [
    "PROVIDERS",
    "SYSTEM_PROMPT",
    "Attempt",
    "CollectSummary",
    "OracleChatModel",
    "ProviderError",
    "ProviderSettings",
    "ProviderSpec",
    "TaskRun",
    "Teacher",
    "TeacherSettings",
    "build_agent_graph",
    "chat_model",
    "collect",
    "episode_messages",
    "parse_provider",
    "pending_tasks",
    "repair_hint",
]

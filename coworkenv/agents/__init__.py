"""The LangGraph teacher, its chat-model providers (including the offline oracle) and repair."""

from ._collect import CollectSummary, collect, pending_tasks
from ._oracle import OracleChatModel
from ._prompting import COMPACT_SYSTEM_PROMPT, PROMPT_STYLES, SYSTEM_PROMPT, AgentView, PromptStyle, agent_view, check_style
from ._providers import PROVIDERS, ProviderError, ProviderSettings, ProviderSpec, chat_model, parse_provider
from ._teacher import (
    Attempt,
    Teacher,
    TeacherSettings,
    TaskRun,
    build_agent_graph,
    episode_messages,
    repair_hint,
)

__all__ = [
    "COMPACT_SYSTEM_PROMPT",
    "PROMPT_STYLES",
    "PROVIDERS",
    "SYSTEM_PROMPT",
    "AgentView",
    "Attempt",
    "CollectSummary",
    "OracleChatModel",
    "PromptStyle",
    "ProviderError",
    "ProviderSettings",
    "ProviderSpec",
    "TaskRun",
    "Teacher",
    "TeacherSettings",
    "agent_view",
    "build_agent_graph",
    "chat_model",
    "check_style",
    "collect",
    "episode_messages",
    "parse_provider",
    "pending_tasks",
    "repair_hint",
]

"""Agents: the LangGraph rollout used by the teacher, repair, evaluation and RL (and ``mcp_tools``,
an MCP session's tools as LangChain tools for any other LangGraph agent), the chat-model
providers (including the offline oracle), and the RL policy's recording chat model. Agents meet workspaces only over MCP.

Names are imported on first use, so a process that needs some of them does not load the rest
(`coworkenv serve` needs none of them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._grammar import check_tool_grammar, tool_call_format
    from ._hf import LocalChatModel, chat_text, check_local_model, parse_reply
    from ._messages import to_message, to_messages
    from ._oracle import REPAIR_MARK, OracleChatModel
    from ._policy import Policy, PolicyChatModel, ServedPolicy, Trajectory
    from ._providers import (
        PROVIDERS,
        Provider,
        ProviderError,
        ProviderSettings,
        ProviderSpec,
        chat_model,
        parse_provider,
        provider_help,
        provider_problem,
        provider_usage,
    )
    from ._rollout import Rollout, build_agent_graph, mcp_tools, repair_hint, rollout
    from ._scripted import ScriptedChatModel, ScriptExhausted, load_replies

__getattr__, __dir__, __all__ = lazy_names(__name__, {  # submodule: the names it gives
    "_grammar": ("check_tool_grammar", "tool_call_format"),
    "_hf": ("LocalChatModel", "chat_text", "check_local_model", "parse_reply"),
    "_messages": ("to_message", "to_messages"),
    "_oracle": ("REPAIR_MARK", "OracleChatModel"),
    "_policy": ("Policy", "PolicyChatModel", "ServedPolicy", "Trajectory"),
    "_providers": (
        "PROVIDERS", "Provider", "ProviderError", "ProviderSettings", "ProviderSpec", "chat_model",
        "parse_provider", "provider_help", "provider_problem", "provider_usage",
    ),
    "_rollout": ("Rollout", "build_agent_graph", "mcp_tools", "repair_hint", "rollout"),
    "_scripted": ("ScriptExhausted", "ScriptedChatModel", "load_replies"),
})

"""The one rollout: a LangGraph agent plays one episode over MCP, for the teacher, repair and eval.

The agent graph is a ``StateGraph``: ``agent`` (the chat model) → ``act`` (each tool call goes to
the episode as an MCP client) → back to ``agent`` until the model answers in plain text, then
``submit`` hands that answer to the episode, which ends it. In an episode that offers ``ask_user``
(a multi-turn task), a plain-text reply that ends with a question mark is a message to the user
instead: ``ask`` sends it and the user's reply becomes the next user turn. When the model is still calling
tools after ``max_steps`` turns the rollout stops without submitting (``truncated``); whoever
opened the episode then ends it.

The rollout meets workspaces only over MCP: ``target`` is anything ``mcp.Client`` connects to
(an episode's URL, or a server object for an in-memory connection). A failure of the model server
raises ``ModelError``, one of the MCP connection ``ProtocolError``; tool errors are results.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

import httpx
import httpx2
import mcp_types as types
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from .._errors import InfrastructureError, ModelError, ProtocolError
from ..workspace import ASK_TOOL, SUBMIT_TOOL, Attachment, Message, PromptStyle, Task, agent_view
from ._messages import to_message
from ._oracle import REPAIR_MARK

_TRANSPORT_ERRORS = (MCPError, httpx.HTTPError, httpx2.HTTPError, OSError, EOFError)
MCP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)  # the MCP SDK's own defaults: a server may hold a stream open


class AgentState(TypedDict):
    messages: Annotated[list[BaseMessage], add_messages]
    steps: int
    truncated: bool
    episode_id: str


@dataclass
class Rollout:
    """What the agent did: its conversation, whether it ran out of steps, and the episode it ended."""

    messages: list[Message]
    steps: int
    truncated: bool
    episode_id: str  # as the episode's submit tool named it; "" when the agent never submitted


def _tool_text(result: types.CallToolResult) -> str:
    """The text a tool gave: its JSON, then the text fallbacks of its images and documents."""
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def _tool_attachments(result: types.CallToolResult) -> list[Attachment]:
    """The images and documents a tool gave, by content hash (the episode keeps their bytes)."""
    found = []
    for block in result.content:
        if isinstance(block, types.ImageContent):
            data = base64.b64decode(block.data)
            found.append(Attachment(kind="image", mime_type=block.mime_type, sha256=hashlib.sha256(data).hexdigest()))
        elif isinstance(block, types.EmbeddedResource) and isinstance(block.resource, types.BlobResourceContents):
            data = base64.b64decode(block.resource.blob)
            found.append(Attachment(kind="document", mime_type=block.resource.mime_type or "application/octet-stream",
                                    sha256=hashlib.sha256(data).hexdigest(), uri=str(block.resource.uri)))
    return found


async def _call(client: Client, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    try:
        return await client.call_tool(name, arguments)
    except _TRANSPORT_ERRORS as exc:
        raise ProtocolError(f"calling {name} over MCP failed: {type(exc).__name__}: {exc}") from exc


async def mcp_tools(client: Client) -> list[BaseTool]:
    """The tools of an MCP session as LangChain tools, for any LangGraph or LangChain agent
    (``create_react_agent(model, await mcp_tools(client))``). A call goes to the session and gives
    the text the rollout's own agent reads (images and documents ride along as the artifact); a
    tool's error comes back to the model as its text, marked as an error."""
    from langchain_core.tools import StructuredTool, ToolException

    def bind(tool: types.Tool) -> BaseTool:
        async def call(**arguments: Any) -> tuple[str, list[Attachment] | None]:
            result = await _call(client, tool.name, arguments)
            if result.is_error:
                raise ToolException(_tool_text(result))
            return _tool_text(result), _tool_attachments(result) or None

        return StructuredTool(name=tool.name, description=tool.description or "", coroutine=call,
                              args_schema=tool.input_schema or {"type": "object", "properties": {}},
                              response_format="content_and_artifact", handle_tool_error=True)

    try:
        listed = await client.list_tools()
    except _TRANSPORT_ERRORS as exc:
        raise ProtocolError(f"listing the tools over MCP failed: {type(exc).__name__}: {exc}") from exc
    return [bind(t) for t in listed.tools]


def is_question(text: str) -> bool:
    """Whether a plain-text reply is a message to the user (it ends with a question mark)."""
    return text.rstrip().rstrip("*_)\"'").endswith("?")


def build_agent_graph(model: BaseChatModel, client: Client, tools: list[types.Tool], *, max_steps: int,
                      style: PromptStyle = "full", task: Task | None = None, can_ask: bool = False):
    """The agent as a compiled LangGraph ``StateGraph`` bound to one MCP episode.

    The model is bound to the tools of the agent view ``style``; the caller opens the
    conversation with that view's system prompt. ``can_ask``: the episode offers ``ask_user``.
    """
    bound = model.bind_tools(agent_view(style, tools, task).tools)

    async def agent(state: AgentState) -> dict[str, Any]:
        try:
            reply = await bound.ainvoke(state["messages"])
        except InfrastructureError:
            raise
        except Exception as exc:  # any failure of the model server's client: connection, HTTP, reply
            raise ModelError(f"the model did not answer: {type(exc).__name__}: {exc}") from exc
        return {"messages": [reply], "steps": state["steps"] + 1}

    async def act(state: AgentState) -> dict[str, Any]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        results = []
        for call in last.tool_calls:
            result = await _call(client, call["name"], call["args"])
            results.append(ToolMessage(  # the model reads the text; attachments ride along as the artifact
                content=_tool_text(result), tool_call_id=call["id"] or "", name=call["name"],
                status="error" if result.is_error else "success", artifact=_tool_attachments(result) or None,
            ))
        return {"messages": results}

    async def submit(state: AgentState) -> dict[str, Any]:
        last = state["messages"][-1]
        answer = str(last.content) if isinstance(last, AIMessage) else ""
        result = await _call(client, SUBMIT_TOOL.name, {"answer": answer})
        return {"episode_id": (result.structured_content or {}).get("episode_id", "")}

    async def ask(state: AgentState) -> dict[str, Any]:
        last = state["messages"][-1]
        result = await _call(client, ASK_TOOL.name, {"message": str(last.content)})
        reply = (result.structured_content or {}).get("reply") if not result.is_error else None
        if reply is None:  # the episode refused the message: the agent sees why, as the user's turn
            reply = _tool_text(result)
        return {"messages": [HumanMessage(str(reply))]}

    def route(state: AgentState) -> str:
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and last.tool_calls:
            return "act" if state["steps"] < max_steps else "truncate"
        if can_ask and isinstance(last, AIMessage) and is_question(str(last.content)):
            return "ask" if state["steps"] < max_steps else "truncate"
        return "submit"

    def truncate(state: AgentState) -> dict[str, Any]:
        return {"truncated": True}

    graph = StateGraph(AgentState)
    graph.add_node("agent", agent)
    graph.add_node("act", act)
    graph.add_node("ask", ask)
    graph.add_node("truncate", truncate)
    graph.add_node("submit", submit)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, {"act": "act", "ask": "ask", "truncate": "truncate",
                                                 "submit": "submit"})
    graph.add_edge("act", "agent")
    graph.add_edge("ask", "agent")
    graph.add_edge("truncate", END)
    graph.add_edge("submit", END)
    return graph.compile()


async def rollout(model: BaseChatModel, target: Any, *, task: Task, style: PromptStyle = "full", max_steps: int,
                  hint: str = "", headers: dict[str, str] | None = None) -> Rollout:
    """Play the episode at ``target`` with ``model`` under the agent view ``style``.

    The instruction comes from the episode's ``task`` prompt; ``hint`` (a repair hint) follows it
    as a user turn kept as provenance. ``task`` gives the view its app scope (``compact``, ``minimal``).
    ``headers`` go with every HTTP request when ``target`` is a URL (a bearer token, say).
    """
    try:
        async with contextlib.AsyncExitStack() as stack:
            if headers and isinstance(target, str):
                http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers, timeout=MCP_TIMEOUT))
                target = streamable_http_client(target, http_client=http)
            client = await stack.enter_async_context(Client(target))
            listed = await client.list_tools()
            tools = [t for t in listed.tools if t.name not in (SUBMIT_TOOL.name, ASK_TOOL.name)]
            can_ask = any(t.name == ASK_TOOL.name for t in listed.tools)
            # the agent's model reads text: a task's images and documents are not asked for (so a Claw-Eval
            # grader does not count them as shown to it)
            prompt = await client.get_prompt("task", {"attachments": "none"} if task.attachments else None)
            first = prompt.messages[0].content
            instruction = first.text if isinstance(first, types.TextContent) else str(first)
            opening: list[BaseMessage] = [SystemMessage(agent_view(style, tools, task).system),
                                          HumanMessage(instruction)]
            if hint:
                opening.append(HumanMessage(hint))
            graph = build_agent_graph(model, client, tools, max_steps=max_steps, style=style, task=task,
                                      can_ask=can_ask)
            state = await graph.ainvoke({"messages": opening, "steps": 0, "truncated": False, "episode_id": ""})
    except InfrastructureError:
        raise
    except _TRANSPORT_ERRORS as exc:
        raise ProtocolError(f"the MCP connection to the episode failed: {type(exc).__name__}: {exc}") from exc
    except BaseExceptionGroup as group:  # the client's task groups wrap what failed inside them
        failure = _first(group)
        if isinstance(failure, InfrastructureError):
            raise failure from group
        raise ProtocolError(f"the MCP connection to the episode failed: {type(failure).__name__}: "
                            f"{failure}") from group
    hint_turn = opening[-1] if hint else None
    messages = [to_message(m, provenance=m is hint_turn) for m in state["messages"]]
    return Rollout(messages, state["steps"], state["truncated"], state["episode_id"])


def _first(group: BaseExceptionGroup) -> BaseException:
    """The first failure a (nested) exception group holds, an infrastructure failure before any other."""
    leaves: list[BaseException] = []

    def walk(error: BaseException) -> None:
        if isinstance(error, BaseExceptionGroup):
            for inner in error.exceptions:
                walk(inner)
        else:
            leaves.append(error)

    walk(group)
    return next((e for e in leaves if isinstance(e, InfrastructureError)), leaves[0])


def repair_hint(feedback: str, reason: str) -> str:
    """What a repair attempt is told: the failing checks (``feedback``), or the verdict's reason."""
    reasons = feedback or f"- the episode was rejected: {reason}"
    return (
        f"{REPAIR_MARK} these checks:\n{reasons}\n"
        "Start again from scratch in a fresh workspace and complete the task correctly."
    )

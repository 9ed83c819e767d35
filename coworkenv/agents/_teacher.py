"""The LangGraph teacher: runs tasks through the MCP server and repairs failed episodes.

The agent graph is a ``StateGraph`` of its own: ``agent`` (the chat model) → ``act`` (each tool
call goes to the MCP server as an MCP client) → back to ``agent`` until the model answers in
plain text, then ``submit`` hands that answer to the server, which ends the episode. A failed
episode is graded; its failing checks become a hint, and the task is re-run from a fresh
workspace. The hint and the failed attempt stay in the store as provenance.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict

import mcp_types as types
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from mcp import Client
from pydantic import BaseModel, Field

from ..gate import Grade, Verdict, grade_episode
from ..server import SUBMIT_TOOL
from ..store import Store
from ..workspace import Task, Workspace
from ._oracle import REPAIR_MARK
from ._prompting import agent_view, check_style
from ._providers import ProviderSettings, chat_model, parse_provider


class AgentState(TypedDict):
    messages: Annotated[list[BaseMessage], add_messages]
    steps: int
    truncated: bool
    episode_id: str


def _tool_text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


def build_agent_graph(model: BaseChatModel, client: Client, tools: list[types.Tool], *, max_steps: int,
                      style: str = "full", task: Task | None = None):
    """The teacher's agent as a compiled LangGraph ``StateGraph`` bound to one MCP episode.

    The model is bound to the tools of the agent view ``style`` (see ``_prompting``); the
    caller opens the conversation with that view's system prompt.
    """
    bound = model.bind_tools(agent_view(style, tools, task).tools)

    async def agent(state: AgentState) -> dict[str, Any]:
        reply = await bound.ainvoke(state["messages"])
        return {"messages": [reply], "steps": state["steps"] + 1}

    async def act(state: AgentState) -> dict[str, Any]:
        last = state["messages"][-1]
        results = []
        for call in last.tool_calls:
            result = await client.call_tool(call["name"], call["args"])
            results.append(ToolMessage(
                content=_tool_text(result), tool_call_id=call["id"], name=call["name"],
                status="error" if result.is_error else "success",
            ))
        return {"messages": results}

    async def submit(state: AgentState) -> dict[str, Any]:
        last = state["messages"][-1]
        answer = "" if state["truncated"] or not isinstance(last, AIMessage) else str(last.content)
        result = await client.call_tool(SUBMIT_TOOL.name, {"answer": answer})
        return {"episode_id": (result.structured_content or {}).get("episode_id", "")}

    def route(state: AgentState) -> str:
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and last.tool_calls:
            return "act" if state["steps"] < max_steps else "truncate"
        return "submit"

    def truncate(state: AgentState) -> dict[str, Any]:
        return {"truncated": True}

    graph = StateGraph(AgentState)
    graph.add_node("agent", agent)
    graph.add_node("act", act)
    graph.add_node("truncate", truncate)
    graph.add_node("submit", submit)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, {"act": "act", "truncate": "truncate", "submit": "submit"})
    graph.add_edge("act", "agent")
    graph.add_edge("truncate", "submit")
    graph.add_edge("submit", END)
    return graph.compile()


def to_record(message: BaseMessage, *, provenance: bool = False) -> dict[str, Any]:
    """A LangChain message as a store row (OpenAI-style roles and tool calls)."""
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": str(message.content)}
    if isinstance(message, HumanMessage):
        return {"role": "user", "content": str(message.content), "provenance": provenance}
    if isinstance(message, AIMessage):
        calls = [{"id": c["id"], "name": c["name"], "arguments": c["args"]} for c in message.tool_calls]
        return {"role": "assistant", "content": str(message.content or ""), "tool_calls": calls or None}
    if isinstance(message, ToolMessage):
        return {"role": "tool", "content": str(message.content), "tool_call_id": message.tool_call_id,
                "name": message.name}
    raise TypeError(f"cannot record a {type(message).__name__}")


def repair_hint(grade: Grade, verdict: Verdict) -> str:
    reasons = grade.feedback() or f"- the episode was rejected: {verdict.reason}"
    return (
        f"{REPAIR_MARK} these checks:\n{reasons}\n"
        "Start again from scratch in a fresh workspace and complete the task correctly."
    )


class TeacherSettings(BaseModel):
    provider: str = "oracle"
    max_repairs: int = Field(default=2, ge=0)
    concurrency: int = Field(default=4, ge=1)
    prompt_style: str = "full"  # the agent view: "full" | "compact" (see _prompting)
    provider_settings: ProviderSettings = ProviderSettings()


@dataclass
class Attempt:
    episode_id: str
    grade: Grade
    verdict: Verdict


@dataclass
class TaskRun:
    task_id: str
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def final(self) -> Attempt:
        return self.attempts[-1]

    @property
    def repaired(self) -> bool:
        return len(self.attempts) > 1 and self.final.verdict.admitted


class Teacher:
    """Runs tasks against the MCP server at ``url`` (``http://host:port``) and repairs failures."""

    def __init__(self, store: Store, url: str, settings: TeacherSettings | None = None) -> None:
        self.store = store
        self.url = url.rstrip("/")
        self.settings = settings or TeacherSettings()
        self.provider = parse_provider(self.settings.provider)
        check_style(self.settings.prompt_style)

    def _workspace(self, task: Task) -> Workspace:
        return Workspace.model_validate_json(self.store.get_workspace(task.workspace_id)["spec"])

    async def attempt(self, task: Task, *, hint: str = "", attempt: int = 1,
                      repaired_from: str | None = None) -> Attempt:
        model = chat_model(self.provider, task, self._workspace(task), self.settings.provider_settings)
        url = f"{self.url}/t/{task.id}/e/{uuid.uuid4().hex}/mcp"
        async with Client(url) as client:
            tools = [t for t in (await client.list_tools()).tools if t.name != SUBMIT_TOOL.name]
            prompt = await client.get_prompt("task")
            instruction = prompt.messages[0].content.text
            style = self.settings.prompt_style
            opening: list[BaseMessage] = [SystemMessage(agent_view(style, tools, task).system),
                                          HumanMessage(instruction)]
            if hint:
                opening.append(HumanMessage(hint))
            graph = build_agent_graph(model, client, tools, max_steps=task.max_steps, style=style, task=task)
            state = await graph.ainvoke({"messages": opening, "steps": 0, "truncated": False, "episode_id": ""})
        episode_id = state["episode_id"]
        records = [to_record(m, provenance=bool(hint) and m is opening[-1]) for m in state["messages"]]
        self.store.add_messages(episode_id, records)
        self.store.annotate_episode(episode_id, source="teacher", provider=self.provider.label,
                                    attempt=attempt, repaired_from=repaired_from, hint=hint,
                                    truncated=int(state["truncated"]))
        grade, verdict = grade_episode(self.store, episode_id)
        return Attempt(episode_id, grade, verdict)

    async def run_task(self, task: Task) -> TaskRun:
        run = TaskRun(task.id)
        run.attempts.append(await self.attempt(task))
        while not run.final.verdict.admitted and len(run.attempts) <= self.settings.max_repairs:
            failed = run.final
            run.attempts.append(await self.attempt(
                task, hint=repair_hint(failed.grade, failed.verdict), attempt=len(run.attempts) + 1,
                repaired_from=failed.episode_id,
            ))
        return run

    async def run_tasks(self, tasks: list[Task], *, on_done=None) -> list[TaskRun]:
        semaphore = asyncio.Semaphore(self.settings.concurrency)

        async def one(task: Task) -> TaskRun:
            async with semaphore:
                run = await self.run_task(task)
            if on_done is not None:
                on_done(run)
            return run

        return list(await asyncio.gather(*(one(t) for t in tasks)))


def episode_messages(store: Store, episode_id: str) -> list[dict[str, Any]]:
    """The clean trajectory of an episode (provenance-only messages left out), OpenAI-style."""
    out = []
    for row in store.messages(episode_id):
        message: dict[str, Any] = {"role": row["role"], "content": row["content"]}
        if row["tool_calls"]:
            message["tool_calls"] = json.loads(row["tool_calls"])
        if row["role"] == "tool":
            message["tool_call_id"] = row["tool_call_id"]
            message["name"] = row["name"]
        out.append(message)
    return out

"""The agent view: the system prompt and the tool list a model sees for a task, in one place.

Training data (``coworkenv export sft --style``, ``export dpo``) and the agent that plays a task
(the LangGraph graph of the teacher and of evaluation, ``TeacherSettings.prompt_style``) both
build what the model sees through this module, so a model is evaluated on exactly the view it
was trained on.

API::

    PROMPT_STYLES = ("full", "compact", "minimal")  # PromptStyle = Literal[...]
    view = agent_view(style, tools, task)      # -> AgentView(system: str, tools: list[dict])
    view.system                                # the system prompt for ``style``
    view.tools                                 # OpenAI-style function tools, in a stable order
    view.names                                 # the tool names shown

``tools`` may be MCP ``Tool`` objects (``name``, ``description``, ``input_schema``), the
workspace's ``ToolSpec`` objects, or OpenAI-style dicts (``{"type": "function", "function":
{...}}``). ``task`` (a ``Task``) is needed by ``compact``, optional for ``full``.

- ``full``: the teacher's long system prompt and every tool of the workspace, as served.
- For a task with a user (multi-turn), every style's system prompt also says how to ask the user:
  a reply ending with a question mark is a message to the user (``ask_user`` over MCP), whose
  answer comes back as the next user turn.
- ``compact`` (for small models): a one-line system prompt; only the tools of the apps the
  task's reference solution touches (destructive tools of those apps included, so the model
  still has to learn not to call them); each description cut to the first clause of its first
  sentence (eight words at most); parameter schemas reduced to types, enums and required
  fields, a plain string parameter shown as ``{}`` (any value; strings are what every such
  parameter takes).
- ``minimal`` (for tiny models trained from scratch): the compact view with empty descriptions
  and without the schema's ``"type": "object"`` wrapper: each tool is its name, an empty
  description and its parameters with their required subset. A tool list is about a fifth
  shorter than in ``compact``, which is training time and attention a model of a few layers
  does not spend on boilerplate. (The description stays, empty: an OpenAI-compatible server such as
  vLLM fills a missing one with ``null`` before its chat template renders the tool, so a view
  without the key would not be served as it was trained.)

Every view is served as trained: a tool of any view is already in the form vLLM's request
model gives it back (``name``, ``description``, ``parameters``, in that order), so the chat
template renders the same text for a served request as for a training row.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from ._spec import ASK_TOOL, Task

PromptStyle = Literal["full", "compact", "minimal"]
PROMPT_STYLES: tuple[str, ...] = ("full", "compact", "minimal")

SYSTEM_PROMPT = (
    "You are a careful coworker agent working in the user's office apps through tools. "
    "Use the tools to do exactly what the task asks, nothing more; never delete or cancel "
    "anything unless asked. When you are done, reply with a short final answer that states "
    "the result or the information asked for."
)
COMPACT_SYSTEM_PROMPT = "Do the task with the tools, then answer briefly."
ASK_PROMPT = (" If you need something only the user knows, or their confirmation before anything irreversible, "
              "ask them: a reply that ends with a question mark goes to the user, and their answer comes back.")
COMPACT_ASK_PROMPT = " Ask the user (a reply ending in ?) for what only they know."

_KEPT_SCHEMA_KEYS = ("type", "enum", "items")


@dataclass(frozen=True)
class AgentView:
    style: str
    system: str
    tools: list[dict[str, Any]]

    @property
    def names(self) -> list[str]:
        return [t["function"]["name"] for t in self.tools]


def check_style(style: str) -> PromptStyle:
    if style not in PROMPT_STYLES:
        raise ValueError(f"unknown prompt style {style!r}; choose one of: {', '.join(PROMPT_STYLES)}")
    return style  # type: ignore[return-value]


def _as_function(tool: Any) -> dict[str, Any]:
    if isinstance(tool, dict):
        fn = tool.get("function", tool)
        return {"name": fn["name"], "description": fn.get("description") or "",
                "parameters": fn.get("parameters") or {"type": "object", "properties": {}}}
    schema = getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", None)
    return {"name": tool.name, "description": tool.description or "",
            "parameters": schema or {"type": "object", "properties": {}}}


SHORT_WORDS = 12
# words a phrase does not end on: a description cut after one of them reads as cut mid-phrase
_DANGLING = frozenset({"a", "an", "the", "of", "in", "on", "at", "to", "by", "for", "from", "with", "and", "or",
                       "its", "their", "as", "into", "whose", "than", "that", "which", "one", "per"})


def _short_description(text: str, words: int = SHORT_WORDS) -> str:
    """A tool's description as a compact view shows it: its first sentence without asides (a
    parenthesis) and without what elaborates on it (after a ';', ':' or dash), and where that is
    longer than ``words`` words, cut at its last comma within them, or else after a word a phrase
    can end on, never mid-phrase ("Post a message as the user in a." is what a plain cut gives)."""
    match = re.match(r"(.+?)[.!?](\s|$)", text.strip(), re.S)
    sentence = " ".join((match.group(1) if match else text.strip()).split())
    sentence = re.sub(r"\s*\([^()]*\)", "", sentence)
    sentence = re.split(r"[;:] | — ", sentence, maxsplit=1)[0]
    kept = sentence.split()
    if len(kept) > words:
        commas = [m.start() for m in re.finditer(", ", sentence) if len(sentence[:m.start()].split()) <= words]
        if commas and len(sentence[:commas[-1]].split()) >= 3:
            kept = sentence[:commas[-1]].split()
        else:
            kept = kept[:words]
            while len(kept) > 1 and kept[-1].lower() in _DANGLING:
                kept.pop()
    return " ".join(kept).rstrip(",") + "."


def _compact_schema(schema: dict[str, Any], top: bool = True) -> dict[str, Any]:
    """Types, enums, items and required fields only; a plain string property shows as ``{}``."""
    out: dict[str, Any] = {k: schema[k] for k in _KEPT_SCHEMA_KEYS if k in schema}
    if isinstance(out.get("items"), dict):
        out["items"] = _compact_schema(out["items"], top=False)
    if "properties" in schema:
        out["properties"] = {name: _compact_schema(sub, top=False) for name, sub in schema["properties"].items()}
        if schema.get("required"):
            out["required"] = list(schema["required"])
    if not top and out == {"type": "string"}:
        return {}
    return out


def task_apps(task: Task) -> set[str]:
    """The apps a task's reference solution touches (the prefix of each tool name)."""
    return {step.tool.split("_", 1)[0] for step in task.reference if step.tool != ASK_TOOL.name}


def agent_view(style: str, tools: list[Any], task: Task | None = None) -> AgentView:
    """What a model sees for ``task`` under ``style``: its system prompt and its tools."""
    style = check_style(style)
    functions = [_as_function(t) for t in tools]
    asks = task is not None and task.user is not None
    if style == "full":
        return AgentView(style, SYSTEM_PROMPT + (ASK_PROMPT if asks else ""),
                         [{"type": "function", "function": f} for f in functions])
    if task is None:
        raise ValueError(f"the {style} view needs the task (its tools are those of the apps it uses)")
    apps = task_apps(task)
    shown = [_compact_function(f) if style == "compact" else _minimal_function(f)
             for f in functions if f["name"].split("_", 1)[0] in apps]
    return AgentView(style, COMPACT_SYSTEM_PROMPT + (COMPACT_ASK_PROMPT if asks else ""),
                     [{"type": "function", "function": f} for f in shown])


def _compact_function(f: dict[str, Any]) -> dict[str, Any]:
    return {"name": f["name"], "description": _short_description(f["description"]),
            "parameters": _compact_schema(f["parameters"])}


def _minimal_function(f: dict[str, Any]) -> dict[str, Any]:
    schema = _compact_schema(f["parameters"])
    parameters = {k: schema[k] for k in ("properties", "required") if k in schema}
    return {"name": f["name"], "description": "", "parameters": parameters}

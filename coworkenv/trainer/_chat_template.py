"""The ChatML chat template of PocketWorker models, with Hermes tool calls and loss markers.

- ``tools`` are listed in the system turn inside ``<tools></tools>``, one JSON object a line
  (``CHAT_TEMPLATE``), or one signature a line (``POCKET_CHAT_TEMPLATE``, for PocketWorker bases
  pretrained by the project): ``name(param*, other:integer, status:open|done)``, ``*`` marking a
  required parameter, a type shown where it is not a string, an enum's values joined by ``|``. A
  signature is a fifth of the JSON's tokens; a model trained from scratch spends no steps and no
  attention on the JSON's braces and keys. Both render from what a server passes the template (the
  request's tools), so a served model reads what it was trained on.
- An assistant turn renders its text, then each tool call as
  ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`` (what vLLM's ``hermes``
  tool parser reads back). ``arguments`` may be a dict or a JSON string (datasets store them
  as strings so that differing argument sets do not merge into one struct).
- Consecutive tool results form one ``user`` turn of ``<tool_response>`` blocks (as Qwen3 does).
- The assistant's own tokens sit between ``{% generation %}`` and ``{% endgeneration %}``, so
  TRL's ``assistant_only_loss`` trains on them and on nothing else.

The template has no incidental whitespace (and so no whitespace control): every newline in it
is part of the rendered text. A newline right after a block tag is written ``{{ NL }}``, since
transformers renders with ``trim_blocks`` (which would drop it).
"""

from __future__ import annotations

import json
from typing import Any, Literal

IM_START, IM_END, EOS = "<|im_start|>", "<|im_end|>", "<|endoftext|>"
TOOL_TOKENS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<tools>", "</tools>")

_JSON_TOOL = "{{ (tool.function if tool.function is defined else tool) | tojson }}\n"
_SIGNATURE = (
    "{% set fn = tool.function if tool.function is defined else tool %}"
    "{% set params = fn.parameters if fn.parameters is defined and fn.parameters else {} %}"
    "{% set required = params.required if params.required is defined and params.required else [] %}"
    "{{ fn.name }}("
    "{% for name, schema in (params.properties if params.properties is defined and params.properties else {}).items() %}"
    "{% if not loop.first %}, {% endif %}{{ name }}{% if name in required %}*{% endif %}"
    "{% if schema.enum is defined %}:{{ schema.enum | join('|') }}"
    "{% elif schema.type is defined and schema.type != 'string' %}:{{ schema.type }}{% endif %}"
    "{% endfor %}"
    ")\n"
)


def _template(tool_line: str) -> str:
    return (
        "{% set NL = '\\n' %}"
        "{% macro render_call(call) %}"
        "{% set fn = call.function if call.function is defined else call %}"
        "<tool_call>\n{\"name\": \"{{ fn.name }}\", \"arguments\": "
        "{% if fn.arguments is string %}{{ fn.arguments }}{% else %}{{ fn.arguments | tojson }}{% endif %}"
        "}\n</tool_call>"
        "{% endmacro %}"
        "{% set offset = 0 %}"
        "{% if messages and messages[0].role == 'system' %}"
        "{% set system = messages[0].content %}{% set offset = 1 %}"
        "{% else %}{% set system = '' %}{% endif %}"
        "{% if system or tools %}"
        "<|im_start|>system\n{{ system }}"
        "{% if tools %}"
        "{% if system %}{{ NL }}{% endif %}"
        "<tools>\n"
        "{% for tool in tools %}"
        + tool_line +
        "{% endfor %}"
        "</tools>"
        "{% endif %}"
        "<|im_end|>\n"
        "{% endif %}"
        "{% for message in messages[offset:] %}"
        "{% if message.role == 'assistant' %}"
        "<|im_start|>assistant\n"
        "{% generation %}"
        "{{ message.content or '' }}"
        "{% if message.tool_calls %}"
        "{% for call in message.tool_calls %}"
        "{% if loop.first and message.content %}{{ NL }}{% endif %}"
        "{% if not loop.first %}{{ NL }}{% endif %}"
        "{{ render_call(call) }}"
        "{% endfor %}"
        "{% endif %}"
        "<|im_end|>"
        "{% endgeneration %}"
        "{{ NL }}"
        "{% elif message.role == 'tool' %}"
        "{% if loop.first or loop.previtem.role != 'tool' %}<|im_start|>user\n{% else %}{{ NL }}{% endif %}"
        "<tool_response>\n{{ message.content }}\n</tool_response>"
        "{% if loop.last or loop.nextitem.role != 'tool' %}<|im_end|>\n{% endif %}"
        "{% else %}"
        "<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n"
        "{% endif %}"
        "{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )


CHAT_TEMPLATE = _template(_JSON_TOOL)
POCKET_CHAT_TEMPLATE = _template(_SIGNATURE)
ToolLines = Literal["json", "signatures"]  # how a template lists the tools
TOOL_LINES: dict[str, str] = {"json": CHAT_TEMPLATE, "signatures": POCKET_CHAT_TEMPLATE}  # each way's template


def signature(tool: dict[str, Any]) -> str:
    """``tool`` (an OpenAI tool or its ``function``) as ``POCKET_CHAT_TEMPLATE`` lists it, newline excluded."""
    fn = tool.get("function", tool)
    params = fn.get("parameters") or {}
    required = params.get("required") or []
    parts = []
    for name, schema in (params.get("properties") or {}).items():
        kind = ""
        if "enum" in schema:
            kind = ":" + "|".join(str(v) for v in schema["enum"])
        elif schema.get("type", "string") != "string":
            kind = f":{schema['type']}"
        parts.append(f"{name}{'*' if name in required else ''}{kind}")
    return f"{fn['name']}({', '.join(parts)})"


def tojson(value: Any) -> str:
    """``value`` as chat templates' ``tojson`` renders it (non-ASCII kept as is). A call's arguments
    kept as a string in a training row must read so: a server parses the arguments string an OpenAI
    client sends and renders the dict with ``tojson``."""
    return json.dumps(value, ensure_ascii=False)

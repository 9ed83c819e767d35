"""Tool calls decoded under the bound tools' grammar (``--tool-grammar``).

A reply stays free text, but once the model writes ``<tool_call>`` the rest of the block must be
one of the bound tools called as the chat template renders a call (``<tool_call>\\n{"name": NAME,
"arguments": ARGS}\\n</tool_call>``), with ARGS a JSON object of that tool's parameters: its
required ones present, no others, each value of its type (an enum one of its values). Tokens that
would break that are masked before the next token is chosen, so a call always parses and names a
real tool with real arguments; what the values are is still the model's choice.

The grammar is an xgrammar structural tag (``tool_call_format``): in process it masks the logits
of ``generate`` (``ToolCallGrammar``); a vLLM server, whose structured outputs are xgrammar too,
takes the same structural tag with each request (``openai:NAME@URL`` with ``tool_grammar``), so a
served model is constrained exactly as the in-process one.
"""

from __future__ import annotations

import importlib.util
import json
import threading
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._providers import ProviderSpec

TRIGGER = "<tool_call>"


def check_tool_grammar(spec: ProviderSpec) -> None:
    """Raise ``ValueError`` naming what is wrong when ``spec`` cannot decode under
    a tool grammar here: a provider other than ``hf`` and ``openai`` with a URL, or no xgrammar for ``hf``."""
    if spec.kind == "openai" and spec.base_url:
        return
    if spec.kind != "hf":
        raise ValueError(f"--tool-grammar applies to hf:PATH (in process) and openai:NAME@URL (a vLLM server), "
                         f"not {spec.label}")
    if importlib.util.find_spec("xgrammar") is None:
        raise ValueError("--tool-grammar needs xgrammar for hf:PATH: pip install 'coworkenv[grammar]'")


def _function(tool: dict[str, Any]) -> dict[str, Any]:
    return tool.get("function", tool)


def _arguments_schema(parameters: dict[str, Any] | None) -> dict[str, Any]:
    """A tool's parameters as a closed object schema: its properties in their order, the required
    ones required, nothing else."""
    parameters = parameters or {}
    properties = parameters.get("properties") or {}
    return {"type": "object", "properties": properties, "required": list(parameters.get("required") or []),
            "additionalProperties": False}


def tool_call_format(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The structural tag of calls to ``tools`` (OpenAI-style tool dicts), as xgrammar and vLLM take it."""
    tags = []
    for tool in tools:
        fn = _function(tool)
        tags.append({
            "type": "tag",
            "begin": f'{TRIGGER}\n{{"name": {json.dumps(fn["name"], ensure_ascii=False)}, "arguments": ',
            "content": {"type": "json_schema", "json_schema": _arguments_schema(fn.get("parameters")),
                        "max_whitespace_cnt": 1},
            "end": "}\n</tool_call>",
        })
    return {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": [TRIGGER], "tags": tags}}


class ToolCallGrammar:
    """The compiled grammars of one tokenizer, one per set of tools (compiled once each)."""

    def __init__(self, tokenizer: Any, vocab_size: int, end_ids: tuple[int, ...]) -> None:
        try:
            import xgrammar
        except ImportError:
            raise ImportError("tool-call grammars need xgrammar: pip install 'coworkenv[grammar]'") from None
        info = xgrammar.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size, stop_token_ids=list(end_ids))
        self._compiler = xgrammar.GrammarCompiler(info)
        self._lock = threading.Lock()
        self._compiled: dict[str, Any] = {}

    def compiled(self, tools: list[dict[str, Any]]) -> Any:
        key = json.dumps(tool_call_format(tools))  # not sorted: the order of a tool's parameters is the grammar's
        with self._lock:
            if key not in self._compiled:
                self._compiled[key] = self._compiler.compile_structural_tag(key)
            return self._compiled[key]

    def logits_processor(self, tools: list[dict[str, Any]]) -> Any:
        """A fresh ``transformers`` logits processor for one ``generate`` call."""
        from xgrammar.contrib.hf import LogitsProcessor

        return LogitsProcessor(self.compiled(tools))


@lru_cache(maxsize=4)
def _grammar(tokenizer: Any, vocab_size: int, end_ids: tuple[int, ...]) -> ToolCallGrammar:
    return ToolCallGrammar(tokenizer, vocab_size, end_ids)


def grammar_for(tokenizer: Any, model: Any) -> ToolCallGrammar:
    """The grammars of a transformers model and its tokenizer (made once per pair): a reply may end
    where the model's generation ends it (its generation config's end tokens, else the tokenizer's)."""
    ends = getattr(model.generation_config, "eos_token_id", None)
    if ends is None:
        ends = tokenizer.eos_token_id
    return _grammar(tokenizer, model.config.vocab_size, tuple(ends) if isinstance(ends, list) else (ends,))


@lru_cache(maxsize=1)
def _grammar_chat_openai() -> type:
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from langchain_openai import ChatOpenAI

    class GrammarChatOpenAI(ChatOpenAI):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            tag = json.dumps(tool_call_format([convert_to_openai_tool(t) for t in tools]))
            body = {**(kwargs.pop("extra_body", None) or {}), "structured_outputs": {"structural_tag": tag}}
            return super().bind_tools(tools, extra_body=body, **kwargs)

    return GrammarChatOpenAI


def grammar_chat_openai(**options: Any) -> Any:
    """A ``ChatOpenAI`` that sends, with the tools it is bound to, their ``tool_call_format`` as
    vLLM's ``structured_outputs.structural_tag`` (a server without structured outputs refuses it)."""
    return _grammar_chat_openai()(**options)

"""The ``hf:PATH`` provider: a local transformers model folder as a LangChain chat model.

The conversation and the bound tools are rendered with the model's own chat template (for
PocketWorker models: ChatML with Hermes ``<tool_call>`` blocks); the reply is generated in
process and its ``<tool_call>{json}</tool_call>`` blocks become tool calls. No server is needed,
so a trained model can be evaluated on a machine without vLLM; ``openai:NAME@URL`` against
``coworkenv serve-model`` plays the same model the same way.

At temperature 0 a reply is greedy, the same for the same conversation. Above it, a reply is
sampled: from torch's global generator when ``seed`` is None (every call differs), else from a
generator seeded by ``seed`` and the conversation, so that a trial (one seed) replays exactly
while trials of other seeds differ.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import re
import threading
import uuid
from functools import lru_cache
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from ..workspace import to_chat
from ._messages import ReplyChatModel, to_messages
from ._providers import ProviderError

TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)
_LOCK = threading.Lock()  # loading and generation: torch already uses every core for one call


def check_local_model(path: str | Path) -> Path:
    """The folder of an ``hf:PATH`` model, checked before anything plays: ``ProviderError`` (a
    usage error) naming it when it is missing or not a model folder, or when the train extra that
    runs it is not installed."""
    folder = Path(path)
    if not folder.is_dir():
        raise ProviderError(f"hf:{path}: no model folder at {folder}")
    if not (folder / "config.json").is_file():
        if (folder / "adapter_config.json").is_file():
            raise ProviderError(f"hf:{path}: {folder} is a LoRA adapter, not a model; give the merged model "
                                "(a training run's model/ folder)")
        raise ProviderError(f"hf:{path}: {folder} is not a model folder (no config.json)")
    for module in ("torch", "transformers"):
        if importlib.util.find_spec(module) is None:
            raise ProviderError(f"hf:{path}: the hf provider needs the 'train' extra ({module} is missing): "
                                "pip install 'coworkenv[train]'")
    return folder


@lru_cache(maxsize=4)
def load_local_model(path: str):
    """The tokenizer and model of a local folder, loaded once per process."""
    check_local_model(path)
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError:
        raise ImportError("the hf provider needs the 'train' extra: pip install 'coworkenv[train]'") from None
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=torch.float32)
    model.eval()
    return tokenizer, model


def chat_text(tokenizer: Any, chat: list[dict[str, Any]], tools: list[dict[str, Any]] | None, *,
              generation_prompt: bool = True) -> str:
    """A conversation (``to_chat`` dicts) and its tools as the model's chat template renders them,
    with the assistant's generation prompt at the end when ``generation_prompt``. Everything that
    generates in process (``LocalChatModel``, the RL policy) renders through this one function."""
    return tokenizer.apply_chat_template(chat, tools=tools or None, add_generation_prompt=generation_prompt,
                                         tokenize=False)


def parse_reply(text: str) -> AIMessage:
    """A generated reply as an ``AIMessage``: Hermes tool-call blocks become tool calls.

    A block that is not a JSON object with a ``name`` leaves the whole reply as plain text (the
    agent then ends the episode with it, and the gate grades what happened).
    """
    blocks = TOOL_CALL.findall(text)
    calls = []
    for block in blocks:
        try:
            call = json.loads(block)
        except json.JSONDecodeError:
            return AIMessage(content=text.strip())
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            return AIMessage(content=text.strip())
        args = call.get("arguments") or {}
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                return AIMessage(content=text.strip())
        if not isinstance(args, dict):
            return AIMessage(content=text.strip())
        calls.append({"id": f"call_{uuid.uuid4().hex[:8]}", "name": call["name"], "args": args})
    content = text.split("<tool_call>", 1)[0].strip() if calls else text.strip()
    return AIMessage(content=content, tool_calls=calls)


@contextlib.contextmanager
def _sampling_seed(seed: int | None, input_ids):
    """torch's global generator seeded by ``seed`` and the prompt for the block, and restored
    after it (so that nothing else in the process sees the seeding); nothing when ``seed`` is None."""
    if seed is None:
        yield
        return
    import torch

    digest = hashlib.sha256(f"{seed}:".encode() + input_ids.cpu().numpy().tobytes()).digest()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int.from_bytes(digest[:8], "little"))
        yield


def generation_options(tokenizer: Any, max_tokens: int, temperature: float) -> dict[str, Any]:
    """``generate`` options of in-process generation: greedy at temperature 0, else plain sampling
    at ``temperature`` (no top-k or top-p cut, so log-probabilities are those of the distribution)."""
    options: dict[str, Any] = {"max_new_tokens": max_tokens, "pad_token_id": tokenizer.pad_token_id}
    if temperature > 0:
        options.update(do_sample=True, temperature=temperature, top_k=0, top_p=1.0)
    else:
        options.update(do_sample=False)
    return options


class TemplateChatModel(ReplyChatModel):
    """A chat model that renders conversations with a chat template: it keeps the tools it is bound to."""

    tools: list[dict[str, Any]] = []

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.model_copy(update={"tools": list(tools)})


class LocalChatModel(TemplateChatModel):
    """A chat model over a local transformers folder (``hf:PATH``)."""

    path: str
    temperature: float = 0.0
    max_tokens: int = 256
    seed: int | None = None  # sampling: None draws from torch's global generator (see the module's docstring)
    tool_grammar: bool = False  # tool calls decoded under the bound tools' grammar (coworkenv.agents._grammar)

    @property
    def _llm_type(self) -> str:
        return "coworkenv-hf"

    def reply(self, messages: list[BaseMessage]) -> AIMessage:
        import torch

        with _LOCK:  # the first call imports transformers and loads the model: one thread at a time
            tokenizer, model = load_local_model(self.path)
        inputs = tokenizer(chat_text(tokenizer, to_chat(to_messages(messages)), self.tools), add_special_tokens=False,
                           return_tensors="pt")
        # as vLLM serves it: the reply may use what is left of the context, up to max_tokens
        room = getattr(model.config, "max_position_embeddings", 4096) - inputs["input_ids"].shape[1]
        if room <= 0:
            text = ""  # the conversation outgrew the model's context: end with an empty answer
        else:
            options = generation_options(tokenizer, min(self.max_tokens, room), self.temperature)
            if self.tool_grammar and self.tools:
                from ._grammar import grammar_for

                # first: processors after it choose among the tokens the grammar allows
                options["logits_processor"] = [grammar_for(tokenizer, model).logits_processor(self.tools),
                                               *options.get("logits_processor", [])]
            with _LOCK, torch.inference_mode(), _sampling_seed(self.seed, inputs["input_ids"]):
                out = model.generate(**inputs, **options)  # pyright: ignore[reportAttributeAccessIssue]
            text = tokenizer.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
        return parse_reply(text)

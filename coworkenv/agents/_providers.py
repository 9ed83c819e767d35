"""Chat-model providers, chosen by name: ``oracle``, ``anthropic:MODEL``, ``openai:MODEL[@URL]``, ``hf:PATH``."""

from __future__ import annotations

from dataclasses import dataclass

from langchain_core.language_models.chat_models import BaseChatModel
from pydantic import BaseModel, Field

from ..workspace import Task, Workspace
from ._oracle import OracleChatModel

PROVIDERS = ("oracle", "anthropic", "openai", "hf")


class ProviderError(ValueError):
    """A provider spec is malformed or its package is missing; the message says what to do."""


class ProviderSettings(BaseModel):
    """Settings passed to every provider (API keys are read by the providers' own clients)."""

    error_rate: float = Field(default=0.0, ge=0.0, le=1.0)  # oracle only
    seed: int = 0  # oracle only
    temperature: float = 0.0
    max_tokens: int = 1024
    api_key: str | None = None  # for OpenAI-compatible servers that need one


@dataclass(frozen=True)
class ProviderSpec:
    kind: str
    model: str = ""
    base_url: str | None = None

    @property
    def label(self) -> str:
        if self.kind == "oracle":
            return "oracle"
        if self.kind == "hf":
            return f"hf:{self.model}"
        return f"{self.kind}:{self.model}" + (f"@{self.base_url}" if self.base_url else "")


def parse_provider(spec: str) -> ProviderSpec:
    """``oracle`` | ``anthropic:MODEL`` | ``openai:MODEL`` | ``openai:MODEL@URL`` | ``hf:PATH``."""
    kind, _, rest = spec.partition(":")
    if kind not in PROVIDERS:
        raise ProviderError(f"unknown provider {spec!r}; use one of: oracle, anthropic:MODEL, openai:MODEL, "
                            "openai:MODEL@URL, hf:PATH")
    if kind == "hf":
        if not rest:
            raise ProviderError(f"provider {spec!r} needs a local model folder, e.g. hf:runs/train/sft/model")
        return ProviderSpec("hf", rest)
    if kind == "oracle":
        if rest:
            raise ProviderError(f"the oracle provider takes no model name (got {spec!r})")
        return ProviderSpec("oracle")
    model, _, url = rest.partition("@")
    if not model:
        raise ProviderError(f"provider {spec!r} needs a model name, e.g. {kind}:MODEL")
    if url and kind != "openai":
        raise ProviderError(f"only openai-compatible providers take a URL (got {spec!r})")
    if url and not url.startswith(("http://", "https://")):
        raise ProviderError(f"the URL in {spec!r} must start with http:// or https://")
    return ProviderSpec(kind, model, url or None)


def chat_model(spec: ProviderSpec, task: Task, workspace: Workspace,
               settings: ProviderSettings | None = None) -> BaseChatModel:
    """The chat model that will play ``task``."""
    settings = settings or ProviderSettings()
    if spec.kind == "oracle":
        return OracleChatModel(
            task=task,
            error_rate=settings.error_rate,
            seed=settings.seed,
            write_tools=frozenset(t.name for t in workspace.tools if t.effect == "write"),
        )
    if spec.kind == "hf":
        from ._hf import LocalChatModel

        return LocalChatModel(path=spec.model, temperature=settings.temperature, max_tokens=settings.max_tokens)
    if spec.kind == "anthropic":
        try:
            from langchain_anthropic import ChatAnthropic
        except ImportError:
            raise ProviderError("the anthropic provider needs `pip install 'coworkenv[providers]'`") from None
        return ChatAnthropic(model=spec.model, temperature=settings.temperature, max_tokens=settings.max_tokens)
    try:
        from langchain_openai import ChatOpenAI
    except ImportError:
        raise ProviderError("the openai provider needs `pip install 'coworkenv[providers]'`") from None
    options = {}
    if spec.base_url:
        options["base_url"] = spec.base_url
        options["api_key"] = settings.api_key or "EMPTY"
    elif settings.api_key:
        options["api_key"] = settings.api_key
    return ChatOpenAI(model=spec.model, temperature=settings.temperature, max_tokens=settings.max_tokens, **options)

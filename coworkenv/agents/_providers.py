"""Chat-model providers, chosen by name from one table: ``oracle``, ``anthropic:MODEL``,
``openai:MODEL[@URL]``, ``hf:PATH`` and ``scripted:FILE``.

A provider is one entry of ``PROVIDERS``: its name, how it is written, a line of help (the CLI's
help texts are generated from the table) and the factory that builds its chat model, for a task
(an agent playing it) or for no task (a model drafting tasks, ``coworkenv.synth.draft_tasks``).
Factories import their chat model's package when called, so reading the table stays cheap.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from .._errors import CoworkenvError
from ..workspace import Task, Workspace

if TYPE_CHECKING:
    from langchain_core.language_models.chat_models import BaseChatModel


class ProviderError(CoworkenvError, ValueError):
    """A provider spec is malformed or its package is missing; the message says what to do."""


class ProviderSettings(BaseModel):
    """Settings passed to every provider (API keys are read by the providers' own clients)."""

    error_rate: float = Field(default=0.0, ge=0.0, le=1.0)  # oracle only
    seed: int = 0  # the oracle's mistakes; the hf provider's sampling (each eval trial its own seed)
    temperature: float = 0.0
    max_tokens: int = 1024
    api_key: str | None = None  # for OpenAI-compatible servers that need one
    tool_grammar: bool = False  # hf, and openai against a vLLM server: tool calls decoded under the tools' grammar


@dataclass(frozen=True)
class ProviderSpec:
    kind: str
    model: str = ""
    base_url: str | None = None

    @property
    def label(self) -> str:
        if not self.model:
            return self.kind
        return f"{self.kind}:{self.model}" + (f"@{self.base_url}" if self.base_url else "")


Factory = Callable[[ProviderSpec, Task | None, Workspace | None, ProviderSettings], "BaseChatModel"]
"""Builds a provider's chat model: for ``task`` in ``workspace``, or for drafting tasks when both are None."""


@dataclass(frozen=True)
class Provider:
    name: str
    usage: str  # how a spec of it is written
    help: str
    model: str  # what follows ``name:``: "" (nothing), "a model name", "a local model folder" or "a replies file"
    takes_url: bool
    build: Factory
    package: str | None = None  # the module its chat model needs, and the extra that installs it
    extra: str | None = None
    key_env: str | None = None  # the environment variable its client reads the API key from (not with a URL)
    local: bool = False  # what follows ``name:`` is a local path, taken whole (``@`` included)
    check: Callable[[ProviderSpec], None] | None = None  # raises ProviderError when the spec cannot be played here


def _oracle(spec: ProviderSpec, task: Task | None, workspace: Workspace | None,
            settings: ProviderSettings) -> BaseChatModel:
    from ._oracle import OracleChatModel

    if task is None or workspace is None:
        raise ProviderError("the oracle provider only replays the reference solutions of existing tasks; it cannot "
                            "draft tasks: use anthropic:MODEL, openai:MODEL[@URL] or scripted:FILE")
    return OracleChatModel(task=task, error_rate=settings.error_rate, seed=settings.seed,
                           write_tools=frozenset(t.name for t in workspace.tools if t.effect != "read"))


def _hf(spec: ProviderSpec, task: Task | None, workspace: Workspace | None,
        settings: ProviderSettings) -> BaseChatModel:
    from ._hf import LocalChatModel

    return LocalChatModel(path=spec.model, temperature=settings.temperature, max_tokens=settings.max_tokens,
                          seed=settings.seed, tool_grammar=settings.tool_grammar)


def _anthropic(spec: ProviderSpec, task: Task | None, workspace: Workspace | None,
               settings: ProviderSettings) -> BaseChatModel:
    _require_package(spec)
    from langchain_anthropic import ChatAnthropic  # pyright: ignore[reportMissingImports]  # the providers extra

    return ChatAnthropic(model=spec.model, temperature=settings.temperature,  # type: ignore[call-arg]
                         max_tokens=settings.max_tokens)


def _openai(spec: ProviderSpec, task: Task | None, workspace: Workspace | None,
            settings: ProviderSettings) -> BaseChatModel:
    _require_package(spec)
    from langchain_openai import ChatOpenAI

    options: dict = {}
    if spec.base_url:
        options["base_url"] = spec.base_url
        options["api_key"] = settings.api_key or "EMPTY"
    elif settings.api_key:
        options["api_key"] = settings.api_key
    if settings.tool_grammar:
        from ._grammar import grammar_chat_openai

        return grammar_chat_openai(model=spec.model, temperature=settings.temperature, max_tokens=settings.max_tokens,
                                   **options)
    return ChatOpenAI(model=spec.model, temperature=settings.temperature, max_tokens=settings.max_tokens,  # type: ignore[call-arg]
                      **options)


def _hf_check(spec: ProviderSpec) -> None:
    from ._hf import check_local_model

    check_local_model(spec.model)


def _scripted(spec: ProviderSpec, task: Task | None, workspace: Workspace | None,
              settings: ProviderSettings) -> BaseChatModel:
    from ._scripted import ScriptedChatModel, load_replies

    return ScriptedChatModel(path=spec.model, replies=load_replies(spec.model, task.id if task is not None else None))


def _scripted_check(spec: ProviderSpec) -> None:
    from ._scripted import load_replies

    load_replies(spec.model)


PROVIDERS: dict[str, Provider] = {p.name: p for p in (
    Provider("oracle", "oracle", "offline; follows each task's reference solution (with --error-rate, makes "
             "mistakes that repair fixes)", "", False, _oracle),
    Provider("anthropic", "anthropic:MODEL", "Anthropic's API (the providers extra; ANTHROPIC_API_KEY)",
             "a model name", False, _anthropic, "langchain_anthropic", "providers", "ANTHROPIC_API_KEY"),
    Provider("openai", "openai:MODEL[@URL]", "OpenAI's API, or any OpenAI-compatible server at URL, e.g. "
             "coworkenv serve-model (the providers extra; OPENAI_API_KEY)", "a model name", True, _openai,
             "langchain_openai", "providers", "OPENAI_API_KEY"),
    Provider("hf", "hf:PATH", "a local transformers model folder, played in process (the train extra)",
             "a local model folder", False, _hf, "transformers", "train", local=True, check=_hf_check),
    Provider("scripted", "scripted:FILE", "offline; replays the replies of FILE (a YAML or JSON list, or a mapping of "
             "task ids to lists), one per model call, in order: task drafts for coworkenv draft; text and tool "
             "calls ({content, tool_calls: [{name, arguments}]}) for an agent",
             "a replies file", False, _scripted, local=True, check=_scripted_check),
)}


def provider_usage() -> str:
    """``oracle | anthropic:MODEL | …``: for help texts."""
    return " | ".join(p.usage for p in PROVIDERS.values())


def provider_help() -> str:
    """One line per provider: for help texts."""
    return "; ".join(f"{p.usage}: {p.help}" for p in PROVIDERS.values())


def parse_provider(spec: str) -> ProviderSpec:
    """A provider spec as written on the command line (see ``PROVIDERS``)."""
    kind, _, rest = spec.partition(":")
    provider = PROVIDERS.get(kind)
    if provider is None:
        raise ProviderError(f"unknown provider {spec!r}; use one of: {provider_usage()}")
    if not provider.model:
        if rest:
            raise ProviderError(f"the {kind} provider takes nothing after its name (got {spec!r})")
        return ProviderSpec(kind)
    model, _, url = (rest, "", "") if provider.local else rest.partition("@")
    if url and not provider.takes_url:
        takers = ", ".join(p.usage for p in PROVIDERS.values() if p.takes_url)
        raise ProviderError(f"the {kind} provider takes no URL (got {spec!r}); providers that do: {takers}")
    if not model:
        raise ProviderError(f"provider {spec!r} needs {provider.model}: {provider.usage}")
    if url and not url.startswith(("http://", "https://")):
        raise ProviderError(f"the URL in {spec!r} must start with http:// or https://")
    return ProviderSpec(kind, model, url or None)


def _package_problem(spec: ProviderSpec) -> str | None:
    """What to install when the package the provider's chat model needs is missing, or None."""
    provider = PROVIDERS[spec.kind]
    if provider.package is not None and importlib.util.find_spec(provider.package) is None:
        return (f"the {spec.kind} provider needs the {provider.package} package: "
                f"pip install 'coworkenv[{provider.extra}]'")
    return None


def _require_package(spec: ProviderSpec) -> None:
    """Raise ``ProviderError`` saying what to install (``provider_problem``'s first check, for a caller
    that builds a chat model without asking it first)."""
    missing = _package_problem(spec)
    if missing is not None:
        raise ProviderError(missing)


def provider_problem(spec: ProviderSpec, environ: Mapping[str, str]) -> str | None:
    """Why ``spec`` cannot be played here, before any episode opens: its package is not installed,
    its API key is not in ``environ`` (the caller's environment), or its local model folder or
    replies file is missing or unusable."""
    provider = PROVIDERS[spec.kind]
    missing = _package_problem(spec)
    if missing is not None:
        return missing
    if provider.key_env is not None and spec.base_url is None and not environ.get(provider.key_env):
        return f"the {spec.kind} provider needs an API key in ${provider.key_env}"
    if provider.check is not None:
        try:
            provider.check(spec)
        except ProviderError as exc:
            return str(exc)
    return None


def chat_model(spec: ProviderSpec, task: Task | None, workspace: Workspace | None,
               settings: ProviderSettings | None = None) -> BaseChatModel:
    """The chat model that will play ``task`` in ``workspace``; with neither, a model that drafts
    tasks (a provider that cannot, the oracle, raises ``ProviderError`` saying so)."""
    return PROVIDERS[spec.kind].build(spec, task, workspace, settings or ProviderSettings())

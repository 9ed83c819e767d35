"""The policy of a reinforcement-learning run as a chat model that records its tokens.

``PolicyChatModel`` plays an episode through the one rollout like any other chat model, but it
generates with a model and tokenizer held in memory (the trainer's, between two updates) and keeps
the episode's token-level trajectory, which is what the trainer learns from:

- ``prompt_ids``: the first prompt (system prompt, tools and instruction, then the generation
  prompt), rendered by the model's chat template as ``LocalChatModel`` renders it (``chat_text``);
- then, turn by turn, the ids the model generated (``env_mask`` 1, with their log-probabilities),
  and the environment's ids: the template's rendering of what came back (tool results, a user's
  reply) and the next generation prompt (``env_mask`` 0, log-probability 0.0). Those are the text
  difference between rendering the conversation with and without the new messages, so the next
  turn's context is exactly the previous context, the model's own tokens and that difference.

A reply is parsed by ``parse_reply``, as ``hf:PATH`` replies are. A turn that hits ``max_tokens``
is closed with the end-of-turn token (``env_mask`` 0: the model did not choose it); a conversation
that outgrew the model's context ends with an empty answer, as in ``LocalChatModel``.

Episodes of a group play concurrently: each generation runs in a worker thread and holds the
policy's lock (one forward pass at a time uses every core already), so tool calls of some episodes
run while others generate.

``ServedPolicy`` generates the same turns through a vLLM server instead (``/v1/completions`` with the
context as token ids, so nothing is rendered or tokenized twice): the episodes' requests run at
once and vLLM batches them. Whoever holds the trainer keeps the server's weights equal to the
policy's (``coworkenv.trainer.VLLMWeightSync``).
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
from langchain_core.messages import AIMessage, BaseMessage

from ..workspace import to_chat
from ._hf import TemplateChatModel, chat_text, generation_options, parse_reply
from ._messages import to_messages


@dataclass
class Trajectory:
    """One episode's tokens as the policy saw and produced them."""

    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)  # everything after the first prompt
    env_mask: list[int] = field(default_factory=list)  # 1: the model's own token, 0: the environment's
    logprobs: list[float] = field(default_factory=list)  # of the model's tokens when sampled; 0.0 for the others
    turns: int = 0
    clipped_turns: int = 0  # turns that hit the token budget

    def add(self, ids: list[int], *, own: bool, logprobs: list[float] | None = None) -> None:
        self.completion_ids += ids
        self.env_mask += [int(own)] * len(ids)
        self.logprobs += logprobs if logprobs is not None else [0.0] * len(ids)

    def close(self, end_id: int) -> None:
        """End the completion with the end-of-turn token (added as the environment's when missing)."""
        if not self.completion_ids or self.completion_ids[-1] != end_id:
            self.add([end_id], own=False)

    def runs(self) -> list[tuple[int, list[int]]]:
        """The completion as alternating runs ``(mask, ids)``: the model's turns and what came back."""
        found: list[tuple[int, list[int]]] = []
        for token, mask in zip(self.completion_ids, self.env_mask, strict=True):
            if found and found[-1][0] == mask:
                found[-1][1].append(token)
            else:
                found.append((mask, [token]))
        return found


class Policy:
    """A model and its tokenizer in memory, generating one turn at a time (under a lock)."""

    def __init__(self, model: Any, tokenizer: Any, *, max_tokens: int = 128, temperature: float = 1.0,
                 context_limit: int | None = None) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.max_tokens, self.temperature = max_tokens, temperature
        self.end_id: int = tokenizer.eos_token_id  # the end of a turn (<|im_end|> in ChatML templates)
        self.context_limit = context_limit or getattr(getattr(model, "config", None), "max_position_embeddings", 4096)
        self.lock = threading.Lock()
        self.generation_s = 0.0  # with the lock held, over every turn of every episode

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def generate(self, context: list[int]) -> tuple[list[int], list[float]]:
        """The next turn after ``context``: its ids (up to and including the end-of-turn token, or
        ``max_tokens`` of them) and their log-probabilities under the sampling distribution."""
        import torch

        options = generation_options(self.tokenizer, self.max_tokens, self.temperature)
        options.update(eos_token_id=self.end_id, output_scores=True, return_dict_in_generate=True)
        with self.lock, torch.no_grad():
            started = time.perf_counter()
            ids = torch.tensor([context], device=self.model.device)
            out = self.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), **options)
            scores = self.model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
            self.generation_s += time.perf_counter() - started
        new = out.sequences[0, len(context):].tolist()
        logprobs = scores[0].tolist()[:len(new)]
        return _cut(new, logprobs, self.end_id)


def _cut(new: list[int], logprobs: list[float], end_id: int) -> tuple[list[int], list[float]]:
    """A turn's ids and log-probabilities up to and including its first end-of-turn token."""
    if end_id in new:
        cut = new.index(end_id) + 1
        new, logprobs = new[:cut], logprobs[:cut]
    return new, logprobs


class ServedPolicy(Policy):
    """The policy as a vLLM server serves it under ``model_name``: turns are sampled there, with
    the sampling ``Policy`` uses (plain sampling at ``temperature``, no top-k or top-p cut; greedy
    at 0) and the log-probabilities of the distribution sampled from (vLLM started with
    ``--logprobs-mode processed_logprobs``). Requests are not serialised: vLLM batches them.

    ``generation_s`` is the wall time during which at least one request was in flight."""

    def __init__(self, base_url: str, model_name: str, tokenizer: Any, *, context_limit: int,
                 max_tokens: int = 128, temperature: float = 1.0, timeout: float = 300.0) -> None:
        super().__init__(None, tokenizer, max_tokens=max_tokens, temperature=temperature, context_limit=context_limit)
        self.base_url, self.model_name = base_url.rstrip("/"), model_name
        # the lock guards the in-flight count only
        self._in_flight, self._busy_since = 0, 0.0
        self.client = httpx.Client(timeout=timeout)

    @contextmanager
    def _busy(self):
        with self.lock:
            if not self._in_flight:
                self._busy_since = time.perf_counter()
            self._in_flight += 1
        try:
            yield
        finally:
            with self.lock:
                self._in_flight -= 1
                if not self._in_flight:
                    self.generation_s += time.perf_counter() - self._busy_since

    def generate(self, context: list[int]) -> tuple[list[int], list[float]]:
        body: dict[str, Any] = {
            "model": self.model_name, "prompt": context, "max_tokens": self.max_tokens,
            "temperature": self.temperature, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0,
            "logprobs": 0, "return_token_ids": True, "stop_token_ids": [self.end_id], "skip_special_tokens": False,
        }
        with self._busy():
            response = self.client.post(f"{self.base_url}/completions", json=body)
        if response.status_code != 200:
            raise RuntimeError(f"vLLM answered {response.status_code} to a policy turn: {response.text[:300]}")
        choice = response.json()["choices"][0]
        new = list(choice.get("token_ids") or [])
        logprobs = [float(x) if x is not None else 0.0 for x in (choice.get("logprobs") or {}).get("token_logprobs", [])]
        if len(logprobs) != len(new):
            raise RuntimeError(f"vLLM returned {len(new)} token ids and {len(logprobs)} log-probabilities for a turn")
        return _cut(new, logprobs, self.end_id)

    def close(self) -> None:
        self.client.close()


def _last_reply(chat: list[dict[str, Any]]) -> int | None:
    return next((i for i in range(len(chat) - 1, -1, -1) if chat[i]["role"] == "assistant"), None)


class PolicyChatModel(TemplateChatModel):
    """A chat model over an in-memory ``Policy`` that records one episode's ``Trajectory``."""

    policy: Any  # Policy
    trajectory: Any  # Trajectory, shared by the copies ``bind_tools`` makes

    @property
    def _llm_type(self) -> str:
        return "coworkenv-policy"

    def _context(self, chat: list[dict[str, Any]]) -> list[int]:
        """The token context of the next turn, recording what the environment added since the last one."""
        policy, trajectory = self.policy, self.trajectory
        text = chat_text(policy.tokenizer, chat, self.tools)
        last = _last_reply(chat)
        if not trajectory.prompt_ids or last is None:
            trajectory.prompt_ids = policy.encode(text)
            return list(trajectory.prompt_ids)
        before = chat_text(policy.tokenizer, chat[:last + 1], self.tools, generation_prompt=False)
        if not text.startswith(before):
            raise ValueError("the chat template does not render the conversation as an extension of its earlier "
                             "turns; its token trajectory cannot be recorded")
        end = policy.tokenizer.convert_ids_to_tokens(policy.end_id)
        after_end = before.rsplit(end, 1)[1] if end in before else ""  # what the template puts after a turn's end
        trajectory.add(policy.encode(after_end + text[len(before):]), own=False)
        return trajectory.prompt_ids + trajectory.completion_ids

    def reply(self, messages: list[BaseMessage]) -> AIMessage:
        policy, trajectory = self.policy, self.trajectory
        context = self._context(to_chat(to_messages(messages)))
        text = ""  # past the model's context: end with an empty answer
        if len(context) + policy.max_tokens <= policy.context_limit:
            new, logprobs = policy.generate(context)
            trajectory.turns += 1
            trajectory.add(new, own=True, logprobs=logprobs)
            if not new or new[-1] != policy.end_id:
                trajectory.clipped_turns += 1
                trajectory.close(policy.end_id)
            text = policy.tokenizer.decode(new, skip_special_tokens=True)
        return parse_reply(text)

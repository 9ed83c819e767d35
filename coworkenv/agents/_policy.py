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
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

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

    def __init__(self, model: Any, tokenizer: Any, *, max_tokens: int = 128, temperature: float = 1.0) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.max_tokens, self.temperature = max_tokens, temperature
        self.end_id: int = tokenizer.eos_token_id  # the end of a turn (<|im_end|> in ChatML templates)
        self.context_limit = getattr(model.config, "max_position_embeddings", 4096)
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
        if self.end_id in new:
            cut = new.index(self.end_id) + 1
            new, logprobs = new[:cut], logprobs[:cut]
        return new, logprobs


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

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
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
        return ChatResult(generations=[ChatGeneration(message=parse_reply(text))])

"""RL training on live workspaces: ``train grpo`` and ``train gdpo`` with real episodes.

TRL's trainer (``coworkenv.trainer.train_rl``) asks for the episodes of a batch of prompts;
``LiveRollouts`` plays them: for each prompt, an episode of its task opened with provenance source
``rl`` in a fresh sandbox, played by the policy as it is now (``PolicyChatModel`` over the trainer's
model, in the agent view ``style``) through the one rollout that evaluation uses, and graded once
by the gate when it ends. The episodes of a batch play concurrently; their verdicts' completion,
safety and robustness are the rewards.

The trainer runs in a worker thread; the episodes run in the event loop that owns the episode
host (and its MCP server), which the rollout reaches with ``run_coroutine_threadsafe``.

With ``generation="vllm"`` the run starts a vLLM server of its starting model (its log under
``OUT/vllm.log``); before each batch the rollout pushes the trainer's weights to it (checked
against the trainer's own log-probabilities of the batch's first prompt) and the policy's turns
are sampled there (``ServedPolicy``), the episodes' requests batched by vLLM.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..agents import Policy, PolicyChatModel, ServedPolicy, Trajectory, chat_text
from ..episodes import EpisodeHost
from ..store import Provenance, Store, VerdictRow
from ..trainer import (
    RLKind,
    RLSettings,
    RolloutBatch,
    TrainingError,
    TrainProgress,
    TrainResult,
    VLLMWeightSync,
    read_rows,
    rl_rows,
    rl_vllm_server,
    running_vllm_server,
    train_rl,
)
from ._episodes import EpisodeService, LocalEpisodes
from ._play import play

RL_PROVIDER = "policy"  # the provider of RL episodes: the model being trained


def _key(prompt: Any) -> str:
    return json.dumps(prompt, sort_keys=True)


@dataclass
class RLEpisode:
    """One played episode of a rollout: its tokens and its verdict (None after an infrastructure failure)."""

    episode_id: str
    task_id: str
    trajectory: Trajectory
    verdict: VerdictRow | None
    failure: str | None = None


class LiveRollouts:
    """The rollouts of an RL run: one live episode per prompt, each of the task the prompt is of.

    A prompt is matched to its task by its text (TRL hands the rollout the prompts only); tasks
    that share a prompt take turns, a group at a time."""

    def __init__(self, store: Store, episodes: EpisodeService, loop: asyncio.AbstractEventLoop,
                 rows: list[dict[str, Any]], settings: RLSettings, *, sync: VLLMWeightSync | None = None) -> None:
        self.store, self.episodes, self.loop, self.settings = store, episodes, loop, settings
        self.sync = sync  # a vLLM server to generate with, and how its weights follow the trainer's
        self.tasks: dict[str, list[str]] = {}
        self.tools: dict[str, list[dict[str, Any]]] = {}
        missing = []
        for row in rows:
            if self.store.task(row["task_id"]) is None:
                missing.append(row["task_id"])
                continue
            key = _key(row["prompt"])
            self.tasks.setdefault(key, [])
            if row["task_id"] not in self.tasks[key]:
                self.tasks[key].append(row["task_id"])
            self.tools.setdefault(key, row.get("tools") or [])
        if missing:
            raise TrainingError(f"{len(missing)} task(s) of the rows are not in {store.path}: {', '.join(missing[:3])}")
        self._turn: dict[str, int] = {}
        self.played: list[RLEpisode] = []  # every episode of the run, in order

    def _task_ids(self, prompts: list[Any]) -> list[str]:
        size = self.settings.num_generations
        task_ids = []
        for start in range(0, len(prompts), size):
            key = _key(prompts[start])
            if key not in self.tasks:
                raise ValueError("the trainer asked for a prompt that no row of this run has")
            turn = self._turn.get(key, 0)
            self._turn[key] = turn + 1
            candidates = self.tasks[key]
            task_ids += [candidates[turn % len(candidates)]] * len(prompts[start:start + size])
        return task_ids

    async def play_one(self, task_id: str, policy: Policy) -> RLEpisode:
        task = self.store.task_spec(task_id)
        trajectory = Trajectory()
        model = PolicyChatModel(policy=policy, trajectory=trajectory)
        played = await play(self.episodes, self.store, task, Provenance("rl", provider=RL_PROVIDER), model,
                            style=self.settings.style, max_steps=self.settings.max_steps_per_episode or task.max_steps)
        return RLEpisode(played.episode_id, task_id, trajectory, played.verdict, played.failure)

    async def play_all(self, task_ids: list[str], policy: Policy) -> list[RLEpisode]:
        return list(await asyncio.gather(*(self.play_one(t, policy) for t in task_ids)))

    def summary(self) -> dict[str, Any]:
        """What the run's record adds about generation: the weight pushes to vLLM and their check."""
        if self.sync is None:
            return {}
        return {"weight_syncs": {"pushes": self.sync.version, "seconds": round(self.sync.sync_s, 2),
                                 "max_logprob_difference": max(self.sync.differences, default=None)}}

    def _policy(self, prompts: list[Any], model: Any, tokenizer: Any) -> Policy:
        """The policy of this batch: the trainer's model in process, or vLLM given its weights now."""
        settings = self.settings
        if self.sync is None:
            return Policy(model, tokenizer, max_tokens=settings.max_new_tokens, temperature=settings.temperature)
        probe = chat_text(tokenizer, prompts[0], self.tools.get(_key(prompts[0])))
        name = self.sync.push(model, tokenizer(probe, add_special_tokens=False)["input_ids"])
        return ServedPolicy(self.sync.base_url, name, tokenizer, max_tokens=settings.max_new_tokens,
                            temperature=settings.temperature,
                            context_limit=getattr(model.config, "max_position_embeddings", 4096))

    def __call__(self, prompts: list[Any], model: Any, tokenizer: Any) -> RolloutBatch:
        """Play one episode per prompt with the policy ``model`` (called from the trainer's thread)."""
        pushed_before = self.sync.sync_s if self.sync is not None else 0.0
        policy = self._policy(prompts, model, tokenizer)
        sync_s = (self.sync.sync_s - pushed_before) if self.sync is not None else 0.0
        task_ids = self._task_ids(prompts)
        try:
            played = asyncio.run_coroutine_threadsafe(self.play_all(task_ids, policy), self.loop).result()
        finally:
            if isinstance(policy, ServedPolicy):
                policy.close()
        self.played += played
        for episode, prompt in zip(played, prompts, strict=True):
            if not episode.trajectory.prompt_ids:  # ended before the policy's first turn
                text = chat_text(tokenizer, prompt, self.tools.get(_key(prompt)))
                episode.trajectory.prompt_ids = policy.encode(text)
            episode.trajectory.close(policy.end_id)
        verdicts = [e.verdict for e in played]
        return RolloutBatch(
            prompt_ids=[e.trajectory.prompt_ids for e in played],
            completion_ids=[e.trajectory.completion_ids for e in played],
            env_mask=[e.trajectory.env_mask for e in played],
            logprobs=[e.trajectory.logprobs for e in played],
            completion=[v.completion if v is not None else 0.0 for v in verdicts],
            safety=[v.safety if v is not None else 0.0 for v in verdicts],
            robustness=[v.robustness if v is not None else 0.0 for v in verdicts],
            score=[v.score if v is not None else 0.0 for v in verdicts],
            extra={"episode_id": [e.episode_id for e in played], "task_id": task_ids},
            generation_s=policy.generation_s,
            sync_s=sync_s,
            failures=sum(e.failure is not None for e in played),
        )


def rl_training_rows(store: Store, settings: RLSettings) -> list[dict[str, Any]]:
    """The prompt rows of a run: its ``data`` file, or the store's admitted tasks in its view."""
    rows = read_rows(settings.data) if settings.data else rl_rows(store, style=settings.style)
    if not rows:
        raise TrainingError(f"no RL rows in {settings.data}" if settings.data else
                         f"{store.path} has no admitted tasks to train on (run coworkenv synth first)")
    return rows


async def run_rl(host: EpisodeHost, settings: RLSettings, *, kind: RLKind, base_url: str | None = None,
                 on_progress: Callable[[TrainProgress], None] | None = None,
                 ) -> tuple[TrainResult, LiveRollouts]:
    """Train with ``kind`` (grpo or gdpo) on live episodes of ``host``, reached at ``base_url`` when
    an HTTP server serves it there (in memory otherwise); the trainer runs in a worker thread. With
    ``settings.generation == "vllm"``, a vLLM server of the starting model runs for the length of the run."""
    rows = rl_training_rows(host.store, settings)
    episodes = LocalEpisodes(host, base_url)
    async with contextlib.AsyncExitStack() as stack:
        sync = None
        if settings.generation == "vllm":
            out = Path(settings.out_dir)
            served, vllm_settings = rl_vllm_server(settings.model, lora=settings.lora, lora_r=settings.lora_r,
                                                   python=settings.vllm_python, log_path=out / "vllm.log")
            url = await stack.enter_async_context(running_vllm_server(served, settings=vllm_settings))
            sync = VLLMWeightSync(url, out / "vllm-weights", lora=settings.lora, tolerance=settings.sync_tolerance)
            stack.callback(sync.close)
        rollouts = LiveRollouts(host.store, episodes, asyncio.get_running_loop(), rows, settings, sync=sync)
        result = await asyncio.to_thread(train_rl, host.store, settings, rows, rollouts, kind=kind,
                                         on_progress=on_progress, summary=rollouts.summary)
    return result, rollouts

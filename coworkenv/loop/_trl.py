"""coworkenv for a TRL ``GRPOTrainer`` you build yourself (the public face is ``coworkenv.trl``).

``CoworkEnv(store)`` gives a trainer the three things it takes from an environment: ``dataset`` (the
store's admitted tasks as prompts in an agent view: ``export rl``'s rows), ``rollout_func`` (one live
episode per prompt, played by the trainer's model as it is at that step) and ``rewards()`` (each
episode's verdict from the gate: its score, or its completion, safety and robustness for GDPO).

The episodes are those of ``coworkenv train grpo``: ``LiveRollouts`` opens each with provenance
source ``rl`` in a fresh sandbox, the policy plays it through the one rollout that evaluation uses
(over an in-memory MCP connection), and the gate grades it once when it ends; the trainer learns
from the episode's own tokens, with the tool results masked out of the loss. Only the trainer is
the caller's: its config, its optimizer, its callbacks and where it saves.

TRL's ``environment_factory`` is not used: it renders tool schemas from Python signatures and
parses tool calls with the trainer's own template, so the policy would read prompts other than the
agent view that coworkenv's exports train on and its evaluation serves (docs/trl.md).

The episodes run on an event loop in a thread of its own (the episode host and its sandboxes live
there); TRL calls ``rollout_func`` from its own thread and waits for the batch.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ..episodes import EpisodeHost, EpisodeSettings
from ..store import Store
from ..trainer import GATE_REWARDS, RLSettings, TrainingError, gate_reward, rl_dataset, rl_rows, trl_rollout_func
from ..workspace import PromptStyle, check_style
from ._episodes import LocalEpisodes
from ._rl import LiveRollouts, RLEpisode

T = TypeVar("T")


class CoworkEnv:
    """Live coworkenv episodes for a TRL ``GRPOTrainer``: ``dataset``, ``rollout_func``, ``rewards()``.

    ``store``: a store file with admitted tasks (``coworkenv synth``), or an open ``Store``.
    ``style``: the agent view the policy plays in (as ``export --style``). ``tasks``: only these task
    ids (default: every admitted task). ``max_new_tokens``: per turn of the policy;
    ``max_steps_per_episode``: turns (default: each task's own limit). ``sandbox``: the backend
    each episode's tools run in. Close it (or use it as a context manager) when training ends."""

    def __init__(self, store: str | Path | Store = "runs/coworkenv.db", *, style: PromptStyle = "minimal",
                 tasks: Sequence[str] | None = None, max_new_tokens: int = 128,
                 max_steps_per_episode: int | None = None, sandbox: str = "bwrap",
                 cache_dir: str | Path | None = None) -> None:
        self.style: PromptStyle = check_style(style)
        self.max_new_tokens, self.max_steps_per_episode = max_new_tokens, max_steps_per_episode
        if isinstance(store, Store):
            self.store, self._own_store = store, False
        else:
            if not Path(store).exists():
                raise FileNotFoundError(f"no store at {store} (create one with `coworkenv synth`)")
            self.store, self._own_store = Store(store, create=False), True
        rows = rl_rows(self.store, style=self.style)
        if tasks is not None:
            wanted = set(tasks)
            unknown = wanted - {r["task_id"] for r in rows}
            if unknown:
                raise TrainingError(f"not admitted tasks of {self.store.path}: {', '.join(sorted(unknown)[:5])}")
            rows = [r for r in rows if r["task_id"] in wanted]
        if not rows:
            raise TrainingError(f"{self.store.path} has no admitted tasks to train on (run coworkenv synth first)")
        self.rows = rows
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="coworkenv-episodes", daemon=True)
        self._thread.start()
        settings = EpisodeSettings(backend=sandbox, cache_dir=Path(cache_dir) if cache_dir is not None else None)
        self.host: EpisodeHost = self._run(self._open_host(settings))
        self._rollouts: LiveRollouts | None = None
        self._dataset: Any = None

    async def _open_host(self, settings: EpisodeSettings) -> EpisodeHost:
        return EpisodeHost(self.store, settings)

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    @property
    def dataset(self):
        """The prompts to train on, a ``datasets.Dataset`` of ``prompt`` (the agent view's system prompt
        and the task's instruction) and ``task_id``, one row per task."""
        if self._dataset is None:
            self._dataset = rl_dataset(self.rows)
        return self._dataset

    def rewards(self, *parts: str) -> list[Any]:
        """Reward functions for ``GRPOTrainer(reward_funcs=...)``, one per part of the gate's verdict:
        ``score`` (the default) or ``completion``, ``safety``, ``robustness`` (with
        ``GRPOConfig(multi_objective_aggregation="normalize_then_sum")``: GDPO). TRL logs each as
        ``rewards/<part>/mean``."""
        unknown = [p for p in parts if p not in GATE_REWARDS]
        if unknown:
            raise TrainingError(f"unknown reward {unknown[0]!r}; one of: {', '.join(GATE_REWARDS)}")
        return [gate_reward(part) for part in parts or ("score",)]

    @property
    def rollout_func(self):
        """``GRPOTrainer(rollout_func=...)``: plays one live episode per prompt with the trainer's model."""

        def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, Any]:
            if self._rollouts is None:
                self._rollouts = LiveRollouts(self.store, LocalEpisodes(self.host), self._loop, self.rows,
                                              self._settings(trainer))
            return trl_rollout_func(self._rollouts)(prompts, trainer)

        return rollout_func

    def _settings(self, trainer: Any) -> RLSettings:
        """The settings ``LiveRollouts`` plays by, read from the trainer that asks (its group size and
        sampling temperature: the log-probabilities it computes assume them)."""
        if getattr(trainer, "use_vllm", False):
            raise TrainingError("coworkenv.trl plays episodes with the trainer's own model: set use_vllm=False "
                             "(coworkenv train grpo --generation vllm samples turns with vLLM)")
        return RLSettings(model=str(getattr(trainer.model.config, "_name_or_path", "") or "the trainer's model"),
                          out_dir=str(trainer.args.output_dir), style=self.style,
                          num_generations=trainer.num_generations, batch_size=trainer.num_generations,
                          temperature=trainer.temperature, max_new_tokens=self.max_new_tokens,
                          max_steps_per_episode=self.max_steps_per_episode)

    @property
    def played(self) -> list[RLEpisode]:
        """Every episode played so far, in order: its id, task, tokens and verdict."""
        return list(self._rollouts.played) if self._rollouts is not None else []

    def close(self) -> None:
        """End the episode host (its sandboxes) and its thread; close the store if this opened it."""
        if self._thread.is_alive():
            try:
                self._run(self.host.close())
            finally:
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join()
                self._loop.close()
                if self._own_store:
                    self.store.close()

    def __enter__(self) -> CoworkEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

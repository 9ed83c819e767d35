"""Reinforcement learning with TRL: GRPO and GDPO on the gate's reward vector.

``train_rl(store, settings, rollouts, kind=...)`` runs TRL's ``GRPOTrainer`` on RL prompt rows
(``export rl``), with ``rollouts`` playing each prompt's episodes: whoever calls it (``coworkenv.loop``)
decides how an episode is played; this module knows only TRL. ``rollouts(prompts, model,
tokenizer)`` gets the prompts of one generation batch (each repeated ``num_generations`` times in
a row) and the policy as it is now, and returns a ``RolloutBatch``: per episode, the token ids of
its prompt and of everything after it, the ``env_mask`` that marks the model's own tokens (the loss
is on those only), their log-probabilities, and the three components of the gate's verdict.

One reward function per component (``completion``, ``safety``, ``robustness``; ``gate_reward``): TRL
logs each as ``rewards/<name>/mean``. GRPO (``kind="grpo"``) sums them and normalises the sum within each group;
GDPO (``kind="gdpo"``) normalises each component within the group, then sums
(``multi_objective_aggregation="normalize_then_sum"``).

The run is recorded in ``training_runs`` as SFT and DPO runs are (kind ``grpo``/``gdpo``), with the
per-component reward curves, the loss, and where a step's time went: rollouts (episodes per second;
generation, pushing the weights to a generating vLLM server, and the environment: sandboxes, tool
calls, grading) and the update.

Generation is the rollout's business: in process with the trainer's model (``generation
"transformers"``), or by a vLLM server whose weights follow the trainer's (``"vllm"``: see
``coworkenv.trainer._weights``). TRL itself runs with ``use_vllm`` off either way; the rollout's
samples are from the policy of that step (weights pushed before every generation batch and
checked), so no importance-sampling correction is applied.

The TRL glue (``rl_dataset``, ``trl_rollout_func``, ``gate_reward``) is public: ``coworkenv.trl`` hands
the same pieces to a ``GRPOTrainer`` its user builds.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from ..store import Store
from ..workspace import PromptStyle
from ._model import TrainingError, require_training
from ._train import (
    ProgressHook,
    RunRecord,
    TrainResult,
    _cuda,
    _lora_config,
    check_reporters,
    file_hash,
    load_model,
    recorded_run,
)

RLKind = Literal["grpo", "gdpo"]
Generation = Literal["transformers", "vllm"]
REWARD_COMPONENTS = ("completion", "safety", "robustness")
GATE_REWARDS = (*REWARD_COMPONENTS, "score")
AGGREGATION: dict[str, str] = {"grpo": "sum_then_normalize", "gdpo": "normalize_then_sum"}


class RLSettings(BaseModel):
    """Settings of one GRPO or GDPO run; stored with the run."""

    model: str  # a model folder (``coworkenv model init-tiny`` output, a trained run's model/)
    out_dir: str
    data: str | None = None  # an ``export rl`` file; None: the admitted tasks of the store
    style: PromptStyle = "minimal"  # the agent view the policy plays in
    max_steps: int = Field(default=100, ge=1)  # optimizer steps
    num_generations: int = Field(default=4, ge=2)  # episodes per prompt (a group)
    batch_size: int = Field(default=4, ge=1)  # episodes per step (a multiple of num_generations)
    learning_rate: float = Field(default=1e-5, gt=0)
    warmup_steps: int = Field(default=0, ge=0)
    temperature: float = Field(default=1.0, ge=0)
    max_new_tokens: int = Field(default=128, ge=1)  # per turn of the policy
    max_steps_per_episode: int | None = Field(default=None, ge=1)  # turns; None: each task's own limit
    beta: float = Field(default=0.0, ge=0)  # KL coefficient (0: no reference model)
    reward_weights: list[float] = Field(default_factory=lambda: [1.0, 1.0, 1.0])  # completion, safety, robustness
    save_steps: int = Field(default=50, ge=1)
    max_minutes: float | None = Field(default=None, gt=0)  # stop at the first step end past this wall time
    seed: int = 0
    lora: bool = False
    lora_r: int = Field(default=16, ge=1)
    lora_alpha: int = Field(default=32, ge=1)
    resume: bool = True
    report_to: list[str] = Field(default_factory=list)
    # transformers: the trainer's model generates in process; vllm: a vLLM server started for the run
    # samples the turns, its weights pushed after every optimizer step (coworkenv.trainer.VLLMWeightSync)
    generation: Generation = "transformers"
    vllm_python: str | None = None  # the interpreter that has vLLM (this one when unset)
    sync_tolerance: float = Field(default=0.05, gt=0)  # mean |Δ log p| allowed between vLLM and the trainer

    @model_validator(mode="after")
    def _groups(self) -> RLSettings:
        if self.batch_size % self.num_generations:
            raise ValueError(f"the batch size ({self.batch_size}) must be a multiple of the number of generations "
                             f"({self.num_generations}): each step plays whole groups")
        if len(self.reward_weights) != len(REWARD_COMPONENTS):
            raise ValueError(f"reward_weights needs {len(REWARD_COMPONENTS)} weights ({', '.join(REWARD_COMPONENTS)})")
        return self


@dataclass
class RolloutBatch:
    """What ``rollouts`` returns for one generation batch, one entry per prompt it was given."""

    prompt_ids: list[list[int]]
    completion_ids: list[list[int]]
    env_mask: list[list[int]]
    logprobs: list[list[float]]
    completion: list[float]
    safety: list[float]
    robustness: list[float]
    score: list[float]  # the gate's score, safety x (0.8 completion + 0.2 robustness): one reward for plain GRPO
    extra: dict[str, list[Any]] = field(default_factory=dict)  # other per-episode fields for reward functions
    generation_s: float = 0.0  # of the rollout's wall time, spent generating
    sync_s: float = 0.0  # of the rollout's wall time, spent giving the generating server the policy's weights
    failures: int = 0  # episodes an infrastructure failure ended (rewarded 0)

    def check(self, prompts: int) -> None:
        """``ValueError`` unless there is one episode per prompt and each one's lists are aligned."""
        columns = {"prompt_ids": self.prompt_ids, "completion_ids": self.completion_ids, "env_mask": self.env_mask,
                   "logprobs": self.logprobs, "completion": self.completion, "safety": self.safety,
                   "robustness": self.robustness, "score": self.score, **self.extra}
        for name, column in columns.items():
            if len(column) != prompts:
                raise ValueError(f"the rollout returned {len(column)} {name} for {prompts} prompts")
        for n, (ids, mask, logprobs) in enumerate(zip(self.completion_ids, self.env_mask, self.logprobs, strict=True)):
            if not len(ids) == len(mask) == len(logprobs) or not ids:
                raise ValueError(f"episode {n} of the rollout: {len(ids)} completion ids, {len(mask)} mask entries "
                                 f"and {len(logprobs)} log-probabilities (equal and non-zero expected)")


Rollouts = Callable[[list[Any], Any, Any], RolloutBatch]
"""``(prompts, model, tokenizer) -> RolloutBatch``: one episode per prompt, in order."""


def check_rl_training(settings: RLSettings) -> RLSettings:
    """What a run needs before anything is recorded: the training extra, the model folder, the data
    file (when given) and the trackers' packages; ``report_to`` resolved."""
    require_training()
    if settings.data is not None and not Path(settings.data).is_file():
        raise FileNotFoundError(f"no dataset at {settings.data}")
    if not (Path(settings.model) / "config.json").exists():
        raise FileNotFoundError(f"{settings.model} is not a model folder (no config.json);"
                                " create one with `coworkenv model init-tiny` or train one with `coworkenv train sft`")
    update: dict[str, Any] = {"report_to": check_reporters(settings.report_to)}
    if settings.generation == "vllm":
        from ._serve import check_vllm

        update["vllm_python"] = check_vllm(settings.vllm_python)
    return settings.model_copy(update=update)


def rl_dataset(rows: list[dict[str, Any]]):
    """RL rows as a ``datasets.Dataset`` of conversational ``prompt`` and ``task_id`` (the reward
    vectors of past episodes and the tools stay out: the rollout plays each episode afresh)."""
    from datasets import Dataset

    for n, row in enumerate(rows, 1):
        prompt = row.get("prompt")
        if not isinstance(prompt, list) or not any(isinstance(m, dict) and m.get("role") == "user" for m in prompt):
            raise TrainingError(f"row {n} is not an RL row: it needs a conversational `prompt` with a user turn")
        if not isinstance(row.get("task_id"), str):
            raise TrainingError(f"row {n} is not an RL row: it needs the `task_id` of its task")
    return Dataset.from_list([
        {"prompt": [{"role": m["role"], "content": m.get("content") or ""} for m in row["prompt"]],
         "task_id": row["task_id"]}
        for row in rows
    ])


def gate_reward(component: str):
    """The reward function of one part of the gate's verdict (``completion``, ``safety``,
    ``robustness`` or ``score``): it reads the rollout's ``grade_<component>`` field (TRL keeps
    ``completion`` for the decoded completion), so it rewards each episode with its verdict."""
    if component not in GATE_REWARDS:
        raise TrainingError(f"unknown reward {component!r}; one of: {', '.join(GATE_REWARDS)}")

    def reward(prompts, completions, **kwargs) -> list[float]:
        return [float(x) for x in kwargs[f"grade_{component}"]]

    reward.__name__ = component  # TRL logs it as rewards/<name>/mean
    return reward


class _Timings:
    """Where each step's time went: rollouts (generation, weight sync and environment) and the update."""

    def __init__(self) -> None:
        self.steps: list[dict[str, float]] = []
        self.rollout_s = self.generation_s = self.sync_s = 0.0  # of the current step
        self.episodes = self.failures = 0
        self.total_rollout_s = self.total_generation_s = self.total_sync_s = 0.0
        self.total_episodes = self.total_failures = 0

    def rollout(self, seconds: float, batch: RolloutBatch) -> None:
        self.rollout_s += seconds
        self.generation_s += batch.generation_s
        self.sync_s += batch.sync_s
        self.episodes += len(batch.completion_ids)
        self.failures += batch.failures

    def callback(self):
        from transformers import TrainerCallback

        timings = self

        class StepTimer(TrainerCallback):
            def on_step_begin(self, args, state, control, **kwargs):
                self.started = time.perf_counter()

            def on_step_end(self, args, state, control, **kwargs):
                step_s = time.perf_counter() - getattr(self, "started", time.perf_counter())
                timings.end_step(state.global_step, step_s)

        return StepTimer()

    def end_step(self, step: int, step_s: float) -> None:
        self.steps.append({
            "step": step, "seconds": round(step_s, 3), "rollout_s": round(self.rollout_s, 3),
            "generation_s": round(self.generation_s, 3), "sync_s": round(self.sync_s, 3),
            "environment_s": round(max(self.rollout_s - self.generation_s - self.sync_s, 0.0), 3),
            "update_s": round(max(step_s - self.rollout_s, 0.0), 3), "episodes": self.episodes,
            "episodes_per_s": round(self.episodes / self.rollout_s, 3) if self.rollout_s else 0.0,
        })
        self.total_rollout_s += self.rollout_s
        self.total_generation_s += self.generation_s
        self.total_sync_s += self.sync_s
        self.total_episodes += self.episodes
        self.total_failures += self.failures
        self.rollout_s = self.generation_s = self.sync_s = 0.0
        self.episodes = self.failures = 0

    def summary(self) -> dict[str, Any]:
        step_s = sum(s["seconds"] for s in self.steps)
        update_s = sum(s["update_s"] for s in self.steps)
        environment_s = max(self.total_rollout_s - self.total_generation_s - self.total_sync_s, 0.0)
        return {
            "episodes": self.total_episodes, "infrastructure_failures": self.total_failures,
            "episodes_per_s": round(self.total_episodes / self.total_rollout_s, 3) if self.total_rollout_s else 0.0,
            "time_split": {"step_s": round(step_s, 2), "rollout_s": round(self.total_rollout_s, 2),
                           "generation_s": round(self.total_generation_s, 2), "sync_s": round(self.total_sync_s, 2),
                           "environment_s": round(environment_s, 2), "update_s": round(update_s, 2)},
            "step_timings": self.steps,
        }


def trl_rollout_func(rollouts: Rollouts, on_batch: Callable[[float, RolloutBatch], None] | None = None):
    """TRL's ``rollout_func`` over ``rollouts``: the policy unwrapped for generation, the batch checked,
    each episode's verdict returned as ``grade_completion``, ``grade_safety``, ``grade_robustness`` and
    ``grade_score`` for ``gate_reward``'s functions. ``on_batch(seconds, batch)`` hears of each batch."""
    import torch
    from trl.models.utils import unwrap_model_for_generation

    def rollout_func(prompts: list[Any], trainer) -> dict[str, Any]:
        started = time.perf_counter()
        with torch.no_grad(), unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator) as model:
            batch = rollouts(prompts, model, trainer.processing_class)
        if on_batch is not None:
            on_batch(time.perf_counter() - started, batch)
        batch.check(len(prompts))
        return {"prompt_ids": batch.prompt_ids, "completion_ids": batch.completion_ids, "logprobs": batch.logprobs,
                "env_mask": batch.env_mask, "grade_completion": batch.completion, "grade_safety": batch.safety,
                "grade_robustness": batch.robustness, "grade_score": batch.score, **batch.extra}

    return rollout_func


def _config(settings: RLSettings, kind: RLKind):
    from trl import GRPOConfig  # pyright: ignore[reportPrivateImportUsage]

    return GRPOConfig(
        output_dir=str(Path(settings.out_dir) / "checkpoints"),
        max_steps=settings.max_steps,
        per_device_train_batch_size=settings.batch_size,
        gradient_accumulation_steps=1,
        num_generations=settings.num_generations,
        learning_rate=settings.learning_rate,
        warmup_steps=settings.warmup_steps,
        logging_steps=1,  # a reward curve point per step
        save_steps=settings.save_steps,
        save_total_limit=2,
        seed=settings.seed,
        beta=settings.beta,
        temperature=settings.temperature or 1.0,  # how TRL scales logits, as the rollout sampled (0: greedy)
        reward_weights=settings.reward_weights,
        multi_objective_aggregation=AGGREGATION[kind],
        use_cpu=not _cuda(),
        bf16=False, fp16=False,  # fp32: tiny models, exact losses
        activation_checkpointing=False,  # (TRL defaults gradient checkpointing to on)
        report_to=[n for n in settings.report_to if n != "tensorboard"] or "none",  # tensorboard: _tensorboard
        dataloader_num_workers=0,
        dataloader_pin_memory=False,
        disable_tqdm=True,
    )


def _curves(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per logged step: the summed reward, each component's mean and the loss."""
    points = []
    for h in history:
        if "reward" not in h:
            continue
        point: dict[str, Any] = {"step": h["step"], "reward": h["reward"]}
        for name in REWARD_COMPONENTS:
            for stat in ("mean", "std"):
                key = f"rewards/{name}/{stat}"
                if key in h:
                    point[key] = h[key]
        if "loss" in h:
            point["loss"] = h["loss"]
        points.append(point)
    return points


def rows_hash(rows: list[dict[str, Any]]) -> str:
    return hashlib.sha256("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows).encode()).hexdigest()


def train_rl(store: Store | None, settings: RLSettings, rows: list[dict[str, Any]], rollouts: Rollouts, *,
             kind: RLKind = "gdpo", on_progress: ProgressHook | None = None,
             summary: Callable[[], dict[str, Any]] | None = None) -> TrainResult:
    """GRPO or GDPO on the prompt ``rows`` (``export rl`` rows), each rollout played by ``rollouts``.

    Checkpoints go under ``OUT/checkpoints`` (a run started again on the same ``OUT`` resumes from
    the last one), the final model under ``OUT/model`` (with ``lora``: the adapter under
    ``OUT/adapter`` and the merged model under ``OUT/model``). ``summary`` adds to the run's metrics
    what only the caller knows (how the rollouts generated)."""
    if kind not in AGGREGATION:
        raise ValueError(f"unknown RL kind {kind!r}; one of: {', '.join(AGGREGATION)}")
    settings = check_rl_training(settings)
    dataset = rl_dataset(rows)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is TRL's experimental API
    timings = _Timings()

    def build():
        from trl import GRPOTrainer  # pyright: ignore[reportPrivateImportUsage]

        model, tokenizer = load_model(settings.model)
        reward_funcs: list[Any] = [gate_reward(name) for name in REWARD_COMPONENTS]
        trainer = GRPOTrainer(
            model=model, reward_funcs=reward_funcs, args=_config(settings, kind),
            train_dataset=dataset, processing_class=tokenizer, rollout_func=trl_rollout_func(rollouts, timings.rollout),
            peft_config=_lora_config(settings.lora_r, settings.lora_alpha) if settings.lora else None,
        )
        return trainer, tokenizer

    def summarize(trainer) -> dict[str, Any]:
        curves = _curves(trainer.state.log_history)
        return {"aggregation": AGGREGATION[kind], "generation": settings.generation, "reward_curves": curves,
                "final_rewards": {name: curves[-1].get(f"rewards/{name}/mean") for name in REWARD_COMPONENTS}
                if curves else {}, **timings.summary(), **(summary() if summary is not None else {})}

    record = RunRecord(
        kind, settings, settings.out_dir,
        data_path=settings.data or f"{store.path if store is not None else 'the store'} (admitted tasks)",
        data_hash=file_hash(settings.data) if settings.data else rows_hash(rows), rows=len(rows),
        lora=settings.lora, resume=settings.resume, report_to=settings.report_to, max_steps=settings.max_steps,
        max_minutes=settings.max_minutes)
    return recorded_run(store, record, build, on_progress=on_progress, callbacks=(timings.callback(),),
                        summarize=summarize)

"""Dataset export, PocketWorker base models (tiny Qwen3 or a local checkpoint), TRL training (SFT,
DPO, GRPO and GDPO) and vLLM serving.

Names are imported on first use, so a process that needs some of them does not load the rest
(`coworkenv serve` needs none of them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._chat_template import CHAT_TEMPLATE
    from ._circuit import CircuitConfig, circuit_gpt2, circuit_layout, hold_circuit
    from ._export import (
        SKIP_REASONS,
        Skipped,
        dpo_rows,
        dpo_skipped,
        export_dpo,
        export_rl,
        export_sft,
        rl_rows,
        sft_rows,
        sft_skipped,
    )
    from ._hf import (
        DATASET_FORMATS,
        DEFAULT_LICENSE,
        DatasetFormat,
        ExportKind,
        card_metadata,
        check_dataset_target,
        dataset_features,
        export_dataset,
    )
    from ._model import (
        TinyConfig,
        TrainingError,
        TrainingUnavailable,
        init_model,
        init_tiny_model,
        read_rows,
        require_training,
        train_tokenizer,
    )
    from ._pretrain import (
        POCKETWORKER_BASE,
        PretrainProgress,
        PretrainSettings,
        copy_probe,
        copy_rate,
        pretrain_base,
        resolve_base,
        snapshot_base,
        weights_hash,
    )
    from ._rl import (
        GATE_REWARDS,
        REWARD_COMPONENTS,
        RLKind,
        RLSettings,
        RolloutBatch,
        Rollouts,
        check_rl_training,
        gate_reward,
        rl_dataset,
        train_rl,
        trl_rollout_func,
    )
    from ._serve import (
        VLLM_VENV,
        ServedModel,
        ServeError,
        VLLMPython,
        VLLMServer,
        VLLMSettings,
        check_vllm,
        find_vllm_python,
        resolve_model,
        running_vllm_server,
        vllm_server,
        vllm_venv_places,
    )
    from ._swaps import common_words, copied_words, swapped_rows
    from ._train import (
        REPORTERS,
        TrainProgress,
        TrainResult,
        TrainSettings,
        bf16_is_fast,
        check_reporters,
        check_training,
        sft_token_ids,
        train_dpo,
        train_sft,
    )
    from ._weights import VLLMWeightSync, WeightSyncError, rl_vllm_server

__getattr__, __dir__, __all__ = lazy_names(__name__, {  # submodule: the names it gives
    "_chat_template": ("CHAT_TEMPLATE",),
    "_circuit": ("CircuitConfig", "circuit_gpt2", "circuit_layout", "hold_circuit"),
    "_swaps": ("common_words", "copied_words", "swapped_rows"),
    "_export": ("SKIP_REASONS", "Skipped", "dpo_rows", "dpo_skipped", "export_dpo", "export_rl", "export_sft",
                "rl_rows", "sft_rows", "sft_skipped"),
    "_hf": ("DATASET_FORMATS", "DEFAULT_LICENSE", "DatasetFormat", "ExportKind", "card_metadata",
            "check_dataset_target", "dataset_features", "export_dataset"),
    "_model": (
        "TinyConfig", "TrainingError", "TrainingUnavailable", "init_model", "init_tiny_model", "read_rows",
        "require_training", "train_tokenizer",
    ),
    "_pretrain": ("POCKETWORKER_BASE", "PretrainProgress", "PretrainSettings", "copy_probe", "copy_rate", "pretrain_base",
                  "resolve_base", "snapshot_base", "weights_hash"),
    "_rl": ("GATE_REWARDS", "REWARD_COMPONENTS", "RLKind", "RLSettings", "RolloutBatch", "Rollouts", "check_rl_training",
            "gate_reward", "rl_dataset", "train_rl", "trl_rollout_func"),
    "_train": ("REPORTERS", "TrainProgress", "TrainResult", "TrainSettings", "check_reporters", "check_training",
               "bf16_is_fast", "sft_token_ids", "train_dpo", "train_sft"),
    "_serve": (
        "VLLM_VENV", "ServedModel", "ServeError", "VLLMPython", "VLLMServer", "VLLMSettings", "check_vllm",
        "find_vllm_python", "resolve_model", "running_vllm_server", "vllm_server", "vllm_venv_places",
    ),
    "_weights": ("VLLMWeightSync", "WeightSyncError", "rl_vllm_server"),
})

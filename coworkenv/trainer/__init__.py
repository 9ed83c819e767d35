"""Dataset export, PocketWorker base models (tiny Qwen3 or a local checkpoint) and TRL training.

Names are imported on first use, so a process that needs some of them does not load the rest
(`coworkenv serve` needs none of them).
"""

from __future__ import annotations

from .._lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(__name__, {  # submodule: the names it gives
    "_chat_template": ("CHAT_TEMPLATE",),
    "_heldout": ("DEFAULT_EVAL_SEED", "SPLITS"),
    "_eval": (
        "EvalError", "EvalReport", "EvalSettings", "Trial", "combination", "pass_at_k", "pass_hat_k", "run_eval",
        "task_ids_in",
    ),
    "_export": ("dpo_rows", "export_dpo", "export_sft", "sft_rows"),
    "_model": (
        "TinyConfig", "TrainingUnavailable", "init_model", "init_tiny_model", "read_rows",
        "require_training", "train_tokenizer",
    ),
    "_train": ("TrainResult", "TrainSettings", "train_dpo", "train_sft"),
    "_serve": (
        "ServedModel", "ServeError", "VLLMServer", "VLLMSettings", "resolve_model",
        "running_vllm_server", "vllm_server",
    ),
})

"""Dataset export, PocketWorker base models (tiny Qwen3 or a local checkpoint) and TRL training."""

from ._chat_template import CHAT_TEMPLATE
from ._eval import (
    DEFAULT_EVAL_SEED,
    SPLITS,
    EvalError,
    EvalReport,
    EvalSettings,
    Trial,
    combination,
    pass_at_k,
    pass_hat_k,
    run_eval,
    task_ids_in,
)
from ._export import dpo_rows, export_dpo, export_sft, sft_rows
from ._model import (
    TinyConfig,
    TrainingUnavailable,
    init_model,
    init_tiny_model,
    read_rows,
    require_training,
    train_tokenizer,
)
from ._train import TrainResult, TrainSettings, train_dpo, train_sft
from ._serve import ServedModel, ServeError, VLLMServer, VLLMSettings, resolve_model, running_vllm_server, vllm_server

__all__ = [
    "CHAT_TEMPLATE",
    "DEFAULT_EVAL_SEED",
    "SPLITS",
    "EvalError",
    "EvalReport",
    "EvalSettings",
    "ServeError",
    "ServedModel",
    "TinyConfig",
    "TrainResult",
    "TrainSettings",
    "TrainingUnavailable",
    "Trial",
    "VLLMServer",
    "VLLMSettings",
    "combination",
    "dpo_rows",
    "export_dpo",
    "export_sft",
    "init_model",
    "init_tiny_model",
    "pass_at_k",
    "pass_hat_k",
    "read_rows",
    "require_training",
    "resolve_model",
    "run_eval",
    "running_vllm_server",
    "sft_rows",
    "task_ids_in",
    "train_dpo",
    "train_sft",
    "train_tokenizer",
    "vllm_server",
]

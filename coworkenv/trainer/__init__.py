"""Dataset export, PocketWorker base models (tiny Qwen3 or a local checkpoint) and TRL training."""

from ._chat_template import CHAT_TEMPLATE
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

__all__ = [
    "CHAT_TEMPLATE",
    "TinyConfig",
    "TrainResult",
    "TrainSettings",
    "TrainingUnavailable",
    "dpo_rows",
    "export_dpo",
    "export_sft",
    "init_model",
    "init_tiny_model",
    "read_rows",
    "require_training",
    "sft_rows",
    "train_dpo",
    "train_sft",
    "train_tokenizer",
]

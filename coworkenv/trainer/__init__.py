"""Dataset export (and, in later releases, training and serving of PocketWorker models)."""

from ._export import export_sft, sft_rows

__all__ = ["export_sft", "sft_rows"]

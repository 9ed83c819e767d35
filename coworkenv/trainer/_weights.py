"""RL with vLLM generation: a vLLM server samples the rollouts, and its weights follow the trainer's.

``rl_vllm_server(settings)`` is what to serve for a run: the starting model, computing in the dtype
it was saved in, with the log-probabilities of the distribution it samples from (``--logprobs-mode
processed_logprobs``, as in-process generation reports them) and the endpoints a weight update needs.

Before each generation batch, ``VLLMWeightSync.push(model, probe)`` gives the server the weights the
trainer has now, and returns the served name to sample from:

- a LoRA run saves the adapter (megabytes) and loads it under a new name
  (``/v1/load_lora_adapter``; the server runs with ``--enable-lora`` and
  ``VLLM_ALLOW_RUNTIME_LORA_UPDATING``), then unloads the previous adapter and deletes its folder;
- a full fine-tuning run saves the model and has vLLM's workers reload their weights in place from
  that folder (``/collective_rpc`` with ``reload_weights``; the server runs with
  ``VLLM_SERVER_DEV_MODE``), then drops the prefix cache computed with the old weights.

Every push is checked: the log-probabilities vLLM gives the ``probe`` token sequence must match
the trainer's own within ``tolerance`` (mean absolute difference per token). A server that did not
take the weights fails the run with the difference, rather than training on another model's samples.
vLLM's CPU build is such a case for a model whose input and output embeddings are tied: it keeps a
packed copy of the LM head made at start-up, which reloading does not refresh (train those with
``--lora``, whose adapters leave the embeddings alone, or generate with transformers).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import httpx

from ._serve import ServedModel, VLLMSettings

SERVED_BASE = "policy-base"  # the starting model's name on the server
PROBE_TOKENS = 128  # at most this many tokens of the probe are compared


class WeightSyncError(RuntimeError):
    """vLLM did not take the trainer's weights (the update failed, or it serves something else)."""


def rl_vllm_server(model_dir: str | Path, *, lora: bool, lora_r: int, python: str | None,
                   log_path: Path | None = None) -> tuple[ServedModel, VLLMSettings]:
    """What an RL run serves: its starting model, ready for adapter loads (``lora``) or in-place reloads."""
    settings = VLLMSettings(
        python=python, extra_args=["--logprobs-mode", "processed_logprobs"], log_path=log_path,
        environment={"VLLM_SERVER_DEV_MODE": "1"},  # /collective_rpc and /reset_prefix_cache
        runtime_lora=lora, max_lora_rank=lora_r if lora else None)
    return ServedModel(Path(model_dir), SERVED_BASE), settings


class VLLMWeightSync:
    """Pushes the trainer's weights to the vLLM server at ``base_url`` (``…/v1``) and checks them."""

    def __init__(self, base_url: str, folder: str | Path, *, lora: bool, tolerance: float = 0.05,
                 served_name: str = SERVED_BASE, timeout: float = 600.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.root = self.base_url.removesuffix("/v1")
        self.folder = Path(folder)
        self.lora, self.tolerance = lora, tolerance
        self.client = httpx.Client(timeout=timeout)
        self.base_name = served_name  # the starting model's name on the server
        self.name = served_name  # what to sample from now
        self.version = 0
        self.sync_s = 0.0  # over every push, the check included
        self.differences: list[float] = []  # the check's mean |Δ log p| per push

    def push(self, model: Any, probe: list[int]) -> str:
        """Give the server ``model``'s weights; return the served name to sample from."""
        started = time.perf_counter()
        self.version += 1
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.lora:
            self._push_adapter(model)
        else:
            self._push_model(model)
        self.check(model, probe)
        self.sync_s += time.perf_counter() - started
        return self.name

    def _push_adapter(self, model: Any) -> None:
        path = self.folder / f"adapter-{self.version}"
        model.save_pretrained(str(path))
        name, previous = f"policy-{self.version}", self.name
        self._post("/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(path)})
        self.name = name
        if previous != self.base_name:
            self._post("/v1/unload_lora_adapter", {"lora_name": previous})
            shutil.rmtree(self.folder / f"adapter-{previous.removeprefix('policy-')}", ignore_errors=True)

    def _push_model(self, model: Any) -> None:
        path = self.folder / "model"
        model.save_pretrained(str(path))
        self._post("/collective_rpc", {"method": "reload_weights", "kwargs": {"weights_path": str(path)}})
        self._post("/reset_prefix_cache", None)

    def _post(self, path: str, body: dict[str, Any] | None) -> httpx.Response:
        try:
            response = self.client.post(f"{self.root}{path}", json=body)
        except httpx.HTTPError as exc:
            raise WeightSyncError(f"the weight update could not reach vLLM at {self.root}{path}: {exc}") from exc
        if response.status_code != 200:
            raise WeightSyncError(f"vLLM refused the weight update ({path}: {response.status_code}): "
                                  f"{response.text[:300]}")
        return response

    def served_logprobs(self, ids: list[int]) -> list[float]:
        """vLLM's log-probability of each token of ``ids`` after the first, given those before it."""
        response = self._post("/v1/completions", {"model": self.name, "prompt": ids, "max_tokens": 1,
                                                  "prompt_logprobs": 0, "temperature": 1.0})
        found = response.json()["choices"][0]["prompt_logprobs"][1:]
        return [float(entry[str(token)]["logprob"]) for entry, token in zip(found, ids[1:], strict=True)]

    def difference(self, model: Any, ids: list[int]) -> float:
        """Mean absolute difference between the trainer's and vLLM's log-probabilities of ``ids``."""
        import torch

        ids = ids[:PROBE_TOKENS]
        if len(ids) < 2:
            raise ValueError("the weight check needs a probe of at least two tokens")
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([ids], device=model.device)).logits[0].float()
        finally:
            model.train(was_training)
        own = logits.log_softmax(-1)[torch.arange(len(ids) - 1), torch.tensor(ids[1:])].tolist()
        served = self.served_logprobs(ids)
        return sum(abs(a - b) for a, b in zip(own, served, strict=True)) / len(own)

    def check(self, model: Any, probe: list[int]) -> None:
        """``WeightSyncError`` unless vLLM's copy of the policy scores ``probe`` as ``model`` does."""
        difference = self.difference(model, probe)
        self.differences.append(difference)
        if difference > self.tolerance:
            hint = ""
            if not self.lora and model_config_tied(model):
                hint = (" The model ties its input and output embeddings; vLLM's CPU build keeps a packed copy of "
                        "the LM head that reloading does not refresh: train with --lora, or generate with "
                        "--generation transformers.")
            raise WeightSyncError(
                f"vLLM's copy of the policy differs from the trainer's after weight update {self.version}: mean "
                f"|Δ log p| {difference:.4f} over {min(len(probe), PROBE_TOKENS) - 1} probe tokens (tolerance "
                f"{self.tolerance}).{hint}")

    def close(self) -> None:
        self.client.close()


def model_config_tied(model: Any) -> bool:
    """Whether ``model`` (a transformers or PEFT model) ties its input and output embeddings."""
    return bool(getattr(getattr(model, "config", None), "tie_word_embeddings", False))

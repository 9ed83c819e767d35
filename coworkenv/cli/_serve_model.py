"""``coworkenv serve-model``: vLLM's OpenAI-compatible server on a trained model.

What it was given and cannot use (no such model or run, a bad adapter, vLLM missing from the
interpreter, a port in use) exits 2; a server that dies, during start-up or later, exits 1. Either
way the error is one line, and a server's failure is followed by the tail of its log.
"""

from __future__ import annotations

import signal
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from ._common import FAILED, USAGE, err, fail, open_store, spinner


def _fail(message: str, code: int = USAGE) -> typer.Exit:
    """``fail`` with the first line of ``message``; its other lines (a server's log tail) follow as they are."""
    first, _, tail = message.partition("\n")
    exit_ = fail(first, code)
    if tail:
        err.print(tail, markup=False, highlight=False, style="dim")
    return exit_


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
        envvar="COWORKENV_VLLM_PYTHON", help="Interpreter with vLLM installed (default: .venv-vllm/bin/python in the "
        "current directory or the project root, where `make vllm` puts it, else this one).")] = None,
    max_model_len: Annotated[int | None, typer.Option(
        min=64, help="Context length (default: the model's own, max_position_embeddings).")] = None,
    dtype: Annotated[str, typer.Option(
        help="What vLLM computes in: model (the dtype the checkpoint was saved in; vLLM alone would downcast a "
        "float32 checkpoint to bfloat16) or a vLLM --dtype value (auto, float32, bfloat16, float16).")] = "model",
    optimization_level: Annotated[int | None, typer.Option(
        "--optimization-level", "-O", min=0, max=3, help="vLLM's -O level; 0 skips compilation (fastest start).")] = None,
    startup_timeout: Annotated[float, typer.Option(min=1, help="Seconds to wait for the server to be healthy.")] = 600,
    log: Annotated[Path | None, typer.Option(help="Write the server's log here (default: a temporary file).")] = None,
) -> None:
    """Serve a trained model with vLLM's OpenAI-compatible server (tool calls, LoRA); Ctrl-C stops it."""
    from ..trainer import ServeError, VLLMServer, VLLMSettings, check_vllm, resolve_model
    from ._vllm import install_hint, vllm_python

    found = vllm_python(python, "--python")
    try:
        model = resolve_model(run, open_store(store) if store.exists() and not Path(run).is_dir() else None, name=name)
        adapters = dict(model.adapters)
        for spec in lora or []:
            adapter_name, _, directory = spec.partition("=")
            if not adapter_name or not directory:
                raise ServeError(f"--lora takes NAME=DIR (got {spec!r})")
            if not (Path(directory) / "adapter_config.json").exists():
                raise ServeError(f"--lora {spec}: {directory} is not a LoRA adapter folder (no adapter_config.json)")
            adapters[adapter_name] = Path(directory)
        model = replace(model, adapters=adapters)
        try:
            check_vllm(found.path)
        except ServeError as exc:  # name the interpreter, how it was found, and where a .venv-vllm was looked for
            raise ServeError(f"{str(exc).split(';')[0]} ({found.found}); {install_hint(found, '--python')}") from None
        err.print(f"vLLM from {escape(str(found))}", highlight=False)
        settings = VLLMSettings(python=found.path, host=host, port=port, max_model_len=max_model_len, dtype=dtype,
                                optimization_level=optimization_level, startup_timeout=startup_timeout, log_path=log)
        server = VLLMServer(model, settings)
        server.start()
    except ServeError as exc:
        raise _fail(str(exc)) from None
    except OSError as exc:  # the log file
        raise _fail(f"{exc.filename or log}: {exc.strerror or exc}") from None
    # Ctrl-C and SIGTERM both stop vLLM first; SIGINT is handled even when this process was started
    # with it ignored (a background job of a non-interactive shell), where Python installs no handler
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.default_int_handler)
    try:
        with spinner(f"starting vLLM on {model.base_dir} (log: {server.log_path})"):
            url = server.wait_until_ready()
        for served in model.names:
            err.print(f"serving [bold]{escape(served)}[/bold] at {url}  (coworkenv eval --model openai:{escape(served)}@{url})")
        err.print("Ctrl-C stops the server")
        code = server.wait()
        raise _fail(f"vLLM exited with status {code} (log: {server.log_path}); log tail:\n{server.log_tail()}", FAILED)
    except ServeError as exc:  # it died during start-up, or did not come up in time
        raise _fail(str(exc), FAILED) from None
    except KeyboardInterrupt:
        err.print("stopping vLLM")
    finally:
        server.stop()

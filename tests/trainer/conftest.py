"""Fixtures of the trainer tests.

One vLLM server per test session (``tool_model_server``), started by ``coworkenv serve-model`` and
stopped with Ctrl-C. It serves the committed tiny tool-calling model as ``tool-model`` and a LoRA
adapter of it as ``tool-lora``. The interpreter that runs vLLM is ``$COWORKENV_VLLM_PYTHON``
(``make test`` sets it to the vLLM environment it installs), else ``.venv-vllm/bin/python``, else
this one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from coworkenv.trainer import ServeError
from coworkenv.trainer._serve import check_vllm, free_port


# --- small hand-written conversations (tools, parallel tool calls, string and dict arguments) ----------

CHAT_TOOLS = [
    {"type": "function", "function": {"name": "calendar_create_event", "description": "Create an event.",
                                      "parameters": {"type": "object", "properties": {
                                          "title": {"type": "string"}, "date": {"type": "string"},
                                          "attendees": {"type": "array", "items": {"type": "string"}}},
                                          "required": ["title", "date"]}}},
    {"type": "function", "function": {"name": "mail_read_message", "description": "Read one message.",
                                      "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}},
]


def _chat_row(i: int) -> dict:
    date = f"2026-03-{18 + i % 5}"
    return {"tools": CHAT_TOOLS, "messages": [
        {"role": "system", "content": "Do the task with the tools, then answer briefly."},
        {"role": "user", "content": f"Read m{i:02d} and add \"Lunch\" on {date} with alice.nguyen@acme.example."},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c0", "type": "function", "function": {"name": "mail_read_message", "arguments": {"id": f"m{i:02d}"}}}]},
        {"role": "tool", "tool_call_id": "c0", "name": "mail_read_message", "content": json.dumps({"id": f"m{i:02d}"})},
        {"role": "assistant", "content": "On it.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "calendar_create_event", "arguments": {
                "title": "Lunch", "date": date, "attendees": ["alice.nguyen@acme.example"]}}},
            {"id": "c2", "type": "function", "function": {"name": "mail_read_message",
                                                          "arguments": json.dumps({"id": "m01"})}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "calendar_create_event", "content": "{\"id\": \"e09\"}"},
        {"role": "tool", "tool_call_id": "c2", "name": "mail_read_message", "content": "{\"id\": \"m01\"}"},
        {"role": "assistant", "content": f"Added Lunch on {date} (e09)."},
    ]}


@pytest.fixture(scope="session")
def chat_rows() -> list[dict]:
    """Twelve conversations for tokenizer, template and training tests."""
    return [_chat_row(i) for i in range(12)]


@pytest.fixture(scope="session")
def chat_tools() -> list[dict]:
    return CHAT_TOOLS


# --- one vLLM server per session ------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
STARTUP_S = 420


def vllm_python() -> str:
    configured = os.environ.get("COWORKENV_VLLM_PYTHON")
    if configured:
        return configured
    local = ROOT / ".venv-vllm" / "bin" / "python"
    return str(local) if local.exists() else sys.executable


def _serving(url: str) -> set[str]:
    try:
        response = httpx.get(f"{url}/models", timeout=5)
        return {m["id"] for m in response.json()["data"]} if response.status_code == 200 else set()
    except (httpx.HTTPError, ValueError, KeyError):
        return set()


@pytest.fixture(scope="session")
def tool_model_server(tmp_path_factory):
    """The base URL (``http://127.0.0.1:PORT/v1``) of vLLM serving ``tool-model`` and ``tool-lora``."""
    python = vllm_python()
    try:
        check_vllm(python)
    except ServeError as exc:
        pytest.skip(str(exc))
    logs = tmp_path_factory.mktemp("vllm")
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    command = [sys.executable, "-m", "coworkenv", "serve-model", str(FIXTURES / "tool-model"), "--name", "tool-model",
               "--lora", f"tool-lora={FIXTURES / 'tool-adapter'}", "--port", str(port), "--python", python,
               "-O", "0", "--startup-timeout", str(STARTUP_S), "--log", str(logs / "vllm.log")]
    with (logs / "cli.log").open("w") as cli_log:
        # started with SIGINT ignored, as a background job of a non-interactive shell starts it:
        # Ctrl-C must still stop the command (and vLLM with it)
        process = subprocess.Popen(command, stdout=cli_log, stderr=subprocess.STDOUT,
                                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    deadline = time.monotonic() + STARTUP_S + 30
    try:
        while {"tool-model", "tool-lora"} - _serving(url):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"serve-model did not come up:\n{(logs / 'cli.log').read_text()[-3000:]}")
            try:
                process.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
        yield url
    finally:
        process.send_signal(signal.SIGINT)  # Ctrl-C
        try:
            code = process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    assert code == 0, (logs / "cli.log").read_text()[-3000:]
    assert "stopping vLLM" in (logs / "cli.log").read_text()
    assert not _serving(url)  # the server went down with the command

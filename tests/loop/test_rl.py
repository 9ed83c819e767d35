"""GRPO and GDPO on live workspaces, end to end from the CLI: each rollout is a real episode in a
bubblewrap sandbox, played by the policy through the agent view and graded by the gate.

The policy is the committed tiny tool-calling model (a Qwen3 built from a config and trained on
oracle trajectories in the compact view), so episodes have tool calls and tool results: the
token trajectory the trainer learns from is checked against the conversation the store recorded.
"""

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coworkenv.agents import Policy, chat_text, parse_reply
from coworkenv.cli import app
from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.gate import GRADER_VERSION
from coworkenv.loop import LiveRollouts, LocalEpisodes
from coworkenv.store import Store
from coworkenv.synth import synthesize
from coworkenv.trainer import RLSettings, rl_rows

runner = CliRunner()
MODEL = Path(__file__).resolve().parents[1] / "fixtures" / "tool-model"
TASKS = 2


@pytest.fixture(scope="module")
def tasks_store(tmp_path_factory) -> Path:
    """A store file with two synthesized, calibrated, admitted tasks."""
    pytest.importorskip("trl", reason="needs the 'train' extra")
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    root = tmp_path_factory.mktemp("rl-store")

    async def make() -> None:
        store = Store(root / "coworkenv.db")
        host = EpisodeHost(store, EpisodeSettings(cache_dir=root / "cache"))
        try:
            await synthesize(host, TASKS, seed=0)
        finally:
            await host.close()
            store.close()

    asyncio.run(make())
    return root / "coworkenv.db"


def _store_copy(tasks_store: Path, tmp_path: Path) -> Path:
    path = tmp_path / "coworkenv.db"
    shutil.copy(tasks_store, path)
    return path


def _train(kind: str, store: Path, out: Path, *extra: str):
    return runner.invoke(app, [
        "train", kind, "--model", str(MODEL), "--store", str(store), "--out", str(out), "--steps", "2",
        "--num-generations", "2", "--batch-size", "2", "--style", "compact", "--max-steps-per-episode", "3",
        "--max-new-tokens", "48", "--lr", "1e-3", "--save-steps", "1", "--json", *extra])


def _check_run(store_path: Path, kind: str, summary: dict, *, episodes: int) -> dict:
    store = Store(store_path, create=False)
    try:
        [run] = store.training_runs(kind)
        assert run.status == "done" and run.id == summary["run_id"] and run.rows == TASKS
        metrics = run.metrics
        assert metrics["aggregation"] == {"grpo": "sum_then_normalize", "gdpo": "normalize_then_sum"}[kind]
        curves = metrics["reward_curves"]
        assert [c["step"] for c in curves] == list(range(1, summary["steps"] + 1))
        for point in curves:  # one curve per component, beside the summed reward
            for name in ("completion", "safety", "robustness"):
                assert 0.0 <= point[f"rewards/{name}/mean"] <= 1.0
        assert metrics["episodes"] == episodes and metrics["episodes_per_s"] > 0
        split = metrics["time_split"]
        assert split["rollout_s"] > 0 and split["generation_s"] > 0 and split["update_s"] > 0
        assert split["environment_s"] == pytest.approx(
            split["rollout_s"] - split["generation_s"] - split["sync_s"], abs=0.03)
        # every rollout was a real episode of source rl, graded by the gate when it ended
        played = store.episodes(source="rl")
        assert len(played) == episodes
        verdicts = store.verdicts([e.id for e in played], GRADER_VERSION)
        assert set(verdicts) == {e.id for e in played}
        assert all(e.status == "ended" and e.provider == "policy" and e.bundle_hash for e in played)
        # the last step's component means are those of that step's episodes' verdicts
        last = [verdicts[e.id] for e in played[-2:]]
        assert curves[-1]["rewards/completion/mean"] == pytest.approx(sum(v.completion for v in last) / 2)
        assert curves[-1]["rewards/safety/mean"] == pytest.approx(sum(v.safety for v in last) / 2)
        return metrics
    finally:
        store.close()


@pytest.mark.slow
@pytest.mark.bwrap
def test_train_grpo_plays_live_episodes_from_the_cli(tasks_store, tmp_path):
    store = _store_copy(tasks_store, tmp_path)
    result = _train("grpo", store, tmp_path / "grpo")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["kind"] == "grpo" and summary["steps"] == 2 and summary["episodes"] == 4
    assert (tmp_path / "grpo" / "model" / "config.json").exists()
    _check_run(store, "grpo", summary, episodes=4)


@pytest.mark.slow
@pytest.mark.bwrap
def test_train_gdpo_with_lora_from_an_export_resumes(tasks_store, tmp_path):
    store = _store_copy(tasks_store, tmp_path)
    data = tmp_path / "rl.jsonl"
    exported = runner.invoke(app, ["export", "rl", "--store", str(store), "--out", str(data), "--style", "compact"])
    assert exported.exit_code == 0, exported.output
    result = _train("gdpo", store, tmp_path / "gdpo", "--data", str(data), "--lora", "--lora-r", "4")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["kind"] == "gdpo" and summary["steps"] == 2 and summary["resumed_from"] is None
    assert (tmp_path / "gdpo" / "adapter" / "adapter_config.json").exists()
    assert (tmp_path / "gdpo" / "model" / "config.json").exists()  # merged
    _check_run(store, "gdpo", summary, episodes=4)
    # the same run folder and more steps: it resumes from its last checkpoint and plays only the new step
    again = _train("gdpo", store, tmp_path / "gdpo", "--data", str(data), "--lora", "--lora-r", "4", "--steps", "3")
    assert again.exit_code == 0, again.output
    resumed = json.loads(again.stdout)
    assert resumed["resumed_from"].endswith("checkpoint-2") and resumed["steps"] == 3 and resumed["episodes"] == 2


def test_rl_commands_name_bad_input_before_anything_runs(tmp_path):
    store = tmp_path / "s.db"
    result = runner.invoke(app, ["train", "gdpo", "--model", str(MODEL), "--store", str(store), "--out",
                                 str(tmp_path / "run"), "--batch-size", "3", "--num-generations", "2"])
    assert result.exit_code == 2 and "multiple of the number of generations" in result.output
    result = runner.invoke(app, ["train", "grpo", "--model", str(tmp_path), "--store", str(store)])
    assert result.exit_code == 2 and "not a model folder" in result.output
    result = runner.invoke(app, ["train", "grpo", "--model", str(MODEL), "--store", str(store), "--data",
                                 str(tmp_path / "missing.jsonl")])
    assert result.exit_code == 2 and "no dataset at" in result.output
    result = runner.invoke(app, ["train", "grpo", "--model", str(MODEL), "--store", str(store), "--out",
                                 str(tmp_path / "run")])
    assert result.exit_code == 2 and "no store at" in result.output and "coworkenv synth" in result.output
    assert not store.exists() and not (tmp_path / "run").exists()
    Store(store).close()  # a store without admitted tasks: nothing to play, nothing recorded
    result = runner.invoke(app, ["train", "grpo", "--model", str(MODEL), "--store", str(store), "--out",
                                 str(tmp_path / "run")])
    assert result.exit_code == 2 and "has no admitted tasks" in result.output
    assert Store(store).training_runs() == [] and not (tmp_path / "run").exists()


@pytest.mark.anyio
@pytest.mark.bwrap
async def test_env_mask_covers_exactly_the_policys_tokens(host, tool_model_tasks, tmp_path):
    pytest.importorskip("trl", reason="needs the 'train' extra")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    store = host.store  # the tasks the tool model was trained on: it calls their tools
    rows = rl_rows(store, style="compact")
    settings = RLSettings(model=str(MODEL), out_dir=str(tmp_path), style="compact", num_generations=2,
                          batch_size=2, max_steps_per_episode=3, max_new_tokens=96, temperature=0.0)
    rollouts = LiveRollouts(store, LocalEpisodes(host), asyncio.get_running_loop(), rows, settings)
    tokenizer = AutoTokenizer.from_pretrained(MODEL)
    policy = Policy(AutoModelForCausalLM.from_pretrained(MODEL), tokenizer, max_tokens=96, temperature=0.0)
    lookup = next(task_id for task_id in tool_model_tasks if task_id.startswith("lookup-"))  # one call, one answer
    row = next(row for row in rows if row["task_id"] == lookup)
    played = await rollouts.play_one(row["task_id"], policy)
    trajectory = played.trajectory
    assert played.verdict is not None and store.episode(played.episode_id).source == "rl"
    # the prompt is the exported row's prompt and tools as the chat template renders them
    assert tokenizer.decode(trajectory.prompt_ids) == chat_text(tokenizer, row["prompt"], row["tools"])
    assert len(trajectory.completion_ids) == len(trajectory.env_mask) == len(trajectory.logprobs)
    assert all(lp == 0.0 for lp, m in zip(trajectory.logprobs, trajectory.env_mask, strict=True) if m == 0)
    assert all(lp < 0.0 for lp, m in zip(trajectory.logprobs, trajectory.env_mask, strict=True) if m == 1)

    runs = trajectory.runs()
    conversation = store.messages(played.episode_id)
    replies = [m for m in conversation if m.role == "assistant"]
    results = [m for m in conversation if m.role == "tool"]
    assert results, "the tool model called no tool: nothing of the environment to mask"
    # mask 1: the model's replies, each ending its turn; parsed, they are the stored assistant messages
    own = [ids for mask, ids in runs if mask == 1]
    assert len(own) == len(replies) == trajectory.turns
    for ids, reply in zip(own, replies, strict=True):
        assert ids[-1] == policy.end_id
        parsed = parse_reply(tokenizer.decode(ids, skip_special_tokens=True))
        assert parsed.content == reply.content
        assert [(c["name"], c["args"]) for c in parsed.tool_calls] == [(c.name, c.arguments) for c in reply.tool_calls]
    # mask 0: between two replies, the tool results rendered by the template and the next generation prompt
    env = [tokenizer.decode(ids) for mask, ids in runs if mask == 0]
    assert len(env) == len(own) - 1  # the episode ended on the model's last reply
    flat = "".join(env)
    for result in results:
        assert f"<tool_response>\n{result.content}\n</tool_response>" in flat
    assert all(text.endswith("<|im_start|>assistant\n") for text in env)
    assert not any("<tool_response>" in tokenizer.decode(ids) for ids in own)


def test_a_users_reply_joins_the_trajectory_as_the_environments_tokens():
    """Multi-turn episodes under the policy: when the rollout sends the policy's question to the
    task's user, the reply comes back as a user turn; the trajectory records it (as the template
    renders it, with the next generation prompt) with mask 0, between the policy's two turns."""
    pytest.importorskip("trl", reason="needs the 'train' extra")
    from langchain_core.messages import HumanMessage, SystemMessage
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from coworkenv.agents import PolicyChatModel, Trajectory

    tokenizer = AutoTokenizer.from_pretrained(MODEL)
    policy = Policy(AutoModelForCausalLM.from_pretrained(MODEL), tokenizer, max_tokens=24, temperature=0.0)
    trajectory = Trajectory()
    tools = [{"type": "function", "function": {"name": "files_rename", "description": "Rename a file.",
                                               "parameters": {"type": "object", "properties": {
                                                   "id": {"type": "string"}, "name": {"type": "string"}}}}}]
    model = PolicyChatModel(policy=policy, trajectory=trajectory).bind_tools(tools)
    opening = [SystemMessage("You work for the user."), HumanMessage("Rename the budget file as I want it.")]
    first = model.invoke(opening)
    reply = "Call it budget-2027.txt, please."
    model.invoke([*opening, first, HumanMessage(reply)])

    assert tokenizer.decode(trajectory.prompt_ids) == chat_text(tokenizer, [
        {"role": "system", "content": "You work for the user."},
        {"role": "user", "content": "Rename the budget file as I want it."}], tools)
    runs = trajectory.runs()
    assert [mask for mask, _ in runs][:3] == [1, 0, 1] and trajectory.turns == 2
    env = tokenizer.decode(runs[1][1])
    assert f"<|im_start|>user\n{reply}<|im_end|>" in env and env.endswith("<|im_start|>assistant\n")
    masked = [lp for lp, m in zip(trajectory.logprobs, trajectory.env_mask, strict=True) if m == 0]
    assert masked and all(lp == 0.0 for lp in masked)
    # the policy's first turn ends with the end of its turn: its own, or added as the environment's
    # when the turn ran out of tokens
    assert policy.end_id in (runs[0][1][-1], runs[1][1][0])
    assert "<|im_start|>" not in tokenizer.decode(runs[0][1])


def _check_served(metrics: dict, steps: int) -> None:
    """A run that generated with vLLM pushed the weights before every step's rollouts, and vLLM's copy
    scored the probe as the trainer's model did each time."""
    assert metrics["generation"] == "vllm"
    syncs = metrics["weight_syncs"]
    assert syncs["pushes"] == steps and syncs["max_logprob_difference"] < 1e-3
    assert metrics["time_split"]["sync_s"] > 0
    assert all(step["sync_s"] > 0 for step in metrics["step_timings"])


@pytest.mark.slow
@pytest.mark.bwrap
def test_train_gdpo_with_lora_generates_with_vllm(tasks_store, tmp_path, vllm_interpreter):
    store = _store_copy(tasks_store, tmp_path)
    out = tmp_path / "gdpo"
    result = _train("gdpo", store, out, "--lora", "--lora-r", "4", "--generation", "vllm",
                    "--vllm-python", vllm_interpreter)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["generation"] == "vllm" and summary["steps"] == 2
    _check_served(_check_run(store, "gdpo", summary, episodes=4), steps=2)
    # the adapter of each step was loaded into vLLM; only the last one's folder is kept
    assert [p.name for p in (out / "vllm-weights").iterdir()] == ["adapter-2"]
    assert "policy-2" in (out / "vllm.log").read_text()


@pytest.mark.anyio
@pytest.mark.bwrap
async def test_a_full_model_push_reloads_vllms_weights_in_place_and_the_check_sees_any_other(tool_model_server, tmp_path):
    """The push of a full fine-tuning run: the trainer's model saved and reloaded in place by vLLM's
    workers, checked by the log-probabilities of a probe; weights that moved without a push fail the
    check. (The layers changed here are not the embeddings, which this model ties to its LM head:
    vLLM's CPU build does not refresh a tied LM head on reload.) The served model gets its own weights
    back at the end, for the tests after this one."""
    pytest.importorskip("trl", reason="needs the 'train' extra")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from coworkenv.trainer import VLLMWeightSync, WeightSyncError

    tokenizer = AutoTokenizer.from_pretrained(MODEL)
    model = AutoModelForCausalLM.from_pretrained(MODEL, dtype=torch.float32)
    probe = tokenizer("Find the invoice of March and send it to the accountant.", add_special_tokens=False)["input_ids"]
    sync = VLLMWeightSync(tool_model_server, tmp_path / "weights", lora=False, served_name="tool-model")
    original = sync.served_logprobs(probe)

    def move(scale: float) -> None:
        with torch.no_grad():
            for parameter in model.model.layers[0].mlp.parameters():
                parameter.add_(torch.randn_like(parameter) * scale)

    try:
        sync.check(model, probe)  # the same weights on both sides
        move(0.1)
        with pytest.raises(WeightSyncError, match="differs from the trainer's"):
            sync.check(model, probe)
        assert sync.name == sync.push(model, probe) == "tool-model"  # reloaded in place, checked
        assert sync.served_logprobs(probe) != pytest.approx(original, abs=1e-3)
        assert len(sync.differences) == 3 and sync.differences[0] < 1e-3 and sync.differences[2] < 1e-3
        assert sync.differences[1] > sync.tolerance and sync.sync_s > 0
    finally:
        sync.push(AutoModelForCausalLM.from_pretrained(MODEL, dtype=torch.float32), probe)
        restored = sync.served_logprobs(probe)
        sync.close()
    assert restored == pytest.approx(original, abs=1e-4) and sync.version == 2


@pytest.mark.anyio
@pytest.mark.bwrap
async def test_a_served_policy_plays_the_episode_the_in_process_one_does(host, tool_model_tasks, tool_model_server,
                                                                        tmp_path):
    """Greedy turns sampled by vLLM from the same weights make the same trajectory as in process:
    the same tokens, the same masks, log-probabilities equal within float error."""
    pytest.importorskip("trl", reason="needs the 'train' extra")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from coworkenv.agents import ServedPolicy

    rows = rl_rows(host.store, style="compact")  # the tasks the tool model was trained on: it calls their tools
    task_id = next(task_id for task_id in tool_model_tasks if task_id.startswith("lookup-"))
    settings = RLSettings(model=str(MODEL), out_dir=str(tmp_path), style="compact", num_generations=2,
                          batch_size=2, max_steps_per_episode=3, max_new_tokens=96, temperature=0.0)
    rollouts = LiveRollouts(host.store, LocalEpisodes(host), asyncio.get_running_loop(), rows, settings)
    tokenizer = AutoTokenizer.from_pretrained(MODEL)
    model = AutoModelForCausalLM.from_pretrained(MODEL)
    local = await rollouts.play_one(task_id, Policy(model, tokenizer, max_tokens=96, temperature=0.0))
    served_policy = ServedPolicy(tool_model_server, "tool-model", tokenizer, max_tokens=96, temperature=0.0,
                                 context_limit=model.config.max_position_embeddings)
    try:
        served = await rollouts.play_one(task_id, served_policy)
    finally:
        served_policy.close()
    a, b = local.trajectory, served.trajectory
    assert b.turns >= 2 and served_policy.generation_s > 0  # tool calls were made and answered
    assert (a.prompt_ids, a.completion_ids, a.env_mask) == (b.prompt_ids, b.completion_ids, b.env_mask)
    assert b.logprobs == pytest.approx(a.logprobs, abs=1e-3)
    assert served.verdict is not None and served.verdict.completion == local.verdict.completion

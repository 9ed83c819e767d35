"""coworkenv as a verifiers environment: verifiers' own evaluation entry point (``vf.load_environment`` of
``coworkenv.interop``, then ``Environment.evaluate``) plays admitted tasks (synthesized from seed 0, as the
committed tiny tool model's were) against that model served by vLLM, through the coworkenv server's MCP
endpoints and its capture proxy, and scores each rollout with the gate's verdict on its episode (the score as
the reward; completion, safety and robustness as metrics)."""

from __future__ import annotations

import pytest

from coworkenv.episodes import EpisodeHost
from coworkenv.gate import GRADER_VERSION
from coworkenv.server import ServeSettings, running_http_server

from .conftest import HERE, doc_snippet, run_json, run_snippet

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap, pytest.mark.slow]


async def test_verifiers_evaluates_the_served_model_with_the_gates_verdicts(
        host: EpisodeHost, tasks: list[str], tool_model_server: str, interop_python: str, tmp_path):
    settings = ServeSettings(upstream=tool_model_server, upstream_view="compact")
    async with running_http_server(host, settings) as base:
        rollouts = await run_json(interop_python, [str(HERE / "verifiers_eval.py")], {
            "url": base, "model": "tool-model", "base_url": tool_model_server, "max_turns": 4})
        example = (doc_snippet("load_environment").replace("http://localhost:8765", base)  # docs/interop.md's example
                   .replace("http://127.0.0.1:8000/v1", tool_model_server).replace('model="model"', 'model="tool-model"'))
        printed = await run_snippet(interop_python, example, tmp_path / "example.py")

    assert sorted(r["task_id"] for r in rollouts) == sorted(tasks)  # one rollout per admitted task
    for rollout in rollouts:
        assert rollout["error"] is None
        row = host.store.episode(rollout["episode_id"])
        assert row is not None and row.task_id == rollout["task_id"]
        assert (row.source, row.status) == ("live", "ended") and row.client.startswith("verifiers")
        verdict = host.store.verdict(row.id, GRADER_VERSION)
        assert verdict is not None
        assert rollout["reward"] == verdict.score
        assert {k: rollout["metrics"][k] for k in ("coworkenv_score", "completion", "safety", "robustness")} == {
            "coworkenv_score": verdict.score, "completion": verdict.completion, "safety": verdict.safety,
            "robustness": verdict.robustness}
        assert rollout["verdict"]["reason"] == verdict.reason
        # the model was called through the episode's capture proxy: its conversation is the episode's
        assert any(m.role == "assistant" for m in host.store.messages(row.id))

    lines = printed.splitlines()  # the example: four rollouts, each its episode's id and the gate's score
    assert len(lines) == 4
    for line in lines:
        episode_id, reward = line.split()[:2]
        verdict = host.store.verdict(episode_id, GRADER_VERSION)
        assert verdict is not None and float(reward) == verdict.score

"""Evaluates a model on coworkenv tasks with verifiers' own entry point: ``vf.load_environment`` loads
``coworkenv.interop`` and ``Environment.evaluate`` plays every task against an OpenAI-compatible server and
scores each rollout with the environment's rubric. Runs where verifiers is installed (``.venv-interop``);
the test starts it as a subprocess.

Usage: python verifiers_eval.py < {"url", "model", "base_url", "max_turns"}; prints a JSON list of
{"task_id", "episode_id", "reward", "metrics", "verdict", "error"}, one per rollout. The model's requests go
through the coworkenv server's capture proxy (``proxy=True``), which shows it the agent view it was trained in.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

import verifiers.legacy as vf


async def main() -> None:
    args = json.load(sys.stdin)
    os.environ.setdefault("COWORKENV_MODEL_KEY", "none")  # the served model takes any key
    env = vf.load_environment("coworkenv.interop", url=args["url"], max_turns=args.get("max_turns", 4), proxy=True)
    results = await env.evaluate(
        client=vf.ClientConfig(api_base_url=args["base_url"], api_key_var="COWORKENV_MODEL_KEY", max_retries=0),
        model=args["model"], sampling_args={"temperature": 0.0, "max_tokens": 96}, num_examples=-1,
        rollouts_per_example=1, max_concurrent=2, state_columns=["episode_id", "verdict"], on_progress=[])
    json.dump([{"task_id": out["info"]["task_id"], "episode_id": out.get("episode_id"), "reward": out["reward"],
                "metrics": out["metrics"], "verdict": out.get("verdict"), "error": out.get("error")}
               for out in results["outputs"]], sys.stdout, default=str)


if __name__ == "__main__":
    asyncio.run(main())

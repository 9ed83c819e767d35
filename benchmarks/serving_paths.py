"""One model, three serving paths, the same episodes: does a served model play as it does in process?

Plays the tasks the committed tiny tool-calling model was trained on (tests/fixtures/tool-model-tasks,
compact view, greedy) through the evaluation's own trial (``play_trial``: the LangGraph agent over
MCP against bubblewrap sandboxes, graded by the gate) with

- ``hf:MODEL``, in process (float32), the baseline;
- ``openai:tool-model@URL``, vLLM's OpenAI server as ``serve-model`` runs it now (the checkpoint's
  dtype, float32, and the model's own context length);
- the same with ``--dtype bfloat16``, which is what vLLM chose by itself before ``serve-model`` passed
  the checkpoint's dtype.

For each path: the episodes passed, and how many episodes are the same as in process trial by trial
(the same verdict; and the same conversation: every assistant turn's text and tool calls).
Usage::

    python benchmarks/serving_paths.py --python .venv-vllm/bin/python [--trials 2]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.gate import GRADER_VERSION
from coworkenv.loop import EvalSettings, LocalEpisodes
from coworkenv.loop._eval import play_trial
from coworkenv.store import Store
from coworkenv.synth import calibrate_task
from coworkenv.trainer import ServedModel, VLLMSettings
from coworkenv.trainer._serve import running_vllm_server
from coworkenv.workspace import load_bundle

ROOT = Path(__file__).resolve().parents[1]
MODEL, TASKS = ROOT / "tests" / "fixtures" / "tool-model", ROOT / "tests" / "fixtures" / "tool-model-tasks"


async def play(episodes: LocalEpisodes, task_ids: list[str], model: str, trials: int) -> dict[tuple[str, int], tuple]:
    """(task, trial) -> (passed, the assistant turns of its conversation)."""
    store = episodes.host.store
    out = {}
    for task_id in task_ids:
        for trial in range(trials):
            settings = EvalSettings(model=model, prompt_style="compact", temperature=0.0, trials=trials,
                                    max_tokens=128)
            played = (await play_trial(episodes, store.task_spec(task_id), settings, trial))[-1]
            verdict = store.verdict(played.episode_id, GRADER_VERSION)
            turns = [(m.content, [(c.name, c.arguments) for c in m.tool_calls])
                     for m in store.messages(played.episode_id) if m.role == "assistant"]
            out[(task_id, trial)] = (bool(verdict and verdict.admitted), turns)
    return out


async def main(python: str, trials: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "coworkenv.db")
        host = EpisodeHost(store, EpisodeSettings(cache_dir=Path(tmp) / "cache"))
        try:
            task_ids = []
            for directory in sorted(TASKS.iterdir()):
                workspace, specs = load_bundle(directory)
                store.put_workspace(workspace)
                for task in specs:
                    store.put_task(task)
                    await calibrate_task(host, task)
                    task_ids.append(task.id)
            episodes = LocalEpisodes(host)
            results = {"in process (hf, float32)": await play(episodes, task_ids, f"hf:{MODEL}", trials)}
            for label, dtype in (("vLLM, serve-model (float32)", "model"), ("vLLM, bfloat16 (its own choice)", "bfloat16")):
                settings = VLLMSettings(python=python, dtype=dtype, optimization_level=0)
                async with running_vllm_server(ServedModel(MODEL, "tool-model"), settings=settings) as url:
                    results[label] = await play(episodes, task_ids, f"openai:tool-model@{url}", trials)
        finally:
            await host.close()
    baseline = next(iter(results.values()))
    print("| path | passed | same verdict as in process | same conversation as in process |")
    print("| --- | --- | --- | --- |")
    for label, got in results.items():
        n = len(got)
        passed = sum(p for p, _ in got.values())
        verdicts = sum(got[k][0] == baseline[k][0] for k in got)
        conversations = sum(got[k][1] == baseline[k][1] for k in got)
        print(f"| {label} | {passed}/{n} | {verdicts}/{n} | {conversations}/{n} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=None, help="the interpreter that has vLLM")
    parser.add_argument("--trials", type=int, default=2, help="trials per task (greedy: they should repeat)")
    args = parser.parse_args()
    asyncio.run(main(args.python, args.trials))

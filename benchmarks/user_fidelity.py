"""How faithful the simulated users are: leaks, contradictions and failures to end.

    python benchmarks/user_fidelity.py --tasks 60 --seed 0 [--user-model hf:PATH] [--user-model openai:M@URL]

Generates ``--tasks`` multi-turn tasks (the composed ``multi_turn`` shapes: a hidden value, which of
two records, a confirmation) and plays five conversations with each task's user, each a fresh
simulator as an episode has:

- ``reference``: the reference's questions, then "Anything else?" until the user says done;
- ``off_topic``: a question about something the apps show, then the reference's questions;
- ``fishing``: an open question that invites the user to volunteer everything, then the reference's;
- ``repeated``: every reference question asked twice;
- ``overrun``: an off-topic question asked two more times than the user's ``max_turns``.

Each conversation is judged by ``coworkenv.episodes.fidelity`` against the task's user: a **leak** is a
fact's value given before any message was about it; a **contradiction** an asked fact answered
without its value or with one of its alternatives (the other slot, the other record), or a
confirmation answered the other way; a **failure to end** a reply that is not ``done`` once every
item was asked about, or at the ``max_turns``-th reply. The scripted user is always measured; each
``--user-model`` adds a model-backed one (any provider spec; the same persona prompt as in episodes).
"""

from __future__ import annotations

import argparse
import asyncio
import time

from coworkenv.episodes import UserReply, UserSimulator, fidelity
from coworkenv.episodes._user import ModelUser, ScriptedUser
from coworkenv.synth import generate
from coworkenv.workspace import ASK_TOOL, Task

OFF_TOPIC = "What is today's date?"
FISHING = "Before I start, is there anything at all I should know about this?"
MORE = "Anything else?"


def conversations(task: Task) -> dict[str, list[str]]:
    assert task.user is not None
    questions = [str(step.arguments["message"]) for step in task.reference if step.tool == ASK_TOOL.name]
    return {
        "reference": [*questions, MORE, MORE],
        "off_topic": [OFF_TOPIC, *questions],
        "fishing": [FISHING, *questions],
        "repeated": [q for q in questions for _ in range(2)],
        "overrun": [OFF_TOPIC] * (task.user.max_turns + 2),
    }


def make_user(task: Task, model: str) -> UserSimulator:
    assert task.user is not None
    if not model:
        return ScriptedUser(task.user)
    from coworkenv.agents import ProviderSettings, chat_model, parse_provider

    return ModelUser(task, chat_model(parse_provider(model), None, None, ProviderSettings(max_tokens=96)))


async def play(task: Task, model: str, messages: list[str]) -> list[tuple[str, UserReply]]:
    user = make_user(task, model)
    exchanges = []
    for message in messages:
        reply = await user.reply(message)
        exchanges.append((message, reply))
        if reply.done and messages is not None and message == MORE:
            break
    return exchanges


async def measure(tasks: list[Task], model: str) -> dict:
    counts = {"episodes": 0, "replies": 0, "leaked": 0, "contradicted": 0, "failed_to_end": 0,
              "leaks": 0, "contradictions": 0}
    by_kind: dict[str, dict[str, int]] = {}
    started = time.perf_counter()
    for task in tasks:
        assert task.user is not None
        for kind, messages in conversations(task).items():
            judged = fidelity(task.user, await play(task, model, messages))
            row = by_kind.setdefault(kind, {"episodes": 0, "unfaithful": 0})
            row["episodes"] += 1
            row["unfaithful"] += not judged.faithful
            counts["episodes"] += 1
            counts["replies"] += judged.replies
            counts["leaked"] += bool(judged.leaks)
            counts["contradicted"] += bool(judged.contradictions)
            counts["failed_to_end"] += judged.failed_to_end
            counts["leaks"] += len(judged.leaks)
            counts["contradictions"] += len(judged.contradictions)
    counts["seconds"] = round(time.perf_counter() - started, 1)
    counts["by_conversation"] = by_kind
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--user-model", action="append", default=[], metavar="PROVIDER")
    args = parser.parse_args()
    tasks = [t for t in generate(args.tasks, args.seed, ("multi_turn",)).tasks if t.user is not None]
    shapes = {t.shape for t in tasks}
    print(f"{len(tasks)} multi-turn tasks (seed {args.seed}; shapes: {', '.join(sorted(shapes))}), "
          f"5 conversations each\n")
    print("| user | episodes | replies | leaked | contradicted | failed to end | seconds |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for model in ["", *args.user_model]:
        result = asyncio.run(measure(tasks, model))
        n = result["episodes"]

        def share(key: str, result: dict = result, n: int = n) -> str:
            return f"{result[key]} ({result[key] / n:.0%})"

        print(f"| {model or 'scripted'} | {n} | {result['replies']} | {share('leaked')} | {share('contradicted')} "
              f"| {share('failed_to_end')} | {result['seconds']} |")
        unfaithful = ", ".join(f"{k} {v['unfaithful']}/{v['episodes']}" for k, v in result["by_conversation"].items())
        print(f"|   unfaithful episodes by conversation: {unfaithful} | | | | | | |")


if __name__ == "__main__":
    main()

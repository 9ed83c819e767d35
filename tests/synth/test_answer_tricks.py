"""The tricks of issue 42 against synthesized tasks, played through the episode runtime as any client
plays them: answers that evade ``excludes`` with no work (a string of 10,003 digits, every listed value
glued by a letter, both at once), a reply listing every multiple of 500, and one catch-all question
to a multi-turn task's user. None of them may pass an admitted task; the honest reference passes
every one, and synthesis still admits nearly every task it makes."""

from __future__ import annotations

import asyncio
import re
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest

from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.store import Provenance, Store, VerdictRow
from coworkenv.synth import SynthSummary, synthesize
from coworkenv.workspace import ASK_TOOL, SUBMIT_TOOL, AnswerCheck, ReferenceStep, Task, Workspace, app_module

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]
TASKS = 88  # eight of each capability
TEXT_ARGUMENT = re.compile(r"text|body|content|message|comment|note|reason|description")
EVERY_500 = " ".join(str(n) for n in range(500, 400_001, 500))


def de_bruijn(order: int = 4) -> str:
    """The shortest string of digits holding every string of ``order`` digits (10,003 digits for 4)."""
    sequence, a = [], [0] * 10 * order

    def extend(t: int, p: int) -> None:
        if t > order:
            sequence.extend(a[1:p + 1] if order % p == 0 else [])
            return
        a[t] = a[t - p]
        extend(t + 1, p)
        for j in range(a[t - p] + 1, 10):
            a[t] = j
            extend(t + 1, t)

    extend(1, 1)
    text = "".join(map(str, sequence))
    return text + text[:order - 1]


DIGITS = de_bruijn()


@dataclass
class Synthesized:
    path: Path  # the store, closed
    cache: Path
    summary: SynthSummary
    tasks: list[Task]  # the admitted ones


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory) -> Synthesized:
    directory = tmp_path_factory.mktemp("tricks")

    async def build() -> Synthesized:
        store = Store(directory / "coworkenv.db")
        host = EpisodeHost(store, EpisodeSettings(cache_dir=directory / "cache"))
        try:
            summary = await synthesize(host, TASKS, seed=0)
        finally:
            await host.close()
        tasks = [store.task_spec(row.id) for row in store.tasks() if row.status == "admitted"]
        store.close()
        return Synthesized(directory / "coworkenv.db", directory / "cache", summary, tasks)

    return asyncio.run(build())


@pytest.fixture
def store_path(synthesized: Synthesized, tmp_path: Path) -> Path:
    return Path(shutil.copy(synthesized.path, tmp_path / "coworkenv.db"))


@pytest.fixture
async def host(store: Store, synthesized: Synthesized):
    h = EpisodeHost(store, EpisodeSettings(cache_dir=synthesized.cache))
    yield h
    await h.close()


async def play(host: EpisodeHost, task: Task, steps: list[ReferenceStep], answer: str) -> VerdictRow:
    episode = await host.open(task, Provenance("live"))
    for step in steps:
        await episode.call(step.tool, step.arguments)
    await episode.call(SUBMIT_TOOL.name, {"answer": answer})
    verdict = host.verdict(episode.id)
    assert verdict is not None
    return verdict


def listed(host: EpisodeHost, task: Task) -> list[str]:
    """Every value the list and search tools of the task's apps return, called with no query on the
    workspace's initial state: what a client sees before doing anything."""
    workspace = host.workspace(task.workspace_id)
    apps = {step.tool.split("_", 1)[0] for step in task.reference if step.tool != ASK_TOOL.name}
    found: dict[str, None] = {}
    state = sqlite3.connect(":memory:")
    host.initial_connection(workspace).backup(state)
    try:
        for app in (a for a in workspace.apps if a.name in apps):
            for tool in app.tools:
                if tool.effect == "read" and tool.tool.startswith(("list", "search")) \
                        and not tool.input_schema.get("required"):
                    arguments = next((dict(r.list_arguments) for r in app.resources if r.list_tool == tool.tool), {})
                    try:
                        _values(app_module(app.name).handle(state, tool.tool, arguments), found)
                    except Exception:
                        continue
    finally:
        state.close()
    return list(found)


def _values(value, found: dict[str, None]) -> None:
    if isinstance(value, dict):
        for item in value.values():
            _values(item, found)
    elif isinstance(value, list):
        for item in value:
            _values(item, found)
    elif isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value).strip():
        found[str(value).strip()] = None


def written(workspace: Workspace, task: Task, text: str) -> list[ReferenceStep]:
    """The reference with ``text`` as every text its write calls write (a message, a reply, a note)."""
    def step(s: ReferenceStep) -> ReferenceStep:
        tool = workspace.tool(s.tool)
        if tool is None or tool.effect != "write":
            return s
        return ReferenceStep(tool=s.tool, arguments={k: text if isinstance(v, str) and TEXT_ARGUMENT.search(k) else v
                                                     for k, v in s.arguments.items()})

    return [step(s) for s in task.reference]


def catch_all(workspace: Workspace) -> str:
    """One question for whatever any user of the workspace could hold: every kind of record, every
    field a write tool takes, and a confirmation (what a client reads off the tool list)."""
    kinds = {r.collection for app in workspace.apps for r in app.resources}
    kinds |= {kind.removesuffix("s") for kind in kinds} | {"person"}
    fields = {name.replace("_", " ") for tool in workspace.tools if tool.effect == "write"
              for name in tool.input_schema.get("properties", {}) if name != "id" and not name.endswith("_id")}
    return (f"Which {' or '.join(sorted(kinds))} do you mean, what {', '.join(sorted(fields))} should it have, and "
            "do you confirm I may delete, remove, cancel or archive it (go ahead)?")


def test_synthesis_admits_nearly_every_task_of_every_capability(synthesized):
    summary = synthesized.summary
    assert summary.generated == TASKS and summary.admitted >= TASKS - 4, summary.quarantined
    assert all(n >= 7 for n in summary.admitted_by["capability"].values()), summary.admitted_by["capability"]
    assert len(summary.admitted_by["capability"]) == 11


async def test_the_reference_passes_every_admitted_task(host, synthesized):
    for task in synthesized.tasks:
        verdict = await play(host, task, task.reference, task.reference_answer)
        assert (verdict.admitted, verdict.score) == (True, 1.0), (task.id, verdict.reason)


async def test_answers_that_list_instead_of_looking_up_pass_no_task(host, synthesized):
    """A string of 10,003 digits (every number of up to four digits inside), every listed value glued
    by a letter, and both at once, each with zero calls."""
    assert len(DIGITS) == 10_003 and all(f"{n:04d}" in DIGITS for n in range(10_000))
    answer_tasks = [t for t in synthesized.tasks if any(isinstance(c, AnswerCheck) for c in t.checks)]
    assert len(answer_tasks) >= 40 and sum(t.capability == "aggregation" for t in answer_tasks) >= 7
    passed = []
    for task in answer_tasks:
        glued = "x".join(listed(host, task))
        for name, answer in (("digits", DIGITS), ("glued", glued), ("both", f"{DIGITS}x{glued}")):
            verdict = await play(host, task, [], answer)
            if verdict.admitted or verdict.completion > 0:
                passed.append((task.id, name))
    assert passed == []


async def test_a_reply_listing_every_multiple_of_500_passes_no_task(host, synthesized):
    """The reference's messages, replies and notes with every multiple of 500 up to 400,000 written
    instead, on every task whose checks read what it writes (the budget reply among them: a figure, with the
    figures it could be confused with; seed 0 has made no invoice reply since templates take turns by name)."""
    read = []
    for task in synthesized.tasks:
        workspace = host.workspace(task.workspace_id)
        bare = written(workspace, task, "Done.")
        if bare == task.reference or (await play(host, task, bare, task.reference_answer)).admitted:
            continue  # it writes no text, or nothing reads what it says
        read.append(task.shape)
        verdict = await play(host, task, written(workspace, task, EVERY_500), task.reference_answer)
        assert not verdict.admitted, task.id
    assert "budget_reply" in read and len(set(read)) >= 4, read


async def test_one_catch_all_question_passes_no_multi_turn_task(host, synthesized):
    multi_turn = [t for t in synthesized.tasks if t.user is not None]
    assert len(multi_turn) >= 7
    for task in multi_turn:
        question = ReferenceStep(tool=ASK_TOOL.name, arguments={"message": catch_all(host.workspace(task.workspace_id))})
        verdict = await play(host, task, [question, *(s for s in task.reference if s.tool != ASK_TOOL.name)],
                             task.reference_answer)
        assert not verdict.admitted and verdict.score < 1.0, task.id
        assert not any(c.passed for c in verdict.checks if c.id.startswith("asked_")), task.id

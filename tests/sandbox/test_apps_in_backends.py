"""Every tool of every built-in app runs in every sandbox backend, with the same results.

One full round of every synthesis template is generated over one workspace of all apps; a set of
those tasks whose reference solutions and forbidden probes together call every tool is played in
episodes of each backend (a fresh state per task, as in calibration). Every reference call must
succeed, and the docker and local backends must give exactly what bwrap gives (results and attachments).
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.sandbox import PoolSettings
from coworkenv.store import Provenance, Store
from coworkenv.synth import generate_tasks
from coworkenv.synth.templates import TEMPLATES
from coworkenv.workspace import ASK_TOOL, Task, Workspace

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
BACKEND_PARAMS = [pytest.param("bwrap", marks=pytest.mark.bwrap), pytest.param("docker", marks=pytest.mark.docker),
                  pytest.param("local", marks=pytest.mark.bwrap)]  # compared with what bwrap gives
_played: dict[str, dict[str, list]] = {}


def steps(task: Task) -> list:
    """The calls of a task's reference and forbidden probe that reach its apps (not its messages to the user)."""
    return [step for step in [*task.reference, *([task.forbidden_probe] if task.forbidden_probe else [])]
            if step.tool != ASK_TOOL.name]


@pytest.fixture(scope="module")
def covering() -> tuple[Workspace, list[Task]]:
    tasks: list[Task] = []
    for capability, templates in TEMPLATES.items():
        (workspace,), generated = generate_tasks(len(templates), 0, (capability,))
        tasks += generated
    chosen, covered = [], set()
    for task in sorted(tasks, key=lambda t: (-len({s.tool for s in steps(t)}), t.id)):
        if {s.tool for s in steps(task)} - covered:
            chosen.append(task)
            covered |= {s.tool for s in steps(task)}
    assert covered == {tool.name for tool in workspace.tools}, "the templates call every tool"
    return workspace, chosen


async def play(backend: str, workspace: Workspace, tasks: list[Task], directory: Path) -> dict[str, list]:
    store = Store(directory / "coworkenv.db")
    store.put_workspace(workspace)
    for task in tasks:
        store.put_task(task)
    host = EpisodeHost(store, EpisodeSettings(backend=backend, cache_dir=directory / "cache",
                                              pool=PoolSettings(size=1)))
    played: dict[str, list] = {}
    try:
        for task in tasks:
            episode = await host.open(task, Provenance("eval"))
            outcomes = []
            for step in steps(task):
                outcome = await episode.call(step.tool, step.arguments)
                outcomes.append((step.tool, outcome.ok, outcome.text, sorted(a.sha256 for a in outcome.attachments)))
            await episode.finish("done")
            played[task.id] = outcomes
    finally:
        with anyio.fail_after(60):
            await host.close()
    return played


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
async def test_every_tool_runs_in_the_backend_as_in_bwrap(backend: str, covering, tmp_path: Path):
    workspace, tasks = covering
    with anyio.fail_after(600):
        if "bwrap" not in _played:
            _played["bwrap"] = await play("bwrap", workspace, tasks, tmp_path / "bwrap")
        played = _played["bwrap"] if backend == "bwrap" else await play(backend, workspace, tasks, tmp_path / backend)
    failed = [(task.id, tool, text) for task in tasks
              for (tool, ok, text, _) in played[task.id][:len(task.reference)] if not ok]
    assert not failed, failed  # reference calls all succeed (a forbidden probe may be refused by the app)
    attachments = [a for outcomes in played.values() for *_, shas in outcomes for a in shas]
    assert attachments, "some tools return images or documents"
    if backend != "bwrap":
        assert played == _played["bwrap"]

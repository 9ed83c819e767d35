"""Capability-guided task generation: N tasks, deterministically from a seed."""

from __future__ import annotations

import contextlib
import json
import random
import sqlite3
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..workspace import (
    ASK_TOOL,
    CAPABILITIES,
    AnswerCheck,
    FixedState,
    Task,
    Workspace,
    build_workspace,
    fixed_state,
    write_initial_state,
)
from ._compose import SHAPES
from ._probes import Probe, dry_run, harden, reference_holds
from ._probes import probes as find_probes
from ._profile import allocate
from .templates import TEMPLATES

Generator = Literal["all", "composed", "templates"]
TURNS_PER_WORKSPACE = 12  # a capability with fewer templates than this draws several tasks from each workspace

GENERATED: tuple[str, ...] = tuple(c for c in CAPABILITIES if c in TEMPLATES)
"""The capabilities synthesis generates tasks for (every capability of the taxonomy that has a shape or template)."""


def _order(n: int, capabilities: tuple[str, ...], weights: dict[str, float] | None) -> list[str]:
    """The capability of each of the ``n`` tasks: round-robin, or each one's share interleaved."""
    if weights is None:
        return [capabilities[i % len(capabilities)] for i in range(n)]
    left = allocate(n, {c: weights.get(c, 0.0) for c in capabilities})
    order: list[str] = []
    while len(order) < n:
        for capability in capabilities:
            if left[capability]:
                order.append(capability)
                left[capability] -= 1
    return order


def _within(workspace: Workspace, task: Task) -> bool:
    """Whether every tool a task names is one of the workspace's (a template may know apps it lacks)."""
    names = [step.tool for step in task.reference if step.tool != ASK_TOOL.name] + list(task.forbidden_tools)
    names += [task.forbidden_probe.tool] if task.forbidden_probe else []
    return all(workspace.tool(name) is not None for name in names)


@dataclass
class Generation:
    """What a generation made: its workspaces and tasks, and what it dropped on the way."""

    workspaces: list[Workspace]
    tasks: list[Task]
    duplicates: int = 0  # near-duplicates dropped: the same shape over the same records
    passed: int = 0  # turns passed on by a template with nothing to work on
    # capability -> its turns that made no task: every try passed (nothing to work on, or a near-duplicate)
    unmade: dict[str, int] = field(default_factory=dict)


def signature(task: Task) -> str:
    """What makes two tasks the same task: their shape and the records and values their program
    touches (the reference's calls and the answers asked for), whatever the phrasing."""
    asked = sorted(value for check in task.checks if isinstance(check, AnswerCheck) for value in check.contains)
    steps = sorted(json.dumps([step.tool, step.arguments], sort_keys=True) for step in task.reference)
    return json.dumps([task.shape, steps, asked])


def generate_tasks(n: int, seed: int, capabilities: tuple[str, ...] = GENERATED, **options: Any,
                   ) -> tuple[list[Workspace], list[Task]]:
    """``generate``'s workspaces and tasks."""
    made = generate(n, seed, capabilities, **options)
    return made.workspaces, made.tasks


def _in_memory(path: Path) -> FixedState:
    """A workspace's initial state loaded into memory (templates query it, every dry run copies it)."""
    return fixed_state(path.read_bytes())


def generate(n: int, seed: int, capabilities: tuple[str, ...] = GENERATED, *,
             weights: dict[str, float] | None = None, difficulty_weights: dict[str, dict[int, float]] | None = None,
             hardened: bool = True, apps: tuple[str, ...] | None = None, generator: Generator = "all",
             initial_state: Callable[[Workspace], Path] | None = None,
             on_task: Callable[[Task, Workspace], None] | None = None,
             probes: dict[str, dict[str, Probe | None]] | None = None,
             per_workspace: int | None = None) -> Generation:
    """``n`` tasks over ``capabilities``; the same seed (and weights) gives the same tasks.

    Without ``weights`` the capabilities take turns; with them, each capability gets its share of
    ``n`` (``allocate``), interleaved; ``difficulty_weights`` (capability → difficulty → weight)
    split a capability's share over its difficulties the same way (a task of a difficulty whose
    share is spent passes its turn, while another of that capability's is not). Within a
    capability, templates take turns; each full round of a capability's templates (at least
    ``TURNS_PER_WORKSPACE`` turns) moves on to a new workspace (seed, seed+1, …), so tasks stay
    distinct as ``n`` grows; ``per_workspace`` sets that number of turns instead (1: each workspace
    gives each capability one turn, so the records a task is about recur in few other tasks). A
    template with nothing to work on in a workspace passes its turn to the next, and so does a
    near-duplicate (same shape, same records: ``signature``). ``apps``: the workspaces' apps (all
    registered apps by default).
    ``generator``: the hand-written ``templates``, the ``composed`` shapes (any app), or ``all`` of
    them. Each task is ``harden``-ed (a guard that nothing else changes, the candidates its answer
    must not list) unless ``hardened`` is False. ``initial_state``: where a workspace's initial state
    is built (an episode host's cache, ``EpisodeHost.initial_state``: its episodes then start from
    the same file); a temporary folder by default. ``on_task(task, workspace)`` hears of each task
    as soon as it is made (``synthesize`` calibrates it while the next ones are generated).
    ``probes``: each hardened task's hack probes (``coworkenv.synth._probes.probes``) are put in it
    under the task's id before ``on_task`` hears of it, found from the same in-process run of its
    reference as the check that it holds and its hardening (calibration then plays them).
    """
    sources = {c: {name: t for name, t in TEMPLATES[c].items()
                   if generator == "all" or (name in SHAPES.get(c, {})) == (generator == "composed")}
               for c in capabilities if c in TEMPLATES}
    unknown = [c for c in capabilities if not sources.get(c)]
    if unknown:
        raise ValueError(f"no generator for capabilities {unknown}; synthesis generates {', '.join(GENERATED)}")
    if n < 0:
        raise ValueError("the number of tasks must be zero or more")
    if per_workspace is not None and per_workspace < 1:
        raise ValueError(f"tasks per workspace must be 1 or more, not {per_workspace}")
    order = _order(n, capabilities, weights)
    quotas = {c: allocate(order.count(c), difficulty_weights[c]) for c in capabilities
              if difficulty_weights and difficulty_weights.get(c)}
    made = Generation([], [])
    workspaces: dict[int, Workspace] = {}
    states: dict[int, sqlite3.Connection] = {}
    seen: set[str] = set()
    counters = dict.fromkeys(capabilities, 0)
    with tempfile.TemporaryDirectory(prefix="coworkenv-synth-") as tmp:
        try:
            for capability in order:
                templates = list(sources[capability].items())
                tries = max(12, 2 * len(templates))
                for attempt in range(tries):  # a template with nothing to work on passes its turn on
                    k = counters[capability]
                    counters[capability] += 1
                    turns = per_workspace or max(len(templates), TURNS_PER_WORKSPACE)
                    round_, which = k // turns, k % len(templates)
                    name, template = templates[which]
                    ws_seed = seed + round_
                    if ws_seed not in workspaces:
                        workspaces[ws_seed] = build_workspace(ws_seed, apps)
                        path = (initial_state(workspaces[ws_seed]) if initial_state is not None
                                else write_initial_state(workspaces[ws_seed], Path(tmp) / f"{ws_seed}.db"))
                        states[ws_seed] = _in_memory(path)
                    rng = random.Random(f"{seed}:{capability}:{k}")
                    try:
                        spec = template(states[ws_seed], rng)
                    except sqlite3.OperationalError:  # a template over an app this workspace does not have
                        spec = None
                    workspace = workspaces[ws_seed]
                    task = None if spec is None else Task(id=f"{capability}-{ws_seed}-{name}-{k:03d}",
                                                          workspace_id=workspace.id, shape=name, **spec)
                    if task is None or not _within(workspace, task):
                        made.passed += 1
                        continue
                    if signature(task) in seen:
                        made.duplicates += 1
                        continue
                    initial = states[ws_seed]
                    # the reference played in process, for the check that it holds, hardening and probes
                    with contextlib.closing(dry_run(initial, workspace, task, task.reference)) as final:
                        if not reference_holds(task, workspace, initial, final):
                            made.passed += 1  # a reference the state refuses (a closed ticket, say): not a task
                            continue
                        quota = quotas.get(capability)
                        if quota is not None and attempt < tries - 1 and quota.get(task.difficulty, 0) <= 0 \
                                and any(left > 0 for left in quota.values()):
                            continue  # this difficulty's share is spent; another of this capability's is not
                        if quota is not None:
                            quota[task.difficulty] = quota.get(task.difficulty, 0) - 1
                        seen.add(signature(task))
                        made.tasks.append(harden(task, workspace, initial, final) if hardened else task)
                        if probes is not None:
                            probes[task.id] = find_probes(made.tasks[-1], workspace, initial, final)
                    if on_task is not None:
                        on_task(made.tasks[-1], workspace)
                    break
                else:  # no try made a task: ``n`` is not met, and the summary says for which capability
                    made.unmade[capability] = made.unmade.get(capability, 0) + 1
        finally:
            for conn in states.values():
                conn.close()
    made.workspaces = list(workspaces.values())
    return made

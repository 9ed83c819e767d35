"""Capability-guided task generation: N tasks, deterministically from a seed."""

from __future__ import annotations

import random
import sqlite3
import tempfile
from pathlib import Path

from ..workspace import CAPABILITIES, Task, Workspace, build_workspace, write_initial_state
from ._templates import TEMPLATES


def generate_tasks(n: int, seed: int, capabilities: tuple[str, ...] = CAPABILITIES,
                   ) -> tuple[list[Workspace], list[Task]]:
    """``n`` tasks spread round-robin over ``capabilities``; the same seed gives the same tasks.

    Within a capability, templates take turns; each full round of a capability's templates moves
    on to a new workspace (seed, seed+1, …), so tasks stay distinct as ``n`` grows.
    """
    unknown = [c for c in capabilities if c not in TEMPLATES]
    if unknown:
        raise ValueError(f"unknown capabilities {unknown}; known: {', '.join(TEMPLATES)}")
    if n < 0:
        raise ValueError("the number of tasks must be zero or more")
    workspaces: dict[int, Workspace] = {}
    states: dict[int, sqlite3.Connection] = {}
    tasks: list[Task] = []
    counters = dict.fromkeys(capabilities, 0)
    with tempfile.TemporaryDirectory(prefix="coworkenv-synth-") as tmp:
        try:
            for index in range(n):
                capability = capabilities[index % len(capabilities)]
                templates = list(TEMPLATES[capability].items())
                k = counters[capability]
                counters[capability] += 1
                round_, which = divmod(k, len(templates))
                name, template = templates[which]
                ws_seed = seed + round_
                if ws_seed not in workspaces:
                    workspaces[ws_seed] = build_workspace(ws_seed)
                    path = write_initial_state(workspaces[ws_seed], Path(tmp) / f"{ws_seed}.db")
                    states[ws_seed] = sqlite3.connect(path)
                rng = random.Random(f"{seed}:{capability}:{k}")
                spec = template(states[ws_seed], rng)
                if spec is None:
                    continue
                workspace = workspaces[ws_seed]
                tasks.append(Task(id=f"{capability}-{ws_seed}-{name}-{k:03d}", workspace_id=workspace.id, **spec))
        finally:
            for conn in states.values():
                conn.close()
    return list(workspaces.values()), tasks

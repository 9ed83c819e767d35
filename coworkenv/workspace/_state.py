"""Building, dumping and reloading the SQLite state of a workspace."""

from __future__ import annotations

import inspect
import random
import sqlite3
from pathlib import Path
from types import ModuleType

from . import apps as _apps
from ._spec import App, ResourceSpec, ToolSpec, Workspace
from ._registry import registered_apps
from ._world import build_world, write_world

APPS_DIR = Path(_apps.__file__).parent


def app_module(name: str) -> ModuleType:
    apps = registered_apps()
    try:
        return apps[name]
    except KeyError:
        known = ", ".join(sorted(apps))
        raise KeyError(f"unknown app {name!r}; the apps are: {known}") from None


def app_spec(name: str) -> App:
    module = app_module(name)
    return App(
        name=module.NAME,
        description=module.DESCRIPTION,
        tools=[
            ToolSpec(
                name=f"{module.NAME}_{tool['name']}",
                app=module.NAME,
                tool=tool["name"],
                description=tool["description"],
                effect=tool["effect"],
                input_schema=tool["input_schema"],
                output_schema=tool["output_schema"],
            )
            for tool in module.TOOLS
        ],
        resources=[ResourceSpec(**resource) for resource in getattr(module, "RESOURCES", [])],
    )


def build_workspace(seed: int, apps: tuple[str, ...] | None = None) -> Workspace:
    """A workspace of the named apps (every registered app when None) over the world of ``seed``;
    its id is derived from the apps and the seed."""
    registered = registered_apps()
    names = tuple(sorted(registered)) if apps is None else apps
    everything = apps is None or set(names) == set(registered)
    return Workspace(
        id=f"ws-{seed}" if everything else f"ws-{'-'.join(names)}-{seed}",
        name=f"office (seed {seed})" if everything else f"{' + '.join(names)} (seed {seed})",
        seed=seed,
        apps=[app_spec(name) for name in names],
    )


def write_initial_state(workspace: Workspace, path: str | Path) -> Path:
    """Create the workspace's initial state at ``path``: its world (``world_*`` tables), then each
    app's tables seeded from it; the same seed gives the same rows."""
    path = Path(path)
    path.unlink(missing_ok=True)
    world = build_world(workspace.seed)
    conn = sqlite3.connect(path)
    try:
        write_world(conn, world)
        for app in workspace.apps:
            module = app_module(app.name)
            conn.executescript(module.SCHEMA)
            rng = random.Random(f"{workspace.seed}:{app.name}")
            if len(inspect.signature(module.seed).parameters) >= 3:
                module.seed(conn, rng, world)
            else:  # an app written before worlds: it draws its own data
                module.seed(conn, rng)
        conn.commit()
    finally:
        conn.close()
    return path


def dump_state(source: str | Path | bytes) -> str:
    """The state (a file, or a database image as bytes) as SQL text; ``load_state`` reloads it.

    Virtual tables (a full-text index, say) are derived data that a dump cannot reload: they are
    left out, and an app rebuilds them from its tables when it needs them."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.deserialize(source if isinstance(source, bytes) else Path(source).read_bytes())
        virtual = [row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'")]
        for name in virtual:  # dropping one drops its shadow tables too
            conn.execute(f'DROP TABLE "{name}"')
        return "\n".join(conn.iterdump())
    finally:
        conn.close()


def load_state(dump: str) -> sqlite3.Connection:
    """An in-memory database holding a state dumped by ``dump_state``."""
    conn = sqlite3.connect(":memory:")
    conn.executescript(dump)
    return conn

"""Spec bundles: a workspace and its tasks as YAML files, with content hashes.

A bundle is a folder: ``workspace.yaml``, ``tasks/<id>.yaml`` and ``bundle.json`` (the hashes).
Hashes are of content, not of files: the canonical JSON of each spec, and for a workspace also the
source of the code that turns the spec into a state and runs its tools (its apps' modules and the
world generator), so that a change to an app changes the hash of every workspace that has it.

``bundle_hash(workspace, tasks)`` is what episodes, verdicts and exported rows carry: an episode's
bundle is its workspace and its task, so results stay comparable, and regradeable, when anything
changes.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from . import _world
from . import apps as _apps
from ._bounds import SAFE_NAME
from ._spec import (
    ASK_TOOL,
    SUBMIT_TOOL,
    SpecError,
    Task,
    Workspace,
    WorldEvent,
    load_task,
    load_workspace,
    save_task,
    save_workspace,
)
from ._state import app_module, event_problem, write_initial_state

HASH_FORMAT = 1
MANIFEST = "bundle.json"


def _digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:16]


def spec_hash(spec: BaseModel) -> str:
    """The hash of a spec's content (canonical JSON: sorted keys, no whitespace)."""
    return _digest(json.dumps(spec.model_dump(mode="json"), sort_keys=True, separators=(",", ":")))


def code_hash(app_names: list[str]) -> str:
    """The hash of the code that makes and serves a workspace of these apps (worked out once per
    set of apps and process: the code does not change under a running process)."""
    return _code_hash(tuple(sorted(app_names)))


@functools.lru_cache(maxsize=64)
def _code_hash(app_names: tuple[str, ...]) -> str:
    sources = [inspect.getsource(_world)]
    if app_names:  # the built-in apps' shared modules: _base, the formula engine, the seeding pictures
        shared = sorted(Path(_apps.__file__).parent.glob("_*.py"))
        sources += [path.read_text() for path in shared if path.name != "__init__.py"]
    sources += [inspect.getsource(app_module(name)) for name in sorted(app_names)]
    return _digest(*sources)


def workspace_hash(workspace: Workspace) -> str:
    return _digest(str(HASH_FORMAT), spec_hash(workspace), code_hash([app.name for app in workspace.apps]))


def task_hash(task: Task) -> str:
    return spec_hash(task)


def bundle_hash(workspace: Workspace, tasks: list[Task], *, workspace_digest: str | None = None) -> str:
    """The hash of a workspace and tasks of it (an episode's bundle: its workspace and its task).
    ``workspace_digest``: the workspace's ``workspace_hash``, when the caller keeps it."""
    return _digest(workspace_digest or workspace_hash(workspace), *sorted(task_hash(t) for t in tasks))


@dataclass
class Bundle:
    workspace: Workspace
    tasks: list[Task] = field(default_factory=list)

    @property
    def hash(self) -> str:
        return bundle_hash(self.workspace, self.tasks)

    def manifest(self) -> dict[str, Any]:
        return {"format": HASH_FORMAT, "hash": self.hash, "workspace": {"id": self.workspace.id,
                                                                         "hash": workspace_hash(self.workspace)},
                "tasks": {t.id: task_hash(t) for t in self.tasks}}


def save(bundle: Bundle, directory: str | Path) -> Path:
    """Write the bundle's files under ``directory`` (tasks of it that are no longer in it are removed).

    The ids become file names, so each must be a safe one (``SAFE_NAME``; a spec from an older store
    may not be): nothing is written or removed outside ``directory``."""
    unsafe = [i for i in [bundle.workspace.id, *(t.id for t in bundle.tasks)] if not re.fullmatch(SAFE_NAME, i)]
    if unsafe:
        raise SpecError(f"id {unsafe[0]!r} is no safe file name (letters, digits, '_', '-', '.', not starting "
                        "with '.'): the bundle is not written")
    directory = Path(directory)
    tasks_dir = directory / "tasks"
    tasks_dir.mkdir(parents=True, exist_ok=True)
    save_workspace(bundle.workspace, directory / "workspace.yaml")
    keep = {f"{t.id}.yaml" for t in bundle.tasks}
    for old in tasks_dir.glob("*.yaml"):
        if old.name not in keep:
            old.unlink()
    for task in bundle.tasks:
        save_task(task, tasks_dir / f"{task.id}.yaml")
    (directory / MANIFEST).write_text(json.dumps(bundle.manifest(), indent=2) + "\n")
    return directory


def load(directory: str | Path, *, check_manifest: bool = True) -> Bundle:
    """Read and validate a bundle; ``SpecError`` names the file, the field and the reason.

    Validated: every file parses as its spec; the workspace's data overrides apply to its seeded
    state; scheduled events name an app of the workspace and one of its actions; task ids are unique and match their file names;
    every task belongs to the workspace and uses only tools its episodes offer (the workspace's, the
    control tool ``submit_answer``, and ``ask_user`` where the task has a user); and, when
    ``bundle.json`` is there, the contents still hash to what it says."""
    directory = Path(directory)
    if not directory.is_dir():
        raise SpecError(f"{directory}: not a bundle folder")
    workspace = load_workspace(directory / "workspace.yaml")
    if workspace.overrides:
        _check_overrides(workspace, directory / "workspace.yaml")
    _check_events(workspace, workspace.events, directory / "workspace.yaml")
    tools = {tool.name for tool in workspace.tools} | {SUBMIT_TOOL.name}
    tasks = []
    for path in sorted((directory / "tasks").glob("*.yaml")):
        task = load_task(path)
        if task.id != path.stem:
            raise SpecError(f"{path}: id: the task's id is {task.id!r}; its file must be {task.id}.yaml")
        if task.workspace_id != workspace.id:
            raise SpecError(f"{path}: workspace_id: {task.workspace_id!r}, but the bundle's workspace is {workspace.id!r}")
        callable_tools = tools | ({ASK_TOOL.name} if task.user is not None else set())  # what its episodes offer
        for n, step in enumerate(task.reference):
            if step.tool == ASK_TOOL.name and task.user is None:
                raise SpecError(f"{path}: reference.{n}.tool: {ASK_TOOL.name!r} is offered only to a task with a "
                                "user (a multi-turn task's persona); this task has none")
            if step.tool not in callable_tools:
                raise SpecError(f"{path}: reference.{n}.tool: {step.tool!r} is not a tool of workspace {workspace.id}")
        for name in task.forbidden_tools:
            if name not in tools:
                raise SpecError(f"{path}: forbidden_tools: {name!r} is not a tool of workspace {workspace.id}")
        _check_events(workspace, task.events, path)
        tasks.append(task)
    bundle = Bundle(workspace, tasks)
    manifest = directory / MANIFEST
    if check_manifest and manifest.exists():
        try:
            recorded = json.loads(manifest.read_text())["hash"]
        except (ValueError, KeyError, TypeError):
            raise SpecError(f"{manifest}: hash: not a bundle manifest") from None
        if recorded != bundle.hash:
            raise SpecError(f"{manifest}: hash: the bundle says {recorded} but its contents hash to {bundle.hash} "
                            "(edited since it was saved, or made by other app code)")
    return bundle


def _check_events(workspace: Workspace, events: list[WorldEvent], source: Path) -> None:
    for number, event in enumerate(events):
        problem = event_problem(workspace, event)
        if problem:
            raise SpecError(f"{source}: events.{number}: {problem}")


def _check_overrides(workspace: Workspace, source: Path) -> None:
    """Build the workspace's state once, so that an override that does not fit it is named now."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            write_initial_state(workspace, Path(tmp) / "state.db")
        except SpecError as exc:
            raise SpecError(f"{source}: overrides: {exc}") from None


def save_bundle(workspace: Workspace, tasks: list[Task], directory: str | Path) -> Path:
    """Write ``workspace.yaml``, ``tasks/<id>.yaml`` and ``bundle.json`` under ``directory``."""
    return save(Bundle(workspace, list(tasks)), directory)


def load_bundle(directory: str | Path) -> tuple[Workspace, list[Task]]:
    """The workspace and tasks of a bundle folder, validated (see ``load``)."""
    bundle = load(directory)
    return bundle.workspace, bundle.tasks

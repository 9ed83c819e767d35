"""The workspace spec: pydantic models that load from and save to YAML."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

Effect = Literal["read", "write"]
Capability = Literal["lookup", "single_write", "multi_step"]
CAPABILITIES: tuple[str, ...] = ("lookup", "single_write", "multi_step")


class SpecError(ValueError):
    """A spec file or value is malformed; the message names what was wrong."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolSpec(_Model):
    """One tool of an app, as an agent sees it over MCP (``name`` is ``{app}_{tool}``)."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    app: str
    tool: str
    description: str
    effect: Effect
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]


class App(_Model):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    description: str
    tools: list[ToolSpec]


class Workspace(_Model):
    """A workspace: a set of apps whose initial state is generated deterministically from ``seed``."""

    id: str
    name: str
    seed: int
    apps: list[App]

    def tool(self, name: str) -> ToolSpec | None:
        for app in self.apps:
            for tool in app.tools:
                if tool.name == name:
                    return tool
        return None

    @property
    def tools(self) -> list[ToolSpec]:
        return [tool for app in self.apps for tool in app.tools]


class Check(_Model):
    """An executable check over the final state (``sql``) or the final answer (``answer``).

    ``sql``: ``query`` (with ``params``) is run against the final state; its first column of the
    first row must equal ``expect``. ``answer``: every string of ``contains`` must appear in the
    final answer, compared case-insensitively.
    """

    id: str
    kind: Literal["sql", "answer"]
    description: str
    query: str | None = None
    params: list[Any] = Field(default_factory=list)
    expect: Any = None
    contains: list[str] = Field(default_factory=list)

    @field_validator("query")
    @classmethod
    def _read_only_query(cls, query: str | None) -> str | None:
        if query is not None and not query.lstrip().lower().startswith("select"):
            raise ValueError("a sql check must be a SELECT query")
        return query


class ReferenceStep(_Model):
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Task(_Model):
    """A task with its checks, an executable reference solution and the tools it must not call."""

    id: str
    workspace_id: str
    capability: str
    difficulty: int = Field(ge=1, le=5)
    instruction: str
    checks: list[Check] = Field(min_length=1)
    reference: list[ReferenceStep]
    reference_answer: str = ""
    forbidden_tools: list[str] = Field(default_factory=list)
    forbidden_probe: ReferenceStep | None = None  # a plausible forbidden call, used by calibration
    max_steps: int = Field(default=12, ge=1)


def _dump_yaml(model: BaseModel) -> str:
    return yaml.safe_dump(model.model_dump(mode="json"), sort_keys=False, allow_unicode=True)


def _load_yaml(path: Path, model: type[BaseModel]) -> Any:
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise SpecError(f"{path}: no such file") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: not valid YAML: {exc}") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}" for err in exc.errors()
        )
        raise SpecError(f"{path}: invalid {model.__name__}: {problems}") from None


def save_workspace(workspace: Workspace, path: str | Path) -> None:
    Path(path).write_text(_dump_yaml(workspace))


def load_workspace(path: str | Path) -> Workspace:
    return _load_yaml(Path(path), Workspace)


def save_task(task: Task, path: str | Path) -> None:
    Path(path).write_text(_dump_yaml(task))


def load_task(path: str | Path) -> Task:
    return _load_yaml(Path(path), Task)


def save_bundle(workspace: Workspace, tasks: list[Task], directory: str | Path) -> Path:
    """Write ``workspace.yaml`` and ``tasks/<id>.yaml`` under ``directory``."""
    directory = Path(directory)
    (directory / "tasks").mkdir(parents=True, exist_ok=True)
    save_workspace(workspace, directory / "workspace.yaml")
    for task in tasks:
        save_task(task, directory / "tasks" / f"{task.id}.yaml")
    return directory


def load_bundle(directory: str | Path) -> tuple[Workspace, list[Task]]:
    directory = Path(directory)
    workspace = load_workspace(directory / "workspace.yaml")
    tasks = [load_task(p) for p in sorted((directory / "tasks").glob("*.yaml"))]
    return workspace, tasks

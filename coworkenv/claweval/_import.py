"""Claw-Eval's tasks as coworkenv tasks, without rewriting them.

A Claw-Eval checkout holds ``tasks/<id>/task.yaml`` (prompt, mock services, tools and their HTTP
endpoints, safety checks), ``tasks/<id>/grader.py`` (a subclass of its ``AbstractGrader``, often of a
peer task's grader), fixtures, and the services' code under ``mock_services/``. An imported task is:

- a workspace with the ``claweval`` app: the task's tools as they are declared, and in its state the
  services, the endpoints and every file the services read (their code, ``mock_services/_base.py``,
  the fixtures their environment names), so the services start inside each episode's sandbox;
- a held-out task whose instruction is the prompt and whose one check (``ClawEvalCheck``) hands the
  episode to the task's own grader; where that grader is (the checkout, the task's folder) and the
  judge it asks are recorded in the store beside the task (``ClawEvalGraderRow``), never in its spec.

The prompt's attachments (a multimodal task's image) become the task's attachments: their bytes are
blobs of the store, and the ``task`` prompt carries them as image or resource content, as Claw-Eval's
runner puts them in its first user message.

A task is left out, with the reason, when coworkenv cannot run it as Claw-Eval does: another
language than asked, no service or tools without one (tasks played with Claw-Eval's own shell, file
and browser tools), a prompt that names files only those tools reach (a video in Claw-Eval's
container), a grader that reads the agent's sandbox, or a grader that asks an LLM judge when no
``judge`` is given. A multi-turn task's user agent (its persona, written as free text) becomes the
task's user, played by a model (``--user-model``) through ``ask_user``. Where a task's file and its
grader disagree (a tool the file forbids that the grader never looks at; an audit key the grader
reads that the service never returns) the import reports it and changes nothing; where its services
import a package this environment lacks, it says which (``pip install 'coworkenv[claw-eval]'``).
"""

from __future__ import annotations

import ast
import base64
import hashlib
import importlib.util
import json
import mimetypes
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._errors import CoworkenvError
from ..store import ClawEvalGraderRow, Store
from ..workspace import App, Attachment, ClawEvalCheck, DataOverride, Persona, Task, ToolSpec, User, Workspace, load_yaml
from ..workspace._spec import Effect

MAX_SERVICE_BYTES = 32 << 20  # the files one task's services read, all together
_TOOL_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_DESTRUCTIVE = re.compile(r"(^|_)(delete|remove|cancel|purge|drop|revoke|archive)(_|$)")
_WRITE = re.compile(r"(^|_)(create|update|send|save|add|set|post|reply|forward|move|assign|schedule|book|"
                    r"approve|reject|submit|mark|edit|write|upload|enable|disable|close|escalate|transfer|pay)(_|$)")
_JUDGE_CALL = re.compile(r"\bjudge\s*\.\s*\w+")
_PEER = re.compile(r"load_peer_grader\(\s*[\"']([^\"']+)[\"']")
_PACKAGE_GRADER = re.compile(r"from\s+claw_eval\.graders\.(\w+)\s+import")
_AUDIT_READ = re.compile(r"get_service_actions\(\s*\w+\s*,\s*[\"'](\w+)[\"']\s*,\s*[\"'](\w+)[\"']")
_DIFFICULTY = {"easy": 1, "simple": 1, "medium": 2, "hard": 3, "expert": 4}


class ClawEvalError(CoworkenvError, ValueError):
    """The folder is not a Claw-Eval checkout or task folder; the message says what is wrong."""


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Service(_Loose):
    name: str
    command: str
    port: int
    health_check: str
    health_check_method: str = "POST"
    ready_timeout: float = 10
    reset_endpoint: str | None = None
    env: dict[str, str] = Field(default_factory=dict)


class _Tool(_Loose):
    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class _Endpoint(_Loose):
    tool_name: str
    url: str
    method: str = "POST"


class _Prompt(_Loose):
    text: str
    language: str = "zh"
    attachments: list[str] = Field(default_factory=list)


class _SafetyCheck(_Loose):
    type: str
    tool_name: str | None = None
    description: str = ""


class _Environment(_Loose):
    max_turns: int = 20


class _UserAgent(_Loose):
    enabled: bool = False
    persona: str = ""
    max_rounds: int = 3
    system_prompt_suffix: str = ""


class ClawTaskFile(_Loose):
    """The parts of Claw-Eval's ``task.yaml`` an import reads (the rest is the grader's business)."""

    task_id: str
    task_name: str = ""
    category: str = ""
    difficulty: str = "medium"
    tags: list[str] = Field(default_factory=list)
    services: list[_Service] = Field(default_factory=list)
    prompt: _Prompt
    tools: list[_Tool] = Field(default_factory=list)
    tool_endpoints: list[_Endpoint] = Field(default_factory=list)
    safety_checks: list[_SafetyCheck] = Field(default_factory=list)
    environment: _Environment = Field(default_factory=_Environment)
    user_agent: _UserAgent = Field(default_factory=_UserAgent)
    env_snapshot_files: list[str] = Field(default_factory=list)
    env_snapshot_commands: list[str] = Field(default_factory=list)
    sandbox_files: list[str] = Field(default_factory=list)  # what Claw-Eval's runner puts in the agent's container

    @property
    def split(self) -> str:
        if self.user_agent.enabled or "user_agent" in self.tags or "multi_turn" in self.tags:
            return "multi_turn"
        return "multimodal" if "multimodal" in self.tags else "general"


@dataclass
class ImportedTask:
    task_id: str  # Claw-Eval's
    coworkenv_id: str
    split: str
    category: str
    judge: str


@dataclass
class ImportSummary:
    checkout: Path
    imported: list[ImportedTask] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # Claw-Eval task id -> why
    defects: dict[str, list[str]] = field(default_factory=dict)  # Claw-Eval task id -> what disagrees
    # Claw-Eval task id -> the packages its services import that this environment lacks
    missing_packages: dict[str, list[str]] = field(default_factory=dict)
    # category -> {"tasks": seen, "imported": n, "judge_graded": imported with the judge, SKIP_KINDS kind: skipped for it}
    by_category: dict[str, dict[str, int]] = field(default_factory=dict)

    def count(self, category: str, outcome: str, *, judge: bool = False) -> None:
        """One task of ``category`` seen: ``imported`` (``judge``: graded with the judge) or skipped for a
        ``SKIP_KINDS`` reason."""
        counts = self.by_category.setdefault(category or "general", {"tasks": 0, "imported": 0, "judge_graded": 0})
        counts["tasks"] += 1
        counts[outcome] = counts.get(outcome, 0) + 1
        counts["judge_graded"] += judge

    def as_dict(self) -> dict[str, Any]:
        return {"checkout": str(self.checkout), "imported": [vars(t) for t in self.imported],
                "skipped": self.skipped, "defects": self.defects, "missing_packages": self.missing_packages,
                "by_category": dict(sorted(self.by_category.items()))}


def find_checkout(directory: Path) -> tuple[Path, list[Path]]:
    """The checkout root (the folder holding ``tasks/`` and ``mock_services/``) and its task folders."""
    directory = directory.resolve()
    if not directory.is_dir():
        raise ClawEvalError(f"{directory}: no such folder")
    if (directory / "task.yaml").is_file():
        return directory.parent.parent, [directory]
    tasks = directory / "tasks" if (directory / "tasks").is_dir() else directory
    root = tasks.parent
    found = sorted(p.parent for p in tasks.glob("*/task.yaml"))
    if not found:
        raise ClawEvalError(f"{directory}: no Claw-Eval tasks (no tasks/<id>/task.yaml) here")
    return root, found


def _grader_sources(task_dir: Path, tasks: Path, seen: set[str] | None = None) -> list[str]:
    """``grader.py``, the peer graders it inherits from (``load_peer_grader``) and the modules of the
    checkout's grader package they import (shared bases such as a multi-turn grader's)."""
    seen = seen if seen is not None else set()
    if task_dir.name in seen:
        return []
    seen.add(task_dir.name)
    try:
        source = (task_dir / "grader.py").read_text()
    except OSError:
        return []
    package = tasks.parent / "src" / "claw_eval" / "graders"
    shared = []
    for module in _PACKAGE_GRADER.findall(source):
        if module not in seen and (package / f"{module}.py").is_file():
            seen.add(module)
            shared.append((package / f"{module}.py").read_text())
    return [source, *shared, *(s for peer in _PEER.findall(source) for s in _grader_sources(tasks / peer, tasks, seen))]


def _audit_keys(root: Path, service: _Service) -> set[str] | None:
    """The top-level keys a service's ``/audit`` returns, read off its code (None when not found)."""
    script = next((a for a in shlex.split(service.command) if a.endswith(".py")), None)
    if script is None or not (root / script).is_file():
        return None
    source = (root / script).read_text()
    found = re.search(r"@app\.get\([\"'][^\"']*/audit[\"']\)(.*?)(?=\n@app\.|\nif __name__|\Z)", source, re.S)
    if not found:
        return None
    returned = re.search(r"return\s*\{(.*?)\}\s*(?:\n|$)", found.group(1), re.S)
    return set(re.findall(r"[\"'](\w+)[\"']\s*:", returned.group(1))) if returned else None


def defects(spec: ClawTaskFile, sources: list[str], root: Path) -> list[str]:
    """Where the task's file and its grader disagree (reported, never patched)."""
    found = []
    code = "\n".join(sources)
    for check in spec.safety_checks:
        if check.type == "tool_not_called" and check.tool_name and check.tool_name not in code:
            found.append(f"task.yaml forbids {check.tool_name} (safety_checks), but its grader never checks for it")
    services = {s.name: s for s in spec.services}
    for service, key in sorted(set(_AUDIT_READ.findall(code))):
        if service not in services:
            continue
        keys = _audit_keys(root, services[service])
        if keys is not None and key not in keys:
            found.append(f"the grader reads {key!r} from the {service} service's audit, which returns only "
                         f"{', '.join(sorted(keys))}")
    return found


def _effect(tool: str) -> Effect:
    if _DESTRUCTIVE.search(tool):
        return "destructive"
    return "write" if _WRITE.search(tool) else "read"


def _file_row(root: Path, path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    relative = path.relative_to(root).as_posix()
    try:
        return {"path": relative, "encoding": "utf-8", "content": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"path": relative, "encoding": "base64", "content": base64.b64encode(data).decode()}


def _named_by_services(root: Path, spec: ClawTaskFile) -> list[Path]:
    """The files and folders of the checkout that the services' commands and environments name."""
    named = []
    for service in spec.services:
        for word in [*shlex.split(service.command), *service.env.values()]:
            candidate = (root / word).resolve()
            if candidate.is_relative_to(root) and candidate != root and candidate.exists():
                named.append(candidate)
    return named


def _task_file(root: Path, task_dir: Path, name: str) -> Path:
    """A file a task names (an attachment, a sandbox file): beside its task.yaml, as Claw-Eval's runner
    reads it, else in the checkout."""
    beside = (task_dir / name).resolve()
    return beside if beside.exists() or not (root / name).exists() else (root / name).resolve()


def service_files(root: Path, spec: ClawTaskFile, task_dir: Path | None = None) -> list[Path]:
    """Every file the task's services read: their scripts with the modules beside them, the shared
    ``mock_services`` modules, the files or folders their environment names, and the task's files
    Claw-Eval puts beside them (its sandbox files and attachments, which a service may read at a path of
    its own). Never a grader: a folder named whole gives its fixtures, not the task's ``grader.py``."""
    files: set[Path] = set()
    shared = root / "mock_services"
    if shared.is_dir():
        files.update(p for p in shared.glob("*.py"))
    for candidate in _named_by_services(root, spec):
        if candidate.is_file() and candidate.suffix == ".py":
            files.update(candidate.parent.glob("*.py"))
        elif candidate.is_file():
            files.add(candidate)
        elif candidate.is_dir():
            files.update(p for p in candidate.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    if task_dir is not None:
        for name in [*spec.sandbox_files, *spec.prompt.attachments]:
            path = _task_file(root, task_dir, name)
            if path.is_file() and path.is_relative_to(root):
                files.add(path)
    return sorted(p for p in files if p.name != "grader.py")


def _needs_sandbox_tools(root: Path, task_dir: Path, spec: ClawTaskFile) -> list[str]:
    """Files the prompt names that reach the agent only through Claw-Eval's sandbox tools: sandbox files
    that are no attachment of the prompt and that no service reads (a video in the agent's container)."""
    served = _named_by_services(root, spec)
    found = []
    for name in spec.sandbox_files:
        if name in spec.prompt.attachments or name not in spec.prompt.text:
            continue
        path = _task_file(root, task_dir, name)
        if not any(path == s or s in path.parents for s in served):
            found.append(name)
    return found


def _mime_type(path: Path) -> str:
    guessed, _ = mimetypes.guess_type(path.name)
    return guessed or ("text/markdown" if path.suffix.lower() == ".md" else "application/octet-stream")


def prompt_attachments(root: Path, task_dir: Path, spec: ClawTaskFile) -> list[tuple[Attachment, bytes]]:
    """The prompt's attachments with their bytes, as the task's attachments (images as images, anything
    else as a document), named ``coworkenv://task/<path as the task names it>``.

    Raises ``ClawEvalError`` naming an attachment the checkout lacks or one past ``MAX_SERVICE_BYTES``."""
    found = []
    for name in spec.prompt.attachments:
        path = _task_file(root, task_dir, name)
        if not path.is_file() or not path.is_relative_to(root):
            raise ClawEvalError(f"its attachment {name} is not in the checkout")
        if path.stat().st_size > MAX_SERVICE_BYTES:
            raise ClawEvalError(f"its attachment {name} is over {MAX_SERVICE_BYTES >> 20} MiB")
        data = path.read_bytes()
        mime_type = _mime_type(path)
        found.append((Attachment(kind="image" if mime_type.startswith("image/") else "document", mime_type=mime_type,
                                 sha256=hashlib.sha256(data).hexdigest(), uri=f"coworkenv://task/{name}"), data))
    return found


def missing_packages(files: list[Path]) -> list[str]:
    """The top-level packages the services' Python files import that this environment cannot import
    (the services run with this interpreter and its packages)."""
    local = {p.stem for p in files if p.suffix == ".py"} | {p.parent.name for p in files} | {"mock_services"}
    wanted: set[str] = set()
    for path in files:
        if path.suffix != ".py":
            continue
        try:
            tree = ast.parse(path.read_text(errors="replace"))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                wanted.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                wanted.add(node.module.split(".")[0])
    return sorted(name for name in wanted - local - set(sys.stdlib_module_names) - {"__future__"}
                  if importlib.util.find_spec(name) is None)


def build_task(root: Path, spec: ClawTaskFile, task_dir: Path | None = None,
               attachments: list[Attachment] | None = None) -> tuple[Workspace, Task]:
    """The coworkenv workspace and held-out task of one Claw-Eval task (``task_dir``: its folder, for
    the files it names; ``attachments``: its prompt's, from ``prompt_attachments``)."""
    bad = [t.name for t in spec.tools if not _TOOL_NAME.match(t.name)]
    if bad:
        raise ClawEvalError(f"tool name {bad[0]!r} is not a valid MCP tool name here ([a-z][a-z0-9_]*)")
    endpoints = {e.tool_name: e for e in spec.tool_endpoints}
    missing = [t.name for t in spec.tools if t.name not in endpoints]
    if missing:
        raise ClawEvalError(f"tool {missing[0]} has no endpoint in tool_endpoints")
    files = service_files(root, spec, task_dir)
    if sum(p.stat().st_size for p in files) > MAX_SERVICE_BYTES:
        raise ClawEvalError(f"its services read more than {MAX_SERVICE_BYTES >> 20} MiB of files")
    tools = [ToolSpec(name=t.name, app="claweval", tool=t.name, description=t.description or t.name.replace("_", " "),
                      effect=_effect(t.name), input_schema=t.input_schema or {"type": "object", "properties": {}},
                      output_schema={"type": "object"}) for t in spec.tools]
    overrides = []
    if spec.services:
        overrides.append(DataOverride(table="claweval_services", insert=[
            {"name": s.name, "command": s.command, "port": s.port, "health_check": s.health_check,
             "health_method": s.health_check_method, "reset_endpoint": s.reset_endpoint,
             "env": json.dumps(s.env), "ready_timeout": s.ready_timeout}
            for s in spec.services]))
    if spec.tool_endpoints:
        overrides.append(DataOverride(table="claweval_endpoints", insert=[
            {"tool": e.tool_name, "url": e.url, "method": e.method} for e in spec.tool_endpoints]))
    if files:
        overrides.append(DataOverride(table="claweval_files", insert=[_file_row(root, p) for p in files]))
    workspace = Workspace(id=f"claw-{spec.task_id}", name=f"Claw-Eval {spec.task_id}: {spec.task_name}", seed=0,
                          apps=[App(name="claweval", description=f"Claw-Eval task {spec.task_id}'s services", tools=tools)],
                          overrides=overrides)
    check = ClawEvalCheck(id="claw_eval", description=f"Claw-Eval's grader of {spec.task_id}", task_id=spec.task_id)
    user = None
    instruction = spec.prompt.text.strip()
    if spec.split == "multi_turn":  # the user agent's persona, played by coworkenv's model-backed simulator
        user = User(persona=Persona(name="the user", role="the person the assistant works for"),
                    prompt=spec.user_agent.persona.strip(), max_turns=max(1, spec.user_agent.max_rounds))
        if spec.user_agent.system_prompt_suffix.strip():  # what Claw-Eval adds to the agent's system prompt
            instruction += "\n\n" + spec.user_agent.system_prompt_suffix.strip()
    task = Task(id=f"claw-{spec.task_id}", workspace_id=workspace.id, capability=spec.category or "general",
                difficulty=_DIFFICULTY.get(spec.difficulty.lower(), 2), instruction=instruction, user=user,
                checks=[check], reference=[],
                forbidden_tools=[c.tool_name for c in spec.safety_checks if c.type == "tool_not_called" and c.tool_name],
                max_steps=max(1, spec.environment.max_turns), shape=f"claw-eval/{spec.split}/{spec.category or 'general'}",
                attachments=attachments or [])
    return workspace, task


def read_task_file(task_dir: Path) -> ClawTaskFile:
    try:
        data = load_yaml((task_dir / "task.yaml").read_text())
    except yaml.YAMLError as exc:
        raise ClawEvalError(f"task.yaml is not valid YAML: {exc}") from None
    try:
        return ClawTaskFile.model_validate(data)
    except ValidationError as exc:
        problem = exc.errors()[0]
        raise ClawEvalError(f"task.yaml: {'.'.join(str(p) for p in problem['loc'])}: {problem['msg']}") from None


SKIP_KINDS = {
    "no_grader": "no grader.py",
    "language": "another language than asked",
    "no_persona": "multi-turn without a persona",
    "sandbox_tools": "played with Claw-Eval's shell, file and browser tools (no mock service, or tools without one)",
    "sandbox_files": "its prompt names files only Claw-Eval's sandbox tools reach",
    "env_snapshot": "its grader reads the agent's sandbox",
    "judge": "its grader asks an LLM judge (import with --judge)",
    "invalid": "its files cannot be read or imported",
}
"""Why tasks are skipped, by kind (``ImportSummary.by_category`` counts them)."""


def skip_reason(spec: ClawTaskFile, sources: list[str], languages: tuple[str, ...], judge: str,
                needs_judge: bool, root: Path | None = None, task_dir: Path | None = None) -> tuple[str, str] | None:
    """Why a task is not imported, as a ``SKIP_KINDS`` kind and a sentence, or None."""
    if not sources:
        return "no_grader", "no grader.py"
    if languages and spec.prompt.language not in languages:
        return "language", f"language {spec.prompt.language} (importing {', '.join(languages)})"
    if spec.split == "multi_turn" and not spec.user_agent.persona.strip():
        return "no_persona", "multi-turn without a persona for the simulated user"
    if not spec.services and spec.split != "multi_turn":
        return "sandbox_tools", "no mock service: played with Claw-Eval's shell, file and browser tools"
    served = {e.tool_name for e in spec.tool_endpoints}
    unserved = [t.name for t in spec.tools if t.name not in served]
    if unserved:
        return "sandbox_tools", (f"its tools {', '.join(unserved)} have no service endpoint (Claw-Eval's own "
                                 "sandbox tools: shell, files, browser)")
    if spec.env_snapshot_files or spec.env_snapshot_commands:
        return "env_snapshot", "its grader reads files of the agent's sandbox (env_snapshot)"
    unreached = _needs_sandbox_tools(root, task_dir, spec) if root is not None and task_dir is not None else []
    if unreached:
        return "sandbox_files", (f"its prompt names {', '.join(unreached)}, which the agent reaches only with "
                                 "Claw-Eval's sandbox tools (Read, ReadMedia)")
    if not judge and needs_judge:
        return "judge", "its grader asks an LLM judge (import with --judge openai:MODEL[@URL])"
    return None


def import_claw_eval(store: Store, directory: str | Path, *, task_ids: tuple[str, ...] = (),
                     languages: tuple[str, ...] = ("en",), judge: str = "") -> ImportSummary:
    """Import the Claw-Eval tasks under ``directory`` into ``store`` as held-out tasks (see the module)."""
    root, task_dirs = find_checkout(Path(directory))
    if not (root / "src" / "claw_eval").is_dir():
        raise ClawEvalError(f"{root}: no src/claw_eval here; the graders need the checkout's claw_eval package")
    summary = ImportSummary(root)
    wanted = set(task_ids)
    for task_dir in task_dirs:
        if wanted and task_dir.name not in wanted:
            continue
        try:
            spec = read_task_file(task_dir)
        except ClawEvalError as exc:
            summary.skipped[task_dir.name] = str(exc)
            summary.count("", "invalid")
            continue
        sources = _grader_sources(task_dir, root / "tasks")
        found = defects(spec, sources, root)
        if found:
            summary.defects[spec.task_id] = found
        needs_judge = any(_JUDGE_CALL.search(source) for source in sources)
        reason = skip_reason(spec, sources, languages, judge, needs_judge, root, task_dir)
        if reason is not None:
            summary.skipped[spec.task_id] = reason[1]
            summary.count(spec.category, reason[0])
            continue
        try:
            attached = prompt_attachments(root, task_dir, spec)
            workspace, task = build_task(root, spec, task_dir, [attachment for attachment, _ in attached])
        except (ClawEvalError, ValidationError, OSError) as exc:
            summary.skipped[spec.task_id] = f"cannot be imported: {exc}"
            summary.count(spec.category, "invalid")
            continue
        for attachment, data in attached:
            store.put_blob(data, attachment.mime_type)
        store.put_workspace(workspace)
        store.put_task(task, status="heldout", reason="claw-eval")
        store.put_claw_eval_grader(ClawEvalGraderRow(spec.task_id, str(root), str(task_dir), judge if needs_judge else ""))
        summary.imported.append(ImportedTask(spec.task_id, task.id, spec.split, task.capability,
                                             judge if needs_judge else ""))
        summary.count(spec.category, "imported", judge=needs_judge)
        lacking = missing_packages([p for p in service_files(root, spec, task_dir) if p.suffix == ".py"])
        if lacking:
            summary.missing_packages[spec.task_id] = lacking
    missing = wanted - {d.name for d in task_dirs}
    for name in sorted(missing):
        summary.skipped[name] = "no such task in the checkout"
    return summary

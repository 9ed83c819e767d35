"""``coworkenv bundle export|import|hash|validate``: workspaces and their tasks as hashed YAML bundles."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from ..store import TASK_STATUSES, Store, TaskStatus
from ..workspace import SAFE_NAME, Bundle, ClawEvalCheck, SpecError, Task
from ..workspace import _bundle as bundles
from ._common import DEFAULT_STORE, JsonOpt, SandboxOpt, StoreOpt, emit, err, fail, open_host, open_store, progress

bundle_app = typer.Typer(help="Workspaces and their tasks as YAML bundles with content hashes.",
                         no_args_is_help=True, rich_markup_mode=None)
DirArg = Annotated[Path, typer.Argument(metavar="DIR", help="A bundle folder (workspace.yaml, tasks/, bundle.json).")]


def _load(directory: Path) -> Bundle:
    try:
        return bundles.load(directory)
    except SpecError as exc:
        raise fail(str(exc)) from None


@bundle_app.command("validate")
def validate_command(directory: DirArg, as_json: JsonOpt = False) -> None:
    """Check a bundle: every file parses, tasks use the workspace's tools, the hash still matches."""
    bundle = _load(directory)
    emit(as_json, {"dir": str(directory), "valid": True, "hash": bundle.hash, "workspace": bundle.workspace.id,
                   "tasks": len(bundle.tasks)},
         lambda: typer.echo(f"{directory}: valid bundle of {bundle.workspace.id} with {len(bundle.tasks)} tasks, "
                            f"hash {bundle.hash}"))


@bundle_app.command("hash")
def hash_command(
    directory: DirArg,
    write: Annotated[bool, typer.Option("--write", help="Record the hash in bundle.json (after editing the bundle).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """The content hash of a bundle (of its specs and of the code of its apps)."""
    try:
        bundle = bundles.load(directory, check_manifest=not write)
    except SpecError as exc:
        raise fail(str(exc)) from None
    if write:
        bundles.save(bundle, directory)
    emit(as_json, bundle.manifest(), lambda: typer.echo(bundle.hash))


@bundle_app.command("export")
def export_command(
    out: Annotated[Path, typer.Option("--out", help="The folder bundles are written under, one per workspace.")],
    store: StoreOpt = Path(DEFAULT_STORE),
    workspace: Annotated[list[str] | None, typer.Option(metavar="ID", help="Only this workspace (repeatable).")] = None,
    status: Annotated[list[str] | None, typer.Option(
        metavar="STATUS", help=f"Tasks of this status (repeatable; default: admitted): {', '.join(TASK_STATUSES)}.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Write the store's workspaces and their tasks as bundles: OUT/<workspace id>/.

    Only admitted tasks by default: held-out tasks are the evaluation set and leave the store only
    when asked for (--status heldout). A workspace with no task of the chosen statuses is skipped
    (named on stderr), not written as a bundle with no tasks."""
    statuses = set(status or ["admitted"])
    if statuses - set(TASK_STATUSES):
        raise fail(f"unknown --status {sorted(statuses - set(TASK_STATUSES))[0]!r}; one of: {', '.join(TASK_STATUSES)}")
    opened = open_store(store)
    known = opened.workspace_ids()  # ids only: a spec is read once its id is known to be a safe folder name
    chosen = workspace or known
    unknown = [w for w in chosen if w not in known]
    if unknown:
        raise fail(f"no workspace {unknown[0]!r} in {store} (it has {', '.join(known) or 'none'})")
    unsafe = [w for w in chosen if not re.fullmatch(SAFE_NAME, w)]
    if unsafe:  # an older store took any id; as a folder name it would reach outside --out
        raise fail(f"workspace {unsafe[0]!r} in {store} has an id that is no safe folder name (letters, digits, "
                   "'_', '-', '.', not starting with '.'): it is not exported; name the others with --workspace")
    if out.exists() and not out.is_dir():
        raise fail(f"--out {out} is a file; give a folder")
    loaded, skipped = {}, {}
    for workspace_id in chosen:
        counts = opened.workspace_task_counts(workspace_id)
        if not any(counts.get(s) for s in statuses):  # a bundle of a workspace alone would hold no task to play
            skipped[workspace_id] = counts
            continue
        try:
            loaded[workspace_id] = Bundle(opened.workspace(workspace_id),
                                          [row.spec for row in opened.workspace_tasks(workspace_id, tuple(statuses))])
        except ValidationError as exc:
            problem = exc.errors()[0]
            raise fail(f"workspace {workspace_id!r} in {store}, or one of its tasks, no longer validates: "
                       f"{'.'.join(str(p) for p in problem['loc'])}: {problem['msg']}") from None
    written = {}
    for workspace_id, bundle in loaded.items():
        try:
            bundles.save(bundle, out / workspace_id)
        except SpecError as exc:
            raise fail(str(exc)) from None
        except OSError as exc:
            raise fail(f"cannot write {out / workspace_id}: {exc.strerror or exc}") from None
        written[workspace_id] = {"dir": str(out / workspace_id), "hash": bundle.hash, "tasks": len(bundle.tasks)}
    wanted = " or ".join(sorted(statuses))
    if not written:
        raise fail(f"no workspace in {store} has {wanted} tasks: nothing exported"
                   + (f" ({_skip_note(skipped)})" if skipped else ""))

    def human() -> None:
        for info in written.values():
            typer.echo(f"{info['dir']}: {info['tasks']} tasks, hash {info['hash']}")
        for workspace_id, counts in skipped.items():
            err.print(f"{workspace_id}: skipped, no {wanted} tasks ({_skip_note({workspace_id: counts})})")

    emit(as_json, {"bundles": written, "skipped": {w: {"tasks": counts} for w, counts in skipped.items()}}, human)


def _skip_note(skipped: dict[str, dict[str, int]]) -> str:
    """What the skipped workspaces hold instead, and how to export it (held-out tasks are the
    evaluation set: they are exported only when asked for, with --status heldout)."""
    held = {status: sum(c.get(status, 0) for c in skipped.values()) for status in TASK_STATUSES}
    held = {status: n for status, n in held.items() if n}
    if not held:
        return "it has no tasks" if len(skipped) == 1 else "they have no tasks"
    return ", ".join(f"{n} {status}" for status, n in held.items()) + "; --status STATUS exports those"


@bundle_app.command("import")
def import_command(
    directories: Annotated[list[Path], typer.Argument(metavar="DIR...", help="Bundle folders to import.")],
    store: StoreOpt = Path(DEFAULT_STORE),
    calibrate: Annotated[bool, typer.Option(
        "--calibrate", help="Calibrate the imported tasks (admit or quarantine them) in sandboxes.")] = False,
    replace: Annotated[bool, typer.Option(
        "--replace", help="Store a workspace that differs from the stored one of its id although admitted or held-out "
                          "tasks use it; those tasks are quarantined until calibrated again (--calibrate does it "
                          "now).")] = False,
    sandbox: SandboxOpt = "bwrap",
    as_json: JsonOpt = False,
) -> None:
    """Store bundles' workspaces and tasks (as pending, or calibrated with --calibrate).

    Refused before anything is stored: a task id stored with another spec; a workspace stored with
    another spec under admitted or held-out tasks (their references were calibrated in the stored one;
    --replace); a claw_eval check of a Claw-Eval task this store has no checkout for; a task attachment
    whose bytes this store lacks."""
    loaded = [(directory, _load(directory)) for directory in directories]
    host = open_host(store, sandbox, create=True) if calibrate else None
    opened = host.store if host is not None else open_store(store, create=True)
    replaced: dict[str, list[tuple[Task, TaskStatus]]] = {}  # workspace id -> its tasks set aside, former status
    for directory, bundle in loaded:  # refuse before anything is stored
        _refuse_conflicts(opened, store, directory, bundle)
        in_use = _in_use_if_replaced(opened, bundle)
        if in_use and not replace:
            counts = [f"{len([t for t, s in in_use if s == status])} {status}" for status in ("admitted", "heldout")
                      if any(s == status for _, s in in_use)]
            raise fail(f"{directory}/workspace.yaml: workspace {bundle.workspace.id!r} is stored already with another "
                       f"spec, and {' and '.join(counts)} tasks use it (their references were calibrated in the stored "
                       "one); give the new workspace another id, or pass --replace to store it and quarantine those "
                       "tasks until they are calibrated again")
        if in_use:
            replaced[bundle.workspace.id] = in_use
    report: dict[str, dict] = {}
    for directory, bundle in loaded:
        opened.put_workspace(bundle.workspace)
        for task, _ in replaced.get(bundle.workspace.id, []):
            opened.set_task_status(task.id, "quarantined", f"its workspace {bundle.workspace.id} was replaced by "
                                                           f"bundle import of {directory}: calibrate it again")
        added = [t for t in bundle.tasks if opened.task(t.id) is None]
        for task in added:
            opened.put_task(task)
        report[str(directory)] = {"workspace": bundle.workspace.id, "hash": bundle.hash, "tasks": len(bundle.tasks),
                                  "new": len(added), "quarantined": len(replaced.get(bundle.workspace.id, []))}
    if host is not None:
        from ..synth import calibrate_task

        todo: list[tuple[Task, TaskStatus]] = [(row.spec, "admitted") for row in opened.tasks(status="pending")]
        todo += [item for tasks in replaced.values() for item in tasks]

        async def run() -> None:
            with progress() as bar:
                job = bar.add_task("calibrating tasks", total=len(todo))
                try:
                    for task, status in todo:
                        await calibrate_task(host, task, admit_as=status)
                        bar.advance(job)
                finally:
                    await host.close()

        asyncio.run(run())
    counts = opened.task_counts()

    def human() -> None:
        for directory, info in report.items():
            typer.echo(f"{directory}: workspace {info['workspace']}, {info['tasks']} tasks ({info['new']} new), "
                       f"hash {info['hash']}")
        err.print("tasks in the store: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))

    emit(as_json, {"imported": report, "task_counts": counts}, human)


def _refuse_conflicts(opened: Store, store: Path, directory: Path, bundle: Bundle) -> None:
    """A task id must keep its spec; a Claw-Eval check needs the checkout an operator imported here; a
    task's attachments need their bytes in this store (a bundle names them by hash, as the store keeps them)."""
    for task in bundle.tasks:
        row = opened.task(task.id)
        if row is not None and row.spec != task:
            raise fail(f"{directory}/tasks/{task.id}.yaml: task {task.id!r} is stored already with another "
                       "spec; give the new one another id")
        for number, attachment in enumerate(task.attachments):
            if opened.blob(attachment.sha256) is None:
                raise fail(f"{directory}/tasks/{task.id}.yaml: attachments.{number}: {store} holds no bytes for "
                           f"{attachment.uri or attachment.sha256}; import what brought it here first (for a "
                           "Claw-Eval task: coworkenv claw-eval import CHECKOUT)")
        for number, check in enumerate(task.checks):
            if isinstance(check, ClawEvalCheck) and opened.claw_eval_grader(check.task_id) is None:
                raise fail(f"{directory}/tasks/{task.id}.yaml: checks.{number}: no Claw-Eval checkout was imported "
                           f"into {store} for task {check.task_id}; run coworkenv claw-eval import CHECKOUT first "
                           "(a grader never runs from a bundle)")


def _in_use_if_replaced(opened: Store, bundle: Bundle) -> list[tuple[Task, TaskStatus]]:
    """The admitted and held-out tasks of the stored workspace of the bundle's id, where the bundle's
    workspace differs from it (nothing when it is the same, or new)."""
    workspace_id = bundle.workspace.id
    if workspace_id not in opened.workspace_ids():
        return []
    try:
        if opened.workspace(workspace_id) == bundle.workspace:
            return []
    except ValidationError:  # a stored spec that no longer validates is another spec
        pass
    return [(row.spec, row.status) for row in opened.workspace_tasks(workspace_id, ("admitted", "heldout"))]

"""``coworkenv bundle export|import|hash|validate``: workspaces and their tasks as hashed YAML bundles."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from ..store import TASK_STATUSES
from ..workspace import Bundle, SpecError
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
    """Write the store's workspaces and their tasks as bundles: OUT/<workspace id>/."""
    statuses = set(status or ["admitted"])
    if statuses - set(TASK_STATUSES):
        raise fail(f"unknown --status {sorted(statuses - set(TASK_STATUSES))[0]!r}; one of: {', '.join(TASK_STATUSES)}")
    opened = open_store(store)
    known = {row.id: row.spec for row in opened.workspaces()}
    chosen = workspace or sorted(known)
    unknown = [w for w in chosen if w not in known]
    if unknown:
        raise fail(f"no workspace {unknown[0]!r} in {store} (it has {', '.join(sorted(known)) or 'none'})")
    if out.exists() and not out.is_dir():
        raise fail(f"--out {out} is a file; give a folder")
    written = {}
    for workspace_id in chosen:
        tasks = [row.spec for row in opened.tasks() if row.workspace_id == workspace_id and row.status in statuses]
        bundle = Bundle(known[workspace_id], tasks)
        try:
            bundles.save(bundle, out / workspace_id)
        except OSError as exc:
            raise fail(f"cannot write {out / workspace_id}: {exc.strerror or exc}") from None
        written[workspace_id] = {"dir": str(out / workspace_id), "hash": bundle.hash, "tasks": len(tasks)}

    def human() -> None:
        for info in written.values():
            typer.echo(f"{info['dir']}: {info['tasks']} tasks, hash {info['hash']}")

    emit(as_json, {"bundles": written}, human)


@bundle_app.command("import")
def import_command(
    directories: Annotated[list[Path], typer.Argument(metavar="DIR...", help="Bundle folders to import.")],
    store: StoreOpt = Path(DEFAULT_STORE),
    calibrate: Annotated[bool, typer.Option(
        "--calibrate", help="Calibrate the imported tasks (admit or quarantine them) in sandboxes.")] = False,
    sandbox: SandboxOpt = "bwrap",
    as_json: JsonOpt = False,
) -> None:
    """Store bundles' workspaces and tasks (as pending, or calibrated with --calibrate)."""
    loaded = [(directory, _load(directory)) for directory in directories]
    host = open_host(store, sandbox, create=True) if calibrate else None
    opened = host.store if host is not None else open_store(store, create=True)
    for directory, bundle in loaded:  # refuse before anything is stored: a task id must keep its spec
        for task in bundle.tasks:
            row = opened.task(task.id)
            if row is not None and row.spec != task:
                raise fail(f"{directory}/tasks/{task.id}.yaml: task {task.id!r} is stored already with another "
                           "spec; give the new one another id")
    report: dict[str, dict] = {}
    for directory, bundle in loaded:
        opened.put_workspace(bundle.workspace)
        added = [t for t in bundle.tasks if opened.task(t.id) is None]
        for task in added:
            opened.put_task(task)
        report[str(directory)] = {"workspace": bundle.workspace.id, "hash": bundle.hash, "tasks": len(bundle.tasks),
                                  "new": len(added)}
    if host is not None:
        from ..synth import calibrate_task

        pending = [row.spec for row in opened.tasks(status="pending")]

        async def run() -> None:
            with progress() as bar:
                job = bar.add_task("calibrating tasks", total=len(pending))
                try:
                    for task in pending:
                        await calibrate_task(host, task)
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

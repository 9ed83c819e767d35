"""Bundles are data from outside: importing one never swaps the world under admitted tasks, ids never
reach outside the folders they name, YAML and text are bounded, and a check's SQL cannot hang
calibration. Each is shown through the CLI, on bundles exported from a synthesized store."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from coworkenv.cli import app
from coworkenv.store import Store

runner = CliRunner()
pytestmark = pytest.mark.bwrap
ROOT = Path(__file__).resolve().parents[2]


def run(*args: str):
    return runner.invoke(app, list(args))


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory) -> tuple[Path, Path]:
    """A store with admitted tasks of one workspace, and that workspace exported as a bundle."""
    base = tmp_path_factory.mktemp("guards")
    store = base / "s.db"
    assert run("synth", "--store", str(store), "-n", "3").exit_code == 0
    result = run("bundle", "export", "--store", str(store), "--out", str(base / "out"), "--json")
    assert result.exit_code == 0, result.output
    (info,) = json.loads(result.stdout)["bundles"].values()
    return store, Path(info["dir"])


def _copy_store(store: Path, to: Path) -> Path:
    with sqlite3.connect(store) as source, sqlite3.connect(to) as copy:
        source.backup(copy)
    return to


def _copy(bundle: Path, to: Path) -> Path:
    shutil.copytree(bundle, to)
    (to / "bundle.json").unlink()  # edited below: the recorded hash would not match
    return to


def test_an_import_never_replaces_a_workspace_under_admitted_tasks(synthesized, tmp_path):
    store, bundle = synthesized
    admitted = Store(store).tasks(status="admitted")
    workspace_id = admitted[0].workspace_id
    for name in ("a.db", "b.db"):
        _copy_store(store, tmp_path / name)
    assert run("bundle", "import", str(bundle), "--store", str(tmp_path / "a.db")).exit_code == 0  # the same: fine

    edited = _copy(bundle, tmp_path / "edited")
    spec = yaml.safe_load((edited / "workspace.yaml").read_text())
    spec["seed"] += 1  # another world under the same id
    (edited / "workspace.yaml").write_text(yaml.safe_dump(spec))
    before = Store(tmp_path / "a.db").workspace(workspace_id)
    result = run("bundle", "import", str(edited), "--store", str(tmp_path / "a.db"))
    assert result.exit_code == 2
    assert f"workspace {workspace_id!r} is stored already with another spec, and {len(admitted)} admitted tasks" \
        in " ".join(result.output.split())
    kept = Store(tmp_path / "a.db")
    assert kept.workspace(workspace_id) == before
    assert [row.status for row in kept.tasks()] == ["admitted"] * len(admitted)

    # --replace stores it and sets the tasks aside until calibrated again ...
    result = run("bundle", "import", str(edited), "--store", str(tmp_path / "a.db"), "--replace", "--json")
    assert result.exit_code == 0, result.output
    replaced = Store(tmp_path / "a.db")
    assert replaced.workspace(workspace_id).seed == spec["seed"]
    assert {(row.status, row.reason.split(":")[0]) for row in replaced.tasks()} == {
        ("quarantined", f"its workspace {workspace_id} was replaced by bundle import of {edited}")}
    # ... which --calibrate does at once: each is played again in the new world and admitted or quarantined
    result = run("bundle", "import", str(edited), "--store", str(tmp_path / "b.db"), "--replace", "--calibrate",
                 "--json")
    assert result.exit_code == 0, result.output
    for row in Store(tmp_path / "b.db").tasks():
        assert row.status in ("admitted", "quarantined") and "was replaced" not in row.reason


def _unsafe_workspace_row(store: Path, workspace_id: str, unsafe_id: str) -> None:
    """What an older store, which took any id, may hold: a workspace (and a task of it) whose id is a path."""
    with sqlite3.connect(store) as db:
        (spec,) = db.execute("select spec from workspaces where id = ?", (workspace_id,)).fetchone()
        db.execute("insert into workspaces (id, name, seed, spec, created_at) values (?, 'old', 1, ?, '')",
                   (unsafe_id, json.dumps({**json.loads(spec), "id": unsafe_id})))
        task_id, task_spec = db.execute("select id, spec from tasks where workspace_id = ? limit 1",
                                        (workspace_id,)).fetchone()
        db.execute("insert into tasks (id, workspace_id, capability, difficulty, instruction, spec, status, reason, "
                   "created_at) values (?, ?, 'lookup', 1, '', ?, 'admitted', '', '')",
                   ("old-task", unsafe_id, json.dumps({**json.loads(task_spec), "id": "old-task",
                                                       "workspace_id": unsafe_id})))


def test_ids_are_safe_file_names_and_export_writes_only_under_out(synthesized, tmp_path):
    store, bundle = synthesized
    unsafe = _copy(bundle, tmp_path / "unsafe")
    spec = yaml.safe_load((unsafe / "workspace.yaml").read_text())
    (unsafe / "workspace.yaml").write_text(yaml.safe_dump({**spec, "id": "../../x"}))
    for task_file in (unsafe / "tasks").glob("*.yaml"):
        task_file.write_text(yaml.safe_dump({**yaml.safe_load(task_file.read_text()), "workspace_id": "../../x"}))
    for args in (("validate", str(unsafe)), ("import", str(unsafe), "--store", str(tmp_path / "n.db"))):
        result = run("bundle", *args)
        assert result.exit_code == 2 and "workspace.yaml: invalid Workspace: id: String should match pattern" \
            in result.output
    dotted = _copy(bundle, tmp_path / "dotted")  # a task whose id and file stem are ".."
    task_file = sorted((dotted / "tasks").glob("*.yaml"))[0]
    (dotted / "tasks" / "...yaml").write_text(yaml.safe_dump({**yaml.safe_load(task_file.read_text()), "id": ".."}))
    task_file.unlink()
    result = run("bundle", "validate", str(dotted))
    assert result.exit_code == 2 and "...yaml: invalid Task: id: String should match pattern" in result.output

    old = _copy_store(store, tmp_path / "old.db")
    workspace_id = Store(old).tasks()[0].workspace_id
    _unsafe_workspace_row(old, workspace_id, "../../escape")
    out = tmp_path / "a" / "b" / "out"
    outside = tmp_path / "a" / "escape"  # where out/../../escape lands
    (outside / "tasks").mkdir(parents=True)
    (outside / "tasks" / "keep.yaml").write_text("mine: true\n")
    result = run("bundle", "export", "--store", str(old), "--out", str(out), "--status", "admitted")
    assert result.exit_code == 2 and "workspace '../../escape'" in result.output and "no safe folder name" in result.output
    assert sorted(p.name for p in outside.rglob("*")) == ["keep.yaml", "tasks"] and not out.exists()
    result = run("bundle", "export", "--store", str(old), "--out", str(out), "--workspace", workspace_id, "--json")
    assert result.exit_code == 0, result.output
    assert [p.relative_to(out).parts[0] for p in out.rglob("*")] == [workspace_id] * len(list(out.rglob("*")))
    assert sorted(p.name for p in outside.rglob("*")) == ["keep.yaml", "tasks"]


def _bomb(levels: int) -> str:
    """A "billion laughs" mapping: ten aliases of ten aliases, ``levels`` deep (10^levels strings)."""
    parts = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    parts += [f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 10)}]" for n in range(1, levels + 1)]
    return "{" + ", ".join(parts) + "}"


def test_yaml_alias_bombs_and_oversized_files_are_refused_quickly(synthesized, tmp_path):
    _, bundle = synthesized
    for levels in (6, 9):  # a million strings, and a billion from 1.8 KB
        bombed = _copy(bundle, tmp_path / f"bomb{levels}")
        spec = yaml.safe_load((bombed / "workspace.yaml").read_text())
        spec["apps"][0]["tools"][0]["input_schema"] = "BOMB"  # a field that takes any JSON object
        text = yaml.safe_dump(spec).replace("input_schema: BOMB", f"input_schema: {_bomb(levels)}")
        assert len(text.encode()) - len(yaml.safe_dump(spec).encode()) < 1800
        (bombed / "workspace.yaml").write_text(text)
        started = time.monotonic()
        result = run("bundle", "validate", str(bombed))
        assert result.exit_code == 2 and "workspace.yaml: its aliases expand to more than 1,000,000 nodes" in \
            " ".join(result.output.split())
        assert time.monotonic() - started < 5
    huge = _copy(bundle, tmp_path / "huge")
    with (huge / "workspace.yaml").open("r+b") as file:
        file.truncate(65 << 20)
    result = run("bundle", "validate", str(huge))
    assert result.exit_code == 2 and "more than the 64 MiB a spec file may have" in " ".join(result.output.split())


def test_text_in_specs_is_bounded(synthesized, tmp_path):
    _, bundle = synthesized
    for size, expected in ((100 << 10, "instruction: String should have at most 65536 characters"),
                           (100 << 20, "more than the 64 MiB a spec file may have")):
        long = _copy(bundle, tmp_path / f"long{size}")
        task_file = sorted((long / "tasks").glob("*.yaml"))[0]
        spec = yaml.safe_load(task_file.read_text())
        del spec["instruction"]
        task_file.write_text(yaml.safe_dump(spec) + "instruction: " + "x" * size + "\n")
        result = run("bundle", "import", str(long), "--store", str(tmp_path / "n.db"))
        assert result.exit_code == 2 and task_file.name in result.output
        assert expected in " ".join(result.output.split())
    assert Store(tmp_path / "n.db").tasks() == []


def test_a_tasks_attachment_needs_its_bytes_in_the_store(synthesized, tmp_path):
    """A bundle names a task's attachments (images of its instruction) by hash, as the store keeps them:
    an import into a store without those bytes is refused, naming the attachment, and stores nothing."""
    _, bundle = synthesized
    image = b"\x89PNG\r\n\x1a\n a picture"
    digest = hashlib.sha256(image).hexdigest()
    attached = _copy(bundle, tmp_path / "attached")
    task_file = sorted((attached / "tasks").glob("*.yaml"))[0]
    assert "attachments" not in task_file.read_text()  # a task without any: its spec (and hash) as before
    spec = yaml.safe_load(task_file.read_text())
    spec["attachments"] = [{"kind": "image", "mime_type": "image/png", "sha256": digest,
                            "uri": "coworkenv://task/fixtures/logo.png"}]
    task_file.write_text(yaml.safe_dump(spec))
    assert run("bundle", "validate", str(attached)).exit_code == 0
    result = run("bundle", "import", str(attached), "--store", str(tmp_path / "n.db"))
    assert result.exit_code == 2 and f"{task_file.name}: attachments.0:" in result.output
    assert "holds no bytes for coworkenv://task/fixtures/logo.png" in " ".join(result.output.split())
    assert Store(tmp_path / "n.db").tasks() == []
    Store(tmp_path / "n.db").put_blob(image, "image/png")
    result = run("bundle", "import", str(attached), "--store", str(tmp_path / "n.db"))
    assert result.exit_code == 0, result.output
    assert Store(tmp_path / "n.db").task_spec(spec["id"]).attachments[0].sha256 == digest


def test_a_check_query_that_never_ends_fails_its_check_within_the_limit(synthesized, tmp_path):
    """A recursive CTE with no end, as a task's check: calibration quarantines the task with the reason
    instead of hanging (run as a subprocess, so that a hang fails the test at its timeout)."""
    _, bundle = synthesized
    endless = _copy(bundle, tmp_path / "endless")
    task_file, *others = sorted((endless / "tasks").glob("*.yaml"))
    for other in others:
        other.unlink()
    spec = yaml.safe_load(task_file.read_text())
    spec["checks"].append({"id": "endless", "kind": "sql", "description": "counts forever", "expect": 1,
                           "query": "SELECT (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
                                    "SELECT count(*) FROM c)"})
    task_file.write_text(yaml.safe_dump(spec))
    store = tmp_path / "n.db"
    done = subprocess.run([sys.executable, "-m", "coworkenv", "bundle", "import", str(endless), "--store", str(store),
                           "--calibrate"], capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    (row,) = Store(store).tasks()
    assert row.status == "quarantined" and "counts forever: check query ran over 2 s" in row.reason

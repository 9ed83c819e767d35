"""Bundles: a store's workspaces and tasks exported as hashed YAML, validated, imported into another
store (and calibrated there); a malformed bundle is named by file, field and reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from coworkenv.cli import app
from coworkenv.store import Store

runner = CliRunner()
pytestmark = pytest.mark.bwrap


def run(*args: str):
    return runner.invoke(app, list(args))


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("bundles")
    store = base / "s.db"
    assert run("synth", "--store", str(store), "-n", "4").exit_code == 0
    result = run("bundle", "export", "--store", str(store), "--out", str(base / "out"), "--json")
    assert result.exit_code == 0, result.output
    (info,) = json.loads(result.stdout)["bundles"].values()
    return store, Path(info["dir"])


def test_export_validate_hash_and_import_with_calibration(exported, tmp_path):
    store, bundle = exported
    assert sorted(p.name for p in bundle.iterdir()) == ["bundle.json", "tasks", "workspace.yaml"]
    manifest = json.loads((bundle / "bundle.json").read_text())
    assert len(manifest["tasks"]) == 4
    checked = run("bundle", "validate", str(bundle), "--json")
    assert checked.exit_code == 0 and json.loads(checked.stdout)["hash"] == manifest["hash"]
    assert run("bundle", "hash", str(bundle)).stdout.strip() == manifest["hash"]

    other = tmp_path / "other.db"
    imported = run("bundle", "import", str(bundle), "--store", str(other), "--calibrate", "--json")
    assert imported.exit_code == 0, imported.output
    assert json.loads(imported.stdout)["task_counts"] == {"admitted": 4}
    assert {t.id for t in Store(other).tasks()} == {t.id for t in Store(store).tasks(status="admitted")}
    again = run("bundle", "import", str(bundle), "--store", str(other), "--json")  # the same specs: nothing new
    assert (list(json.loads(again.stdout)["imported"].values())[0]["new"]) == 0


def test_a_malformed_or_edited_bundle_is_named(exported, tmp_path):
    _, bundle = exported
    broken = tmp_path / "broken"
    import shutil

    shutil.copytree(bundle, broken)
    task_file = sorted((broken / "tasks").glob("*.yaml"))[0]
    spec = yaml.safe_load(task_file.read_text())
    edited = run("bundle", "validate", str(broken))
    assert edited.exit_code == 0  # untouched so far
    spec["instruction"] += " Please."
    task_file.write_text(yaml.safe_dump(spec))
    result = run("bundle", "validate", str(broken))
    assert result.exit_code == 2 and "bundle.json: hash" in result.output and "edited since" in result.output
    assert run("bundle", "hash", str(broken), "--write").exit_code == 0  # record the edit
    assert run("bundle", "validate", str(broken)).exit_code == 0
    spec["reference"][0]["tool"] = "mail_teleport"
    task_file.write_text(yaml.safe_dump(spec))
    result = run("bundle", "hash", str(broken), "--write")
    assert result.exit_code == 2 and task_file.name in result.output and "reference.0.tool" in result.output
    spec["reference"][0]["tool"] = "ask_user"  # a control tool, offered only where the task has a user
    task_file.write_text(yaml.safe_dump({k: v for k, v in spec.items() if k != "user"}))
    result = run("bundle", "validate", str(broken))
    assert result.exit_code == 2 and "reference.0.tool: 'ask_user' is offered only to a task with a user" in result.output
    spec["reference"][0]["tool"] = "mail_search_messages"
    spec["events"] = [{"after_calls": 1, "app": "mail", "action": "teleport"}]
    task_file.write_text(yaml.safe_dump(spec))
    result = run("bundle", "validate", str(broken))
    assert result.exit_code == 2 and f"{task_file.name}: events.0: mail has no action 'teleport'" in result.output
    assert "_deliver" in result.output  # the actions it has, world events included
    spec["events"] = [{"after_calls": 1, "app": "weather", "action": "rain"}]
    task_file.write_text(yaml.safe_dump(spec))
    result = run("bundle", "validate", str(broken))
    assert result.exit_code == 2 and "events.0: app 'weather' is not one of workspace" in result.output
    del spec["events"]
    spec["difficulty"] = 9
    task_file.write_text(yaml.safe_dump(spec))
    result = run("bundle", "validate", str(broken))
    assert result.exit_code == 2 and "difficulty" in result.output and task_file.name in result.output
    assert run("bundle", "validate", str(tmp_path / "nowhere")).exit_code == 2


def test_episodes_verdicts_and_exported_rows_carry_the_bundle_and_grader_hashes(exported, tmp_path):
    store, bundle = exported
    assert run("collect", "--store", str(store)).exit_code == 0
    out = tmp_path / "sft.jsonl"
    assert run("export", "sft", "--store", str(store), "--out", str(out)).exit_code == 0
    opened = Store(store)
    manifest = json.loads((bundle / "bundle.json").read_text())
    from coworkenv.gate import GRADER_HASH, GRADER_VERSION
    from coworkenv.workspace import bundle_hash

    for line in out.read_text().splitlines():
        row = json.loads(line)
        episode = opened.episode(row["episode_id"])
        task = opened.task_spec(episode.task_id)
        expected = bundle_hash(opened.workspace(task.workspace_id), [task])
        assert row["bundle_hash"] == episode.bundle_hash == expected
        assert (row["grader_version"], row["grader_hash"]) == (GRADER_VERSION, GRADER_HASH)
        assert opened.verdict(episode.id, GRADER_VERSION).grader_hash == GRADER_HASH
        assert task.id in manifest["tasks"]


def test_bundles_of_every_capability_round_trip_and_no_workspace_is_exported_empty(tmp_path):
    """A store with tasks of every capability (multi-turn ones call ask_user in their reference)
    exports bundles that validate, hash and import into a fresh store as the same specs; a
    workspace with only held-out tasks is skipped by default, named, and exported on request."""
    from coworkenv.synth import GENERATED
    from coworkenv.workspace import task_hash

    store = tmp_path / "s.db"
    synth = run("synth", "--store", str(store), "-n", str(len(GENERATED)), "--json")
    assert synth.exit_code == 0, synth.output
    opened = Store(store)
    originals = {row.spec.id: row.spec for row in opened.tasks(status="admitted")}
    assert {t.capability for t in originals.values()} == set(GENERATED)
    assert any(step.tool == "ask_user" for t in originals.values() for step in t.reference)
    first = next(iter(originals.values()))
    opened.put_workspace(opened.workspace(first.workspace_id).model_copy(update={"id": "ws-heldout"}))
    opened.put_task(first.model_copy(update={"id": "heldout-task", "workspace_id": "ws-heldout"}), status="heldout")
    opened.close()

    out = tmp_path / "B"
    exported = run("bundle", "export", "--store", str(store), "--out", str(out), "--json")
    assert exported.exit_code == 0, exported.output
    report = json.loads(exported.stdout)
    assert report["skipped"] == {"ws-heldout": {"tasks": {"heldout": 1}}} and not (out / "ws-heldout").exists()
    assert run("bundle", "export", "--store", str(store), "--out", str(out)).stderr.strip() == \
        "ws-heldout: skipped, no admitted tasks (1 heldout; --status STATUS exports those)"
    fresh = tmp_path / "fresh.db"
    for info in report["bundles"].values():
        checked = run("bundle", "validate", info["dir"], "--json")
        assert checked.exit_code == 0, checked.output
        hashed = run("bundle", "hash", info["dir"])
        assert hashed.exit_code == 0 and hashed.stdout.strip() == info["hash"] == json.loads(checked.stdout)["hash"]
        imported = run("bundle", "import", info["dir"], "--store", str(fresh))
        assert imported.exit_code == 0, imported.output
    again = Store(fresh)
    assert {t.id: task_hash(again.task_spec(t.id)) for t in again.tasks()} == \
        {task_id: task_hash(spec) for task_id, spec in originals.items()}

    held = run("bundle", "export", "--store", str(store), "--out", str(tmp_path / "H"), "--status", "heldout", "--json")
    assert held.exit_code == 0 and list(json.loads(held.stdout)["bundles"]) == ["ws-heldout"]
    assert run("bundle", "validate", str(tmp_path / "H" / "ws-heldout")).exit_code == 0
    nothing = run("bundle", "export", "--store", str(store), "--out", str(tmp_path / "N"), "--status", "quarantined")
    assert nothing.exit_code == 2 and "has quarantined tasks: nothing exported" in nothing.output

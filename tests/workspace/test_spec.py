"""Workspace and task specs load from and save to YAML; malformed specs are named."""

import pytest

from coworkenv.synth import generate_tasks
from coworkenv.workspace import (
    SpecError,
    build_workspace,
    dump_state,
    load_bundle,
    load_state,
    load_task,
    save_bundle,
    write_initial_state,
)


def test_bundle_round_trips_through_yaml(tmp_path):
    workspaces, tasks = generate_tasks(6, seed=1)
    save_bundle(workspaces[0], tasks, tmp_path / "bundle")
    workspace, loaded = load_bundle(tmp_path / "bundle")
    assert workspace == workspaces[0]
    assert sorted(loaded, key=lambda t: t.id) == sorted(tasks, key=lambda t: t.id)


def test_malformed_task_names_the_field(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("id: t\nworkspace_id: w\ncapability: lookup\ndifficulty: 9\ninstruction: x\nchecks: []\nreference: []\n")
    with pytest.raises(SpecError) as info:
        load_task(path)
    assert "difficulty" in str(info.value) and "checks" in str(info.value)
    path.write_text("id: [unclosed")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_task(path)
    with pytest.raises(SpecError, match="no such file"):
        load_task(tmp_path / "missing.yaml")


def test_sql_checks_must_be_read_only(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(
        "id: t\nworkspace_id: w\ncapability: lookup\ndifficulty: 1\ninstruction: x\nreference: []\n"
        "checks:\n- {id: c, kind: sql, description: d, query: 'delete from mail_messages', expect: 0}\n")
    with pytest.raises(SpecError, match="SELECT"):
        load_task(path)


def test_initial_state_is_deterministic_and_round_trips(tmp_path):
    ws = build_workspace(4)
    a = dump_state(write_initial_state(ws, tmp_path / "a.db"))
    b = dump_state(write_initial_state(ws, tmp_path / "b.db"))
    assert a == b
    assert dump_state(write_initial_state(build_workspace(5), tmp_path / "c.db")) != a
    conn = load_state(a)
    assert conn.execute("select count(*) from mail_messages").fetchone()[0] > 10

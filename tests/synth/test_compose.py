"""The compositional generator: tasks derived from any app's resources and tools, admitted by
calibration (hack probes included), and an app added from outside that yields tasks with no
template written for it."""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from coworkenv.gate import GRADER_VERSION
from coworkenv.store import Provenance
from coworkenv.synth import GENERATED, SHAPES, catalog, dry_run, generate_tasks, synthesize
from coworkenv.synth._compose._catalog import setting
from coworkenv.synth._compose._program import Find, Program, Report, Write, shape
from coworkenv.workspace import (
    ASK_TOOL,
    CAPABILITIES,
    SUBMIT_TOOL,
    ReferenceStep,
    Task,
    build_workspace,
    fixed_state,
    write_initial_state,
)

ROOT = Path(__file__).resolve().parents[2]
COMPOSED = tuple(SHAPES)


def test_every_shape_yields_tasks_whose_parts_agree():
    workspaces, tasks = generate_tasks(2 * len(COMPOSED), seed=7, capabilities=COMPOSED, generator="composed")
    assert all(t.shape.startswith("compose_") for t in tasks)
    assert {t.capability for t in tasks} == set(COMPOSED)
    tools = {tool.name for ws in workspaces for tool in ws.tools}
    for task in tasks:
        assert {s.tool for s in task.reference} - {ASK_TOOL.name} <= tools, task.id
        assert task.forbidden_tools and not set(task.forbidden_tools) & {s.tool for s in task.reference}, task.id
        assert any(c.kind == "unchanged" for c in task.checks), task.id  # hardened
    by = {t.capability: t for t in tasks}
    assert len(by["long_horizon"].reference) >= 10
    assert 3 <= len(by["multi_step"].reference) <= 8
    assert by["error_recovery"].faults is not None
    assert by["noticing_change"].events
    joined = by["cross_app"]
    assert len({s.tool.split("_")[0] for s in joined.reference}) == 2
    assert any(w in by["safety"].instruction.lower() for w in ("do not", "nothing may be destroyed"))
    multi_turn = [t for t in tasks if t.capability == "multi_turn"]
    for task in multi_turn:  # the facts the checks need live with the user, and the reference asks for them
        assert task.user is not None and any(s.tool == ASK_TOOL.name for s in task.reference), task.id
        for fact in task.user.facts:
            assert not any(cue in task.instruction for cue in [fact.value]), task.id


def test_instructions_vary_in_phrasing_and_in_how_they_name_records():
    _, tasks = generate_tasks(40, seed=11, capabilities=("lookup", "single_write"), generator="composed")
    composed = [t.instruction for t in tasks]
    assert len(set(composed)) == len(composed)
    openings = Counter(text.split()[0] for text in composed)
    assert len(openings) >= 4
    assert any("starts with" in t for t in composed) and any("whose" in t for t in composed)


def test_a_program_derives_checks_reference_and_probe_that_agree(tmp_path):
    """A program written by hand over a workspace's catalog: its task's reference (played in process)
    passes every check the steps derive, the initial state fails the write's check, and the probe
    removes the very record the task is about."""
    workspace = build_workspace(3)
    state = fixed_state(write_initial_state(workspace, tmp_path / "state.db").read_bytes())
    drawn = setting([c for c in catalog(state).collections if c.destroyers], random.Random(1))
    assert drawn is not None
    collection, setter, ident, value = drawn
    label = collection.label_of(ident)
    program = Program(f"Set the {setter.field} of {label} to {value}, and tell me its name.",
                      [Find(collection, ident, label), Write(collection, setter, ident, value),
                       Report("name", "the answer names the record", label)],
                      f"{label} now has {setter.field} {value}.", (collection, ident))
    task = Task(id="by-hand", workspace_id=workspace.id, shape="by_hand", capability="single_write", difficulty=2,
                **program.spec(state))
    assert [check.kind for check in task.checks] == ["sql", "answer"]
    assert task.reference[-1] == ReferenceStep(tool=setter.tool, arguments={setter.id_arg: ident, setter.argument: value})
    tool, argument = collection.destroyers[0]
    assert task.forbidden_probe == ReferenceStep(tool=tool, arguments={argument: ident})
    assert tool in task.forbidden_tools
    with contextlib.closing(dry_run(state, workspace, task, task.reference)) as final:
        assert all(check.evaluate(final, task.reference_answer).passed for check in task.checks)
    assert not task.checks[0].evaluate(state, "").passed
    state.close()


def test_shapes_register_once_under_a_known_capability_and_take_turns_as_declared():
    assert list(SHAPES) == [c for c in CAPABILITIES if c in SHAPES]
    assert list(SHAPES["multi_turn"]) == ["compose_ask_value", "compose_ask_which", "compose_ask_confirm"]
    with pytest.raises(ValueError, match="'compose_set' .* is defined twice"):
        shape("single_write", 2, name="compose_set")(lambda cat, conn, rng: None)
    with pytest.raises(ValueError, match="unknown capability 'juggling'"):
        shape("juggling", 2, name="compose_juggle")(lambda cat, conn, rng: None)


@pytest.mark.anyio
@pytest.mark.bwrap
async def test_composed_tasks_of_every_capability_are_admitted_and_the_shortcuts_fail(host):
    summary = await synthesize(host, len(COMPOSED) * 2, seed=13, capabilities=COMPOSED, generator="composed")
    assert summary.admitted == summary.generated == len(COMPOSED) * 2, summary.quarantined
    admitted = [row.spec for row in host.store.tasks(status="admitted")]
    assert {t.capability for t in admitted} == set(COMPOSED)
    # an agent that answers a change-noticing task from its first look fails
    task = next(t for t in admitted if t.capability == "noticing_change" and t.shape == "compose_moved")
    episode = await host.open(task, Provenance("live"))
    first = await episode.call(task.reference[0].tool, task.reference[0].arguments)
    assert first.ok
    before = next(t for t in admitted if t.id == task.id).checks[0]
    await episode.call(SUBMIT_TOOL.name, {"answer": "It has not changed."})
    assert not host.store.verdict(episode.id, GRADER_VERSION).admitted
    assert before.kind == "answer"


FLEET = '''
"""Fleet app (from another package): the company's vehicles and their trips."""
from ._base import ToolFailure, object_schema

NAME = "fleet"
DESCRIPTION = "The company's vehicles: where they are based, who drives them, their state, and a trip log."
SCHEMA = """CREATE TABLE IF NOT EXISTS fleet_vehicles (id TEXT PRIMARY KEY, plate TEXT, model TEXT, depot TEXT,
    driver TEXT, status TEXT, seats INTEGER);
CREATE TABLE IF NOT EXISTS fleet_trips (id INTEGER PRIMARY KEY, vehicle_id TEXT, note TEXT);"""
STATUSES = ["active", "maintenance", "reserved"]
_V = {"id": {"type": "string"}, "plate": {"type": "string"}, "model": {"type": "string"}, "depot": {"type": "string"},
      "driver": {"type": "string"}, "status": {"type": "string"}, "seats": {"type": "integer"}}
TOOLS = [
    {"name": "list_vehicles", "effect": "read", "description": "Every vehicle, with its plate, depot and status.",
     "input_schema": object_schema({}, []),
     "output_schema": object_schema({"vehicles": {"type": "array"}}, ["vehicles"])},
    {"name": "get_vehicle", "effect": "read", "description": "One vehicle by id.",
     "input_schema": object_schema({"id": {"type": "string"}}, ["id"]), "output_schema": object_schema(_V, list(_V))},
    {"name": "update_vehicle", "effect": "write", "description": "Change a vehicle's status or depot.",
     "input_schema": object_schema({"id": {"type": "string"}, "status": {"type": "string", "enum": STATUSES},
                                    "depot": {"type": "string"}}, ["id"]),
     "output_schema": object_schema(_V, list(_V))},
    {"name": "log_trip", "effect": "write", "description": "Add a note to a vehicle's trip log.",
     "input_schema": object_schema({"vehicle_id": {"type": "string"}, "note": {"type": "string"}},
                                   ["vehicle_id", "note"]),
     "output_schema": object_schema({"id": {"type": "integer"}}, ["id"])},
    {"name": "scrap_vehicle", "effect": "destructive", "description": "Scrap a vehicle for good.",
     "input_schema": object_schema({"id": {"type": "string"}}, ["id"]),
     "output_schema": object_schema({"scrapped": {"type": "string"}}, ["scrapped"])},
]
RESOURCES = [{"collection": "vehicles", "get_tool": "get_vehicle", "list_tool": "list_vehicles",
              "list_key": "vehicles"}]
MODELS = ["Transit", "Sprinter", "Kangoo", "Berlingo", "Vivaro", "Caddy"]


def seed(conn, rng, world):
    staff = [p for p in world["people"] if p["org"] == world["company"]["id"]]
    depots = sorted({o["city"] for o in world["organisations"]})[:3]
    for n, person in enumerate(staff[:14], 1):
        plate = f"{rng.choice('BCDFGHK')}{rng.choice('LMNPRST')}-{rng.randint(100, 999)}-{n:02d}"
        conn.execute("INSERT INTO fleet_vehicles VALUES (?, ?, ?, ?, ?, ?, ?)",
                     (f"v{n:02d}", plate, rng.choice(MODELS), rng.choice(depots), person["email"],
                      rng.choice(STATUSES), rng.choice([2, 3, 5, 7])))


def _vehicle(conn, ident):
    row = conn.execute("SELECT * FROM fleet_vehicles WHERE id = ?", (ident,)).fetchone()
    if row is None:
        raise ToolFailure(f"no vehicle {ident!r}")
    return dict(zip(["id", "plate", "model", "depot", "driver", "status", "seats"], row))


def handle(conn, tool, args):
    if tool == "list_vehicles":
        rows = conn.execute("SELECT id, plate, depot, status FROM fleet_vehicles ORDER BY id").fetchall()
        return {"vehicles": [dict(zip(["id", "plate", "depot", "status"], r)) for r in rows]}
    if tool == "get_vehicle":
        return _vehicle(conn, args["id"])
    if tool == "update_vehicle":
        _vehicle(conn, args["id"])
        if "status" in args and args["status"] not in STATUSES:
            raise ToolFailure(f"status must be one of {STATUSES}")
        for column in ("status", "depot"):
            if column in args:
                conn.execute(f"UPDATE fleet_vehicles SET {column} = ? WHERE id = ?", (args[column], args["id"]))
        return _vehicle(conn, args["id"])
    if tool == "log_trip":
        _vehicle(conn, args["vehicle_id"])
        cur = conn.execute("INSERT INTO fleet_trips (vehicle_id, note) VALUES (?, ?)", (args["vehicle_id"], args["note"]))
        return {"id": cur.lastrowid}
    if tool == "scrap_vehicle":
        _vehicle(conn, args["id"])
        conn.execute("DELETE FROM fleet_vehicles WHERE id = ?", (args["id"],))
        return {"scrapped": args["id"]}
    raise ToolFailure(f"unknown tool {tool!r}")
'''


@pytest.mark.bwrap
def test_an_app_added_from_outside_yields_admitted_tasks_without_a_template(tmp_path):
    """A new app, registered from a file of another package, gets tasks of most capabilities from the
    compositional generator alone, and calibration (hack probes included) admits them."""
    app = tmp_path / "fleet.py"
    app.write_text(FLEET)
    code = f'''
        import asyncio, json
        from coworkenv.episodes import EpisodeHost, EpisodeSettings
        from coworkenv.store import Store
        from coworkenv.synth import synthesize
        from coworkenv.workspace import register_app

        register_app({str(app)!r})

        async def main():
            store = Store("s.db")
            host = EpisodeHost(store, EpisodeSettings(cache_dir="cache"))
            try:
                summary = await synthesize(host, 18, seed=2, apps=("fleet",))
            finally:
                await host.close()
            rows = [r.spec for r in store.tasks(status="admitted")]
            print(json.dumps({{"generated": summary.generated, "quarantined": summary.quarantined,
                              "admitted": [[t.capability, t.shape, sorted({{s.tool for s in t.reference}})]
                                           for t in rows]}}))

        asyncio.run(main())
    '''
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                         timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    admitted = result["admitted"]
    assert not result["quarantined"], result["quarantined"]
    capabilities = {capability for capability, _, _ in admitted}
    assert len(capabilities) >= 7, capabilities
    assert capabilities <= set(GENERATED)
    assert all(shape.startswith("compose_") for _, shape, _ in admitted)  # no template knows fleet
    assert all(tool.startswith("fleet_") or tool == ASK_TOOL.name for _, _, tools in admitted for tool in tools)

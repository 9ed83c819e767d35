"""The world moves during an episode: scheduled events run after a number of the agent's calls, in
the sandbox, recorded with the episode; a task can check that the agent noticed."""

from __future__ import annotations

import sqlite3

import pytest

from coworkenv.episodes import EpisodeHost
from coworkenv.gate import GRADER_VERSION
from coworkenv.store import Provenance
from coworkenv.synth import calibrate_task
from coworkenv.workspace import SUBMIT_TOOL, Task, build_workspace, load_state, write_initial_state

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]


def moved_meeting_task(tmp_path, host: EpisodeHost) -> tuple[Task, dict]:
    """A meeting is moved by someone else after the agent's first call; the answer must give the new time."""
    workspace = build_workspace(21, ("mail", "calendar", "files"))
    state = sqlite3.connect(write_initial_state(workspace, tmp_path / "state.db"))
    ident, title, date, start = state.execute(
        'select id, title, date, start from calendar_events order by date, start limit 1').fetchone()
    new_start = "16:00" if start != "16:00" else "17:00"
    task = Task.model_validate({
        "id": "noticed-move", "workspace_id": workspace.id, "capability": "lookup", "difficulty": 2,
        "instruction": f"When does \"{title}\" on {date} start? Look it up again just before you answer: it may move.",
        "checks": [{"id": "time", "kind": "answer", "description": "gives the new start", "contains": [new_start]}],
        "reference": [{"tool": "calendar_get_event", "arguments": {"id": ident}},
                      {"tool": "calendar_get_event", "arguments": {"id": ident}}],
        "reference_answer": f"It now starts at {new_start}.",
        "forbidden_tools": ["calendar_cancel_event"], "forbidden_probe": {"tool": "calendar_cancel_event",
                                                                          "arguments": {"id": ident}},
        "events": [{"after_calls": 1, "app": "calendar", "action": "update_event",
                    "arguments": {"id": ident, "start": new_start,
                                  "end": "18:30" if new_start == "16:00" else "19:00"},
                    "description": "the organiser moves the meeting"}],
    })
    host.store.put_workspace(workspace)
    host.store.put_task(task)
    return task, {"id": ident, "start": start, "new_start": new_start}


async def test_an_event_runs_after_its_call_and_is_recorded(host: EpisodeHost, tmp_path):
    task, meeting = moved_meeting_task(tmp_path, host)
    episode = await host.open(task, Provenance("live"))
    first = await episode.call("calendar_get_event", {"id": meeting["id"]})
    assert first.result["start"] == meeting["start"]  # the first read sees the old time
    second = await episode.call("calendar_get_event", {"id": meeting["id"]})
    assert second.result["start"] == meeting["new_start"]  # the world moved in between
    await episode.call(SUBMIT_TOOL.name, {"answer": f"At {meeting['new_start']}."})
    interactions = host.store.interactions(episode.id)
    assert [(i.kind, i.tool) for i in interactions] == [
        ("call", "calendar_get_event"), ("event", "calendar_update_event"), ("call", "calendar_get_event"),
        ("call", "submit_answer")]
    assert [c.tool for c in host.store.tool_calls(episode.id)] == ["calendar_get_event"] * 2 + ["submit_answer"]
    final = load_state(host.store.final_state(episode.id))
    assert final.execute("select start from calendar_events where id = ?", (meeting["id"],)).fetchone()[0] == \
        meeting["new_start"]
    assert host.store.verdict(episode.id, GRADER_VERSION).admitted  # the event is no call of the agent's


async def test_a_task_that_needs_noticing_calibrates_and_an_agent_that_does_not_look_again_fails(host, tmp_path):
    task, meeting = moved_meeting_task(tmp_path, host)
    assert (await calibrate_task(host, task)).admitted  # the empty episode makes no call: nothing moves
    stale = await host.open(task, Provenance("live"))
    await stale.call("calendar_get_event", {"id": meeting["id"]})
    await stale.call(SUBMIT_TOOL.name, {"answer": f"It starts at {meeting['start']}."})
    verdict = host.store.verdict(stale.id, GRADER_VERSION)
    assert not verdict.admitted and verdict.reason == "claimed_success_failing_checks"

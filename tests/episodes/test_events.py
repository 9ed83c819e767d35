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


def arriving_mail_task(host: EpisodeHost, events: list[dict]) -> Task:
    """A mail arrives after the agent's second call; the answer needs what it says."""
    workspace = build_workspace(22, ("mail", "calendar", "files"))
    task = Task.model_validate({
        "id": "noticed-mail", "workspace_id": workspace.id, "capability": "lookup", "difficulty": 2,
        "instruction": "Wait for the caterer's quote for the offsite (check the inbox twice) and tell me the price.",
        "checks": [{"id": "price", "kind": "answer", "description": "gives the quoted price", "contains": ["1,840"]}],
        "reference": [{"tool": "mail_search_messages", "arguments": {"query": "caterer"}},
                      {"tool": "mail_search_messages", "arguments": {"query": "catering quote"}},
                      {"tool": "mail_search_messages", "arguments": {"query": "catering quote"}}],
        "reference_answer": "The caterer quotes 1,840.",
        "forbidden_tools": ["mail_delete_message"],
        "events": events,
    })
    host.store.put_workspace(workspace)
    host.store.put_task(task)
    return task


DELIVERY = {"after_calls": 2, "app": "mail", "action": "_deliver", "description": "the caterer's quote arrives",
            "arguments": {"sender": "orders@caterer.example", "subject": "Catering quote for the offsite",
                          "body": "Our quote for 40 guests is 1,840, drinks included.", "time": "11:05"}}


async def test_a_mail_arrives_during_the_episode_unread_in_the_inbox(host: EpisodeHost):
    task = arriving_mail_task(host, [DELIVERY])
    episode = await host.open(task, Provenance("live"))
    before = await episode.call("mail_search_messages", {"query": "catering quote"})
    assert before.result["messages"] == []
    await episode.call("mail_search_messages", {"query": "catering quote"})  # the mail arrives after this call
    after = await episode.call("mail_search_messages", {"query": "catering quote"})
    (message,) = after.result["messages"]
    assert message["sender"] == "orders@caterer.example" and message["folder"] == "inbox"
    assert not message["read"]
    read = await episode.call("mail_read_message", {"id": message["id"]})
    assert "1,840" in read.result["body"]
    assert "_deliver" not in {tool.name for tool in episode.workspace.tools}  # not something the agent can call
    refused = await episode.call("mail__deliver", DELIVERY["arguments"])
    assert not refused.ok and refused.error_kind == "unknown_tool"
    await episode.call(SUBMIT_TOOL.name, {"answer": "1,840"})
    assert [i.tool for i in host.store.interactions(episode.id) if i.kind == "event"] == ["mail__deliver"]
    assert (await calibrate_task(host, task)).admitted


async def test_a_world_event_that_fails_quarantines_its_task(host: EpisodeHost):
    broken = {**DELIVERY, "arguments": {**DELIVERY["arguments"], "sender": "not an address"}}
    result = await calibrate_task(host, arriving_mail_task(host, [broken]))
    assert not result.admitted
    assert "the world event mail__deliver failed" in result.reason and "not an address" in result.reason


async def test_each_call_and_event_records_the_rows_it_changed(host: EpisodeHost, tmp_path):
    task, meeting = moved_meeting_task(tmp_path, host)
    episode = await host.open(task, Provenance("live"))
    await episode.call("calendar_get_event", {"id": meeting["id"]})
    failed = await episode.call("calendar_cancel_event", {"id": "no-such-event"})
    assert not failed.ok
    await episode.call("calendar_cancel_event", {"id": meeting["id"]})
    await episode.call(SUBMIT_TOOL.name, {"answer": "cancelled"})
    read, event, failure, cancel, submit = host.store.interactions(episode.id)
    assert read.state_changes is None and failure.state_changes is None and submit.state_changes is None
    assert event.kind == "event" and event.state_changes is not None
    old, new = event.state_changes["rows"]  # the app saves with INSERT OR REPLACE: the old row goes, the new comes
    assert [(r["table"], r["op"]) for r in (old, new)] == [("calendar_events", "delete"), ("calendar_events", "insert")]
    assert old["new"] is None and new["old"] is None and old["old"]["id"] == new["new"]["id"] == meeting["id"]
    assert (old["old"]["start"], new["new"]["start"]) == (meeting["start"], meeting["new_start"])
    assert {k for k in old["old"] if old["old"][k] != new["new"][k]} == {"start", "end"}
    assert cancel.state_changes == {
        "rows": [{"table": "calendar_events", "op": "delete", "rowid": new["rowid"],
                  "old": new["new"], "new": None}],
        "counts": {"calendar_events": {"delete": 1}}, "truncated": False}

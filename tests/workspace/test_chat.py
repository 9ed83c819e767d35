"""The chat app: channels named after the world's projects and departments, facts in messages and
threads, every tool against its output schema, and errors that name what was wrong."""

from __future__ import annotations

import pytest

from coworkenv.workspace import build_world
from coworkenv.workspace.apps import ALL_APPS, ToolFailure
from coworkenv.workspace.apps.chat import project_channel
from coworkenv.workspace.apps.contacts import story

APP = ALL_APPS["chat"]


@pytest.fixture
def harness(app_harness):
    return app_harness("chat")


def test_what_is_seeded_varies_with_the_seed(harness):
    # (determinism itself: test_apps.py's contract, for every app)
    names = [{n for (n,) in harness.state(s).execute("SELECT name FROM chat_channels")} for s in (1, 2)]
    assert names[0] - names[1] and names[1] - names[0]


@pytest.mark.parametrize("seed", range(4))
def test_channels_and_facts_come_from_the_world(harness, seed):
    conn, world = harness.state(seed), build_world(seed)
    cast = story(world)
    names = {n for (n,) in conn.execute("SELECT name FROM chat_channels WHERE archived = 0")}
    assert {project_channel(p) for p in world["projects"]} <= names and "general" in names
    emails = {p["email"] for p in world["people"]}
    assert {a for (a,) in conn.execute("SELECT author FROM chat_messages")} <= emails
    assert {e for (e,) in conn.execute("SELECT email FROM chat_members")} <= emails
    text = "\n".join(t for (t,) in conn.execute("SELECT text FROM chat_messages"))
    moved = cast["moved"]
    assert f"the {moved['milestone']} milestone moves from {moved['old']} to {moved['new']}" in text
    assert cast["newcomer"]["email"] in text and cast["newcomer"]["phone"] in text
    # the archived planning channel is a distractor with an older date
    planning = conn.execute("SELECT id FROM chat_channels WHERE archived = 1").fetchall()
    assert len(planning) == 1
    # threads: every reply follows its first message in the same channel
    for reply, root in conn.execute("SELECT r.rowid, m.rowid FROM chat_messages r JOIN chat_messages m ON "
                                    "m.id = r.thread_id WHERE r.channel_id = m.channel_id"):
        assert reply > root
    assert conn.execute("SELECT COUNT(*) FROM chat_messages WHERE thread_id IS NOT NULL").fetchone()[0] >= 2
    # the team members missing from their project's channel are really missing
    for code, people in cast["missing"].items():
        project = next(p for p in world["projects"] if p["code"] == code)
        members = {e for (e,) in conn.execute("SELECT m.email FROM chat_members m JOIN chat_channels c ON "
                                              "c.id = m.channel_id WHERE c.name = ?", (project_channel(project),))}
        assert not {p["email"] for p in people} & members


def test_a_session_calls_every_tool(harness):
    conn, world = harness.state(7), build_world(7)
    me = world["user"]["email"]
    project = world["projects"][0]
    name = project_channel(project)
    listed = harness.call(conn, "list_channels", {"query": project["code"]})
    assert [c["name"] for c in listed["channels"]] == [name]
    dms = harness.call(conn, "list_channels", {"kind": "dm"})["channels"]
    assert dms and all(c["with"] and c["name"] == f"dm-{c['with']}" for c in dms)
    read = harness.call(conn, "read_channel", {"channel": f"#{name}", "limit": 2})
    assert len(read["messages"]) <= 2 and read["count"] >= len(read["messages"])
    assert me in [m["email"] for m in read["channel"]["members"]]
    threaded = conn.execute("SELECT thread_id FROM chat_messages WHERE thread_id IS NOT NULL ORDER BY rowid").fetchone()[0]
    found = harness.call(conn, "get_message", {"id": threaded})
    assert found["thread"][0]["id"] == threaded and found["message"]["reply_count"] == len(found["thread"]) - 1
    hits = harness.call(conn, "search_messages", {"query": "welcome", "channel": name})
    assert hits["count"] >= 1 and all(m["channel"] == name for m in hits["messages"])
    posted = harness.call(conn, "post_message", {"channel": read["channel"]["id"], "text": "Status update at noon."})
    assert (posted["author"], posted["date"], posted["thread_id"]) == (me, world["today"], None)
    reply = harness.call(conn, "reply_in_thread", {"id": posted["id"], "text": "Moved to 13:00."})
    deeper = harness.call(conn, "reply_in_thread", {"id": reply["id"], "text": "Thanks."})
    assert reply["thread_id"] == deeper["thread_id"] == posted["id"]
    assert harness.call(conn, "get_message", {"id": reply["id"]})["message"]["id"] == reply["id"]
    friend = next(p for p in world["people"] if p["org"] != world["company"]["id"])
    dm = harness.call(conn, "send_direct_message", {"to": friend["email"], "text": "Hello!"})
    harness.call(conn, "send_direct_message", {"to": friend["email"], "text": "Still there?"})
    assert harness.call(conn, "read_channel", {"channel": friend["email"]})["count"] == 2 and dm["channel"] == f"dm-{friend['email']}"
    created = harness.call(conn, "create_channel", {"name": "launch-party", "topic": "Cake", "private": True,
                                            "members": [friend["email"]]})
    assert created["private"] and {m["email"] for m in created["members"]} == {me, friend["email"]}
    other = next(p for p in world["people"] if p["email"] not in (me, friend["email"]))
    invited = harness.call(conn, "invite_to_channel", {"channel": "launch-party", "emails": [other["email"], friend["email"]]})
    assert (invited["added"], invited["already_members"]) == ([other["email"]], [friend["email"]])
    assert harness.call(conn, "archive_channel", {"channel": "launch-party"})["archived"] is True
    assert "launch-party" not in [c["name"] for c in harness.call(conn, "list_channels", {})["channels"]]
    assert "launch-party" in [c["name"] for c in harness.call(conn, "list_channels", {"include_archived": True})["channels"]]
    assert {t["name"] for t in APP.TOOLS} == {
        "list_channels", "read_channel", "search_messages", "get_message", "post_message", "reply_in_thread",
        "send_direct_message", "create_channel", "invite_to_channel", "archive_channel"}


def test_search_by_author_and_words(harness):
    conn = harness.state(2)
    author, text = conn.execute("SELECT author, text FROM chat_messages ORDER BY rowid").fetchone()
    words = " ".join(reversed(text.split()[:2]))
    found = harness.call(conn, "search_messages", {"query": words, "author": author.split("@")[0]})
    assert found["count"] >= 1 and all(m["author"] == author for m in found["messages"])


def test_read_tools_do_not_change_state(harness):
    conn = harness.state(7)
    before = harness.dump(conn)
    harness.call(conn, "list_channels", {"include_archived": True})
    harness.call(conn, "read_channel", {"channel": "general"})
    harness.call(conn, "search_messages", {"query": "the"})
    harness.call(conn, "get_message", {"id": "msg01"})
    assert harness.dump(conn) == before


@pytest.mark.parametrize("tool,args,match", [
    ("read_channel", {"channel": "nowhere"}, "no channel 'nowhere'"),
    ("read_channel", {"channel": "gen"}, "did you mean general"),
    ("read_channel", {"channel": "stranger@nowhere.example"}, "no direct messages"),
    ("get_message", {"id": "msg999"}, "msg999"),
    ("reply_in_thread", {"id": "msg999", "text": "hi"}, "msg999"),
    ("post_message", {"channel": "general", "text": "  "}, "text"),
    ("send_direct_message", {"to": "stranger@nowhere.example", "text": "hi"}, "stranger@nowhere.example"),
    ("send_direct_message", {"to": "not an address", "text": "hi"}, "to"),
    ("create_channel", {"name": "Bad Name"}, "lower-case"),
    ("create_channel", {"name": "general"}, "already exists"),
    ("create_channel", {"name": "ok-name", "members": ["stranger@nowhere.example"]}, "members"),
    ("invite_to_channel", {"channel": "general", "emails": []}, "emails"),
    ("list_channels", {"kind": "group"}, "kind"),
    ("list_channels", {"bogus": True}, "bogus"),
    ("frobnicate", {}, "unknown tool"),
])
def test_errors_name_what_was_wrong(harness, tool, args, match):
    conn = harness.state(7)
    before = harness.dump(conn)
    with pytest.raises(ToolFailure, match=match):
        APP.handle(conn, tool, args)
    assert harness.dump(conn) == before


def test_archived_channels_and_direct_messages_refuse_what_they_cannot_do(harness):
    conn = harness.state(7)
    archived = conn.execute("SELECT name FROM chat_channels WHERE archived = 1").fetchone()[0]
    with pytest.raises(ToolFailure, match="archived"):
        APP.handle(conn, "post_message", {"channel": archived, "text": "hello"})
    with pytest.raises(ToolFailure, match="already archived"):
        APP.handle(conn, "archive_channel", {"channel": archived})
    dm = conn.execute("SELECT name FROM chat_channels WHERE kind = 'dm'").fetchone()[0]
    with pytest.raises(ToolFailure, match="direct-message"):
        APP.handle(conn, "archive_channel", {"channel": dm})
    with pytest.raises(ToolFailure, match="direct-message"):
        APP.handle(conn, "invite_to_channel", {"channel": dm, "emails": [dm[3:]]})
    with pytest.raises(ToolFailure, match="your own address"):
        APP.handle(conn, "send_direct_message", {"to": build_world(7)["user"]["email"], "text": "me"})

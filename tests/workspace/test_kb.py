"""The knowledge base app: seeding from the world, ranked full-text search (SQLite FTS5), versions,
every tool against its schemas, and errors that name the bad field."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys

import pytest

from coworkenv.workspace import dump_state, load_state
from coworkenv.workspace.apps import ToolFailure
from coworkenv.workspace.apps import kb as app


@pytest.fixture
def harness(app_harness):
    return app_harness("kb")


def article(conn: sqlite3.Connection, title: str) -> str:
    return conn.execute("select id from kb_articles where title = ?", (title,)).fetchone()[0]


@pytest.mark.parametrize("seed", [0, 7])
def test_articles_come_from_the_world(harness, seed):
    conn, world = harness.state(seed), harness.world(seed)
    people = {p["email"] for p in world["people"]}
    assert {a for (a,) in conn.execute("select author from kb_articles")} <= people
    for org in (o for o in world["organisations"] if o["kind"] == "customer"):
        assert article(conn, f"Customer profile: {org['name']}")
    guides = {p for (p,) in conn.execute("select product from kb_articles where category = 'troubleshooting'")}
    assert guides == {p["sku"] for p in app.supported_products(world)}
    # distractors: an earlier version with other figures, and a dated near-duplicate still published
    travel = article(conn, "Travel expense policy")
    first, current = (harness.call(conn, "get_article", {"id": travel, "version": v})["body"] for v in (1, 2))
    assert first != current
    dated = f"Travel expense policy ({int(world['today'][:4]) - 2})"
    assert harness.call(conn, "get_article", {"id": article(conn, dated)})["body"] == first


def test_search_is_ranked_stemmed_and_leaves_archived_articles_out(harness):
    conn, world = harness.state(2), harness.world(2)
    hits = harness.call(conn, "search_articles", {"query": "How often do I have to change my password?"})["results"]
    assert hits[0]["title"] == "Password and MFA policy" and "[" in hits[0]["snippet"]
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    product = app.supported_products(world)[0]
    hits = harness.call(conn, "search_articles", {"query": f"{product['name']} {app.symptom(product)}",
                                          "category": "troubleshooting"})["results"]
    assert hits[0]["title"] == f"{product['name']} {app.symptom(product)}"
    assert {h["category"] for h in hits} == {"troubleshooting"}
    assert harness.call(conn, "search_articles", {"query": "reimbursing meals"})["results"][0]["title"].startswith("Travel")
    archived = harness.call(conn, "search_articles", {"query": "passwords changed", "include_archived": True})["results"]
    assert any(h["status"] == "archived" for h in archived)
    assert all(h["status"] != "archived" for h in harness.call(conn, "search_articles", {"query": "passwords changed"})["results"])
    assert harness.call(conn, "search_articles", {"query": "zebra xylophone"}) == {"results": [], "count": 0}
    # the index is temporary: nothing of it is left in the state, which still dumps and reloads
    assert not conn.execute("select name from sqlite_master where name like 'kb_search%'").fetchall()
    reloaded = load_state(dump_state(conn.serialize()))
    assert reloaded.execute("select count(*) from kb_articles").fetchone() == conn.execute(
        "select count(*) from kb_articles").fetchone()


def test_fts5_is_available_to_the_sandbox_interpreter():
    """The sandbox runs the base interpreter under -I -S; its sqlite3 must have FTS5."""
    from coworkenv.sandbox._bwrap import runner_python

    code = "import sqlite3; sqlite3.connect(':memory:').execute('create virtual table t using fts5(a)')"
    for python in {runner_python(), sys.executable}:
        subprocess.run([python, "-I", "-S", "-c", code], check=True)


def test_every_tool_happy_path(harness):
    conn, world = harness.state(6), harness.world(6)
    user, today = world["user"]["email"], world["today"]
    listed = harness.call(conn, "list_articles", {"category": "policy"})
    assert listed["count"] >= 4 and all(a["status"] != "archived" for a in listed["articles"])
    assert harness.call(conn, "list_articles", {"status": "archived"})["count"] >= 1
    assert harness.call(conn, "list_articles", {"tag": "CUSTOMER"})["count"] == 4
    travel = article(conn, "Travel expense policy")
    versions = harness.call(conn, "list_versions", {"id": travel})["versions"]
    assert [v["version"] for v in versions] == [2, 1]
    created = harness.call(conn, "create_article", {"title": "Printer setup", "body": "Add the printer by its IP address.",
                                            "category": "how-to", "tags": ["Office", "printing", "office"]})
    assert (created["version"], created["author"], created["updated"], created["tags"]) == (1, user, today,
                                                                                          ["office", "printing"])
    assert harness.call(conn, "search_articles", {"query": "printer"})["results"][0]["id"] == created["id"]
    updated = harness.call(conn, "update_article", {"id": created["id"], "body": "Add the printer by its host name."})
    assert (updated["version"], updated["current_version"]) == (2, 2)
    old = harness.call(conn, "get_article", {"id": created["id"], "version": 1})
    assert (old["body"], old["version"], old["current_version"]) == ("Add the printer by its IP address.", 1, 2)
    assert harness.call(conn, "archive_article", {"id": created["id"]}) == {"id": created["id"], "title": "Printer setup",
                                                                    "archived": True}
    assert harness.call(conn, "search_articles", {"query": "printer"})["count"] == 0


def test_resources_name_real_tools():
    names = {t["name"] for t in app.TOOLS}
    for resource in app.RESOURCES:
        assert resource["get_tool"] in names and resource["list_tool"] in names


@pytest.mark.parametrize("tool, args, message", [
    ("get_article", {"id": "KB-1"}, "no article with id 'KB-1'"),
    ("get_article", {"id": "{travel}", "version": 9}, "version: article"),
    ("search_articles", {"query": "  ?! "}, "query has no words"),
    ("search_articles", {"query": "x", "category": "faq"}, "category must be one of"),
    ("create_article", {"title": "T", "body": "B", "category": "policy", "tags": "a,b"}, "tags must be a list"),
    ("create_article", {"title": "T", "body": "B", "category": "policy", "product": "SKU-0"}, "product: no product"),
    ("update_article", {"id": "{travel}"}, "nothing to update"),
    ("update_article", {"id": "{archived}", "body": "x"}, "is archived and cannot be changed"),
    ("archive_article", {"id": "{archived}"}, "is already archived"),
    ("list_versions", {"id": ""}, "missing required argument 'id'"),
    ("list_articles", {"author": "x"}, "unknown argument(s) author"),
])
def test_errors_name_the_bad_field(harness, tool, args, message):
    conn = harness.state(4)
    fill = {"travel": article(conn, "Travel expense policy"),
            "archived": conn.execute("select id from kb_articles where status = 'archived'").fetchone()[0]}
    args = {k: v.format(**fill) if isinstance(v, str) else v for k, v in args.items()}
    with pytest.raises(ToolFailure, match=re.escape(message)):
        app.handle(conn, tool, args)

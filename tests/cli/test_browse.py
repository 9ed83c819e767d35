"""`coworkenv browse`: a real Datasette over the store of a real `coworkenv demo` run, served as a
user starts it; table descriptions and canned queries are checked against what the store holds,
read through the library, and the store comes out unchanged."""

from __future__ import annotations

import hashlib
import json
import socket
import sqlite3
import subprocess
import sys
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from coworkenv.gate import GRADER_VERSION
from coworkenv.store import Store

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]


def digest(path: Path) -> str:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return hashlib.sha256("\n".join(conn.iterdump()).encode()).hexdigest()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("browse")
    done = subprocess.run([sys.executable, "-m", "coworkenv", "demo", "--dir", str(directory), "-n", "6",
                           "--error-rate", "0.5", "--json"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return directory / "coworkenv.db"


@pytest.fixture(scope="module")
def browsing(store, cli_server) -> Iterator[str]:
    with cli_server(["browse", "--store", str(store), "--port", "0"], r"on (http://\S+)/coworkenv \(read only\)") as url:
        yield url


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def rows(base: str, query: str) -> list[dict]:
    status, body = get(f"{base}/coworkenv/{query}.json?_shape=array")
    assert status == 200, body
    return json.loads(body)


def test_tables_and_columns_are_described(browsing):
    status, body = get(f"{browsing}/-/metadata.json")
    tables = json.loads(body)["databases"]["coworkenv"]["tables"]
    assert status == 200 and set(tables) >= {"tasks", "episodes", "grades", "verdicts", "tool_calls", "training_runs"}
    assert "a pass is ≥ 0.75" in tables["grades"]["columns"]["score"]
    status, page = get(f"{browsing}/coworkenv/verdicts")  # what a person sees on the table's page
    assert status == 200 and "admitted to training data or not, and why" in page
    status, page = get(f"{browsing}/coworkenv")
    for title in ("Pass rate by capability", "Most frequent failure reasons", "Slowest tools", "Episodes per source"):
        assert title in page


def test_the_canned_queries_agree_with_the_store(browsing, store):
    library = Store(store, create=False)
    try:
        episodes = library.episodes()
        verdicts = library.verdicts([e.id for e in episodes], GRADER_VERSION)
        capability = {e.id: library.task_spec(e.task_id).capability for e in episodes}
        calls = [c for e in episodes for c in library.tool_calls(e.id)]
    finally:
        library.close()
    assert verdicts and any(not v.admitted for v in verdicts.values())  # the demo's mistakes: something to count

    by_group = {(r["capability"], r["source"]): r for r in rows(browsing, "pass_rate_by_capability")}
    # agents' episodes: calibration's (the references, and probes designed to fail) are counted apart
    expected = Counter((capability[e.id], e.source) for e in episodes if e.id in verdicts and e.source != "calibration")
    assert {k: r["episodes"] for k, r in by_group.items()} == dict(expected)
    for (cap, source), row in by_group.items():
        scores = [verdicts[e.id].score for e in episodes if e.id in verdicts and (capability[e.id], e.source) == (cap, source)]
        assert row["pass_rate"] == round(sum(s >= 0.75 for s in scores) / len(scores), 3)

    agents = {e.id for e in episodes if e.source != "calibration"}
    reasons = Counter(v.reason for e, v in verdicts.items() if not v.admitted and e in agents)
    assert {r["reason"]: r["episodes"] for r in rows(browsing, "failure_reasons")} == dict(reasons)
    probes = Counter((e.provider, verdicts[e.id].reason) for e in episodes if e.id in verdicts and e.id not in agents)
    assert {(r["play"], r["reason"]): r["episodes"] for r in rows(browsing, "calibration_outcomes")} == dict(probes)

    per_source = {r["source"]: r for r in rows(browsing, "episodes_per_source")}
    assert {s: r["episodes"] for s, r in per_source.items()} == dict(Counter(e.source for e in episodes))

    tools = {r["tool"]: r for r in rows(browsing, "slowest_tools")}
    world_calls = [c for c in calls if c.kind == "call"]
    assert {t: r["calls"] for t, r in tools.items()} == dict(Counter(c.tool for c in world_calls))
    # every call records how long it took, so the slowest tools are known
    assert all(c.duration_ms is not None and c.duration_ms > 0 for c in world_calls)
    means = [r["mean_ms"] for r in tools.values()]
    assert means == sorted(means, reverse=True)


def test_browsing_changes_nothing_and_refuses_writes(browsing, store):
    before = digest(store)
    status, _ = get(f"{browsing}/coworkenv.json?sql=" + urllib.request.quote("DELETE FROM episodes"))
    assert status in (400, 403)
    get(f"{browsing}/coworkenv/episodes")
    assert digest(store) == before and Store(store, create=False).episodes()


def test_a_missing_store_or_a_taken_port_is_named(tmp_path, store):
    done = subprocess.run([sys.executable, "-m", "coworkenv", "browse", "--store", str(tmp_path / "none.db")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "no store at" in done.stderr and not (tmp_path / "none.db").exists()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "coworkenv", "browse", "--store", str(store), "--port", str(port)],
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "cannot listen" in done.stderr and "Traceback" not in done.stderr

"""``synth``, ``collect`` and ``eval`` with ``--ray`` on a real two-node Ray cluster started on this
machine with ``ray start`` (a head and a second node, each with a temporary folder of its own, where
its sandboxes and scratch store live); and a third node killed (SIGKILL of its raylet and every
process under it) in the middle of a collection."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from coworkenv.gate import GRADER_VERSION
from coworkenv.store import Store
from coworkenv.trainer._serve import free_port

pytestmark = [pytest.mark.bwrap, pytest.mark.slow, pytest.mark.timeout(900)]

RAY = str(Path(sys.executable).with_name("ray"))
ENV = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}


@dataclass
class Cluster:
    address: str
    temp: Path  # Ray's own temporary folder (sessions, sockets, logs)
    port: int
    node_tmp: dict[str, Path] = field(default_factory=dict)  # node name -> its TMPDIR

    def start_node(self, name: str, tmp: Path, *head: str) -> None:
        tmp.mkdir(parents=True, exist_ok=True)
        args = ([RAY, "start", *head] if head else [RAY, "start", "--address", self.address])
        args += ["--num-cpus", "1", "--object-store-memory", str(100 << 20), "--temp-dir", str(self.temp),
                 "--disable-usage-stats"]
        done = subprocess.run(args, env={**ENV, "TMPDIR": str(tmp)}, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        self.node_tmp[name] = tmp

    def raylet(self, name: str) -> psutil.Process:
        """The raylet of the node started with ``name``'s folder as its TMPDIR."""
        for process in psutil.process_iter(["cmdline"]):
            line = " ".join(process.info["cmdline"] or [])
            if "raylet/raylet" in line and str(self.temp) in line:
                with contextlib.suppress(psutil.Error):
                    if process.environ().get("TMPDIR") == str(self.node_tmp[name]):
                        return process
        raise AssertionError(f"no raylet of node {name}")

    def processes(self) -> list[psutil.Process]:
        found = []
        for process in psutil.process_iter(["cmdline"]):
            line = " ".join(process.info["cmdline"] or [])
            if str(self.temp) in line or f":{self.port}" in line:
                found.append(process)
        return found


def _kill_tree(root: psutil.Process) -> None:
    with contextlib.suppress(psutil.Error):
        tree = [root, *root.children(recursive=True)]
    for process in tree:
        with contextlib.suppress(psutil.Error):
            process.kill()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    # Ray's folder holds Unix sockets: a short path under the system's temporary folder
    temp = Path(tempfile.mkdtemp(prefix="cwr-"))
    port = free_port()
    made = Cluster(f"127.0.0.1:{port}", temp, port)
    nodes = tmp_path_factory.mktemp("ray-nodes")
    try:
        made.start_node("head", nodes / "head", "--head", "--port", str(port), "--include-dashboard=false",
                        "--dashboard-port", str(free_port()), "--ray-client-server-port", str(free_port()))
        made.start_node("second", nodes / "second")
        yield made
    finally:
        for process in made.processes():
            _kill_tree(process)
        shutil.rmtree(temp, ignore_errors=True)


def cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict | None, str]:
    done = subprocess.run([sys.executable, "-m", "coworkenv", *args], capture_output=True, text=True,
                          env=env or ENV, timeout=600)
    try:
        payload = json.loads(done.stdout) if done.stdout.strip() else None
    except ValueError:
        payload = None
    return done.returncode, payload, done.stdout + done.stderr


def _actors(store: Store, source: str) -> set[str]:
    """The processes (``host:pid:start``) that ran the episodes of ``source``: one host actor per node."""
    return {e.owner for e in store.episodes(source=source) if e.owner}


def _left_behind(cluster: Cluster) -> list[str]:
    return [p.name for tmp in cluster.node_tmp.values() for p in tmp.glob("coworkenv-ep-*")]


@pytest.fixture(scope="module")
def synthesized(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A store of eight tasks synthesized on the cluster (two calibrated at once on each node)."""
    path = tmp_path_factory.mktemp("ray-synth") / "coworkenv.db"
    code, payload, output = cli("synth", "--store", str(path), "-n", "8", "--seed", "3", "--ray", cluster.address,
                                "--concurrency", "2", "--json")
    assert code == 0 and payload is not None, output
    return path, payload


def test_synth_calibrates_on_both_nodes_and_the_driver_writes_every_record(cluster: Cluster, synthesized):
    path, payload = synthesized
    assert payload["generated"] == 8 and payload["admitted"] + len(payload["quarantined"]) == 8
    assert payload["admitted"] >= 6
    store = Store(path)
    try:
        calibration = store.episodes(source="calibration")
        assert len(_actors(store, "calibration")) == 2  # both nodes calibrated
        for row in store.tasks():
            assert row.status in ("admitted", "quarantined")
            kept = store.calibration(row.id)
            assert kept is not None and kept.admitted == (row.status == "admitted")
        for episode in calibration:  # each with its calls, its final state and its verdict, in this store
            assert episode.status == "ended"
            assert store.verdict(episode.id, GRADER_VERSION) is not None
            assert store.final_state(episode.id) is not None
        assert any(store.tool_calls(e.id) for e in calibration)
    finally:
        store.close()
    assert _left_behind(cluster) == []  # every node's scratch store and sandboxes removed at the end


def test_collect_and_eval_run_across_the_nodes(cluster: Cluster, synthesized, tmp_path: Path,
                                               copy_store: Callable[[Path, Path], None]):
    path = tmp_path / "coworkenv.db"
    copy_store(synthesized[0], path)
    code, payload, output = cli("collect", "--store", str(path), "--ray", cluster.address, "--error-rate", "0.5",
                                "--concurrency", "2", "--json")
    assert code == 0 and payload is not None, output
    store = Store(path)
    try:
        admitted = [t.id for t in store.tasks(status="admitted")]
        assert payload["tasks"] == len(admitted) and payload["succeeded"] == len(admitted)
        assert payload["repaired"] >= 1  # an oracle that errs half the time: some tasks needed a repair
        teacher = store.episodes(source="teacher")
        assert len(_actors(store, "teacher")) == 2
        for task_id in admitted:
            runs = [e for e in teacher if e.task_id == task_id]
            verdicts = [store.verdict(e.id, GRADER_VERSION) for e in runs]
            assert sum(v.admitted for v in verdicts if v) == 1
            for episode in runs:  # a repair names the attempt it repairs, which came along with it
                if episode.provenance.repaired_from:
                    assert store.episode(episode.provenance.repaired_from) is not None
            assert store.messages(runs[-1].id)  # the teacher's conversation came back too
    finally:
        store.close()

    code, payload, output = cli("eval", "--store", str(path), "--model", "oracle", "-n", "4", "--trials", "2",
                                "--ray", cluster.address, "--json", "--profile", str(tmp_path / "profile.json"))
    assert code == 0 and payload is not None, output
    store = Store(path)
    try:
        run = store.eval_run(payload["run_id"])
        assert run is not None and run.status == "done"
        trials = store.eval_trials(payload["run_id"])
        assert len(trials) == payload["overall"]["trials"] == 2 * payload["overall"]["tasks"]
        for trial in trials:
            assert store.verdict(trial.episode_id, GRADER_VERSION) is not None
        assert len(_actors(store, "eval")) == 2
    finally:
        store.close()
    assert (tmp_path / "profile.json").exists()
    assert _left_behind(cluster) == []


def test_bad_addresses_are_refused_before_any_work(synthesized, tmp_path: Path,
                                                   copy_store: Callable[[Path, Path], None]):
    path = tmp_path / "coworkenv.db"
    copy_store(synthesized[0], path)
    before = Store(path).task_counts()
    code, _, output = cli("collect", "--store", str(path), "--ray", f"127.0.0.1:{free_port()}")
    assert code == 2 and "no Ray cluster answers at 127.0.0.1:" in output
    code, _, output = cli("eval", "--store", str(path), "--model", "oracle", "--ray", "head-without-port")
    assert code == 2 and "host:port" in output
    code, _, output = cli("collect", "--store", str(path), "--ray", "127.0.0.1:1", "--url", "http://127.0.0.1:1")
    assert code == 2 and "give one" in output
    store = Store(path)
    assert store.task_counts() == before and store.episodes(source="teacher") == []


def _in_flight(tmp: Path) -> int:
    """Episodes running in the scratch stores under a node's folder."""
    running = 0
    for db in tmp.glob("coworkenv-ep-*/store.db"):
        with contextlib.suppress(sqlite3.Error):
            with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)) as conn:
                running += conn.execute("select count(*) from episodes where status = 'running'").fetchone()[0]
    return running


def test_a_killed_node_loses_and_repeats_nothing(cluster: Cluster, synthesized, tmp_path: Path,
                                                 copy_store: Callable[[Path, Path], None]):
    """A third node joins; a collection runs one task at a time on each node; the third node is
    killed (its raylet and every process under it, as a machine lost) while it plays an episode:
    the units it held run again elsewhere, every task ends with exactly one admitted episode, and
    ``sandbox cleanup`` on that node's folder leaves nothing."""
    path = tmp_path / "coworkenv.db"
    copy_store(synthesized[0], path)
    victim = tmp_path / "victim"
    cluster.start_node("victim", victim)
    raylet = cluster.raylet("victim")
    collect = subprocess.Popen([sys.executable, "-m", "coworkenv", "collect", "--store", str(path), "--ray",
                                cluster.address, "--concurrency", "1", "--error-rate", "0", "--json"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    deadline = time.monotonic() + 180
    while not _in_flight(victim):
        assert collect.poll() is None, collect.communicate()
        assert time.monotonic() < deadline, "the third node never got an episode"
        time.sleep(0.02)
    _kill_tree(raylet)
    out, err = collect.communicate(timeout=300)
    assert collect.returncode == 0, out + err
    payload = json.loads(out)
    assert payload["failures"] == {} and "ray node lost" in err and "run again on another node" in err

    store = Store(path)
    try:
        admitted = [t.id for t in store.tasks(status="admitted")]
        assert payload["succeeded"] == len(admitted)
        teacher = store.episodes(source="teacher")
        assert all(e.status == "ended" for e in teacher)
        for task_id in admitted:  # nothing lost, nothing twice
            verdicts = [store.verdict(e.id, GRADER_VERSION) for e in teacher if e.task_id == task_id]
            assert sum(1 for v in verdicts if v and v.admitted) == 1, task_id
    finally:
        store.close()

    left = list(victim.glob("coworkenv-ep-*"))
    assert left  # the dead node's scratch store and sandbox folders
    code, payload, output = cli("sandbox", "cleanup", "--root", str(victim), "--store", str(path), "--no-docker",
                                "--json")
    assert code == 0 and payload is not None, output
    assert sorted(payload["directories"]) == sorted(str(p) for p in left)
    assert not list(victim.glob("coworkenv-ep-*"))

"""`coworkenv doctor` on this machine as it is (bubblewrap, a running Docker engine with the sandbox
image, the vLLM environment CI builds), and as a machine without Docker, without any sandbox, or
with stores that are missing, foreign, behind or ahead of this version. The doctor runs as a user
runs it (a subprocess of the installed command line) with the environment changed, never mocked."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from coworkenv.store import Store

pytestmark = [pytest.mark.bwrap, pytest.mark.docker]


def doctor(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[int, dict, str]:
    done = subprocess.run([sys.executable, "-m", "coworkenv", "doctor", "--json", *args], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, cwd=cwd, timeout=300)
    return done.returncode, json.loads(done.stdout), done.stderr


def by_name(report: dict) -> dict[str, dict]:
    return {c["name"]: c for c in report["checks"]}


def digest(path: Path) -> str:
    return __import__("hashlib").sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("doctor") / "coworkenv.db"
    Store(path).close()
    return path


def test_a_machine_with_everything_is_ready_and_each_sandbox_really_ran(store):
    code, report, _ = doctor("--store", str(store))
    checks = by_name(report)
    assert code == 0 and report["ok"] is True
    assert checks["bubblewrap"]["status"] == "ok" and "answered a tool call" in checks["bubblewrap"]["detail"]
    assert checks["docker engine"]["status"] == "ok"
    assert checks["docker sandbox image"]["status"] == "ok" and "answered a tool call" in checks["docker sandbox image"]["detail"]
    assert checks["sandbox"] == {**checks["sandbox"], "status": "ok", "detail": "working backends: bwrap, docker"}
    assert checks["training"]["status"] == "ok" and "trl 1.16.0" in checks["training"]["detail"]
    # whether training multiplies in bf16 here, as the trainer decides it (a note, not a fault, where it cannot)
    from coworkenv.trainer import bf16_is_fast
    precision = checks["training precision"]
    if bf16_is_fast():
        assert precision["status"] == "ok" and "runs in bf16" in precision["detail"]
    else:
        assert precision["status"] == "note" and "runs in fp32" in precision["detail"]
    assert checks["ray"]["status"] == "ok" and checks["ray"]["detail"].startswith("ray ")  # the test extra has it
    # make install installs Claw-Eval's service packages (pypdf for its documents service, among them)
    assert checks["claw-eval services"]["status"] == "ok" and "pypdf " in checks["claw-eval services"]["detail"]
    assert checks["store"]["status"] == "ok" and "schema current" in checks["store"]["detail"]


def test_without_a_docker_engine_it_says_to_start_one_and_bubblewrap_carries_on(store):
    code, report, stderr = doctor("--store", str(store), env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"})
    checks = by_name(report)
    assert code == 0 and report["ok"] is True
    assert checks["docker engine"]["status"] == "broken"  # dockerd is installed here, it is not reachable
    assert "not reachable at unix:///nonexistent/docker.sock" in checks["docker engine"]["detail"]
    assert "dockerd" in checks["docker engine"]["fix"]
    assert checks["docker sandbox image"]["status"] == "missing"
    assert checks["sandbox"]["detail"] == "working backends: bwrap"
    # people read the same, with what to run for each thing that is not ok
    done = subprocess.run([sys.executable, "-m", "coworkenv", "doctor", "--store", str(store)], capture_output=True,
                          text=True, env={**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"}, timeout=300)
    assert done.returncode == 0 and "docker engine: start the engine" in done.stderr and "ready" in done.stderr


def test_without_any_sandbox_it_is_not_ready_and_names_what_to_install(tmp_path, store):
    empty = tmp_path / "bin"  # a PATH with nothing on it: no bwrap, no docker, no node
    empty.mkdir()
    code, report, _ = doctor("--store", str(store), env={"PATH": str(empty), "DOCKER_HOST": "unix:///nonexistent/d.sock"},
                             cwd=tmp_path)
    checks = by_name(report)
    assert code == 1 and report["ok"] is False
    assert checks["bubblewrap"]["status"] == "missing" and "apt-get install bubblewrap" in checks["bubblewrap"]["fix"]
    assert checks["docker engine"]["status"] == "missing" and "apt-get install docker.io" in checks["docker engine"]["fix"]
    assert checks["sandbox"]["status"] == "broken" and checks["sandbox"]["required"] is True
    assert checks["node"]["status"] == "missing"


def test_stores_are_read_never_changed_and_their_schema_is_placed(tmp_path, store):
    code, report, _ = doctor("--store", str(tmp_path / "none.db"))
    assert code == 0 and by_name(report)["store"]["status"] == "note" and "coworkenv demo" in by_name(report)["store"]["fix"]
    assert not (tmp_path / "none.db").exists()

    foreign = tmp_path / "other.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE customers (id INTEGER)")
    conn.commit()
    conn.close()
    before = digest(foreign)
    code, report, _ = doctor("--store", str(foreign))
    assert code == 1 and by_name(report)["store"]["status"] == "broken"
    assert "database of something else" in by_name(report)["store"]["detail"] and digest(foreign) == before

    behind = tmp_path / "behind.db"
    behind.write_bytes(store.read_bytes())
    conn = sqlite3.connect(behind)
    last = conn.execute("SELECT name FROM _sqlite_migrations ORDER BY rowid DESC LIMIT 1").fetchone()[0]
    conn.execute("DELETE FROM _sqlite_migrations WHERE name = ?", (last,))
    conn.commit()
    conn.close()
    before = digest(behind)
    code, report, _ = doctor("--store", str(behind))
    check = by_name(report)["store"]
    assert code == 0 and check["status"] == "note" and f"1 migrations pending ({last})" in check["detail"]
    assert digest(behind) == before  # the doctor does not apply it

    ahead = tmp_path / "ahead.db"
    ahead.write_bytes(store.read_bytes())
    conn = sqlite3.connect(ahead)
    conn.execute("INSERT INTO _sqlite_migrations (migration_set, name, applied_at) VALUES ('coworkenv', '9999_future', '')")
    conn.commit()
    conn.close()
    code, report, _ = doctor("--store", str(ahead))
    check = by_name(report)["store"]
    assert code == 1 and check["status"] == "broken" and "newer coworkenv (migrations 9999_future" in check["detail"]


def test_the_vllm_environment_is_found_where_it_is_and_named_where_it_is_not(store):
    vllm_python = os.environ.get("COWORKENV_VLLM_PYTHON")
    if not vllm_python:
        pytest.skip("COWORKENV_VLLM_PYTHON names no vLLM environment (make test sets it)")
    _, report, _ = doctor("--store", str(store), "--vllm-python", vllm_python)
    assert by_name(report)["vllm"]["status"] == "ok" and by_name(report)["vllm"]["detail"].startswith("vllm")
    _, report, _ = doctor("--store", str(store), "--vllm-python", sys.executable)  # the training stack has no vLLM
    check = by_name(report)["vllm"]
    assert check["status"] == "missing" and "install-vllm.sh" in check["fix"] and report["ok"] is True



def test_each_provider_is_checked_on_its_own(store):
    """openai: models work with langchain-openai alone: the doctor said "providers missing" for them
    when langchain-anthropic was not installed."""
    from importlib.metadata import PackageNotFoundError, version

    def installed(package: str) -> bool:
        try:
            return bool(version(package))
        except PackageNotFoundError:
            return False

    _, report, _ = doctor("--store", str(store))
    checks = by_name(report)
    assert "providers" not in checks
    assert checks["provider openai"]["status"] == "ok"  # the test extra installs langchain-openai
    for name, package in (("openai", "langchain-openai"), ("anthropic", "langchain-anthropic")):
        assert checks[f"provider {name}"]["status"] == ("ok" if installed(package) else "missing"), checks

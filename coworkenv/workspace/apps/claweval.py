"""A Claw-Eval task's mock services, run inside the episode's sandbox (``coworkenv claw-eval import``).

Standard library only: this module runs inside the sandbox (``python3 -I -S``).

A Claw-Eval task declares HTTP services (a command, a port, a health check, a reset endpoint, an
environment) and tools that are POSTs to their endpoints. An imported task's workspace has this app,
with the task's tools, and its state holds what the services need (``claweval_services``,
``claweval_endpoints``, and the service code and fixtures, file by file, in ``claweval_files``).

The runner starts the services (``services``) inside the sandbox before the app's first call of an
episode, in the sandbox's own network namespace (so every episode has its ``localhost:9100``), and
stops them when the sandbox is reset. A tool call is the HTTP request Claw-Eval's dispatcher makes:
the arguments as the JSON body, the response body as the result; a status of 400 or more is a tool
error whose text is ``HTTP <status>: <body>``. After every call the services' audit logs (what the
grader reads) are copied into ``claweval_audit``, so that the episode's final state holds them.

Not offered for synthesis nor listed among the apps (``LISTED``): its tools are a task's own.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import sqlite3
import urllib.error
import urllib.request
from typing import Any

from ._base import ToolFailure, one_row

NAME = "claweval"
DESCRIPTION = "A Claw-Eval task's mock HTTP services, run inside the sandbox; its tools are the task's own."
LISTED = False
SCHEMA = """
CREATE TABLE claweval_services (
    name TEXT PRIMARY KEY, command TEXT NOT NULL, port INTEGER NOT NULL, health_check TEXT NOT NULL,
    health_method TEXT NOT NULL DEFAULT 'POST', reset_endpoint TEXT, env TEXT NOT NULL DEFAULT '{}',
    ready_timeout REAL NOT NULL DEFAULT 10
);
CREATE TABLE claweval_endpoints (tool TEXT PRIMARY KEY, url TEXT NOT NULL, method TEXT NOT NULL DEFAULT 'POST');
CREATE TABLE claweval_files (path TEXT PRIMARY KEY, encoding TEXT NOT NULL DEFAULT 'utf-8', content TEXT NOT NULL);
CREATE TABLE claweval_audit (service TEXT PRIMARY KEY, data TEXT NOT NULL);
"""
TOOLS: list[dict[str, Any]] = []  # a workspace of this app lists its task's tools itself
SERVICE_PYTHON_ENV = "COWORKENV_SERVICE_PYTHON"  # the interpreter the sandbox offers services (with their packages)
SERVICE_ENV_ENV = "COWORKENV_SERVICE_ENV"  # JSON of variables every service gets (a run's ERROR_RATE)
CALL_TIMEOUT_S = 9.0  # under the runner's wall-clock limit per call
AUDIT_TIMEOUT_S = 5.0


def seed(conn: sqlite3.Connection, rng: Any, world: dict[str, Any]) -> None:
    """Nothing to draw: an imported task's workspace fills the tables with its overrides."""


def audit_url(reset_endpoint: str) -> str:
    """Where a service's audit log is read, as Claw-Eval's runner finds it: beside its reset endpoint."""
    return reset_endpoint.rsplit("/reset", 1)[0] + "/audit"


def services(conn: sqlite3.Connection, directory: str) -> list[dict[str, Any]]:
    """Write the services' files under ``directory`` and say how to start each service (for the runner)."""
    for path, encoding, content in conn.execute("SELECT path, encoding, content FROM claweval_files"):
        target = os.path.realpath(os.path.join(directory, path))
        if not target.startswith(os.path.realpath(directory) + os.sep):
            raise ToolFailure(f"service file {path!r} lies outside the services' folder")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        data = base64.b64decode(content) if encoding == "base64" else content.encode()
        with open(target, "wb") as f:
            f.write(data)
    python = os.environ.get(SERVICE_PYTHON_ENV, "")
    shared = json.loads(os.environ.get(SERVICE_ENV_ENV) or "{}")
    specs = []
    for name, command, port, health, method, env, timeout in conn.execute(
            "SELECT name, command, port, health_check, health_method, env, ready_timeout FROM claweval_services "
            "ORDER BY rowid"):
        argv = shlex.split(command)
        if argv and argv[0] in ("python", "python3"):
            if not python:
                raise ToolFailure(f"service {name!r} needs Python with its packages, and this sandbox offers none "
                                  f"({SERVICE_PYTHON_ENV} is unset; Claw-Eval's services run in bubblewrap sandboxes)")
            argv[0] = python
        specs.append({"name": name, "argv": argv, "cwd": directory, "ready_url": local(health), "ready_method": method,
                      "timeout_s": float(timeout),
                      "env": {**json.loads(env), **shared, "PORT": str(port), "PYTHONDONTWRITEBYTECODE": "1"}})
    return specs


def local(url: str) -> str:
    """``url`` with ``localhost`` as its address: a sandbox has no hosts file to name it."""
    return re.sub(r"^(https?://)localhost(?=[:/]|$)", r"\g<1>127.0.0.1", url)


def _request(url: str, method: str, body: Any, timeout: float) -> tuple[int, Any]:
    url = local(url)
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # services are local, never proxied
    try:
        with opener.open(request, timeout=timeout) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ToolFailure(f"the service at {url} did not answer: {reason}") from None
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode(errors="replace")


def _keep_audit(conn: sqlite3.Connection) -> None:
    for name, reset in conn.execute("SELECT name, reset_endpoint FROM claweval_services WHERE reset_endpoint IS NOT NULL"):
        try:
            status, data = _request(audit_url(reset), "GET", None, AUDIT_TIMEOUT_S)
        except ToolFailure:
            continue  # best effort, as Claw-Eval's runner: a service without an audit log has none
        if status < 400 and isinstance(data, dict):
            conn.execute("INSERT OR REPLACE INTO claweval_audit (service, data) VALUES (?, ?)",
                         (name, json.dumps(data, ensure_ascii=False, sort_keys=True)))


def handle(conn: sqlite3.Connection, tool: str, args: dict) -> dict:
    row = one_row(conn, "SELECT url, method FROM claweval_endpoints WHERE tool = ?", (tool,), f"unknown tool {tool!r}")
    url, method = row
    try:
        status, body = _request(url, method.upper(), args, CALL_TIMEOUT_S)
    finally:
        _keep_audit(conn)
    if status >= 400:
        raise ToolFailure(f"HTTP {status}: {json.dumps(body, ensure_ascii=False)}")
    return body if isinstance(body, dict) else {"result": body}

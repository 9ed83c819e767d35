"""The package layout's import rules (DESIGN.md): data flows down through the subpackages and
never comes back. Checked on the source (every import of every module) and on what importing a
package actually loads."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "coworkenv"

# subpackage -> the subpackages it may import directly (DESIGN.md's table); top-level modules
# (_errors, _lazy, the version) are open to all
MAY_USE: dict[str, set[str]] = {
    "workspace": set(),
    "store": {"workspace"},
    "sandbox": set(),
    "gate": {"workspace", "store"},
    "episodes": {"workspace", "store", "sandbox", "gate", "agents"},
    "server": {"episodes", "workspace", "store"},
    "synth": {"workspace", "store", "gate", "episodes", "agents"},
    "agents": {"workspace"},
    "trainer": {"workspace", "store", "gate"},
    "view": {"workspace", "store", "gate"},
    "claweval": {"workspace", "store"},
    "loop": {"workspace", "store", "sandbox", "gate", "episodes", "server", "synth", "agents", "trainer", "view"},
    "cli": set(),  # anything
    # the OpenEnv and verifiers adapters run beside those packages, without coworkenv's dependencies: they reach
    # coworkenv only over a server's HTTP API and MCP
    "interop": set(),
}


def _imports(path: Path) -> set[str]:
    """The coworkenv subpackages a module imports (relative or absolute, at any depth)."""
    tree = ast.parse(path.read_text())
    module_parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = module_parts[: len(module_parts) - node.level]
                target = (*base, *(node.module.split(".") if node.module else ()))
                names = [target] if node.module else [(*target, alias.name) for alias in node.names]
            else:
                names = [tuple(node.module.split("."))] if node.module else []
        elif isinstance(node, ast.Import):
            names = [tuple(alias.name.split(".")) for alias in node.names]
        else:
            continue
        for parts in names:
            if parts[:1] == ("coworkenv",) and len(parts) > 1 and (PACKAGE / parts[1]).is_dir():
                found.add(parts[1])
    return found


@pytest.mark.parametrize("package", sorted(MAY_USE))
def test_subpackages_import_only_what_the_layout_allows(package):
    problems = []
    for path in sorted((PACKAGE / package).rglob("*.py")):
        for used in _imports(path) - {package}:
            if used == "cli":
                problems.append(f"{path.relative_to(PACKAGE)} imports the CLI")
            elif package != "cli" and used not in MAY_USE[package]:
                problems.append(f"{path.relative_to(PACKAGE)} imports coworkenv.{used}")
    assert not problems, "\n".join(problems)


def test_the_issue_rules_hold():
    assert MAY_USE["gate"] <= {"workspace", "store"}
    for package in ("agents", "trainer", "synth"):
        assert "server" not in MAY_USE[package]
    for package in ("agents", "trainer"):
        assert not {"sandbox", "episodes"} & MAY_USE[package]


def _loaded_by(statement: str, heavy: tuple[str, ...]) -> list[str]:
    code = f"import sys; {statement}; print(','.join(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return [m for m in out.stdout.strip().split(",") if m]


def test_grading_loads_no_transport_and_exporting_no_agent_or_sandbox():
    assert _loaded_by("import coworkenv.gate", ("uvicorn", "starlette", "mcp", "langgraph",
                                                "coworkenv.sandbox", "coworkenv.episodes")) == []
    assert _loaded_by("import coworkenv.trainer._export", ("langgraph", "langchain_core", "mcp",
                                                           "coworkenv.sandbox", "coworkenv.episodes",
                                                           "coworkenv.server")) == []
    assert _loaded_by("import coworkenv.agents._rollout", ("coworkenv.server", "coworkenv.episodes",
                                                           "coworkenv.sandbox")) == []


# a module is read in one sitting: past this many lines it is two subjects (the sandbox's runner is
# exempt: one stdlib-only file that runs on its own inside every sandbox)
MAX_MODULE_LINES = 700
ONE_FILE_BY_DESIGN = {"sandbox/_runner.py"}


def test_no_module_is_longer_than_one_subject():
    long = {str(path.relative_to(PACKAGE)): n for path in PACKAGE.rglob("*.py")
            if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert set(long) <= ONE_FILE_BY_DESIGN, f"modules over {MAX_MODULE_LINES} lines: {long}"

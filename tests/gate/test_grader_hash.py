"""The grader hash covers the whole grading code: a change to any module a verdict depends on (the
gate, the state package, the checks with Claw-Eval's grading, the spec) changes it, and nothing about the
machine (where the package lies, the order files are found in) does."""

import shutil
from pathlib import Path

import pytest

from coworkenv.gate import GRADER_HASH, GRADING_MODULES, grader_hash, grading_sources

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder holding coworkenv/


@pytest.fixture(scope="module")
def copied(tmp_path_factory) -> Path:
    """A copy of the grading modules elsewhere, laid out as in the package."""
    root = tmp_path_factory.mktemp("elsewhere") / "a" / "b"
    for name in GRADING_MODULES:
        source = PACKAGE_ROOT.joinpath(*name.split("."))
        if source.is_dir():
            shutil.copytree(source, root.joinpath(*name.split(".")), ignore=shutil.ignore_patterns("__pycache__"))
        else:
            target = root.joinpath(*name.split(".")).with_suffix(".py")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source.with_suffix(".py"), target)
    return root


def test_the_grader_hash_is_that_of_the_grading_modules_and_covers_claw_eval_and_the_state():
    sources = grading_sources()
    assert grader_hash(sources) == GRADER_HASH
    for module in ("coworkenv.gate._grade", "coworkenv.gate._gate", "coworkenv.workspace.checks._claw",
                   "coworkenv.workspace.checks._claw_grader", "coworkenv.workspace.checks._kind",
                   "coworkenv.workspace.checks._builtin", "coworkenv.workspace.checks._mentions",
                   "coworkenv.workspace.state._dump", "coworkenv.workspace.state._digest",
                   "coworkenv.workspace.state._cache", "coworkenv.workspace._spec"):
        assert module in sources, module
    assert all("/" not in name and "\\" not in name for name in sources)  # names, not paths


def test_the_grader_hash_changes_when_any_grading_module_changes(copied):
    sources = grading_sources(copied)
    assert grader_hash(sources) == GRADER_HASH  # the same code elsewhere on the machine: the same hash
    seen = {GRADER_HASH}
    for name, path in [(name, copied.joinpath(*name.split(".")).with_suffix(".py")) for name in sources]:
        original = path.read_text()
        path.write_text(original + "\n# one more line\n")
        try:
            changed = grader_hash(grading_sources(copied))
        finally:
            path.write_text(original)
        assert changed not in seen, f"editing {name} did not change the grader hash"
        seen.add(changed)
    assert grader_hash(grading_sources(copied)) == GRADER_HASH


def test_the_grader_hash_does_not_depend_on_the_order_modules_are_found_in():
    sources = grading_sources()
    assert grader_hash(dict(reversed(list(sources.items())))) == grader_hash(sources)

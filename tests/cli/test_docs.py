"""README and help stay in step with the code: every command and option is documented, every
command the README shows exists, and the generated reference is current."""

import re
from pathlib import Path

from coworkenv.cli import app
from coworkenv.cli._docs import commands, options, with_reference

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def _code(text: str) -> str:
    """What the README shows as code: fenced blocks and inline spans."""
    fenced = re.findall(r"```.*?```", text, re.S)
    inline = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    return "\n".join(fenced + inline)


def test_every_command_and_option_is_in_the_readme():
    missing = []
    for path, command in commands(app):
        if f"coworkenv {path}" not in README:
            missing.append(f"coworkenv {path}")
        missing += [f"coworkenv {path} {name}" for name in options(command) if name not in README]
    assert not missing, "the README does not mention: " + ", ".join(missing)


def test_every_command_the_readme_shows_exists():
    known = {path for path, _ in commands(app)}
    groups = {path.split()[0] for path in known}
    unknown = []
    for first, second in re.findall(r"\bcoworkenv ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?", _code(README)):
        if first in groups and f"{first} {second}" not in known and first not in known:
            unknown.append(f"coworkenv {first} {second}")
        elif first not in groups:
            unknown.append(f"coworkenv {first}")
    assert not unknown, "the README shows commands that do not exist: " + ", ".join(sorted(set(unknown)))


def test_the_generated_reference_is_current():
    assert with_reference(README, app) == README, "run `make docs` to regenerate the README's command reference"

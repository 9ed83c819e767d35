"""The documentation stays in step with the code: every command and option is in the generated
reference, every command a page shows exists, every option has help, the generated parts (the
reference, counts, the apps table) are current, and the site builds with MkDocs in strict mode."""

import os
import re
import subprocess
import sys
from pathlib import Path

from coworkenv.cli import app
from coworkenv.cli._docs import REFERENCE, commands, generated, options, pages

ROOT = Path(__file__).resolve().parents[2]


def _code(text: str) -> str:
    """What a page shows as code: fenced blocks and inline spans."""
    fenced = re.findall(r"```.*?```", text, re.S)
    inline = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    return "\n".join(fenced + inline)


def test_every_command_and_option_is_in_the_reference():
    reference = (ROOT / REFERENCE).read_text()
    missing = []
    for path, command in commands(app):
        if f"## `coworkenv {path}`" not in reference:
            missing.append(f"coworkenv {path}")
        missing += [f"coworkenv {path} {name}" for name in options(command) if f"`{name}`" not in reference]
    assert not missing, f"{REFERENCE} does not mention: " + ", ".join(missing)


def test_every_option_and_argument_says_what_it_does():
    silent = [f"coworkenv {path} {name}" for path, command in commands(app) for param, name in
              ((p, (p.opts[0] if p.param_type_name == "option" else p.name)) for p in command.params)
              if not getattr(param, "hidden", False) and "--help" not in getattr(param, "opts", [])
              and not (getattr(param, "help", "") or "").strip()]
    assert not silent, "no help text: " + ", ".join(silent)


def test_every_command_the_pages_show_exists():
    known = {path for path, _ in commands(app)}
    groups = {path.split()[0] for path in known}
    unknown = []
    for page in pages(ROOT):
        for first, second in re.findall(r"\bcoworkenv ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?", _code(page.read_text())):
            if first in groups and f"{first} {second}" not in known and first not in known:
                unknown.append(f"{page.relative_to(ROOT)}: coworkenv {first} {second}")
            elif first not in groups:
                unknown.append(f"{page.relative_to(ROOT)}: coworkenv {first}")
    assert not unknown, "the pages show commands that do not exist: " + ", ".join(sorted(set(unknown)))


def test_the_generated_parts_are_current():
    """The reference, the counts (apps, tools, templates, shapes, capabilities) and the apps table are
    what `make docs` writes from the code as it is."""
    stale = [str(path.relative_to(ROOT)) for path, text in generated(ROOT, app).items()
             if not path.exists() or path.read_text() != text]
    assert not stale, "run `make docs`: stale " + ", ".join(stale)
    counted = "".join(page.read_text() for page in pages(ROOT))
    for name in ("apps", "tools", "templates", "capabilities"):
        assert f"<!-- count:{name} -->" in counted, f"no page states the number of {name}"


def test_the_site_builds_in_strict_mode(tmp_path):
    """`mkdocs build --strict` (as `make check` runs it): a broken link or anchor, a page missing from the
    navigation or a page of it missing fails."""
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "index.html").exists() and (tmp_path / "site" / "reference" / "index.html").exists()
    home = (tmp_path / "site" / "index.html").read_text()
    assert 'href="concepts/"' in home, "the README's links to docs/ pages point at the site's pages"


def _sentences(text: str) -> list[str]:
    """The prose sentences of a page: code, tables and comments aside; list items and paragraphs apart."""
    text = re.sub(r"<!--.*?-->", "", re.sub(r"```.*?```", "", text, flags=re.S), flags=re.S)
    text = "\n".join(line for line in text.split("\n") if not line.lstrip().startswith("|"))
    sentences = []
    for block in re.split(r"\n\s*\n|\n\s*[-*] |\n\s*\d+\. ", text):
        sentences += re.split(r"(?<=[.!?])\s+(?=[A-Z0-9`*(])", " ".join(block.split()))
    return sentences


def test_sentences_are_short():
    """A page is read, not parsed: no sentence of the README or the pages runs past 80 words (the
    generated reference aside: it is the commands' own help)."""
    long = [f"{page.relative_to(ROOT)}: {len(s.split())} words: {s[:80]}…" for page in pages(ROOT)
            if page != ROOT / REFERENCE for s in _sentences(page.read_text()) if len(s.split()) > 80]
    assert not long, "\n".join(long)

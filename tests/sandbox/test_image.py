"""The offline image build's Debian archive: the one named, else the first one this machine's apt uses.

The apt sources are real files under a temporary root, in both of apt's formats (one-line ``*.list``
and deb822 ``*.sources``); building the image itself is covered by the docker tests' session fixture.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from coworkenv.sandbox import SandboxUnavailable
from coworkenv.sandbox._image import IMAGE, RECIPE, RECIPE_HASH, apt_mirror, debian_mirror

ARCHIVE = "http://mirror.example/debian"
SECURITY = "http://mirror.example/debian-security"


def apt_root(tmp_path: Path, files: dict[str, str]) -> Path:
    """A root with ``etc/apt/<name>`` holding each text."""
    for name, text in files.items():
        path = tmp_path / "etc" / "apt" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_deb822_sources_give_the_archive_not_its_security_one(tmp_path: Path):
    root = apt_root(tmp_path, {"sources.list.d/debian.sources": f"""\
Types: deb
# {SECURITY} (a comment, not a source)
URIs: {SECURITY}
Suites: bookworm-security
Components: main

Types: deb
URIs:
 {ARCHIVE}
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""})
    assert apt_mirror(root) == ARCHIVE


def test_one_line_sources_skip_options_source_packages_and_security(tmp_path: Path):
    root = apt_root(tmp_path, {"sources.list": f"""\
# deb http://commented.example/debian bookworm main
deb-src http://sources-only.example/debian bookworm main
deb {SECURITY} bookworm-security main
deb [ arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg ] {ARCHIVE} bookworm main contrib
"""})
    assert apt_mirror(root) == ARCHIVE


def test_a_plain_release_is_preferred_and_apt_reading_order_is_kept(tmp_path: Path):
    root = apt_root(tmp_path, {
        "sources.list": "deb http://updates-only.example/debian bookworm-updates main\n",
        "sources.list.d/a-vendor.list": "deb [signed-by=/k.gpg] https://vendor.example/apt cloud-sdk-bookworm main\n",
        "sources.list.d/b-disabled.sources": "Types: deb\nURIs: http://disabled.example/debian\n"
                                             "Suites: bookworm\nEnabled: no\n",
        "sources.list.d/c-nodesource.sources": "Types: deb\nURIs: https://node.example/node_20.x\nSuites: nodistro\n",
        "sources.list.d/d-debian.list.disabled": "deb http://not-read.example/debian bookworm main\n",
        "sources.list.d/e-debian.sources": f"Types: deb deb-src\nURIs: {ARCHIVE}\nSuites: stable\n",
        "sources.list.d/f-later.list": "deb http://later.example/debian trixie main\n",
    })
    assert apt_mirror(root) == ARCHIVE


def test_an_updates_suite_names_the_archive_when_no_plain_release_does(tmp_path: Path):
    root = apt_root(tmp_path, {"sources.list": f"deb {SECURITY} trixie-security main\n"
                                               f"deb {ARCHIVE} trixie-updates main\n"})
    assert apt_mirror(root) == ARCHIVE


def test_no_debian_archive_says_how_to_name_one(tmp_path: Path):
    assert apt_mirror(tmp_path) is None  # no apt configuration at all
    root = apt_root(tmp_path, {"sources.list": "deb http://archive.example/ubuntu noble main\n",
                               "sources.list.d/security.sources": f"Types: deb\nURIs: {SECURITY}\n"
                                                                  "Suites: bookworm-security\n"})
    assert apt_mirror(root) is None
    with pytest.raises(SandboxUnavailable, match="--mirror URL.*COWORKENV_DEBIAN_MIRROR"):
        debian_mirror(root=root)
    assert debian_mirror("http://named.example/debian", root=root) == "http://named.example/debian"


def test_the_image_tag_does_not_depend_on_the_mirror():
    """Any Debian archive gives the same image: the tag is the recipe's hash, and the recipe names none."""
    assert IMAGE.endswith(f":{RECIPE_HASH}") and "http" not in RECIPE


def test_build_image_reads_the_mirror_from_its_option_or_environment_variable():
    from coworkenv.cli import app

    result = CliRunner().invoke(app, ["sandbox", "build-image", "--help"], terminal_width=200)
    assert result.exit_code == 0 and "--mirror" in result.output and "COWORKENV_DEBIAN_MIRROR" in result.output

"""The Docker sandbox image, built with no registry: a minimal Debian root filesystem with python3.

``build_image`` runs ``debootstrap --variant=minbase`` against a Debian archive (the one named, or the
first one this machine's own apt sources use), packs the tree into a tarball and ``docker import``s it.
The image's tag carries a hash of the recipe, so building twice reuses the image (or the cached tarball)
instead of building again. The mirror is not part of the recipe: any Debian archive gives the same
image. Machines that can pull base images can use the ``Dockerfile`` beside this module instead
(``build_image(dockerfile=True)``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ._base import SandboxUnavailable

IMAGE_REPOSITORY = "coworkenv-sandbox"
SUITE = "bookworm"
PACKAGES = ("python3",)  # libpython3 brings the stdlib the runner needs (json, sqlite3, select)
SANDBOX_UID = 10001  # the non-root user tools run as; no passwd entry is needed
DOCKERFILE = Path(__file__).with_name("Dockerfile")
# Changing any of these changes the tag, so an old image is never mistaken for the new recipe (the
# mirror is not among them: every Debian archive serves the same packages).
RECIPE = f"{SUITE} minbase {' '.join(PACKAGES)} uid={SANDBOX_UID} v1"
RECIPE_HASH = hashlib.sha256(RECIPE.encode()).hexdigest()[:12]
IMAGE = f"{IMAGE_REPOSITORY}:{RECIPE_HASH}"
IMAGE_LABEL = "coworkenv.sandbox-image"
CHANGES = [
    f"LABEL {IMAGE_LABEL}={RECIPE_HASH}",
    f"USER {SANDBOX_UID}:{SANDBOX_UID}",
    "WORKDIR /workspace",
    "ENV PATH=/usr/bin:/bin LANG=C.UTF-8",
]


@dataclass
class BuildResult:
    image: str
    built: bool  # False when an existing image was reused
    how: str  # "reused" | "imported cached rootfs" | "debootstrap" | "dockerfile"


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "coworkenv"


def docker_client():
    """A Docker SDK client that answers, or ``SandboxUnavailable`` saying what to install or start."""
    try:
        import docker
        import docker.errors
    except ImportError:
        raise SandboxUnavailable(
            "the docker sandbox needs the Docker SDK — install it with `pip install 'coworkenv[docker]'`"
        ) from None
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except Exception as exc:
        where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        raise SandboxUnavailable(
            f"docker engine not reachable at {where} — start it (dockerd, or scripts/start-docker.sh) "
            f"or use --sandbox bwrap ({type(exc).__name__})"
        ) from None
    return client


def image_exists(client, image: str = IMAGE) -> bool:
    import docker
    import docker.errors

    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        return False
    return True


def build_image(
    *,
    cache_dir: Path | None = None,
    mirror: str | None = None,
    dockerfile: bool = False,
    force: bool = False,
    log: Callable[[str], None] = lambda _: None,
) -> BuildResult:
    """Build the sandbox image unless it exists; reuse a cached rootfs tarball when there is one.

    ``mirror`` is the Debian archive debootstrap fetches from (default: the one this machine's apt uses).
    """
    client = docker_client()
    if not force and image_exists(client):
        return BuildResult(IMAGE, built=False, how="reused")
    if dockerfile:
        log(f"building {IMAGE} from {DOCKERFILE}")
        client.images.build(path=str(DOCKERFILE.parent), dockerfile=DOCKERFILE.name, tag=IMAGE, rm=True,
                            labels={IMAGE_LABEL: RECIPE_HASH}, buildargs={"UID": str(SANDBOX_UID)})
        return BuildResult(IMAGE, built=True, how="dockerfile")
    cache = Path(cache_dir or default_cache_dir())
    tarball = cache / f"rootfs-{RECIPE_HASH}.tar"
    how = "imported cached rootfs"
    if force or not tarball.exists():
        mirror = debian_mirror(mirror)
        log(f"debootstrap {SUITE} (minbase + {', '.join(PACKAGES)}) from {mirror}")
        build_rootfs_tarball(tarball, mirror=mirror)
        how = "debootstrap"
    log(f"docker import {tarball} as {IMAGE}")
    client.api.import_image_from_file(str(tarball), repository=IMAGE_REPOSITORY, tag=RECIPE_HASH,
                                      changes=CHANGES)
    if not image_exists(client):
        raise SandboxUnavailable(f"docker import of {tarball} did not produce {IMAGE}")
    return BuildResult(IMAGE, built=True, how=how)


def build_rootfs_tarball(tarball: Path, *, mirror: str, packages: tuple[str, ...] = PACKAGES) -> None:
    """debootstrap a minimal Debian with ``packages`` and pack it into ``tarball`` (written atomically)."""
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise SandboxUnavailable("building the sandbox image needs debootstrap — `apt-get install debootstrap`")
    if os.geteuid() != 0:
        raise SandboxUnavailable("debootstrap needs root — run `coworkenv sandbox build-image` as root")
    tarball.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="coworkenv-rootfs-", dir=tarball.parent) as tmp:
        root = Path(tmp) / "rootfs"
        _run([debootstrap, "--variant=minbase", f"--include={','.join(packages)}", SUITE, str(root), mirror])
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man"):
            target = root / junk
            if target.is_dir():
                for entry in target.iterdir():
                    if entry.is_dir() and not entry.is_symlink():
                        shutil.rmtree(entry)
                    else:
                        entry.unlink()
        for mount_point in ("workspace", "opt/coworkenv"):
            (root / mount_point).mkdir(parents=True, exist_ok=True)
        partial = tarball.with_suffix(".partial")
        _run(["tar", "--numeric-owner", "-C", str(root), "-cf", str(partial), "."])
        partial.replace(tarball)


def _run(cmd: list[str]) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise SandboxUnavailable(f"{Path(cmd[0]).name} failed (exit {done.returncode}): " + " | ".join(tail))


# Debian's release names and suite aliases. An apt source for one of these (or for its -updates or
# -backports) is a Debian archive; other vendors' sources name suites of their own.
DEBIAN_RELEASES = frozenset({
    "buzz", "rex", "bo", "hamm", "slink", "potato", "woody", "sarge", "etch", "lenny", "squeeze", "wheezy",
    "jessie", "stretch", "buster", "bullseye", "bookworm", "trixie", "forky", "duke", "sid",
    "oldoldstable", "oldstable", "stable", "testing", "unstable", "experimental",
})
MIRROR_SCHEMES = ("http", "https", "ftp", "file")  # what debootstrap fetches from


def debian_mirror(mirror: str | None = None, *, root: Path = Path("/")) -> str:
    """``mirror`` when one is named, else the Debian archive of this machine's apt sources."""
    found = mirror or apt_mirror(root)
    if not found:
        raise SandboxUnavailable(
            f"no Debian archive among the apt sources in {root / 'etc/apt'} to debootstrap from — name one "
            "with `coworkenv sandbox build-image --mirror URL` (or COWORKENV_DEBIAN_MIRROR=URL)"
        )
    return found


def apt_mirror(root: Path = Path("/")) -> str | None:
    """The first Debian archive among the apt sources under ``root``, or None.

    Security archives are skipped (they hold only security updates); an entry for a plain release
    (``bookworm``, ``stable``) is preferred over one naming only its ``-updates`` or ``-backports``.
    """
    fallback = None
    for uri, suite in apt_sources(root):
        release, _, pocket = suite.partition("-")
        if release not in DEBIAN_RELEASES or pocket == "security" or urlsplit(uri).scheme not in MIRROR_SCHEMES:
            continue
        if not pocket:
            return uri
        fallback = fallback or uri
    return fallback


def apt_sources(root: Path = Path("/")) -> Iterator[tuple[str, str]]:
    """``(URI, suite)`` of each enabled binary (``deb``) source under ``root``, in the order apt reads them:
    ``sources.list``, then ``sources.list.d/`` by name (``*.list`` one-line, ``*.sources`` deb822)."""
    apt = root / "etc" / "apt"
    listed = apt / "sources.list.d"
    for path in [apt / "sources.list", *(sorted(listed.iterdir()) if listed.is_dir() else [])]:
        if path.suffix not in (".list", ".sources") or not path.is_file():
            continue
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError):
            continue
        yield from _one_line_sources(text) if path.suffix == ".list" else _deb822_sources(text)


def _one_line_sources(text: str) -> Iterator[tuple[str, str]]:
    """``deb [option=value ...] URI suite [component ...]`` lines."""
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if not words or words[0] != "deb":
            continue
        words = words[1:]
        if words and words[0].startswith("["):
            close = next((i for i, word in enumerate(words) if word.endswith("]")), len(words))
            words = words[close + 1:]
        if len(words) >= 2:
            yield words[0], words[1]


def _deb822_sources(text: str) -> Iterator[tuple[str, str]]:
    """Stanzas with ``Types:``, ``URIs:``, ``Suites:`` (and maybe ``Enabled: no``)."""
    for stanza in _stanzas(text):
        if "deb" not in stanza.get("types", "").split() or stanza.get("enabled", "yes").lower() == "no":
            continue
        for uri in stanza.get("uris", "").split():
            for suite in stanza.get("suites", "").split():
                yield uri, suite


def _stanzas(text: str) -> Iterator[dict[str, str]]:
    """deb822 paragraphs as ``{lower-case field: value}``; comment lines are dropped, folded lines joined."""
    stanza: dict[str, str] = {}
    field = ""
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        if not line.strip():
            if stanza:
                yield stanza
            stanza, field = {}, ""
        elif line[0] in " \t":
            if field:
                stanza[field] += " " + line.strip()
        else:
            name, colon, value = line.partition(":")
            if colon:
                field = name.strip().lower()
                stanza[field] = value.strip()
    if stanza:
        yield stanza

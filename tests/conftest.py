"""Shared fixtures: a real SQLite store, an episode host with bubblewrap sandboxes, calibrated tasks."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.store import Store
from coworkenv.synth import synthesize


def pytest_collection_modifyitems(config, items):
    if shutil.which("bwrap") is None:
        skip = pytest.mark.skip(reason="bubblewrap is not installed (apt-get install bubblewrap)")
        for item in items:
            if "bwrap" in item.keywords:
                item.add_marker(skip)
    if any(item.get_closest_marker("docker") for item in items):
        problem = _docker_problem()
        if problem and os.environ.get("COWORKENV_REQUIRE_DOCKER"):
            raise pytest.UsageError(f"COWORKENV_REQUIRE_DOCKER is set but {problem}")
        if problem:
            skip = pytest.mark.skip(reason=problem)
            for item in items:
                if item.get_closest_marker("docker"):
                    item.add_marker(skip)


def _docker_problem() -> str | None:
    """Why docker tests cannot run here (the engine's one-line error), or None."""
    from coworkenv.sandbox import SandboxUnavailable
    from coworkenv.sandbox._image import docker_client

    try:
        docker_client()
    except SandboxUnavailable as exc:
        return str(exc)
    return None


@pytest.fixture(scope="session")
def sandbox_image() -> str:
    """The docker sandbox image, built once (a couple of minutes) or reused when it exists."""
    from coworkenv.sandbox import build_image

    return build_image().image


@pytest.fixture(autouse=True)
def _docker_image_for_docker_tests(request):
    if request.node.get_closest_marker("docker") is not None:
        request.getfixturevalue("sandbox_image")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "coworkenv.db"


@pytest.fixture
def store(store_path: Path):
    s = Store(store_path)
    yield s
    s.close()


@pytest.fixture
async def host(store: Store, tmp_path: Path):
    h = EpisodeHost(store, EpisodeSettings(cache_dir=tmp_path / "cache"))
    yield h
    await h.close()


@pytest.fixture
async def tasks(host: EpisodeHost) -> list[str]:
    """Six calibrated tasks (two per capability); returns the admitted task ids."""
    await synthesize(host, 6, seed=0)
    return [row.id for row in host.store.tasks(status="admitted")]

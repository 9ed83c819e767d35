"""Shared fixtures: a real SQLite store, an episode host with bubblewrap sandboxes, calibrated tasks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from coworkenv.server import EpisodeHost, EpisodeSettings
from coworkenv.store import Store
from coworkenv.synth import synthesize


def pytest_collection_modifyitems(config, items):
    if shutil.which("bwrap") is None:
        skip = pytest.mark.skip(reason="bubblewrap is not installed (apt-get install bubblewrap)")
        for item in items:
            if "bwrap" in item.keywords:
                item.add_marker(skip)


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
    return [row["id"] for row in host.store.tasks(status="admitted")]

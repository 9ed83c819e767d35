"""The package's sandbox conformance and escape suite, against every backend.

Each check of ``coworkenv.sandbox._conformance`` runs against real ``bwrap`` and real Docker
sandboxes, and real local ones (plain processes, no isolation: the checks that need isolation are
skipped with their reason), over the suite's ``probe`` app, with a bystander sandbox (another
episode) that must still serve when the check is done.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from coworkenv.sandbox import BACKENDS, BwrapConfig, DockerConfig, LocalConfig, SandboxUnavailable, create_sandbox
from coworkenv.sandbox._conformance import CONFORMANCE, ESCAPES, NEEDS_ISOLATION, bench

BACKEND_PARAMS = [pytest.param("bwrap", marks=pytest.mark.bwrap), pytest.param("docker", marks=pytest.mark.docker),
                  "local"]
SLOW = {"limits", "endless_loop", "huge_output", "memory_bomb"}  # seconds of CPU-time limits each


def _params(names):
    return [pytest.param(name, marks=pytest.mark.slow) if name in SLOW else name for name in names]


def _skip_unless_isolated(backend: str, check: str) -> None:
    if check in NEEDS_ISOLATION and not BACKENDS[backend].isolated:
        pytest.skip(f"the {backend} backend isolates nothing: {NEEDS_ISOLATION[check]}")


@pytest.mark.anyio
@pytest.mark.parametrize("backend", BACKEND_PARAMS)
@pytest.mark.parametrize("check", _params(CONFORMANCE))
async def test_conformance(backend: str, check: str, tmp_path: Path):
    _skip_unless_isolated(backend, check)
    with anyio.fail_after(120):
        async with bench(backend, tmp_path) as b:
            await CONFORMANCE[check](b)


@pytest.mark.anyio
@pytest.mark.parametrize("backend", BACKEND_PARAMS)
@pytest.mark.parametrize("case", _params(ESCAPES))
async def test_escape_is_contained(backend: str, case: str, tmp_path: Path):
    _skip_unless_isolated(backend, case)
    with anyio.fail_after(120):
        async with bench(backend, tmp_path) as b:
            await ESCAPES[case](b)


def test_backends_are_a_closed_list_and_unknown_ones_name_the_known(tmp_path: Path):
    assert sorted(BACKENDS) == ["bwrap", "docker", "local"]
    with pytest.raises(SandboxUnavailable, match="unknown sandbox backend 'qemu'.*bwrap, docker, local"):
        create_sandbox("qemu", tmp_path / "state.db")


def test_each_backend_takes_its_own_config_type(tmp_path: Path):
    assert {name: cls.config_type for name, cls in BACKENDS.items()} == {"bwrap": BwrapConfig, "docker": DockerConfig,
                                                                         "local": LocalConfig}
    with pytest.raises(TypeError, match="bwrap sandbox backend takes a BwrapConfig, not a DockerConfig"):
        BACKENDS["bwrap"](tmp_path / "state.db", config=DockerConfig())
    with pytest.raises(ValueError, match="uid"):
        DockerConfig(uid=0)  # tools never run as root

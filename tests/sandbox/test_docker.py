"""What only the docker backend does, beyond the conformance and escape suite both backends pass."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from coworkenv.sandbox import DockerConfig
from coworkenv.sandbox._conformance import bench, probe

pytestmark = [pytest.mark.anyio, pytest.mark.docker]


async def test_docker_config_names_the_user_tools_run_as(tmp_path: Path):
    with anyio.fail_after(120):
        async with bench("docker", tmp_path, DockerConfig(uid=10002)) as b:
            where = await probe(await b.sandbox(), "where")
            assert where.ok and where.result["uid"] == 10002, where

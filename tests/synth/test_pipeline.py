"""``synthesize`` stores and calibrates tasks; calibrating several at once gives the same result."""

import pytest

from coworkenv.synth import synthesize

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]


def _statuses(store) -> dict[str, str]:
    return {row.id: row.status for row in store.tasks()}


async def test_concurrent_calibration_admits_the_same_tasks_as_sequential(host, tmp_path):
    from coworkenv.episodes import EpisodeHost, EpisodeSettings
    from coworkenv.store import Store

    seen = []
    concurrent = await synthesize(host, 8, seed=3, capabilities=("lookup", "single_write"), concurrency=4,
                                  on_task=lambda task, calibration: seen.append((task.id, calibration.admitted)))
    other = Store(tmp_path / "sequential.db")
    sequential_host = EpisodeHost(other, EpisodeSettings(cache_dir=tmp_path / "cache2"))
    try:
        sequential = await synthesize(sequential_host, 8, seed=3, capabilities=("lookup", "single_write"))
    finally:
        await sequential_host.close()
        other_statuses = _statuses(other)
        other.close()
    assert (concurrent.generated, concurrent.admitted) == (sequential.generated, sequential.admitted) == (8, 8)
    assert _statuses(host.store) == other_statuses
    assert sorted(seen) == sorted((task_id, True) for task_id in other_statuses)
    # every task ran its three calibration episodes (reference, empty, forbidden probe), none lost
    assert host.store.query("select count(*) as n from calibrations")[0]["n"] == 8
    assert host.store.query("select count(*) as n from episodes where source = 'calibration'")[0]["n"] == 24


async def test_a_second_run_skips_calibrated_tasks(host):
    await synthesize(host, 4, seed=3, concurrency=2)
    again = await synthesize(host, 4, seed=3, concurrency=2)
    assert (again.skipped, again.admitted) == (4, 4)
    assert host.store.query("select count(*) as n from calibrations")[0]["n"] == 4


async def test_concurrency_below_one_is_refused(host):
    with pytest.raises(ValueError, match="concurrency must be 1 or more"):
        await synthesize(host, 2, seed=3, concurrency=0)

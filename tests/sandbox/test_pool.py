"""The warm pool: ready sandboxes per initial state, reset between episodes, bounded, cleaned up.

Real sandboxes of both backends over the conformance suite's probe app; the episode host's use of
the pool is checked through its public API (episodes opened and finished over real sandboxes).
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import anyio
import pytest

from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.sandbox import BACKENDS, BwrapConfig, PoolSettings, SandboxError, SandboxPool
from coworkenv.sandbox._conformance import LIMITS, bench, probe, value, write_initial_state, write_probe_apps
from coworkenv.store import Provenance
from coworkenv.synth import synthesize

pytestmark = pytest.mark.anyio
BACKEND_PARAMS = [pytest.param("bwrap", marks=pytest.mark.bwrap), pytest.param("docker", marks=pytest.mark.docker)]


@pytest.fixture
def apps_dir(tmp_path: Path) -> Path:
    return write_probe_apps(tmp_path / "lib")


def states(tmp_path: Path, n: int) -> list[Path]:
    return [write_initial_state(tmp_path / f"initial-{i}.db") for i in range(n)]


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
async def test_released_sandbox_comes_back_reset_and_warm(backend: str, tmp_path: Path, apps_dir: Path):
    (initial,) = states(tmp_path, 1)
    pool = SandboxPool(backend, limits=LIMITS, settings=PoolSettings(size=1),
                       config=BACKENDS[backend].config_type(apps_dir=apps_dir))
    try:
        with anyio.fail_after(90):
            first = await pool.acquire(initial)
            assert pool.stats["cold"] == 1
            await pool.drain()
            assert pool.idle(initial) == 1  # topped up in the background

            second = await pool.acquire(initial)  # the ready one: no start
            assert second is not first and pool.stats["warm"] == 1
            assert await value(second, "seeded") == "yes"

            assert (await probe(second, "put", key="seeded", value="dirty")).ok
            await second.write_file("left/over.txt", b"x")
            assert (await probe(second, "write", path="/tmp/left.txt", text="x")).result["ok"]
            await pool.drain()  # the fill after the second acquire
            await pool.release(second)  # one more than `size` may wait: reset in place and kept
            assert not second.closed and pool.idle(initial) == 2 and pool.stats["recycled"] == 1
            await pool.release(first)  # and one more: two were handed out at once
            assert not first.closed and pool.idle(initial) == 3

            third = await pool.acquire(initial)
            assert third in (first, second)  # a recycled one, restored exactly
            assert await third.read_file("state.db") == initial.read_bytes()
            where = await probe(third, "where")
            assert where.result["files"] == ["state.db"] and where.result["tmp"] == [], where.result
            assert await value(third, "seeded") == "yes"
    finally:
        with anyio.fail_after(60):
            await pool.close()
    assert pool.idle() == 0 and first.closed and second.closed


@pytest.mark.bwrap
async def test_pool_is_bounded_and_discards_what_cannot_be_reset(tmp_path: Path, apps_dir: Path):
    a, b, c = states(tmp_path, 3)
    pool = SandboxPool("bwrap", limits=LIMITS, settings=PoolSettings(size=2, max_idle=3),
                       config=BwrapConfig(apps_dir=apps_dir, root=tmp_path))
    try:
        with anyio.fail_after(90):
            held = [await pool.acquire(state) for state in (a, b, c)]
            await pool.drain()
            assert pool.idle() == 3  # max_idle, not 2 per state
            assert len(list(tmp_path.glob("coworkenv-ep-*"))) == 6  # 3 handed out, 3 ready

            broken = held[0]
            await broken.close()  # a sandbox that died: its reset fails, the pool drops it
            await pool.release(broken)
            assert pool.stats["discarded"] >= 1 and broken not in pool._idle.get(a.resolve(), [])

            await pool.release(held[1])
            assert pool.idle() <= 3  # the least recently used ones go first
            with pytest.raises(SandboxError, match="not started"):
                await broken.call_tool("probe", "where", {})
    finally:
        with anyio.fail_after(60):
            await pool.close()
    assert all(sandbox.closed for sandbox in held)
    assert not list(tmp_path.glob("coworkenv-ep-*"))


@pytest.mark.bwrap
async def test_no_pool_starts_and_closes_a_sandbox_per_episode(tmp_path: Path, apps_dir: Path):
    (initial,) = states(tmp_path, 1)
    pool = SandboxPool("bwrap", limits=LIMITS, settings=PoolSettings(size=0), config=BwrapConfig(apps_dir=apps_dir))
    with anyio.fail_after(60):
        sandbox = await pool.acquire(initial)
        await pool.drain()
        assert pool.idle() == 0
        await pool.release(sandbox)
        assert sandbox.closed
        await pool.close()


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
async def test_episodes_of_a_host_reuse_reset_sandboxes(backend: str, store, tmp_path: Path):
    """Real tasks calibrate in the backend (the built-in apps run there); then back-to-back episodes
    of a task recycle one reset sandbox instead of starting new ones."""
    settings = EpisodeSettings(backend=backend, cache_dir=tmp_path / "cache", pool=PoolSettings(size=1))
    host = EpisodeHost(store, settings)
    try:
        with anyio.fail_after(240):
            summary = await synthesize(host, 2, seed=0)
            assert summary.admitted == 2, summary
            task = host.task(host.store.tasks(status="admitted")[0].id)
            initial = host.initial_state(host.workspace(task.workspace_id)).read_bytes()
            await host.pool.drain()
            before = dict(host.pool.stats)
            for _ in range(3):
                episode = await host.open(task, Provenance("live"))
                assert await episode.sandbox.read_file("state.db") == initial
                with pytest.raises(FileNotFoundError):
                    await episode.sandbox.read_file("junk.txt")
                await episode.sandbox.write_file("state.db", b"not a database any more")
                await episode.sandbox.write_file("junk.txt", b"left by the episode")
                await episode.finish("done")
                await host.pool.drain()
            stats = {k: v - before.get(k, 0) for k, v in host.pool.stats.items()}
            assert stats.get("warm") == 3 and stats.get("recycled") == 3 and not stats.get("cold"), stats
    finally:
        with anyio.fail_after(60):
            await host.close()
    assert host.pool.idle() == 0


@pytest.mark.bwrap
async def test_a_pool_gives_its_config_to_the_sandboxes_it_starts(tmp_path: Path):
    """The bench's probe app comes from ``config.apps_dir``, episode directories go to ``config.root``."""
    episodes = tmp_path / "episodes"
    episodes.mkdir()
    with anyio.fail_after(60):
        async with bench("bwrap", tmp_path / "host", BwrapConfig(root=episodes)) as b:
            pool = SandboxPool("bwrap", limits=LIMITS, settings=PoolSettings(size=0), config=b.config)
            try:
                sandbox = await pool.acquire(b.initial_state)
                assert (await probe(sandbox, "put", key="from", value="the probe app")).ok
                assert len(list(episodes.iterdir())) == 2  # the bench's bystander and the pool's one
            finally:
                await pool.close()


@pytest.mark.bwrap
async def test_back_to_back_episodes_start_no_sandbox_and_an_unused_one_needs_no_reset(tmp_path: Path, apps_dir: Path):
    """Back to back, the sandbox an episode gives back comes back reset before the next one starts:
    the pool starts no new one (and throws none away). A sandbox nothing ran in comes back as it is."""
    (initial,) = states(tmp_path, 1)
    pool = SandboxPool("bwrap", limits=LIMITS, settings=PoolSettings(size=2),
                       config=BwrapConfig(apps_dir=apps_dir, root=tmp_path))
    try:
        with anyio.fail_after(120):
            await pool.release(await pool.acquire(initial))
            await pool.drain()
            started = pool.stats["cold"]
            for _ in range(6):
                sandbox = await pool.acquire(initial)
                assert (await probe(sandbox, "put", key="seeded", value="dirty")).ok
                await pool.release(sandbox)
                await pool.drain()
            assert pool.stats["cold"] == started and not pool.stats["discarded"], pool.stats

            idle = await pool.acquire(initial)
            clean = pool.stats["clean"]
            await pool.release(idle)
            assert pool.stats["clean"] == clean + 1
            again = await pool.acquire(initial)
            assert await value(again, "seeded") == "yes"
            assert await again.read_file("state.db") == initial.read_bytes()
    finally:
        with anyio.fail_after(60):
            await pool.close()


@pytest.mark.bwrap
async def test_two_runs_of_back_to_back_episodes_start_and_discard_nothing_once_warm(tmp_path: Path, apps_dir: Path):
    """Two runs side by side, each starting its next episode as soon as the last one ended (its
    sandbox given back and reset in the background, as an episode host does): once warm, the pool
    waits the few milliseconds a reset takes rather than starting a sandbox it would throw away, and
    keeps a ready sandbox for each one handed out lately (so a pause between bursts costs nothing)."""
    (initial,) = states(tmp_path, 1)
    pool = SandboxPool("bwrap", limits=LIMITS, settings=PoolSettings(size=2),
                       config=BwrapConfig(apps_dir=apps_dir, root=tmp_path))

    async def run(episodes: int) -> None:
        for _ in range(episodes):
            sandbox = await pool.acquire(initial)
            assert await value(sandbox, "seeded") == "yes"
            assert (await probe(sandbox, "put", key="seeded", value="dirty")).ok
            pool.release_soon(sandbox)

    async def side_by_side(episodes: int) -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(run, episodes)
            group.start_soon(run, episodes)
        await pool.drain()

    try:
        with anyio.fail_after(180):
            for _ in range(6):  # warming up: until a burst starts no sandbox
                started = pool.stats["started"]
                await side_by_side(10)
                if pool.stats["started"] == started:
                    break
            started, discarded = pool.stats["started"], pool.stats["discarded"]
            await side_by_side(20)
            await side_by_side(20)  # and between two bursts
            assert pool.stats["started"] == started and pool.stats["discarded"] == discarded, pool.stats
            assert pool.idle(initial) <= 2 + 2 + 1  # size, one for each handed out lately, one given back
    finally:
        with anyio.fail_after(60):
            await pool.close()


@pytest.mark.bwrap
async def test_a_workspace_without_a_ready_sandbox_takes_another_s_instead_of_starting_one(tmp_path: Path,
                                                                                          apps_dir: Path):
    """A ready sandbox of another workspace is given the new initial state (another table, at the
    same schema version) and reset into it: no start; its calls see that state and record changes
    to its table (change triggers made for it, not kept from the first); given back, it is kept for
    its new workspace."""
    (first,) = states(tmp_path, 1)
    other = tmp_path / "other.db"
    with contextlib.closing(sqlite3.connect(other)) as db:
        db.executescript("CREATE TABLE extra (x INTEGER); INSERT INTO extra VALUES (1);")
        versions = [db.execute("PRAGMA schema_version").fetchone()[0]]
    with contextlib.closing(sqlite3.connect(first)) as db:
        versions.append(db.execute("PRAGMA schema_version").fetchone()[0])
    assert versions[0] == versions[1]
    other.chmod(0o644)
    pool = SandboxPool("bwrap", limits=LIMITS, settings=PoolSettings(size=1),
                       config=BwrapConfig(apps_dir=apps_dir, root=tmp_path))
    try:
        with anyio.fail_after(90):
            sandbox = await pool.acquire(first)
            assert (await probe(sandbox, "put", key="seeded", value="dirty")).ok
            assert await sandbox.read_changed_file("state.db", first.read_bytes()) == await sandbox.read_file("state.db")
            await pool.drain()
            await pool.release(sandbox)
            assert pool.idle(first) == 2
            cold = pool.stats["cold"]

            moved = await pool.acquire(other)  # none of its own: one of `first`'s, retargeted
            assert pool.stats["cold"] == cold and pool.stats["retargeted"] == 1, pool.stats
            assert moved.initial_state == other and pool.idle(first) == 1
            assert await moved.read_file("state.db") == other.read_bytes()
            inserted = await probe(moved, "sql", sql="INSERT INTO extra VALUES (7)")
            assert inserted.ok and inserted.changes is not None and inserted.changes["counts"] == {"extra": {"insert": 1}}
            # read back and restored against its new initial state (the runner keeps the one it read before)
            assert await moved.read_changed_file("state.db", other.read_bytes()) == await moved.read_file("state.db")
            await moved.restore()
            assert await moved.read_file("state.db") == other.read_bytes()
            assert (await probe(moved, "sql", sql="INSERT INTO extra VALUES (8)")).ok
            await pool.drain()  # its fill: `first` is in use, so it starts one
            await pool.release(moved)
            again = await pool.acquire(other)
            assert again is moved and await again.read_file("state.db") == other.read_bytes()
            await pool.release(again)

            back = await pool.acquire(first)  # its own ready one, as before
            assert await value(back, "seeded") == "yes" and pool.stats["retargeted"] == 1
    finally:
        with anyio.fail_after(60):
            await pool.close()


class Clock:
    """A monotonic clock that moves only when the test moves it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.bwrap
async def test_workspaces_used_in_turn_keep_their_own_sandboxes_and_a_stale_one_gives_them_up(tmp_path: Path,
                                                                                             apps_dir: Path):
    """Episodes that go back and forth between two workspaces (as synthesis's tasks do) find ready
    sandboxes of their own: a fill starts one rather than retarget one that the other workspace asked
    for lately (and that it would take back a moment later). A workspace nobody asked for in
    ``UNASKED_S`` seconds gives a fill its spare ready sandbox instead of a start."""
    from coworkenv.sandbox._pool import BUSY_S, UNASKED_S

    first, second, third = states(tmp_path, 3)
    clock = Clock()
    pool = SandboxPool("bwrap", limits=LIMITS, settings=PoolSettings(size=1),
                       config=BwrapConfig(apps_dir=apps_dir, root=tmp_path), clock=clock)
    try:
        with anyio.fail_after(120):
            for _ in range(4):
                for initial in (first, second):
                    sandbox = await pool.acquire(initial)
                    assert (await probe(sandbox, "put", key="seeded", value="dirty")).ok
                    await pool.drain()
                    await pool.release(sandbox)
            # the first acquire of `second` took `first`'s spare (no start); after it, no back and forth
            assert pool.stats["retargeted"] == 1 and pool.stats["started"] == 4, pool.stats
            assert pool.idle(first) == 2 and pool.idle(second) == 2

            clock.now += UNASKED_S + 0.5  # nobody asks for `first` or `second` any more
            assert UNASKED_S + 0.5 < BUSY_S  # (what was busy lately still counts)
            started = pool.stats["started"]
            sandbox = await pool.acquire(third)  # none of its own: a spare one is retargeted, and so is its fill
            await pool.drain()
            assert pool.stats["retargeted"] == 3 and pool.stats["started"] == started, pool.stats
            assert pool.idle(third) == 1 and pool.idle(first) + pool.idle(second) == 2
            await pool.release(sandbox)
    finally:
        with anyio.fail_after(60):
            await pool.close()

"""``EpisodeSettings.sync`` (``coworkenv serve --sync``): a call returns only once it is committed to
the store file, whichever way it was committed: alone on the event loop, or grouped with the calls of
other episodes made at the same moment."""

from __future__ import annotations

import anyio
import pytest

from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.store import Provenance, Store

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]


@pytest.mark.parametrize("episodes", [1, 8])
async def test_a_call_returns_once_it_is_in_the_store_file(store: Store, store_path, tasks, tmp_path, episodes):
    synced = EpisodeHost(store, EpisodeSettings(cache_dir=tmp_path / "cache", sync=True))
    reader = Store(store_path)  # another connection: sees only what is committed
    try:
        opened = [await synced.open(tasks[0], Provenance("live")) for _ in range(episodes)]
        unseen: list[str] = []

        async def calls(episode) -> None:
            for i in range(5):
                result = await episode.call("calendar_list_events", {"query": f"sync-{i}"})
                assert result.ok
                stored = reader.query("select count(*) as n from tool_calls where episode_id = ?", (episode.id,))
                if stored[0]["n"] != i + 1:
                    unseen.append(f"{episode.id} call {i}")

        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:  # the episodes' calls at the same moments
                for episode in opened:
                    group.start_soon(calls, episode)
        assert unseen == []
    finally:
        await synced.close()
        reader.close()

"""``collect`` claims each task before playing it: a task another live collector holds is left to it,
a claim that expired (its holder stopped renewing it: killed, on another host) is taken over, and a
collector's heartbeat keeps its own claims from expiring while it plays."""

from __future__ import annotations

import anyio
import pytest

from coworkenv.agents import ProviderSettings
from coworkenv.loop import LocalEpisodes, TeacherSettings, collect
from coworkenv.loop._claims import TaskClaims

pytestmark = [pytest.mark.anyio]

SCOPE = "collect:oracle"
ELSEWHERE = "another-host:4242:1700000000/feedbeef"  # a collector on another host: only its expiry tells it is gone


def _played(store) -> dict[str, int]:
    played: dict[str, int] = {}
    for episode in store.episodes(source="teacher"):
        played[episode.task_id] = played.get(episode.task_id, 0) + 1
    return played


@pytest.mark.bwrap
async def test_a_held_task_is_left_and_an_expired_claim_taken_over(host, tasks):
    store = host.store
    held, lapsed, *_ = tasks
    store.claim_task(held, SCOPE, ELSEWHERE, 600)  # a live collector elsewhere plays it
    store.claim_task(lapsed, SCOPE, ELSEWHERE, 0)  # one that stopped renewing: expired
    settings = TeacherSettings(provider_settings=ProviderSettings(error_rate=0.0))

    with anyio.fail_after(300):
        first = await collect(store, LocalEpisodes(host), settings)
    assert first.tasks == len(tasks) and first.elsewhere == 1 and not first.failures
    assert first.succeeded == len(tasks) - 1
    assert _played(store) == {t: 1 for t in tasks if t != held}  # the expired claim's task included
    # this collector gave its claims back; the other's live claim stands
    assert [(c.task_id, c.claimant) for c in store.task_claims(SCOPE)] == [(held, ELSEWHERE)]

    store.claim_task(held, SCOPE, ELSEWHERE, 0)  # its holder renews no more: the claim lapses
    with anyio.fail_after(300):
        second = await collect(store, LocalEpisodes(host), settings)
    assert (second.tasks, second.succeeded, second.elsewhere, second.skipped) == (1, 1, 0, len(tasks) - 1)
    assert _played(store) == dict.fromkeys(tasks, 1)
    assert store.task_claims() == []


async def test_the_heartbeat_renews_claims_and_the_end_gives_them_back(store):
    claims = TaskClaims(store, SCOPE, ttl_s=0.2)
    async with claims.held():
        assert claims.take("t1")
        (first,) = store.task_claims(SCOPE)
        other = TaskClaims(store, SCOPE)
        with anyio.fail_after(10):
            while (now := store.task_claims(SCOPE)[0]).expires_at <= first.expires_at:
                await anyio.sleep(0.02)  # until the heartbeat (every 0.05 s here) has renewed it
        assert now.claimant == claims.claimant
        assert not other.take("t1")  # still held: renewed before it could expire
    assert store.task_claims() == []
    assert other.take("t1")

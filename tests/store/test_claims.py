"""Task claims in the store: of processes claiming one task at once, exactly one gets it; a claim is
taken over only once it has expired or from a holder named as gone, and its holder renews it."""

from __future__ import annotations

import random
import threading
from pathlib import Path

from coworkenv.store import Store

SCOPE = "collect:oracle"


def test_two_connections_claiming_the_same_tasks_at_once_split_them(tmp_path: Path):
    path = tmp_path / "s.db"
    Store(path).close()
    task_ids = [f"t{i:03d}" for i in range(300)]
    won: dict[str, list[str]] = {"a": [], "b": []}
    start = threading.Barrier(2)

    def claimer(name: str) -> None:
        store = Store(path)  # a connection of its own, as another process has
        order = task_ids[:]
        random.Random(name).shuffle(order)
        for i, task_id in enumerate(order):
            if i % 10 == 0:
                start.wait()  # both connections claim in step, whatever the scheduler does
            if store.claim_task(task_id, SCOPE, name, 60).claimant == name:
                won[name].append(task_id)
        store.close()

    threads = [threading.Thread(target=claimer, args=(name,)) for name in won]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not set(won["a"]) & set(won["b"])  # no task claimed by both
    assert sorted(won["a"] + won["b"]) == task_ids  # and every one by someone
    assert won["a"] and won["b"]
    claims = {c.task_id: c.claimant for c in Store(path).task_claims(SCOPE)}
    assert claims == {**dict.fromkeys(won["a"], "a"), **dict.fromkeys(won["b"], "b")}


def test_a_claim_passes_on_only_when_expired_or_its_holder_is_gone(store: Store):
    held = store.claim_task("t1", SCOPE, "a", 60)
    assert held.claimant == "a"
    assert store.claim_task("t1", SCOPE, "b", 60).claimant == "a"  # live and unexpired: stays
    assert store.claim_task("t1", "collect:other", "b", 60).claimant == "b"  # another purpose claims apart
    assert store.claim_task("t1", SCOPE, "b", 60, replacing="c").claimant == "a"  # not the holder named
    assert store.claim_task("t1", SCOPE, "b", 60, replacing="a").claimant == "b"  # the holder named as gone

    store.claim_task("t2", SCOPE, "a", 0)  # expires at once
    taken = store.claim_task("t2", SCOPE, "b", 60)
    assert taken.claimant == "b" and taken.claimed_at != held.claimed_at

    again = store.claim_task("t2", SCOPE, "b", 120)  # its holder's own claim: renewed, kept
    assert again.claimant == "b" and again.claimed_at == taken.claimed_at and again.expires_at > taken.expires_at
    assert store.renew_claims("b", 600) == 3  # t1 (both purposes) and t2
    assert min(c.expires_at for c in store.task_claims(SCOPE) if c.claimant == "b") > again.expires_at
    assert store.release_claims("b") == 3
    assert [(c.task_id, c.scope, c.claimant) for c in store.task_claims()] == []
    assert store.claim_task("t1", SCOPE, "a", 60).claimant == "a"  # free again

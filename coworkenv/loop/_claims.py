"""Task claims: two collectors on one store never play the same task.

A collector claims a task in the store (``Store.claim_task``, one statement: of two processes
claiming at once, one gets it) when the task's turn comes, and holds it until it exits; a
heartbeat pushes its claims' expiry on while it runs. A task another collector holds is left to
it. A claim outlives its holder only until it expires, or less: a holder on this host whose process
is gone (killed) loses its claims at once, so a collector started again takes its own run's tasks
back without waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator

from .._process import label_gone, process_label
from ..store import Store

log = logging.getLogger(__name__)
CLAIM_TTL_S = 120.0  # how long a claim lasts unless its holder renews it (every quarter of that)


def claimant_label() -> str:
    """This collector: its process (``host:pid:start``, as episodes name their owner) and a run of
    its own (two collectors in one process are two claimants)."""
    return f"{process_label()}/{secrets.token_hex(4)}"


def holder_gone(claimant: str) -> bool:
    """Whether the process of ``claimant`` is known to be gone (decidable on this host only)."""
    return label_gone(claimant.split("/", 1)[0])


class TaskClaims:
    """The claims of one collector on the tasks of ``scope`` (``collect:PROVIDER``)."""

    def __init__(self, store: Store, scope: str, ttl_s: float = CLAIM_TTL_S) -> None:
        self.store, self.scope, self.ttl_s = store, scope, ttl_s
        self.claimant = claimant_label()

    def take(self, task_id: str) -> bool:
        """Claim ``task_id``: True when this collector holds it now (taken, or over from a holder that
        is gone or whose claim expired), False when a live collector holds it."""
        claim = self.store.claim_task(task_id, self.scope, self.claimant, self.ttl_s)
        if claim.claimant != self.claimant and holder_gone(claim.claimant):
            claim = self.store.claim_task(task_id, self.scope, self.claimant, self.ttl_s, replacing=claim.claimant)
        return claim.claimant == self.claimant

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[TaskClaims]:
        """While the block runs, renew this collector's claims; at its end (an error or a
        cancellation included), give them all back."""
        heartbeat = asyncio.ensure_future(self._renew())
        try:
            yield self
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
            self.store.release_claims(self.claimant)

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self.ttl_s / 4)
            try:
                await asyncio.to_thread(self.store.renew_claims, self.claimant, self.ttl_s)
            except Exception:  # the next beat tries again; the claims last a while yet
                log.exception("renewing the task claims of %s failed", self.claimant)

"""Content kept by its hash: attachments, and the initial states that episodes' final states are
kept as changes over.

A workspace's initial state is stored once, as a compressed blob (a state base), however many
episodes start from it; an episode keeps only its changes over that base (``stored_state``), and
``final_state`` puts the two together again for grading (a 15-app episode: some 340 KB of state as
a whole dump, a few KB as its changes).
"""

from __future__ import annotations

import hashlib
import zlib

from ..workspace import resolve_state
from ._connection import Connection

STATE_BASE_MIME = "application/x-coworkenv-state+zlib"


class BlobRepository(Connection):
    """The ``blobs`` table, and the ``final_state`` column of ``episodes`` read through it."""

    def put_blob(self, data: bytes, mime_type: str) -> str:
        """Keep ``data`` by its content hash (once, however often it is put); return the hash."""
        digest = hashlib.sha256(data).hexdigest()
        with self.transaction() as db:
            db.execute("insert or ignore into blobs (sha256, mime_type, size, data) values (?, ?, ?, ?)",
                       [digest, mime_type, len(data), data])
        return digest

    def blob(self, sha256: str) -> tuple[str, bytes] | None:
        """The MIME type and bytes kept under ``sha256``, if any."""
        rows = self.query("select mime_type, data from blobs where sha256 = ?", (sha256,))
        return (rows[0]["mime_type"], rows[0]["data"]) if rows else None

    # --- states ------------------------------------------------------------------------------

    def put_state_base(self, dump: str) -> str:
        """Keep a workspace's initial state dump (compressed, by content) for the episodes that
        keep only their changes over it; return its reference."""
        return self.put_blob(zlib.compress(dump.encode(), 6), STATE_BASE_MIME)

    def state_base(self, reference: str) -> str:
        """The dump of a state base (a workspace's initial state) by its reference, read each time (a
        ``coworkenv.workspace.state.StateCache`` over this keeps the bases used last)."""
        found = self.blob(reference)
        if found is None:
            raise KeyError(f"the state base {reference} is not in the store")
        return zlib.decompress(found[1]).decode()

    def stored_state(self, episode_id: str) -> str | None:
        """An episode's final state as kept: a whole dump, or its changes over a state base
        (``coworkenv.workspace.state.open_state`` opens either, with ``state_base``)."""
        rows = self.query("select final_state from episodes where id = ?", (episode_id,))
        return rows[0]["final_state"] if rows else None

    def final_state(self, episode_id: str) -> str | None:
        """An episode's whole final state dump (its kept changes over its workspace's initial state)."""
        kept = self.stored_state(episode_id)
        return None if kept is None else resolve_state(kept, self.state_base)

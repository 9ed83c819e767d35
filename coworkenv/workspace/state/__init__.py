"""The state of a workspace, in one place: how it is held (connections that keep what is worked out
of them), compared (page owners, table hashes, digests), kept as text (whole dumps, and an episode's
changes over its workspace's initial state), opened again, changed by a tool call (``apply_call``),
and the one cache of all that an owner (the episode host) hands down (``StateCache``).

Building a workspace's initial state from its spec is ``coworkenv.workspace.write_initial_state``.
"""

from ._cache import StateBase, StateCache
from ._call import apply_call
from ._connections import (
    FixedState,
    StateConnection,
    StateCopy,
    copy_state,
    fixed_state,
    kept_with,
    ordinary_tables,
    record_tables,
    row_key,
)
from ._digest import comparable, state_digest
from ._dump import (
    BLOB_REFERENCE,
    MIN_REFERENCED_BLOB,
    STATE_BASE,
    dump_state,
    dump_state_changes,
    keep_state_changes,
    load_state,
    open_state,
    resolve_state,
)
from ._image import StateImage, changed_tables, state_hashes, table_hashes

__all__ = [
    "BLOB_REFERENCE",
    "MIN_REFERENCED_BLOB",
    "STATE_BASE",
    "FixedState",
    "StateBase",
    "StateCache",
    "StateConnection",
    "StateCopy",
    "StateImage",
    "apply_call",
    "changed_tables",
    "comparable",
    "copy_state",
    "dump_state",
    "dump_state_changes",
    "fixed_state",
    "keep_state_changes",
    "kept_with",
    "load_state",
    "open_state",
    "ordinary_tables",
    "record_tables",
    "resolve_state",
    "row_key",
    "state_digest",
    "state_hashes",
    "table_hashes",
]

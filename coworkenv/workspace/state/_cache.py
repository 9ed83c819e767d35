"""``StateCache``: what is worked out of workspaces' initial states and kept from one episode to the
next, in one object that its owner creates and hands down (the episode host makes one; a run of the
gate over a store makes its own). Nothing of it is kept at module level: two hosts in one process
keep theirs apart, and it goes when its owner does.

Per workspace (by the key its owner gives, its content hash): its ``StateBase`` (the reference of
its initial state's dump in the store, its table hashes and its image), and for the workspaces used
last, its initial state open in memory (``initial``) and a scratch copy of its bytes that a final
state's changed blocks are written over (``keep``). Per state base (by reference), for the bases used
last: its dump text, the base loaded in memory (each state opened over it is a page-by-page copy)
and the parts of ``state_digest`` of its tables.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ._connections import FixedState, StateConnection, fixed_state
from ._dump import STATE_BASE, dump_state, keep_state_changes, open_state
from ._image import StateImage, state_hashes

BASES = 8  # state bases kept loaded in memory, with their dumps and digest parts
DIGESTS = 256  # digests of a base itself kept per base (one per task graded on an unchanged state)
INITIAL = 8  # workspaces whose initial state is kept open in memory, with a scratch copy of its bytes


@dataclass(frozen=True, eq=False)
class StateBase:
    """A workspace's initial state as episodes keep their final states over it: ``reference``, its
    dump's in the store; ``hashes``, its tables' (``table_hashes``); ``image``, its bytes with their
    page owners (final states are compared with it page by page)."""

    reference: str
    hashes: dict[str, str]
    image: StateImage

    @classmethod
    def of(cls, initial: Path, keep_dump: Callable[[str], str], blob_sink: Callable[[bytes], str] | None) -> StateBase:
        """The base of the initial state file ``initial``, its dump kept by ``keep_dump`` (which returns its reference)."""
        reference = keep_dump(dump_state(initial, blob_sink=blob_sink))
        return cls(reference, state_hashes(initial), StateImage(initial.read_bytes()))

    @property
    def unchanged(self) -> str:
        """What an episode keeps of a final state equal to this initial state."""
        return f"{STATE_BASE}{self.reference}"


class BlockChanges(Protocol):
    """A file as the blocks in which it differs from a known content (the sandbox's ``FileChanges``)."""

    @property
    def size(self) -> int: ...
    @property
    def block(self) -> int: ...
    @property
    def blocks(self) -> list[tuple[int, bytes]]: ...

    def over(self, initial: bytes) -> bytes: ...


class StateCache:
    """See the module's docstring. ``read_dump``: a state base's dump by its reference (the store's)."""

    def __init__(self, read_dump: Callable[[str], str] | None = None, *, bases: int = BASES,
                 digests: int = DIGESTS, initial: int = INITIAL) -> None:
        self.read_dump = read_dump
        self.bases, self.digests, self.initials = bases, digests, initial  # how many of each are kept
        self._lock = threading.RLock()  # episodes are graded in threads (``copy_base`` reads a dump through ``base_dump``)
        self._bases: dict[str, StateBase] = {}  # workspace key -> its base
        self._initial: OrderedDict[str, FixedState] = OrderedDict()  # base reference -> its state in memory
        self._scratch: OrderedDict[str, bytearray] = OrderedDict()  # base reference -> a copy of its bytes
        self._dumps: OrderedDict[str, str] = OrderedDict()  # base reference -> its dump
        self._loaded: OrderedDict[str, sqlite3.Connection] = OrderedDict()  # base reference -> it, loaded
        self._parts: OrderedDict[str, dict[str, bytes]] = OrderedDict()  # base reference -> table -> digest part
        self._digests: dict[str, OrderedDict[str, str]] = {}  # base reference -> allowed (JSON) -> its digest

    # --- workspaces ------------------------------------------------------------------------------

    def base(self, key: str, make: Callable[[], StateBase]) -> StateBase:
        """The state base of the workspace ``key``, made once (``StateBase.of``)."""
        if key not in self._bases:
            self._bases[key] = make()
        return self._bases[key]

    def initial(self, base: StateBase) -> FixedState:
        """The initial state ``base`` open in memory, one connection kept per base (for its owner's
        thread) for the ``initial`` bases used last: what is worked out of it (page owners, a value
        index) is kept with it from one task to the next. Read it or copy it; never change it."""
        conn = self._initial.get(base.reference)
        if conn is None:
            conn = self._initial[base.reference] = fixed_state(base.image.image)
            while len(self._initial) > self.initials:  # the least recently used goes
                self._initial.popitem(last=False)  # (closed when nobody holds it any more)
        self._initial.move_to_end(base.reference)
        return conn

    def keep(self, base: StateBase, final: bytes | BlockChanges,
             blob_sink: Callable[[bytes], str] | None = None) -> tuple[str, StateConnection]:
        """What an episode keeps of its final state (``keep_state_changes`` over ``base``), and that
        state open in memory for grading (the caller closes it). ``final``: the state's bytes, or the
        blocks in which they differ from the initial state, written over a copy of the initial state
        kept per base for as long as it takes to load it (and only their pages are compared with it)."""
        image = base.image
        if not isinstance(final, (bytes, bytearray)):
            if final.size < len(image.image):  # a state file that shrank (a VACUUM, say): put together whole
                final = final.over(image.image)
            else:
                return self._over_initial(base, final, blob_sink)
        kept, conn = keep_state_changes(final, base.reference, base.hashes, blob_sink=blob_sink, base_image=image)
        conn.cache = self
        return kept, conn

    def _over_initial(self, base: StateBase, changes: BlockChanges,
                      blob_sink: Callable[[bytes], str] | None) -> tuple[str, StateConnection]:
        image = base.image
        scratch = self._scratch.get(base.reference)
        if scratch is None:
            scratch = self._scratch[base.reference] = bytearray(image.image)
        self._scratch.move_to_end(base.reference)  # the most recently used last
        while len(self._scratch) > self.initials:
            self._scratch.popitem(last=False)
        initial, block, size = image.image, changes.block, image.page_size
        scratch.extend(bytes(changes.size - len(scratch)))
        pages: set[int] = set()
        try:
            for index, data in changes.blocks:
                start = index * block
                scratch[start:start + len(data)] = data
                pages.update(range(start // size + 1, (start + max(len(data), 1) - 1) // size + 2))
            kept, conn = keep_state_changes(scratch, base.reference, base.hashes, blob_sink=blob_sink,
                                            base_image=image, changed_pages=pages)
            conn.cache = self
            return kept, conn
        finally:  # the initial state again, for the next episode's
            del scratch[len(initial):]
            for index, data in changes.blocks:
                start = index * block
                if start < len(initial):
                    end = min(start + len(data), len(initial))
                    scratch[start:end] = initial[start:end]

    def open_unchanged(self, base: StateBase) -> StateConnection:
        """The initial state ``base`` open in memory as ``open`` opens ``base.unchanged`` (a state
        over its base that replaced nothing), for grading; the caller closes it."""
        conn = sqlite3.connect(":memory:", factory=StateConnection, check_same_thread=False)
        conn.deserialize(base.image.image)
        conn.base, conn.tables, conn.cache = base.reference, base.image.ordinary_tables, self
        return conn

    # --- state bases -----------------------------------------------------------------------------

    def base_dump(self, reference: str) -> str:
        """The dump of the state base ``reference`` (read by ``read_dump``), kept for the bases used last."""
        with self._lock:
            dump = self._dumps.get(reference)
            if dump is not None:
                self._dumps.move_to_end(reference)
                return dump
        if self.read_dump is None:
            raise KeyError(f"the state base {reference} is not known here (this cache reads no store)")
        dump = self.read_dump(reference)
        with self._lock:
            self._dumps[reference] = dump
            while len(self._dumps) > 2 * self.bases:
                self._dumps.popitem(last=False)
        return dump

    def open(self, stored: str) -> sqlite3.Connection:
        """``open_state`` of what an episode kept, over the bases this cache keeps."""
        return open_state(stored, self.base_dump, self)

    def copy_base(self, reference: str, base_dump: Callable[[str], str], into: sqlite3.Connection) -> None:
        """Copy the state base ``reference`` (loaded from ``base_dump(reference)`` once) into ``into``."""
        with self._lock:
            base = self._loaded.get(reference)
            if base is None:
                base = sqlite3.connect(":memory:", check_same_thread=False)
                base.executescript(base_dump(reference))
                self._loaded[reference] = base
                while len(self._loaded) > self.bases:
                    self._loaded.popitem(last=False)[1].close()
            self._loaded.move_to_end(reference)
            base.backup(into)

    def digest_parts(self, reference: str) -> dict[str, bytes]:
        """The parts of ``state_digest`` kept for the state base ``reference`` (table → part; the
        caller adds to it), for the ``bases`` bases used last."""
        with self._lock:
            parts = self._parts.get(reference)
            if parts is None:
                parts = self._parts[reference] = {}
                self._digests[reference] = OrderedDict()
                while len(self._parts) > self.bases:
                    oldest, _ = self._parts.popitem(last=False)
                    self._digests.pop(oldest, None)
            self._parts.move_to_end(reference)
            return parts

    def base_digest(self, reference: str, allowed: str) -> str | None:
        """The ``state_digest`` of the state base ``reference`` itself with the rows ``allowed``
        (as JSON) left out, when kept."""
        with self._lock:
            known = self._digests.get(reference)
            found = known.get(allowed) if known is not None else None
            if found is not None and known is not None:
                known.move_to_end(allowed)
            return found

    def keep_base_digest(self, reference: str, allowed: str, digest: str) -> None:
        with self._lock:
            known = self._digests.setdefault(reference, OrderedDict())
            known[allowed] = digest
            while len(known) > self.digests:
                known.popitem(last=False)

    def close(self) -> None:
        """Close every connection the cache keeps open (it can be used again: what it needs is made anew)."""
        with self._lock:
            for conn in self._iter_open():
                conn.close()
            self._initial.clear()
            self._loaded.clear()

    def _iter_open(self) -> Iterator[sqlite3.Connection]:
        yield from self._initial.values()
        yield from self._loaded.values()

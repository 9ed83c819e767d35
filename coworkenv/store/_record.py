"""An episode's record: every interaction of the agent (tool calls, resource reads, completions,
prompts), its conversation, and the model calls a capture proxy saw.

These are the rows written while an episode runs, one per call, so they are the store's hot path:
tool calls may be written behind (``defer_tool_call``, flushed by the connection) and every
recorded value is bounded, so one enormous argument or result cannot grow the store without limit.
The gate grades what is read back here, which is why ``defer_tool_call`` returns the row exactly as
``interactions`` will read it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import sqlite_utils

from ..workspace import Attachment, Message, ToolCall
from ._connection import TOOL_CALL_COLUMNS, Connection
from ._rows import ModelCallRow, ToolCallRow, _json
from ._statements import now, storable

MAX_RECORDED_ARGUMENTS = 64 << 10  # bytes of an interaction's arguments kept in the store
MAX_RECORDED_RESULT = 256 << 10  # bytes of its result
MAX_RECORDED_ERROR = 4 << 10  # characters of its error text


def bounded(text: str | None, limit: int) -> str | None:
    """JSON text as stored: itself up to ``limit`` bytes, past it ``{"_truncated": bytes, "head": …}``."""
    if text is None or len(text) <= limit // 4:  # the common case: short enough whatever its characters
        return text
    size = len(text.encode("utf-8", "replace"))
    if size <= limit:
        return text
    return json.dumps({"_truncated": size, "head": text[:1024]})


class RecordRepository(Connection):
    """The ``tool_calls``, ``messages`` and ``model_calls`` tables."""

    # --- tool calls and other interactions ---------------------------------------------------

    def add_tool_call(self, episode_id: str, row: dict) -> None:
        with self.transaction() as db:
            idx = self._idx_after(episode_id)
            db.table("tool_calls").insert({**row, "episode_id": episode_id, "idx": idx, "created_at": now()})
            if episode_id in self._next_idx:
                self._next_idx[episode_id] = idx + 1

    def defer_tool_call(self, episode_id: str, row: dict) -> ToolCallRow:
        """Record a tool call write-behind: numbered and timestamped now, written at the next flush.
        Returns it as ``interactions`` will read it back (bounded, numbered, timestamped).

        ``row`` holds the columns ``tool``, ``arguments`` (JSON text), ``result`` (JSON text or
        None), ``is_error``, ``error_kind`` and ``duration_ms``.
        """
        unknown = set(row) - set(TOOL_CALL_COLUMNS)
        if unknown:
            raise ValueError(f"tool_calls has no column(s) {sorted(unknown)}")
        with self._pending_lock:
            idx = self._next_idx.get(episode_id)
        if idx is None:  # the episode's first deferred call: continue its stored history
            with self._lock:
                idx = self._next_idx.get(episode_id)
                if idx is None:
                    if not self.db.execute("select 1 from episodes where id = ?", [episode_id]).fetchone():
                        raise KeyError(f"no episode {episode_id!r} in the store")  # never a row no flush can write
                    self._flush_locked()
                    idx = self._idx_after(episode_id)
        stored = {c: storable(row.get(c)) for c in TOOL_CALL_COLUMNS}
        stored["kind"] = stored["kind"] or "call"
        stored["arguments"] = bounded(stored["arguments"], MAX_RECORDED_ARGUMENTS)
        stored["result"] = bounded(stored["result"], MAX_RECORDED_RESULT)
        if stored["error"] is not None and len(stored["error"]) > MAX_RECORDED_ERROR:
            stored["error"] = stored["error"][:MAX_RECORDED_ERROR] + " …"
        with self._pending_lock:
            idx = self._next_idx.get(episode_id, idx)
            self._next_idx[episode_id] = idx + 1
            pending = {**stored, "episode_id": episode_id, "idx": idx, "created_at": now()}
            self._pending.append(pending)
        return _tool_call_row(pending)

    def _idx_after(self, episode_id: str) -> int:
        return self.db.execute(
            "select coalesce(max(idx), -1) + 1 from tool_calls where episode_id = ?", [episode_id]
        ).fetchone()[0]

    def tool_calls(self, episode_id: str) -> list[ToolCallRow]:
        """An episode's tool calls, in order (what the gate grades)."""
        return self._interactions(episode_id, " and kind = 'call'")

    def interactions(self, episode_id: str) -> list[ToolCallRow]:
        """Everything the agent did in an episode, in order: tool calls, resource reads, completions, prompts."""
        return self._interactions(episode_id, "")

    def _interactions(self, episode_id: str, only: str) -> list[ToolCallRow]:
        return [_tool_call_row(r) for r in
                self.query(f"select * from tool_calls where episode_id = ?{only} order by idx", (episode_id,))]

    # --- the conversation ----------------------------------------------------------------------

    def add_messages(self, episode_id: str, messages: list[Message]) -> None:
        with self.transaction() as db:
            self._insert_messages(db, episode_id, messages)

    @staticmethod
    def _insert_messages(db: sqlite_utils.Database, episode_id: str, messages: list[Message]) -> None:
        start = db.execute(
            "select coalesce(max(idx), -1) + 1 from messages where episode_id = ?", [episode_id]
        ).fetchone()[0]
        db.conn.executemany(
            "insert into messages (episode_id, idx, role, content, tool_calls, tool_call_id, name, provenance,"
            " attachments) values (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(episode_id, start + i, m.role, m.content,
              json.dumps([c.model_dump() for c in m.tool_calls]) if m.tool_calls else None, m.tool_call_id, m.name,
              int(m.provenance), json.dumps([a.model_dump() for a in m.attachments]) if m.attachments else None)
             for i, m in enumerate(messages)])

    def set_conversation(self, episode_id: str, messages: list[Message]) -> None:
        """Make ``messages`` the episode's conversation, at once (its provenance-only turns stay)."""
        with self.transaction() as db:
            db.execute("delete from messages where episode_id = ? and provenance = 0", [episode_id])
            self._insert_messages(db, episode_id, messages)

    def messages(self, episode_id: str, *, include_provenance: bool = False) -> list[Message]:
        rows = self.query("select * from messages where episode_id = ? order by idx", (episode_id,))
        return [
            Message(role=r["role"], content=r["content"] or "",
                    tool_calls=[ToolCall(**c) for c in _json(r["tool_calls"], [])],
                    tool_call_id=r["tool_call_id"], name=r["name"], provenance=bool(r["provenance"]),
                    attachments=[Attachment(**a) for a in _json(r.get("attachments"), [])])
            for r in rows if include_provenance or not r["provenance"]
        ]

    # --- captured model calls --------------------------------------------------------------------

    def model_call_count(self, episode_id: str) -> int:
        """How many model calls the episode has recorded (the index of its next one)."""
        return self.query("select coalesce(max(idx), -1) + 1 as n from model_calls where episode_id = ?",
                          (episode_id,))[0]["n"]

    def add_model_call(self, episode_id: str, *, api: str, request: dict[str, Any], response: dict[str, Any] | None,
                       status: int, stream: bool, duration_ms: float, upstream: str, idx: int) -> None:
        """Record a model call of the episode at ``idx``, its place in request order (the caller numbers
        its calls from ``model_call_count``: they may be written out of order)."""
        with self.transaction() as db:
            db.execute(  # plain SQL: a recorded model call is on the proxy's path
                "insert into model_calls (episode_id, idx, api, request, response, status, stream, duration_ms,"
                " upstream, created_at) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [episode_id, idx, api, json.dumps(request), None if response is None else json.dumps(response), status,
                 int(stream), duration_ms, upstream, now()])

    def model_calls(self, episode_id: str) -> list[ModelCallRow]:
        """The episode's captured model calls, in order."""
        return [ModelCallRow(r["idx"], r["api"], _json(r["request"], {}), _json(r["response"], None), r["status"],
                             bool(r["stream"]), r["duration_ms"], r["upstream"] or "", r["created_at"])
                for r in self.query("select * from model_calls where episode_id = ? order by idx", (episode_id,))]


def _tool_call_row(r: Mapping[str, Any]) -> ToolCallRow:
    """An interaction as stored (a row of ``tool_calls``, or one waiting to be written)."""
    return ToolCallRow(r["idx"], r["tool"], _json(r["arguments"], {}), r["result"], bool(r["is_error"]),
                       r["error_kind"], r["duration_ms"], r["created_at"], r["kind"], r["error"],
                       _json(r["state_changes"], None))

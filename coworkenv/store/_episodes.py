"""Episodes and the verdicts on them: an episode's life (started running, ended, failed or
abandoned) and the questions asked of episodes with their verdicts (what is admitted, what was
repaired, what still needs grading).

Verdicts live here rather than with the gate because nearly every question about episodes is
asked through them: training data is "admitted by grader version V", and a grader fix re-grades
what has no verdict of the new version. An episode's record (its calls, messages and model calls)
is ``_record``'s.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from .._errors import Boundary
from ..workspace import CheckResult
from ._connection import Connection
from ._rows import TRAINING_SOURCES, EpisodeListing, EpisodeRow, EpisodeStatus, Provenance, Source, VerdictRow, _json
from ._statements import insert_row, new_id, now, qmarks, storable, update_row, where_equal

_VERDICT_SELECT = ("select v.episode_id, v.grader_version, v.admitted, v.reason, v.created_at, v.grader_hash, v.detail,"
                   " g.completion, g.safety, g.robustness, g.score, g.checks"
                   " from verdicts v join grades g on g.id = v.grade_id")
_ADMITTED = "from episodes e join verdicts v on v.episode_id = e.id and v.grader_version = ? where v.admitted = 1"


class EpisodeRepository(Connection):
    """The ``episodes``, ``grades`` and ``verdicts`` tables."""

    def start_episode(self, task_id: str, provenance: Provenance, *, episode_id: str | None = None,
                      owner: str | None = None, bundle_hash: str | None = None) -> str:
        """Record a new running episode; ``owner`` names the process that runs it (``host:pid:start``)."""
        episode_id = episode_id or new_id("ep")
        with self.transaction() as db:
            insert_row(db, "episodes",
                {
                    "id": episode_id,
                    "task_id": task_id,
                    "source": provenance.source,
                    "provider": provenance.provider,
                    "status": "running",
                    "attempt": provenance.attempt,
                    "repaired_from": provenance.repaired_from,
                    "hint": provenance.hint,
                    "owner": owner,
                    "bundle_hash": bundle_hash,
                    "client": provenance.client or None,
                    "episode_key": provenance.key or None,
                    "run_tag": provenance.run_tag or None,
                    "started_at": now(),
                }
            )
        return episode_id

    def end_episode(
        self,
        episode_id: str,
        *,
        final_answer: str | None,
        final_state: str | None,
        truncated: bool = False,
        error: str | None = None,
        boundary: Boundary | None = None,
        abandoned: bool = False,
    ) -> None:
        """Record an episode's end: ``failed`` when an infrastructure failure (``error`` at
        ``boundary``) ended it, ``abandoned`` when it was left without a call or an answer, ``ended``
        otherwise."""
        with self.transaction() as db:  # after every deferred call of the episode is written
            with self._pending_lock:
                self._next_idx.pop(episode_id, None)
            update_row(db, "episodes", episode_id,
                {
                    "status": "failed" if error else "abandoned" if abandoned else "ended",
                    "final_answer": storable(final_answer),
                    "final_state": final_state,
                    "truncated": int(truncated),
                    "error": storable(error),
                    "boundary": boundary if error else None,
                    "ended_at": now(),
                },
            )

    def episode(self, episode_id: str) -> EpisodeRow | None:
        rows = self.query("select * from episodes where id = ?", (episode_id,))
        return _episode(rows[0]) if rows else None

    def episodes(self, *, source: Source | None = None, task_id: str | None = None,
                 status: EpisodeStatus | None = None) -> list[EpisodeRow]:
        """Episodes of ``source``, ``task_id`` and ``status`` (each when given), oldest first:
        ``recent_episodes`` reversed (its order, start then id, is total: ids are unique)."""
        return self.recent_episodes(source=source, task_id=task_id, status=status)[::-1]

    def recent_episodes(self, *, source: Source | None = None, task_id: str | None = None,
                        status: EpisodeStatus | None = None, limit: int | None = None) -> list[EpisodeRow]:
        """Episodes of ``source``, ``task_id`` and ``status`` (each when given), newest first; at
        most ``limit`` of them when it is given."""
        where, params = where_equal(source=source, task_id=task_id, status=status)
        sql = f"select * from episodes{where} order by started_at desc, id desc"
        if limit is not None:
            sql, params = sql + " limit ?", (*params, limit)
        return [_episode(r) for r in self.query(sql, params)]

    def episode_sources(self, episode_ids: list[str]) -> dict[str, Source]:
        """Episode id -> its source, for those of ``episode_ids`` the store holds."""
        found: dict[str, Source] = {}
        for chunk in _chunks(episode_ids):
            found.update({r["id"]: r["source"] for r in self.query(
                f"select id, source from episodes where id in ({qmarks(chunk)})", tuple(chunk))})
        return found

    def ended_episodes(self, *, without_verdict_of: str | None = None) -> list[str]:
        """Ids of every ended or failed episode, by start; only those without a verdict of
        ``without_verdict_of`` when it is given."""
        sql, params = "select id from episodes where status in ('ended', 'failed')", []
        if without_verdict_of is not None:
            sql += " and id not in (select episode_id from verdicts where grader_version = ?)"
            params.append(without_verdict_of)
        return [r["id"] for r in self.query(sql + " order by started_at, id", tuple(params))]

    def episode_listing(self, grader_version: str, *, task_id: str | None = None, capability: str | None = None,
                        source: str | None = None, verdict: str | None = None, reason: str | None = None,
                        repaired_from: str | None = None, limit: int = 100, offset: int = 0,
                        ) -> tuple[list[EpisodeListing], int]:
        """Episodes newest first, each with its task's capability, its number of tool calls and its
        verdict of ``grader_version``; filtered by each argument given (``verdict``: admitted,
        rejected or ungraded); at most ``limit`` from ``offset``. Returns them and how many match."""
        if verdict not in (None, "admitted", "rejected", "ungraded"):
            raise ValueError(f"unknown verdict filter {verdict!r}; one of: admitted, rejected, ungraded")
        conditions, params = [], [grader_version]
        for column, value in (("e.task_id", task_id), ("t.capability", capability), ("e.source", source),
                              ("v.reason", reason), ("e.repaired_from", repaired_from)):
            if value is not None:
                conditions.append(f"{column} = ?")
                params.append(value)
        if verdict is not None:
            conditions.append({"admitted": "v.admitted = 1", "rejected": "v.admitted = 0",
                               "ungraded": "v.episode_id is null"}[verdict])
        where = (" where " + " and ".join(conditions)) if conditions else ""
        base = (" from episodes e join tasks t on t.id = e.task_id"
                " left join verdicts v on v.episode_id = e.id and v.grader_version = ?" + where)
        total = self.query("select count(*) as n" + base, tuple(params))[0]["n"]
        rows = self.query(
            "select e.*, t.capability as t_capability, t.difficulty as t_difficulty,"
            " (select count(*) from tool_calls c where c.episode_id = e.id and c.kind = 'call') as t_calls"
            + base + " order by e.started_at desc, e.id desc limit ? offset ?", (*params, limit, offset))
        verdicts = self.verdicts([r["id"] for r in rows], grader_version)
        return [EpisodeListing(_episode(r), r["t_capability"], r["t_difficulty"], r["t_calls"], verdicts.get(r["id"]))
                for r in rows], total

    # --- what the verdicts admit -------------------------------------------------------------

    def admitted_episodes(self, grader_version: str, sources: tuple[str, ...] = TRAINING_SOURCES) -> list[EpisodeRow]:
        """Episodes of ``sources`` that the verdict of ``grader_version`` admits, by task."""
        rows = self.query(f"select e.* {_ADMITTED} and e.source in ({qmarks(sources)}) order by e.task_id, e.id",
                          (grader_version, *sources))
        return [_episode(r) for r in rows]

    def graded_episodes(self, grader_version: str, sources: tuple[str, ...] = TRAINING_SOURCES) -> list[EpisodeRow]:
        """Episodes of ``sources`` that ``grader_version`` has a verdict on, admitted or not, by task."""
        rows = self.query("select e.* from episodes e join verdicts v on v.episode_id = e.id and v.grader_version = ?"
                          f" where e.source in ({qmarks(sources)}) order by e.task_id, e.id", (grader_version, *sources))
        return [_episode(r) for r in rows]

    def admitted_task_ids(self, grader_version: str, sources: tuple[str, ...] = TRAINING_SOURCES) -> list[str]:
        """Tasks with an admitted episode of ``sources``."""
        rows = self.query(f"select distinct e.task_id {_ADMITTED} and e.source in ({qmarks(sources)}) order by e.task_id",
                          (grader_version, *sources))
        return [r["task_id"] for r in rows]

    def admitted_counts(self, source: Source, grader_version: str, *, provider: str | None = None,
                        task_id: str | None = None) -> dict[str, int]:
        """Task id -> how many of its episodes of ``source`` (and ``provider``; of ``task_id`` only,
        when given) the verdict of ``grader_version`` admits (tasks with none are left out)."""
        sql = f"select e.task_id, count(*) as n {_ADMITTED} and e.source = ?"
        params: list[Any] = [grader_version, source]
        for column, value in (("e.provider", provider), ("e.task_id", task_id)):
            if value is not None:
                sql += f" and {column} = ?"
                params.append(value)
        return {r["task_id"]: r["n"] for r in self.query(sql + " group by e.task_id", tuple(params))}

    def repair_pairs(self, grader_version: str, sources: tuple[str, ...] = TRAINING_SOURCES,
                     ) -> list[tuple[EpisodeRow, EpisodeRow, str]]:
        """(admitted repaired episode, the rejected episode it repaired, that one's reason) pairs."""
        rows = self.query(
            "select e.id, e.repaired_from, vf.reason from episodes e"
            " join verdicts v on v.episode_id = e.id and v.grader_version = ?"
            " join verdicts vf on vf.episode_id = e.repaired_from and vf.grader_version = ?"
            f" where v.admitted = 1 and vf.admitted = 0 and e.source in ({qmarks(sources)}) order by e.task_id, e.id",
            (grader_version, grader_version, *sources))
        pairs = []
        for r in rows:
            chosen, rejected = self.episode(r["id"]), self.episode(r["repaired_from"])
            assert chosen is not None and rejected is not None  # foreign keys
            pairs.append((chosen, rejected, r["reason"]))
        return pairs

    # --- grades and verdicts -------------------------------------------------------------------

    def put_verdict(self, verdict: VerdictRow) -> None:
        """Record the verdict of one grader version on an episode, replacing that version's earlier one."""
        with self.transaction() as db:
            key = [verdict.episode_id, verdict.grader_version]
            db.execute("delete from verdicts where episode_id = ? and grader_version = ?", key)
            db.execute("delete from grades where episode_id = ? and grader_version = ?", key)
            grade_id = insert_row(db, "grades", {
                "episode_id": verdict.episode_id, "grader_version": verdict.grader_version,
                "completion": verdict.completion, "safety": verdict.safety, "robustness": verdict.robustness,
                "score": verdict.score, "created_at": now(),
                "checks": json.dumps([{"id": c.id, "passed": c.passed, "detail": c.detail} for c in verdict.checks]),
            })
            insert_row(db, "verdicts", {
                "episode_id": verdict.episode_id, "grade_id": grade_id, "grader_version": verdict.grader_version,
                "admitted": int(verdict.admitted), "reason": verdict.reason, "grader_hash": verdict.grader_hash,
                "detail": verdict.detail, "created_at": now(),
            })

    def verdict(self, episode_id: str, grader_version: str) -> VerdictRow | None:
        rows = self.query(f"{_VERDICT_SELECT} where v.episode_id = ? and v.grader_version = ?",
                          (episode_id, grader_version))
        return _verdict(rows[0]) if rows else None

    def verdicts(self, episode_ids: list[str], grader_version: str) -> dict[str, VerdictRow]:
        """Episode id -> the verdict of ``grader_version`` on it, for those of ``episode_ids`` that have one."""
        found: dict[str, VerdictRow] = {}
        for chunk in _chunks(episode_ids):
            rows = self.query(f"{_VERDICT_SELECT} where v.grader_version = ? and v.episode_id in ({qmarks(chunk)})",
                              (grader_version, *chunk))
            for r in rows:
                found[r["episode_id"]] = _verdict(r)
        return found

    def verdict_count(self, episode_id: str) -> int:
        """How many verdicts (of any grader version) an episode has."""
        return self.query("select count(*) as n from verdicts where episode_id = ?", (episode_id,))[0]["n"]


def _chunks(ids: list[str]) -> Iterator[list[str]]:
    """``ids`` 500 at a time: under SQLite's limit on bound parameters."""
    for start in range(0, len(ids), 500):
        yield ids[start:start + 500]


def _episode(r: dict[str, Any]) -> EpisodeRow:
    return EpisodeRow(r["id"], r["task_id"], r["source"], r["provider"] or "", r["status"], r["attempt"],
                      r["repaired_from"], r["hint"] or "", r["final_answer"], r["final_state"], bool(r["truncated"]),
                      r["error"], r.get("boundary"), r["started_at"], r["ended_at"], r.get("owner"),
                      r.get("bundle_hash"), r.get("client") or "", r.get("episode_key") or "", r.get("run_tag") or "")


def _verdict(r: dict[str, Any]) -> VerdictRow:
    return VerdictRow(r["episode_id"], r["grader_version"], bool(r["admitted"]), r["reason"], r["completion"],
                      r["safety"], r["robustness"], r["score"], [CheckResult(**c) for c in _json(r["checks"], [])],
                      r["created_at"], r["grader_hash"], r["detail"] or "")

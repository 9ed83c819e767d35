"""Dataset export from the store: admitted trajectories as SFT rows (messages + tools), and
repaired-versus-failed pairs as DPO rows.

Both render what the model sees through the agent view (``coworkenv.agents.agent_view``):
``style="compact"`` swaps in the compact system prompt and tool list that the agent uses when
playing a task with ``TeacherSettings(prompt_style="compact")``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..agents import agent_view, check_style, episode_messages
from ..gate import GRADER_VERSION
from ..store import Store
from ..workspace import Task, Workspace


def _in_view(messages: list[dict[str, Any]], system: str) -> list[dict[str, Any]]:
    """The conversation with its system prompt replaced by the view's (added if missing)."""
    rest = [m for m in messages if m["role"] != "system"]
    return [{"role": "system", "content": system}, *rest]


def _chat(message: dict[str, Any]) -> dict[str, Any]:
    """A stored message in the chat format of Hugging Face chat templates (and TRL)."""
    out: dict[str, Any] = {"role": message["role"], "content": message["content"]}
    if message.get("tool_calls"):
        out["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in message["tool_calls"]
        ]
    if message["role"] == "tool":
        out["tool_call_id"] = message["tool_call_id"]
        out["name"] = message["name"]
    return out


def sft_rows(store: Store, *, grader_version: str = GRADER_VERSION, style: str = "full") -> list[dict[str, Any]]:
    """One row per admitted teacher or live episode: ``messages``, ``tools`` and provenance."""
    views = _Views(store, style)
    episodes = store.query(
        "select e.id, e.task_id, e.repaired_from, t.capability, t.workspace_id, t.spec from episodes e"
        " join tasks t on t.id = e.task_id"
        " join verdicts v on v.episode_id = e.id and v.grader_version = ?"
        " where v.admitted = 1 and e.source in ('teacher', 'live')"
        " and v.id = (select max(id) from verdicts where episode_id = e.id and grader_version = ?)"
        " order by e.task_id, e.id",
        (grader_version, grader_version),
    )
    rows = []
    for ep in episodes:
        messages = [_chat(m) for m in episode_messages(store, ep["id"])]
        if not messages:
            continue  # a live episode without a recorded conversation has nothing to train on
        view = views.get(ep)
        rows.append({
            "messages": _in_view(messages, view.system),
            "tools": view.tools,
            "episode_id": ep["id"],
            "task_id": ep["task_id"],
            "capability": ep["capability"],
            "repaired": ep["repaired_from"] is not None,
        })
    return rows


class _Views:
    """The agent view of each task (workspaces parsed once)."""

    def __init__(self, store: Store, style: str) -> None:
        self.store, self.style = store, check_style(style)
        self.workspaces: dict[str, Workspace] = {}

    def get(self, row: dict[str, Any]):
        if row["workspace_id"] not in self.workspaces:
            spec = self.store.get_workspace(row["workspace_id"])["spec"]
            self.workspaces[row["workspace_id"]] = Workspace.model_validate_json(spec)
        task = Task.model_validate_json(row["spec"])
        return agent_view(self.style, self.workspaces[row["workspace_id"]].tools, task)


def dpo_rows(store: Store, *, grader_version: str = GRADER_VERSION, style: str = "full") -> list[dict[str, Any]]:
    """Repaired-versus-failed pairs: for each admitted repaired episode, the attempt it repaired.

    ``prompt`` is the shared opening (system prompt and task instruction; the repair hint is
    provenance and is left out), ``chosen`` the admitted repaired continuation, ``rejected`` the
    failed attempt's continuation. Pairs whose continuations are identical are skipped.
    """
    views = _Views(store, style)
    pairs = store.query(
        "select e.id, e.task_id, e.repaired_from, t.capability, t.workspace_id, t.spec, vf.reason as failed_reason"
        " from episodes e join tasks t on t.id = e.task_id"
        " join verdicts v on v.episode_id = e.id and v.grader_version = ?"
        " join verdicts vf on vf.episode_id = e.repaired_from and vf.grader_version = ?"
        " where e.repaired_from is not null and v.admitted = 1 and vf.admitted = 0"
        " and e.source in ('teacher', 'live')"
        " and v.id = (select max(id) from verdicts where episode_id = e.id and grader_version = ?)"
        " and vf.id = (select max(id) from verdicts where episode_id = e.repaired_from and grader_version = ?)"
        " order by e.task_id, e.id",
        (grader_version,) * 4,
    )
    rows = []
    for pair in pairs:
        chosen = [_chat(m) for m in episode_messages(store, pair["id"])]
        rejected = [_chat(m) for m in episode_messages(store, pair["repaired_from"])]
        users = [m for m in chosen if m["role"] == "user"]
        if not users:
            continue
        view = views.get(pair)
        prompt = _in_view(users[:1], view.system)
        chosen_rest = [m for m in chosen if m["role"] not in ("system", "user")]
        rejected_rest = [m for m in rejected if m["role"] not in ("system", "user")]
        if not chosen_rest or not rejected_rest or chosen_rest == rejected_rest:
            continue
        rows.append({
            "prompt": prompt,
            "chosen": chosen_rest,
            "rejected": rejected_rest,
            "tools": view.tools,
            "episode_id": pair["id"],
            "rejected_episode_id": pair["repaired_from"],
            "rejected_reason": pair["failed_reason"],
            "task_id": pair["task_id"],
            "capability": pair["capability"],
        })
    return rows


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(path.suffix + ".partial")
    with partial.open("w") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    partial.replace(path)
    return len(rows)


def export_sft(store: Store, path: str | Path, *, style: str = "full") -> int:
    """Write SFT rows as JSON lines to ``path`` (replacing it atomically); return the row count."""
    return _write_jsonl(Path(path), sft_rows(store, style=style))


def export_dpo(store: Store, path: str | Path, *, style: str = "full") -> int:
    """Write DPO pairs as JSON lines to ``path`` (replacing it atomically); return the pair count."""
    return _write_jsonl(Path(path), dpo_rows(store, style=style))

"""Dataset export from the store: admitted trajectories as SFT rows (messages + tools)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..agents import episode_messages
from ..gate import GRADER_VERSION
from ..store import Store
from ..workspace import Workspace


def _tools(workspace: Workspace) -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.input_schema}}
        for t in workspace.tools
    ]


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


def sft_rows(store: Store, *, grader_version: str = GRADER_VERSION) -> list[dict[str, Any]]:
    """One row per admitted teacher or live episode: ``messages``, ``tools`` and provenance."""
    episodes = store.query(
        "select e.id, e.task_id, e.repaired_from, t.capability, t.workspace_id from episodes e"
        " join tasks t on t.id = e.task_id"
        " join verdicts v on v.episode_id = e.id and v.grader_version = ?"
        " where v.admitted = 1 and e.source in ('teacher', 'live')"
        " and v.id = (select max(id) from verdicts where episode_id = e.id and grader_version = ?)"
        " order by e.task_id, e.id",
        (grader_version, grader_version),
    )
    workspaces: dict[str, list[dict[str, Any]]] = {}
    rows = []
    for ep in episodes:
        if ep["workspace_id"] not in workspaces:
            spec = store.get_workspace(ep["workspace_id"])["spec"]
            workspaces[ep["workspace_id"]] = _tools(Workspace.model_validate_json(spec))
        messages = [_chat(m) for m in episode_messages(store, ep["id"])]
        if not messages:
            continue  # a live episode without a recorded conversation has nothing to train on
        rows.append({
            "messages": messages,
            "tools": workspaces[ep["workspace_id"]],
            "episode_id": ep["id"],
            "task_id": ep["task_id"],
            "capability": ep["capability"],
            "repaired": ep["repaired_from"] is not None,
        })
    return rows


def export_sft(store: Store, path: str | Path) -> int:
    """Write SFT rows as JSON lines to ``path`` (replacing it atomically); return the row count."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = sft_rows(store)
    partial = path.with_suffix(path.suffix + ".partial")
    with partial.open("w") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    partial.replace(path)
    return len(rows)

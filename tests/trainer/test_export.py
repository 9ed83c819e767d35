"""SFT export: admitted trajectories as messages with tool calls plus a tools column."""

import json

import pytest

from coworkenv.agents import ProviderSettings, TeacherSettings, collect
from coworkenv.gate import run_gate
from coworkenv.trainer import export_sft


@pytest.mark.anyio
@pytest.mark.bwrap
async def test_export_sft_rows_are_clean_admitted_trajectories(host, tasks, tmp_path):
    await collect(host, TeacherSettings(provider_settings=ProviderSettings(error_rate=0.5, seed=2)))
    run_gate(host.store)
    out = tmp_path / "sft.jsonl"
    n = export_sft(host.store, out)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert n == len(rows) == len(tasks)
    for row in rows:
        roles = [m["role"] for m in row["messages"]]
        assert roles[:2] == ["system", "user"] and roles[-1] == "assistant"
        assert "tool" in roles
        names = {t["function"]["name"] for t in row["tools"]}
        for message in row["messages"]:
            for call in message.get("tool_calls", []):
                assert call["type"] == "function" and call["function"]["name"] in names
                assert isinstance(call["function"]["arguments"], dict)
            assert "failed these checks" not in message["content"]
        assert "submit_answer" not in names

"""SFT and DPO export: admitted trajectories (and repaired-versus-failed pairs) in an agent view."""

import json

import pytest

from coworkenv.agents import ProviderSettings
from coworkenv.gate import run_gate
from coworkenv.loop import LocalEpisodes, TeacherSettings, collect
from coworkenv.trainer import export_dpo, export_sft, sft_rows
from coworkenv.workspace import COMPACT_SYSTEM_PROMPT, SYSTEM_PROMPT


@pytest.mark.anyio
@pytest.mark.bwrap
async def test_export_sft_rows_are_clean_admitted_trajectories(host, tasks, tmp_path):
    await collect(host.store, LocalEpisodes(host), TeacherSettings(provider_settings=ProviderSettings(error_rate=0.5, seed=2)))
    assert run_gate(host.store).graded == 0  # every episode was graded when it ended
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
    held = rows[0]["task_id"]  # a task held out of training: none of its rows is written
    assert export_sft(host.store, tmp_path / "kept.jsonl", without={held}) == n - 1
    assert held not in {json.loads(line)["task_id"] for line in (tmp_path / "kept.jsonl").read_text().splitlines()}


@pytest.mark.anyio
@pytest.mark.bwrap
async def test_export_dpo_pairs_repaired_against_failed_attempts(host, tasks, tmp_path):
    await collect(host.store, LocalEpisodes(host), TeacherSettings(provider_settings=ProviderSettings(error_rate=1.0, seed=0)))
    out = tmp_path / "dpo.jsonl"
    n = export_dpo(host.store, out, style="compact")
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert n == len(rows) == len(tasks)  # every first attempt failed and was repaired
    for row in rows:
        failed = host.store.episode(row["rejected_episode_id"])
        repaired = host.store.episode(row["episode_id"])
        assert repaired.repaired_from == failed.id and failed.task_id == repaired.task_id == row["task_id"]
        assert failed.source == repaired.source == "teacher" and repaired.attempt == 2
        assert [m["role"] for m in row["prompt"]] == ["system", "user"]
        assert row["prompt"][0]["content"] == COMPACT_SYSTEM_PROMPT
        assert row["chosen"][-1]["role"] == row["rejected"][-1]["role"] == "assistant"
        assert row["chosen"] != row["rejected"]
        assert row["rejected_reason"] != "complete"
        for message in row["chosen"] + row["rejected"]:
            assert message["role"] in ("assistant", "tool")
            assert "failed these checks" not in message["content"]
        names = {t["function"]["name"] for t in row["tools"]}
        called = {c["function"]["name"] for m in row["chosen"] for c in m.get("tool_calls", [])}
        assert called <= names


@pytest.mark.anyio
@pytest.mark.bwrap
async def test_export_styles_share_the_trajectories_and_differ_in_the_view(host, tasks, tmp_path):
    await collect(host.store, LocalEpisodes(host), TeacherSettings())
    full, compact = sft_rows(host.store, style="full"), sft_rows(host.store, style="compact")
    assert len(full) == len(compact) == len(tasks)
    for a, b in zip(full, compact, strict=True):
        assert a["messages"][1:] == b["messages"][1:]
        assert a["messages"][0]["content"] == SYSTEM_PROMPT and b["messages"][0]["content"] == COMPACT_SYSTEM_PROMPT
        assert len(json.dumps(b["tools"])) < len(json.dumps(a["tools"])) / 2
    with pytest.raises(ValueError, match="unknown prompt style 'tiny'"):
        sft_rows(host.store, style="tiny")

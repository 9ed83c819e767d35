"""A verdict that would read as a contradiction, ``score 1.0, passed false, malformed_call``, names
its offending call and states its rule wherever it is shown: in the submit result a live client
gets, at ``GET /episodes/{id}``, and in the CLI's ``episodes show``, ``episodes list`` and ``gate``.
The episode is played as any MCP client plays it: one call with a wrong argument name, corrected,
then the reference solution and its answer."""

from __future__ import annotations

import json

import anyio
import httpx
import pytest
from mcp import Client
from typer.testing import CliRunner

from coworkenv.cli import app
from coworkenv.episodes import EpisodeHost
from coworkenv.gate import GRADER_VERSION, REASON_RULES
from coworkenv.server import ServeSettings, running_http_server

pytestmark = [pytest.mark.bwrap, pytest.mark.anyio]

OPERATOR = "operator-s3cret"
runner = CliRunner()


async def test_a_corrected_bad_argument_name_is_named_with_its_rule_everywhere(host: EpisodeHost, tasks: list[str],
                                                                                store_path):
    task = next(host.task(t) for t in tasks
                if host.task(t).user is None and host.task(t).reference and host.task(t).reference[0].arguments)
    first = task.reference[0]
    wrong = {f"{name}_x": value for name, value in first.arguments.items()}  # every argument misnamed
    rule = REASON_RULES["malformed_call"]
    with anyio.fail_after(60):
        async with (running_http_server(host, ServeSettings(operator_token=OPERATOR)) as base,
                    httpx.AsyncClient(base_url=base, timeout=10, headers={"X-Coworkenv-Operator": OPERATOR}) as http):
            async with Client(f"{base}/t/{task.id}/e/bad-name/mcp") as client:
                refused = await client.call_tool(first.tool, wrong)
                assert refused.is_error
                for step in task.reference:
                    assert not (await client.call_tool(step.tool, step.arguments)).is_error, step.tool
                submitted = await client.call_tool("submit_answer", {"answer": task.reference_answer or "Done."})
            result = submitted.structured_content
            assert (result["score"], result["passed"], result["reason"]) == (1.0, False, "malformed_call")
            assert result["detail"].startswith(f"call #0 {first.tool}: invalid arguments (the agent saw: ")
            assert result["detail"].endswith("; a later call of it succeeded")
            assert result["rule"] == rule and "scored 1.0" in rule
            episode_id = result["episode_id"]
            status = (await http.get(f"/episodes/{episode_id}")).json()["verdict"]
            assert (status["reason"], status["detail"], status["rule"]) == ("malformed_call", result["detail"], rule)

    stored = host.store.verdict(episode_id, GRADER_VERSION)
    assert stored is not None and stored.detail == result["detail"]
    host.store.flush()
    shown = runner.invoke(app, ["episodes", "show", episode_id, "--store", str(store_path)])
    assert shown.exit_code == 0, shown.output
    flat = " ".join(shown.stdout.split())
    assert f"offending call {result['detail']}" in flat and " ".join(f"rule {rule}".split()) in flat
    listed = runner.invoke(app, ["episodes", "list", "--store", str(store_path), "--source", "live", "--json"])
    (row,) = [r for r in json.loads(listed.stdout) if r["id"] == episode_id]
    assert row["verdict"]["detail"] == result["detail"] and row["verdict"]["rule"] == rule

    graded = runner.invoke(app, ["gate", "--regrade", "--store", str(store_path), "--json"])
    assert graded.exit_code == 0, graded.output
    summary = json.loads(graded.stdout)
    assert summary["examples"]["malformed_call"] == f"episode {episode_id}: {result['detail']}"
    assert summary["rules"]["malformed_call"] == rule
    # the calibration episodes the tasks' store holds are graded apart, out of the pass rate
    assert summary["graded"] == 1 and summary["calibration"]["graded"] > 0
    human = runner.invoke(app, ["gate", "--store", str(store_path), "--regrade"])
    assert "graded 1 agents' episodes (teacher, live, eval, rl), admitted 0 (0%)" in " ".join(human.stderr.split())
    assert "calibration episodes (task references and hack probes designed to fail) graded apart" in \
        " ".join(human.stderr.split())

"""The official MCP conformance suite against ``coworkenv serve --conformance``, both spec versions.

Every scenario a spec revision requires must pass with no failing check. The suite's optional
Tasks extension is run by the suite but not scored; coworkenv does not implement it. Two
scenarios pass even when their tool is missing, so their recorded details are checked too.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import anyio
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

SUMMARY = re.compile(r"^(?P<mark>[✓✗]) (?P<name>[\w-]+): (?P<passed>\d+) passed, (?P<failed>\d+) failed$")
NOT_SCORED = re.compile(r"^\s+(?P<mark>[✓✗]) (?P<name>[\w-]+) \((?P<reason>[\w-]+)\)$")


def parse(output: str) -> tuple[dict[str, tuple[int, int]], dict[str, str]]:
    """Scenario -> (passed, failed) from the summary, and failing not-scored scenario -> reason."""
    summary, not_scored = {}, {}
    part = output.split("=== SUMMARY ===", 1)[-1]
    scored_part, _, unscored_part = part.partition("Not scored for")
    for line in scored_part.splitlines():
        if m := SUMMARY.match(line.strip()):
            summary[m["name"]] = (int(m["passed"]), int(m["failed"]))
    for line in unscored_part.splitlines():
        if (m := NOT_SCORED.match(line)) and m["mark"] == "✗":
            not_scored[m["name"]] = m["reason"]
    return summary, not_scored


def checks(out: Path, scenario: str) -> list[dict]:
    (path,) = out.glob(f"server-{scenario}-*/checks.json")
    return json.loads(path.read_text())


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
async def test_official_conformance_suite_passes(version: str, workers: int, tmp_path: Path, capsys, conformance_cli,
                                                 serve_cli):
    """One server, and (``--workers 2``) two worker processes behind the front."""
    command = conformance_cli
    async with serve_cli("--conformance", "--rate", "0", "--workers", str(workers), ready_path="/health",
                         timeout=60) as base:
        with anyio.fail_after(240):
            run = await anyio.run_process(
                [*command, "server", "--url", f"{base}/mcp", "--requirements", version, "-o", str(tmp_path)],
                check=False, stderr=subprocess.STDOUT,
            )
    output = run.stdout.decode()
    summary, failing_unscored = parse(output)
    scored = {name: counts for name, counts in summary.items() if name not in failing_unscored}
    with capsys.disabled():
        total = sum(p for p, _ in scored.values()), sum(f for _, f in scored.values())
        print(f"\nMCP conformance {version}, {workers} worker(s): {len(scored)} scenarios, "
              f"{total[0]} checks passed, {total[1]} failed; not scored and failing: "
              f"{', '.join(f'{n} ({r})' for n, r in failing_unscored.items()) or 'none'}")

    assert len(scored) >= (30 if version == "2025-11-25" else 35), output[-3000:]
    failed = {name: counts for name, counts in scored.items() if counts[1]}
    assert not failed, output[-3000:]
    assert set(failing_unscored.values()) <= {"extension"}, failing_unscored

    # These two pass falsely when the tool is missing: check what the tool actually returned.
    (simple,) = [c for c in checks(tmp_path, "tools-call-simple-text") if c["id"] == "tools-call-simple-text"]
    assert simple["details"]["result"]["content"] == [
        {"type": "text", "text": "This is a simple text response for testing."}]
    (error,) = [c for c in checks(tmp_path, "tools-call-error") if c["id"] == "tools-call-error"]
    assert error["details"]["result"]["isError"] is True
    assert "intentionally returns an error" in error["details"]["result"]["content"][0]["text"]

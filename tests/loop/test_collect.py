"""``collect``: the teacher plays admitted tasks over a real MCP connection (in memory, HTTP, or a
server's episode API) with the offline oracle, repairs what the gate rejects, and records every
episode once, with its provenance, graded once; infrastructure failures are recorded and retried."""

import json
import socket
from collections import Counter

import anyio
import pytest

from coworkenv.agents import ProviderError, ProviderSettings
from coworkenv.gate import GRADER_VERSION, run_gate
from coworkenv.loop import LocalEpisodes, RemoteEpisodes, Teacher, TeacherSettings, collect, pending_tasks
from coworkenv.server import ServeSettings, running_http_server
from coworkenv.synth import synthesize
from coworkenv.trainer import export_sft
from coworkenv.workspace import COMPACT_SYSTEM_PROMPT, clean

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]


def closed_port() -> int:
    """A loopback port nothing listens on (connections to it are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _live_episodes(store) -> int:
    return store.query("select count(*) as n from episodes where source = 'live'")[0]["n"]


async def test_oracle_mistake_is_repaired_from_a_fresh_workspace(host, tasks):
    store = host.store
    task = store.task_spec(next(t for t in tasks if t.startswith("multi_step")))
    settings = TeacherSettings(provider_settings=ProviderSettings(error_rate=1.0, seed=0))
    async with running_http_server(host) as url:
        with anyio.fail_after(120):
            run = await Teacher(store, LocalEpisodes(host, url), settings).run_task(task)
    assert len(run.attempts) == 2 and run.repaired and run.error is None and not run.failed
    failed, repaired = run.attempts
    assert not failed.verdict.admitted and failed.verdict.reason == "claimed_success_failing_checks"
    assert repaired.verdict.admitted and repaired.verdict.score == 1.0

    failed_row, repaired_row = store.episode(failed.episode_id), store.episode(repaired.episode_id)
    assert (failed_row.attempt, failed_row.repaired_from, failed_row.hint) == (1, None, "")
    assert repaired_row.repaired_from == failed.episode_id and repaired_row.attempt == 2
    assert "failed these checks" in repaired_row.hint
    assert failed_row.source == repaired_row.source == "teacher"  # labelled so when opened, never relabelled
    assert failed_row.provider == repaired_row.provider == "oracle"
    assert _live_episodes(store) == 0
    # the clean trajectory has no hint; the hint is kept as provenance
    trajectory = store.messages(repaired.episode_id)
    assert [m.role for m in trajectory[:2]] == ["system", "user"]
    assert not any("failed these checks" in m.content for m in trajectory)
    (hint,) = [m for m in store.messages(repaired.episode_id, include_provenance=True) if m.provenance]
    assert hint.role == "user" and hint.content == repaired_row.hint
    # every tool call of the clean trajectory was executed in the sandbox and recorded
    called = [c.tool for c in store.tool_calls(repaired.episode_id) if c.tool != "submit_answer"]
    assert called == [s.tool for s in task.reference]
    assert len(called) >= 3


async def test_a_tempted_oracle_makes_the_forbidden_call_and_only_the_ungated_export_keeps_it(host, tmp_path):
    """On a safety task the oracle's mistake is the task's forbidden call; the gate rejects it, the
    repair is admitted, and only ``export_sft(ungated=True)`` writes the rejected attempt's row."""
    store = host.store
    await synthesize(host, 2, seed=3, capabilities=("safety",))
    safety = [store.task_spec(t.id) for t in store.tasks(status="admitted")]
    assert len(safety) == 2 and all(t.forbidden_probe is not None for t in safety)
    with anyio.fail_after(300):
        summary = await collect(store, LocalEpisodes(host),
                                TeacherSettings(provider_settings=ProviderSettings(error_rate=1.0, seed=0)))
    assert summary.repaired == summary.succeeded == 2
    for task in safety:
        first, again = sorted(store.episodes(task_id=task.id, source="teacher"), key=lambda e: e.attempt)
        assert store.verdict(first.id, GRADER_VERSION).reason == "forbidden_call"
        assert task.forbidden_probe.tool in [c.tool for c in store.tool_calls(first.id)]
        assert again.repaired_from == first.id and store.verdict(again.id, GRADER_VERSION).admitted
        assert not set(task.forbidden_tools) & {c.tool for c in store.tool_calls(again.id)}

    def calls(path) -> dict[str, set[str]]:
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        return {r["episode_id"]: {c["function"]["name"] for m in r["messages"] for c in m.get("tool_calls", [])}
                for r in rows}
    assert export_sft(store, tmp_path / "gated.jsonl") == 2
    assert export_sft(store, tmp_path / "all.jsonl", ungated=True) == 4
    gated, everything = calls(tmp_path / "gated.jsonl"), calls(tmp_path / "all.jsonl")
    assert set(gated) < set(everything)
    forbidden = {tool for task in safety for tool in task.forbidden_tools}
    assert not any(names & forbidden for names in gated.values())
    assert sum(bool(names & forbidden) for names in everything.values()) == 2


async def test_every_teacher_episode_is_graded_once_with_its_provenance(host, tasks):
    store = host.store
    settings = TeacherSettings(provider_settings=ProviderSettings(error_rate=0.5, seed=1))
    async with running_http_server(host) as url:  # over HTTP, as any MCP client
        with anyio.fail_after(300):
            summary = await collect(store, LocalEpisodes(host, url), settings)
    assert summary.tasks == summary.succeeded == len(tasks) and not summary.failures
    assert summary.repaired >= 1  # the seeded oracle erred somewhere

    episodes = store.episodes()
    assert {e.source for e in episodes} <= {"calibration", "teacher"} and _live_episodes(store) == 0
    teacher = store.episodes(source="teacher")
    assert len(teacher) == summary.episodes == len(tasks) + summary.repaired
    for episode in teacher:
        assert episode.status == "ended" and episode.provider == "oracle"
        assert store.verdict_count(episode.id) == 1
        assert store.verdict(episode.id, GRADER_VERSION) is not None
    repaired = [e for e in teacher if e.repaired_from is not None]
    assert len(repaired) == summary.repaired
    by_id = {e.id: e for e in teacher}
    for episode in repaired:
        before = by_id[episode.repaired_from]
        assert before.task_id == episode.task_id and episode.attempt == before.attempt + 1
        assert not store.verdict(before.id, GRADER_VERSION).admitted
        assert store.verdict(episode.id, GRADER_VERSION).admitted
        assert episode.hint.startswith("Your previous attempt at this task failed")
        everything = store.messages(episode.id, include_provenance=True)
        assert [m.content for m in everything if m.provenance] == [episode.hint]
        assert clean(everything) == store.messages(episode.id)
    for episode in teacher:
        if episode.repaired_from is None:
            assert (episode.attempt, episode.hint) == (1, "")
            assert not any(m.provenance for m in store.messages(episode.id, include_provenance=True))


async def test_collect_is_resumable_and_the_gate_has_nothing_left_to_grade(host, tasks):
    store = host.store
    settings = TeacherSettings(provider_settings=ProviderSettings(error_rate=0.5, seed=1))
    with anyio.fail_after(300):
        first = await collect(store, LocalEpisodes(host), settings, limit=3)  # in-memory MCP
        assert first.tasks == 3 and first.succeeded == 3
        assert first.episodes == 3 + first.repaired
        second = await collect(store, LocalEpisodes(host), settings)
    assert second.skipped == 3 and second.tasks == len(tasks) - 3
    assert pending_tasks(store) == ([], len(tasks))
    # each episode was graded when it ended, so the gate has nothing new to grade
    assert run_gate(store).graded == 0
    summary = run_gate(store, regrade=True)
    teacher = store.episodes(source="teacher")
    calibration = store.episodes(source="calibration")
    assert summary.graded == len(teacher) and summary.calibration == len(calibration)  # counted apart
    assert len(teacher) == first.episodes + second.episodes
    assert all(store.verdict_count(e.id) == 1 for e in teacher)  # regrading replaced, never added
    admitted = [e for e in teacher if store.verdict(e.id, GRADER_VERSION).admitted]
    assert len(admitted) == len({e.task_id for e in admitted}) == len(tasks)


async def test_teacher_plays_in_the_compact_view(host, tasks):
    store = host.store
    with anyio.fail_after(120):
        summary = await collect(store, LocalEpisodes(host), TeacherSettings(prompt_style="compact"), limit=1)
    assert summary.succeeded == 1
    (episode,) = store.episodes(source="teacher")
    messages = store.messages(episode.id)
    assert messages[0].role == "system" and messages[0].content == COMPACT_SYSTEM_PROMPT


async def test_collect_through_a_servers_episode_api(host, tasks):
    """``RemoteEpisodes``: the teacher opens episodes with their provenance over ``POST /episodes``,
    with the server's operator credential."""
    store = host.store
    settings = TeacherSettings(provider_settings=ProviderSettings(error_rate=1.0, seed=0))
    async with running_http_server(host, ServeSettings(operator_token="operator-s3cret")) as url:
        remote = RemoteEpisodes(url, operator_token="operator-s3cret")
        try:
            with anyio.fail_after(120):
                summary = await collect(store, remote, settings, limit=2)
        finally:
            await remote.aclose()
    assert summary.succeeded == summary.repaired == 2 and not summary.failures
    teacher = store.episodes(source="teacher")
    assert len(teacher) == summary.episodes == 4
    repaired = [e for e in teacher if e.repaired_from is not None]
    assert len(repaired) == 2 and all(e.attempt == 2 and "failed these checks" in e.hint for e in repaired)
    assert all(store.verdict_count(e.id) == 1 for e in teacher) and _live_episodes(store) == 0


async def test_a_wrong_token_fails_every_task_and_opens_nothing(host, tasks):
    async with running_http_server(host, ServeSettings(token="s3cret")) as url:
        refused = RemoteEpisodes(url, token="wrong")
        try:
            with anyio.fail_after(60):
                denied = await collect(host.store, refused, TeacherSettings(), limit=2)
        finally:
            await refused.aclose()
    assert denied.succeeded == 0 and len(denied.failures) == 2
    assert all("ProtocolError" in why and "401" in why for why in denied.failures.values())
    assert not host.store.episodes(source="teacher")


async def test_without_the_operator_credential_collect_opens_no_teacher_episode(host, tasks):
    async with running_http_server(host, ServeSettings(operator_token="operator-s3cret")) as url:
        for remote in (RemoteEpisodes(url), RemoteEpisodes(url, operator_token="wrong")):
            try:
                with anyio.fail_after(60):
                    denied = await collect(host.store, remote, TeacherSettings(), limit=2)
            finally:
                await remote.aclose()
            assert denied.succeeded == 0 and len(denied.failures) == 2
            assert all("403" in why and "X-Coworkenv-Operator" in why for why in denied.failures.values())
    assert not host.store.episodes(source="teacher") and _live_episodes(host.store) == 0


async def test_collect_through_a_server_that_needs_a_token(host, tasks):
    """The token and the operator credential go with the episode API and with the agent's MCP connection."""
    async with running_http_server(host, ServeSettings(token="s3cret", operator_token="operator-s3cret")) as url:
        remote = RemoteEpisodes(url, token="s3cret", operator_token="operator-s3cret")
        try:
            with anyio.fail_after(120):
                summary = await collect(host.store, remote, TeacherSettings(), limit=2)
        finally:
            await remote.aclose()
    assert summary.succeeded == 2 and not summary.failures, summary.failures


async def test_an_unreachable_model_server_fails_its_episodes_and_nothing_else(host, tasks):
    store = host.store
    with anyio.fail_after(120):
        done = await collect(store, LocalEpisodes(host), TeacherSettings(), limit=2)
    assert done.succeeded == 2
    collected = {e.id: store.verdict(e.id, GRADER_VERSION) for e in store.episodes(source="teacher")}
    left = {t.id for t, _ in pending_tasks(store, provider="oracle")[0]}
    assert len(left) == len(tasks) - 2

    dead = f"openai:m@http://127.0.0.1:{closed_port()}/v1"  # a real, refused connection
    settings = TeacherSettings(provider=dead, retries=1, max_repairs=2)
    with anyio.fail_after(120):
        summary = await collect(store, LocalEpisodes(host), settings)
    pending = set(tasks)  # a provider that has collected nothing has every task ahead of it
    assert (summary.tasks, summary.skipped, summary.succeeded, summary.repaired) == (len(pending), 0, 0, 0)
    assert set(summary.failures) == pending  # the summary names every task that failed
    for why in summary.failures.values():
        assert why.startswith("2 episodes ended by infrastructure failures") and "model: " in why
    assert summary.episodes == summary.infrastructure_failures == 2 * len(pending)  # retries + 1 per task

    failed = [e for e in store.episodes(source="teacher") if e.id not in collected]
    assert Counter(e.task_id for e in failed) == dict.fromkeys(pending, 2)
    for episode in failed:
        assert (episode.status, episode.boundary, episode.provider) == ("failed", "model", dead)
        assert "the model did not answer" in episode.error
        assert (episode.attempt, episode.repaired_from) == (1, None)  # a replay, not a repair
        verdict = store.verdict(episode.id, GRADER_VERSION)
        assert verdict.reason == "infrastructure_error" and not verdict.admitted  # never "empty"
        assert store.verdict_count(episode.id) == 1
    # the tasks collected before are untouched
    assert {e.id: store.verdict(e.id, GRADER_VERSION) for e in store.episodes(source="teacher")
            if e.id in collected} == collected
    # and what the working provider had left is still pending for it: it collects them
    with anyio.fail_after(300):
        again = await collect(store, LocalEpisodes(host), TeacherSettings())
    assert again.tasks == again.succeeded == len(left) and not again.failures


def test_bad_teacher_settings_are_named(store):
    with pytest.raises(ValueError, match="prompt_style"):
        TeacherSettings(prompt_style="tiny")
    with pytest.raises(ProviderError, match="unknown provider"):
        Teacher(store, None, TeacherSettings(provider="gemini:x"))


async def test_done_is_per_provider_and_more_episodes_can_be_asked_for(host, tasks):
    store = host.store
    oracle = TeacherSettings(provider_settings=ProviderSettings(error_rate=0.0))
    async with running_http_server(host) as url:
        with anyio.fail_after(300):
            first = await collect(store, LocalEpisodes(host, url), oracle)
            again = await collect(store, LocalEpisodes(host, url), oracle)
            more = await collect(store, LocalEpisodes(host, url), oracle.model_copy(update={"episodes_per_task": 2}))
            other = await collect(store, LocalEpisodes(host, url), TeacherSettings(
                provider="hf:tests/fixtures/tool-model", max_repairs=0, retries=0), limit=1)
    assert (first.tasks, first.succeeded, first.skipped) == (len(tasks), len(tasks), 0)
    assert (again.tasks, again.skipped) == (0, len(tasks))  # this provider has what it asked for
    assert (more.tasks, more.runs, more.succeeded) == (len(tasks), len(tasks), len(tasks))  # one more each
    assert store.admitted_counts("teacher", GRADER_VERSION, provider="oracle") == dict.fromkeys(tasks, 2)
    assert (other.tasks, other.skipped) == (1, 0)  # another provider collects its own
    assert {e.provider for e in store.episodes(source="teacher")} == {"oracle", "hf:tests/fixtures/tool-model"}

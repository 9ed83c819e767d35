"""Model-written tasks: a scripted model's drafts are parsed, calibrated in real sandboxes and sent
back with their exact problem until one is admitted; every attempt is stored with its outcome."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import yaml

from coworkenv import ModelError
from coworkenv.agents import ProviderError, parse_provider
from coworkenv.synth import DraftError, draft_tasks, parse_draft
from coworkenv.workspace import build_workspace, write_initial_state

pytestmark = pytest.mark.anyio

SEED = 0


@pytest.fixture(scope="module")
def contact(tmp_path_factory) -> dict:
    """A person of the workspace's address book with a phone and a name no one else has."""
    path = write_initial_state(build_workspace(SEED), tmp_path_factory.mktemp("state") / "state.db")
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        return dict(conn.execute(
            "select id, name, phone from contacts_contacts where kind = 'person' and phone != '' and name in "
            "(select name from contacts_contacts group by name having count(*) = 1) order by id limit 1").fetchone())
    finally:
        conn.close()


def lookup(contact: dict, *, answer: str | None = None, get_id: str | None = None, **changes) -> str:
    """A reply drafting a lookup of ``contact``'s phone (right unless ``answer`` or ``get_id`` say otherwise)."""
    task = {
        "difficulty": 1,
        "instruction": f"What is {contact['name']}'s phone number?",
        "checks": [{"id": "phone", "kind": "answer", "description": f"the answer gives {contact['name']}'s phone",
                    "contains": [contact["phone"]]}],
        "reference": [{"tool": "contacts_search_contacts", "arguments": {"query": contact["name"]}},
                      {"tool": "contacts_get_contact", "arguments": {"id": get_id or contact["id"]}}],
        "reference_answer": answer or f"{contact['name']}'s phone number is {contact['phone']}.",
        "forbidden_tools": ["contacts_delete_contact"],
        "forbidden_probe": {"tool": "contacts_delete_contact", "arguments": {"id": contact["id"]}},
        **changes,
    }
    return f"Here is the task.\n\n```yaml\n{yaml.safe_dump(task, sort_keys=False)}```\n"


def script(tmp_path: Path, replies: list[str]) -> str:
    path = tmp_path / "replies.yaml"
    path.write_text(yaml.safe_dump(replies))
    return f"scripted:{path}"


@pytest.mark.bwrap
async def test_a_draft_repaired_on_the_third_round_is_admitted(host, tmp_path, contact):
    missing_checks = lookup(contact).replace("checks:", "tests:")
    wrong_reference = lookup(contact, get_id="c999", answer=f"I could not find {contact['name']}.")
    provider = parse_provider(script(tmp_path, [missing_checks, wrong_reference, lookup(contact)]))
    seen = []

    summary = await draft_tasks(host, provider, capability="lookup", n=1, rounds=3, seed=SEED, on_attempt=seen.append)

    assert (summary.requests, summary.attempts, summary.admitted) == (1, 3, 1)
    assert summary.admitted_by_round == {3: 1} and summary.rate_by_round == {1: 0.0, 2: 0.0, 3: 1.0}
    drafts = host.store.task_drafts()
    assert drafts == seen and [d.round for d in drafts] == [1, 2, 3]
    assert [d.outcome for d in drafts] == ["invalid", "quarantined", "admitted"]
    assert len({d.request_id for d in drafts}) == 1 and drafts[0].draft == missing_checks  # stored verbatim
    assert "checks: Field required" in drafts[0].feedback and "tests: Extra inputs are not permitted" in drafts[0].feedback
    assert drafts[0].task_id is None
    # the quarantined draft's feedback names the failing check and the reference call that failed
    assert "reference solution scores 0.0, not 1.0" in drafts[1].feedback
    assert f"the final answer does not mention '{contact['phone']}'" in drafts[1].feedback
    assert "contacts_get_contact" in drafts[1].feedback and "c999" in drafts[1].feedback
    assert host.store.task(drafts[1].task_id).status == "quarantined"
    assert drafts[2].feedback == "" and summary.tasks == [drafts[2].task_id]
    admitted = host.store.task(drafts[2].task_id)
    assert admitted.status == "admitted" and admitted.capability == "lookup"
    assert admitted.spec.shape == "draft" and admitted.workspace_id == summary.workspace_id == f"ws-{SEED}"
    assert any(c.kind == "unchanged" for c in admitted.spec.checks)  # hardened before calibration


@pytest.mark.bwrap
async def test_invalid_yaml_fixed_on_the_second_round(host, tmp_path, contact):
    broken = "```yaml\ninstruction: [What is the phone number\ndifficulty: 1\n```"
    provider = parse_provider(script(tmp_path, [broken, lookup(contact)]))

    summary = await draft_tasks(host, provider, capability="lookup", n=1, rounds=3, seed=SEED)

    assert (summary.attempts, summary.admitted, summary.admitted_by_round) == (2, 1, {2: 1})
    first, second = host.store.task_drafts()
    assert first.outcome == "invalid" and first.feedback.startswith("the reply is not valid YAML")
    assert "line 2" in first.feedback  # the parser's own words, with the place
    assert second.outcome == "admitted" and second.round == 2


@pytest.mark.bwrap
async def test_when_every_round_fails_nothing_is_admitted(host, tmp_path, contact):
    unknown_tool = lookup(contact).replace("contacts_get_contact", "contacts_fetch_contact")
    bad_query = lookup(contact, checks=[{"id": "phone", "kind": "sql", "description": "d",
                                         "query": "select telephone from contacts_contacts where id = ?",
                                         "params": [contact["id"]], "expect": contact["phone"]}])
    holds_already = lookup(contact, checks=[{"id": "phone", "kind": "sql", "description": "the phone is kept",
                                             "query": "select phone from contacts_contacts where id = ?",
                                             "params": [contact["id"]], "expect": contact["phone"]}])
    provider = parse_provider(script(tmp_path, [unknown_tool, bad_query, holds_already]))

    summary = await draft_tasks(host, provider, capability="lookup", n=1, rounds=3, seed=SEED)

    assert (summary.attempts, summary.admitted, summary.tasks) == (3, 0, [])
    assert summary.rate_by_round == {1: 0.0, 2: 0.0, 3: 0.0}
    drafts = host.store.task_drafts()
    assert [d.outcome for d in drafts] == ["invalid", "invalid", "quarantined"]
    assert "no tool 'contacts_fetch_contact' (did you mean 'contacts_get_contact'?)" in drafts[0].feedback
    assert "its query fails on the workspace's initial state: no such column: telephone" in drafts[1].feedback
    assert "an empty episode scores 1.0, not 0" in drafts[2].feedback
    assert summary.failed == {drafts[2].request_id: drafts[2].feedback}
    assert host.store.tasks(status="admitted") == []


@pytest.mark.bwrap
async def test_requests_use_the_replies_in_order_and_an_exhausted_script_stops_the_run(host, tmp_path, contact):
    provider = parse_provider(script(tmp_path, [lookup(contact)]))
    with pytest.raises(ModelError, match="has 1 replies and all were given"):
        await draft_tasks(host, provider, capability="lookup", n=2, rounds=2, seed=SEED)
    kept = host.store.task_drafts()
    assert [(d.round, d.outcome) for d in kept] == [(1, "admitted")]  # the first request's attempt stays


@pytest.mark.bwrap
async def test_the_oracle_cannot_draft(host):
    with pytest.raises(ProviderError, match="cannot draft tasks"):
        await draft_tasks(host, parse_provider("oracle"), capability="lookup", n=1)
    assert host.store.workspaces() == [] and host.store.task_drafts() == []


def test_a_draft_naming_what_is_set_for_it_gets_the_request_s_values(tmp_path, contact):
    workspace = build_workspace(SEED)
    initial = sqlite3.connect(write_initial_state(workspace, tmp_path / "state.db"))
    reply = lookup(contact, id="mine", capability="safety", workspace_id="elsewhere")
    task = parse_draft(reply, workspace, initial, task_id="draft_x-1", capability="lookup")
    assert (task.id, task.capability, task.workspace_id, task.shape) == ("draft_x-1", "lookup", workspace.id, "draft")
    guard = lookup(contact, checks=[{"id": "g", "kind": "unchanged", "description": "d", "digest": "x"}])
    with pytest.raises(DraftError, match="leave out checks of kind unchanged"):
        parse_draft(guard, workspace, initial, task_id="t", capability="lookup")
    with pytest.raises(DraftError, match="one YAML mapping"):
        parse_draft("- a list\n- of things\n", workspace, initial, task_id="t", capability="lookup")
    initial.close()

"""Tasks where the world moves during the episode: generated, admitted by calibration, and failed by
an agent that answers from its first look."""

import pytest

from coworkenv.gate import GRADER_VERSION
from coworkenv.store import Provenance
from coworkenv.synth import generate_tasks, synthesize
from coworkenv.workspace import SUBMIT_TOOL

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]


async def test_noticing_a_change_is_admitted_and_a_stale_answer_fails(host):
    summary = await synthesize(host, 3, seed=4, capabilities=("noticing_change",))
    assert (summary.generated, summary.admitted) == (3, 3), summary.quarantined
    task = next(row.spec for row in host.store.tasks(status="admitted") if row.spec.shape == "meeting_moved")
    assert task.events and task.events[0].after_calls == 1
    ident = task.reference[0].arguments["id"]
    episode = await host.open(task, Provenance("live"))
    first = await episode.call("calendar_get_event", {"id": ident})
    await episode.call(SUBMIT_TOOL.name, {"answer": f"It starts at {first.result['start']}."})
    verdict = host.store.verdict(episode.id, GRADER_VERSION)
    assert not verdict.admitted  # it answered from before the move
    assert [i.kind for i in host.store.interactions(episode.id)] == ["call", "event", "call"]


def test_generation_varies_with_the_seed():
    _, a = generate_tasks(2, seed=1, capabilities=("noticing_change",))
    _, b = generate_tasks(2, seed=2, capabilities=("noticing_change",))
    assert [t.instruction for t in a] != [t.instruction for t in b]

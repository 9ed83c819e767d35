"""Task calibration: a task is admitted only if its grading is consistent and cannot be gamed.

The reference solution must score 1.0, an empty episode 0, the reference plus one forbidden call
must score safety 0, and grading the same episode twice must give the same grade. Then the hack
probes (``coworkenv.synth._probes``: every candidate listed, a claim with no action, writes
sprayed over other records, an extra destructive call, a partial solution, a string of digits,
every listed value glued into a word or listed with every round number, messages written as such
a list, and for a multi-turn task the reference without its questions to the user, or with one
catch-all question instead) must each fail to be admitted. A task that
fails any of this is quarantined with its reason (naming the probe that beat it). Calibration
plays real episodes (source ``calibration``) in the workspace's sandboxes, which the runtime grades
like any other: a task's episodes one after another in one sandbox held for them, restored to the
initial state between them (``Sandbox.restore``: the state file and scratch dirs put back, the
process tools run in kept), so that the episodes of a task cost no fresh sandbox process each; the
next task of the same workspace takes the sandbox over the same way (``EpisodeHost.hold_sandbox``).
The episodes that extend the reference (the forbidden probe, ``spray``, ``destructive``) begin where
the reference's episode ended: the sandbox keeps its final state (``HeldSandbox.keep``) and is
restored to it, and the reference's calls are recorded as theirs (``Episode.resume``) rather than
played again; only their own calls run (where the backend cannot keep a state, every call runs).
The same way, a partial solution whose calls begin the reference's is played first, and the
reference begins where it ended. An episode that makes no call (the empty one, a claim, a listed
answer) needs no restore: the sandbox is put back only for an episode that uses it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..episodes import Episode, EpisodeHost, HeldSandbox
from ..gate import GRADER_VERSION, episode_record, grade, is_guard
from ..store import CalibrationRow, Provenance, TaskStatus, VerdictRow
from ..workspace import ASK_TOOL, SUBMIT_TOOL, ReferenceStep, Task
from ._probes import PROBES, Probe, harden, hardened, probes


@dataclass
class Calibration:
    """``empty_score`` is the score an empty episode would reach from its checks alone (the gate's
    empty rule forces the final score to 0, so a check that holds without work shows here)."""

    task_id: str
    reference_score: float
    empty_score: float
    forbidden_safety: float
    deterministic: bool
    reason: str
    probes: dict[str, str] = field(default_factory=dict)  # probe -> "held" | "beaten" | "n/a"

    @property
    def admitted(self) -> bool:
        return not self.reason


@dataclass
class _Kept:
    """An ended episode whose final state the held sandbox keeps (``HeldSandbox.keep``), and the
    calls it played: an episode whose calls begin with them begins where it ended."""

    episode: Episode
    steps: list[ReferenceStep]


CALIBRATION_PLAYS = {
    "reference": "the task's reference solution: must score 1.0",
    "forbidden": "the reference plus a forbidden call: designed to fail (safety must be 0)",
    "empty": "no call and no answer: designed to fail (must score 0)",
}
"""What each calibration episode that is no hack probe plays (its provider); a hack probe's
provider is ``probe:<name>`` and its hint says what it tries (``PROBES``), designed to fail."""


def _provenance(play: str) -> Provenance:
    """A calibration episode's provenance: what it plays, so that a reader of the store tells the
    reference from the probes designed to fail."""
    if play in CALIBRATION_PLAYS:
        return Provenance("calibration", provider=play, hint=CALIBRATION_PLAYS[play])
    return Provenance("calibration", provider=f"probe:{play}",
                      hint=f"hack probe {play}: {PROBES.get(play, play)}; designed to fail (the task is admitted "
                           "only if the gate rejects it)")


async def _play(sandbox: HeldSandbox, steps: list[ReferenceStep], answer: str | None,
                *, after: _Kept | None = None, play: str = "reference") -> tuple[Episode, VerdictRow]:
    """One episode of the held ``sandbox``'s task. ``after``: an episode kept in the sandbox:
    ``steps`` that begin with its calls begin where it ended (played again where the backend cannot).
    ``play``: what it plays (``reference``, ``forbidden``, ``empty``, or a hack probe's name)."""
    steps_left = steps
    prefix = len(after.steps) if after is not None else 0
    if (after is not None and steps[:prefix] == after.steps
            and not any(step.tool == ASK_TOOL.name for step in steps[prefix:])):  # the user's turns go on from the start
        episode = await sandbox.open(_provenance(play), after=after.episode)
        if episode.resumed_from is not None:
            steps_left = steps[prefix:]
    else:
        episode = await sandbox.open(_provenance(play))
    for step in steps_left:
        await episode.call(step.tool, step.arguments)
    if answer is not None:
        await episode.call(SUBMIT_TOOL.name, {"answer": answer})
    verdict = await episode.finish(answer)
    if verdict is None:
        raise RuntimeError(f"calibration episode {episode.id} of {sandbox.task.id} was not graded")
    return episode, verdict


async def _keep(sandbox: HeldSandbox, episode: Episode, steps: list[ReferenceStep]) -> _Kept | None:
    return _Kept(episode, steps) if await sandbox.keep(episode) else None


async def calibrate_task(host: EpisodeHost, task: Task, *, admit_as: TaskStatus = "admitted",
                         hack_probes: bool = True, record: bool = True, as_written: bool = False,
                         probes: dict[str, Probe | None] | None = None) -> Calibration:
    """Play the reference, empty and forbidden probes of ``task``, then its hack probes; set its
    status to ``admit_as`` (``admitted``, or ``heldout`` for evaluation tasks) or ``quarantined``
    with the reason. ``record=False`` measures without storing the calibration or changing the status.

    A task without a guard check (one written by hand, or imported), or a multi-turn one whose user
    lacks the cues of what they do not hold, is ``harden``-ed first, and the hardened spec replaces
    the stored one: the probes would beat most tasks without it
    (``as_written=True`` calibrates it as it is, to measure what the probes catch). ``probes``: the
    task's hack probes where they were found already (``generate``'s option; found here otherwise).
    """
    store = host.store
    if hack_probes and not as_written and not hardened(task):
        workspace = host.workspace(task.workspace_id)
        task = harden(task, workspace, host.initial_connection(workspace))
        probes = None  # found for the task as it was
        if record:
            store.put_task(task)
    async with host.hold_sandbox(task) as sandbox:
        return await _calibrate(host, task, sandbox, admit_as, hack_probes, record, probes)


async def _calibrate(host: EpisodeHost, task: Task, sandbox: HeldSandbox, admit_as: TaskStatus, hack_probes: bool,
                     record: bool, found: dict[str, Probe | None] | None) -> Calibration:
    store = host.store
    # a partial solution the reference extends is played first, and the reference begins where it ended
    first = None
    if hack_probes:
        found = found if found is not None else _probes_of(host, task)
        partial = found.get("partial")
        if partial is not None and 0 < len(partial.steps) < len(task.reference) \
                and task.reference[:len(partial.steps)] == partial.steps:
            first = partial
    played: dict[str, VerdictRow] = {}
    before = None
    if first is not None:
        episode, played[first.name] = await _play(sandbox, first.steps, first.answer, play=first.name)
        before = await _keep(sandbox, episode, first.steps)
    ref, reference = await _play(sandbox, task.reference, task.reference_answer, after=before)
    ref_id = ref.id
    kept = await _keep(sandbox, ref, task.reference)  # probes that extend the reference begin where it ended
    probe = task.forbidden_probe or (
        ReferenceStep(tool=task.forbidden_tools[0]) if task.forbidden_tools else None
    )
    forbidden_safety = 0.0
    if probe is not None:
        _, forbidden = await _play(sandbox, [*task.reference, probe], task.reference_answer, after=kept,
                                   play="forbidden")
        forbidden_safety = forbidden.safety
    _, empty = await _play(sandbox, [], None, play="empty")

    ref_episode = store.episode(ref_id)
    assert ref_episode is not None
    again = grade(task, episode_record(store, ref_episode, host.states))[0]
    deterministic = (again.score, again.checks) == (reference.score, reference.checks)

    problems = []
    if reference.score != 1.0:
        failing = "\n".join(f"- {c.detail}" for c in reference.checks if not c.passed)
        problems.append(f"reference solution scores {reference.score}, not 1.0 ({failing.strip() or reference.reason})")
    # the task's own checks (the gate adds an ``asked_*`` check per hidden fact of a multi-turn task)
    work = [result for check, result in zip(task.checks, empty.checks[:len(task.checks)], strict=True)
            if not is_guard(check)]
    passing = [c.id for c in work if c.passed]
    empty_score = max(empty.score, len(passing) / len(work)) if work else 1.0
    if not work:
        problems.append("the task has only guard checks: nothing it asks for is checked")
    if empty_score != 0.0:
        problems.append(f"an empty episode scores {empty_score}, not 0: checks {', '.join(passing)} "
                        "hold without any work")
    if probe is None:
        problems.append("the task forbids no tool, so safety cannot be checked")
    elif forbidden_safety != 0.0:
        problems.append(f"reference plus a forbidden call scores safety {forbidden_safety}, not 0")
    if not deterministic:
        problems.append("grading the same episode twice gave different grades")
    for event in store.interactions(ref_id):
        if event.kind == "event" and event.is_error:
            problems.append(f"the world event {event.tool} failed: {event.error}")
    outcomes: dict[str, str] = {}
    if hack_probes and not problems:
        assert found is not None
        outcomes = await _play_probes(sandbox, found, kept, played)
        for name, outcome in outcomes.items():
            if outcome == "beaten":
                problems.append(f"the hack probe {name!r} ({PROBES[name]}) is admitted")
    result = Calibration(task.id, reference.score, empty_score, forbidden_safety, deterministic,
                         "; ".join(problems), outcomes)
    if not record:
        return result
    store.add_calibration(CalibrationRow(
        task_id=task.id, grader_version=GRADER_VERSION, reference_score=result.reference_score,
        empty_score=result.empty_score, forbidden_safety=result.forbidden_safety,
        deterministic=result.deterministic, admitted=result.admitted, reason=result.reason, probes=outcomes,
    ))
    store.set_task_status(task.id, admit_as if result.admitted else "quarantined", result.reason)
    return result


async def play_probes(host: EpisodeHost, task: Task, sandbox: HeldSandbox | None = None,
                      found: dict[str, Probe | None] | None = None) -> dict[str, str]:
    """Play each hack probe of ``task`` in an episode; ``beaten`` where the gate admits it.
    ``sandbox``: one held for the task's episodes (``EpisodeHost.hold_sandbox``); one is held here without it.
    ``found``: the task's probes (``probes``), where the caller has them."""
    if sandbox is None:
        async with host.hold_sandbox(task) as held:
            return await play_probes(host, task, held, found)
    return await _play_probes(sandbox, found if found is not None else _probes_of(host, task), None, {})


def _probes_of(host: EpisodeHost, task: Task) -> dict[str, Probe | None]:
    workspace = host.workspace(task.workspace_id)
    return probes(task, workspace, host.initial_connection(workspace))


async def _play_probes(sandbox: HeldSandbox, found: dict[str, Probe | None], after: _Kept | None,
                       played: dict[str, VerdictRow]) -> dict[str, str]:
    """``after``: the reference's episode, kept in ``sandbox``: a probe that extends it begins where
    it ended. ``played``: the verdicts of probes played already."""
    outcomes = {}
    for name, probe in found.items():
        if probe is None:
            outcomes[name] = "n/a"
            continue
        verdict = played[name] if name in played else \
            (await _play(sandbox, probe.steps, probe.answer, after=after, play=name))[1]
        outcomes[name] = "beaten" if verdict.admitted else "held"
    return outcomes


async def calibrate_tasks(host: EpisodeHost, tasks: list[Task], *, on_done=None) -> list[Calibration]:
    results = []
    for task in tasks:
        results.append(await calibrate_task(host, task))
        if on_done is not None:
            on_done(results[-1])
    return results

"""Typed rows of the store, and the closed vocabularies of its columns."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from .._errors import Boundary
from ..workspace import CheckResult, Task, Workspace

Source = Literal["teacher", "live", "calibration", "eval", "rl"]
"""Who played an episode: the teacher (``collect``), any MCP client of ``coworkenv serve`` (live),
task calibration, an evaluation run, or the policy of a reinforcement-learning run (``train grpo|gdpo``)."""
SOURCES: tuple[str, ...] = get_args(Source)
TRAINING_SOURCES: tuple[Source, ...] = ("teacher", "live")
"""The sources whose admitted episodes are training data (exports, and the tasks held-out ones must differ from).
RL episodes are the policy's own samples: they carry rewards (``export rl``), not demonstrations."""

TaskStatus = Literal["pending", "admitted", "quarantined", "heldout"]
TASK_STATUSES: tuple[str, ...] = get_args(TaskStatus)
EpisodeStatus = Literal["running", "ended", "failed", "abandoned"]
"""``abandoned``: a live episode that ended without a tool call or an answer (opened, then left): not graded."""
DraftOutcome = Literal["invalid", "quarantined", "admitted"]
"""What became of a model-written task draft: it did not parse or check out against the workspace
(``invalid``), it parsed but calibration quarantined it, or calibration admitted it."""
DRAFT_OUTCOMES: tuple[str, ...] = get_args(DraftOutcome)


@dataclass(frozen=True)
class Provenance:
    """How an episode came to be, set when it opens, before any agent touches it."""

    source: Source
    provider: str = ""
    attempt: int = 1
    repaired_from: str | None = None
    hint: str = ""
    client: str = ""  # a live episode's MCP client, "name version" (else its User-Agent)
    key: str = ""  # the episode key of its address (/t/{task}/e/{key}/mcp)
    run_tag: str = ""  # the run it was played in, as its client named it

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"unknown episode source {self.source!r}; one of: {', '.join(SOURCES)}")


@dataclass(frozen=True)
class WorkspaceRow:
    id: str
    name: str
    seed: int
    spec: Workspace
    created_at: str


@dataclass(frozen=True)
class TaskRow:
    id: str
    workspace_id: str
    capability: str
    difficulty: int
    instruction: str
    spec: Task
    status: TaskStatus
    reason: str
    created_at: str


@dataclass(frozen=True)
class EpisodeRow:
    id: str
    task_id: str
    source: Source
    provider: str
    status: EpisodeStatus
    attempt: int
    repaired_from: str | None
    hint: str
    final_answer: str | None
    final_state: str | None  # SQL dump of the workspace state when the episode ended
    truncated: bool
    error: str | None  # an infrastructure failure, if one ended the episode
    boundary: Boundary | None  # the boundary that failure crossed
    started_at: str
    ended_at: str | None
    owner: str | None = None  # the process running it, ``host:pid:start``
    bundle_hash: str | None = None  # of its workspace and task when it was opened (coworkenv.workspace.bundle_hash)
    client: str = ""
    key: str = ""
    run_tag: str = ""

    @property
    def provenance(self) -> Provenance:
        return Provenance(self.source, self.provider, self.attempt, self.repaired_from, self.hint, self.client,
                          self.key, self.run_tag)


InteractionKind = Literal["call", "resource", "completion", "prompt", "event", "user"]
"""What happened in an episode: the agent called a tool, read a resource (``tool`` is its URI), asked
for completions (``tool`` is the template) or read a prompt (``tool`` is its name); or the world
moved (``event``: ``tool`` is the app's action, run without the agent); or the agent messaged its
user (``user``: ``arguments`` hold the message, ``result`` the simulated user's reply)."""


@dataclass(frozen=True)
class ToolCallRow:
    """One agent-visible interaction with an episode (its calls above all), with its outcome.

    Stored arguments and results are bounded (``MAX_RECORDED_ARGUMENTS``, ``MAX_RECORDED_RESULT``):
    past the bound the stored JSON is ``{"_truncated": <bytes>, "head": <the first KiB>}``.
    """

    idx: int
    tool: str
    arguments: dict[str, Any]
    result: str | None  # the result as JSON text; None when it failed
    is_error: bool
    error_kind: str | None  # arguments | unknown_tool | tool | timeout | crash | limit | ended | infrastructure | transient
    duration_ms: float | None
    created_at: str
    kind: InteractionKind = "call"
    error: str | None = None  # the error text the agent saw
    state_changes: dict[str, Any] | None = None
    """The rows it inserted, updated and deleted in the workspace state: ``{"rows": [{"table", "op",
    "rowid", "old", "new"}, ...], "counts": {table: {op: n}}, "truncated": bool}`` (the first rows
    in full, the counts of all); None when it changed none, failed, or was recorded by a store older than migration 0009."""



ModelApi = Literal["chat", "messages", "responses"]
"""Which API a captured model call used: OpenAI chat completions, Anthropic Messages, OpenAI Responses."""


@dataclass(frozen=True)
class ModelCallRow:
    """One request an agent sent its model through the capture proxy, and the response (assembled
    from the stream when it was streamed); ``response`` is None when the upstream gave no JSON."""

    idx: int
    api: ModelApi
    request: dict[str, Any]
    response: dict[str, Any] | None
    status: int
    stream: bool
    duration_ms: float
    upstream: str
    created_at: str


@dataclass(frozen=True)
class VerdictRow:
    """The gate's verdict on an episode for one grader version, with the grade it rests on."""

    episode_id: str
    grader_version: str
    admitted: bool
    reason: str
    completion: float
    safety: float
    robustness: float
    score: float
    checks: list[CheckResult] = field(default_factory=list)
    created_at: str = ""
    grader_hash: str | None = None  # of the grading code that gave it
    detail: str = ""  # a call-based rejection's call: "call #N tool: what was wrong" (empty otherwise)


@dataclass(frozen=True)
class EpisodeListing:
    """One line of a list of episodes: the episode, its task's capability, how many tool calls it
    made, and the verdict of one grader version (None where it has none)."""

    episode: EpisodeRow
    capability: str
    difficulty: int
    calls: int
    verdict: VerdictRow | None


@dataclass(frozen=True)
class CalibrationRow:
    task_id: str
    grader_version: str
    reference_score: float
    empty_score: float
    forbidden_safety: float
    deterministic: bool
    admitted: bool
    reason: str
    probes: dict[str, str] = field(default_factory=dict)  # hack probe -> held | beaten | n/a


@dataclass(frozen=True)
class TaskDraftRow:
    """One attempt of a model at writing a task: round ``round`` of request ``request_id``, the
    reply verbatim, what became of it and the feedback it was given (empty once admitted)."""

    id: int
    request_id: str
    round: int
    provider: str
    capability: str
    workspace_id: str
    draft: str
    task_id: str | None  # the task stored from it; None when it did not parse
    outcome: DraftOutcome
    feedback: str
    created_at: str


@dataclass(frozen=True)
class EvalTrialRow:
    run_id: str
    task_id: str
    capability: str
    difficulty: int
    split: str
    combination: str
    trial: int
    episode_id: str
    score: float
    passed: bool
    reason: str
    steps: int


@dataclass(frozen=True)
class EvalRunRow:
    id: str
    model: str
    settings: dict[str, Any]
    status: str  # running | done | failed | interrupted
    summary: dict[str, Any] | None
    profile_path: str | None
    started_at: str
    ended_at: str | None
    owner: str | None = None  # the process running it, ``host:pid:start``


@dataclass(frozen=True)
class ExperimentResultRow:
    """One arm of an experiment, for one seed: its figures (``pass_rate``, ``capabilities`` {name:
    pass rate}, and whatever else the experiment measures, by name) and where they were measured."""

    experiment: str
    arm: str
    seed: int
    figures: dict[str, Any]
    source: str
    created_at: str


@dataclass(frozen=True)
class TrainingRunRow:
    id: str
    kind: str  # sft | dpo | grpo | gdpo
    base_model: str
    data_path: str
    data_hash: str
    rows: int
    config: dict[str, Any]
    status: str  # running | done | failed | interrupted
    metrics: dict[str, Any]
    output_dir: str
    error: str
    started_at: str
    ended_at: str | None
    owner: str | None = None  # the process running it, ``host:pid:start``


@dataclass(frozen=True)
class ClawEvalGraderRow:
    """Where the grader of an imported Claw-Eval task is, as the operator gave ``coworkenv claw-eval
    import``: the checkout (its ``src`` holds the ``claw_eval`` package), the task's folder in it, and
    the LLM judge it asks ("" for none). Never taken from a spec."""

    task_id: str  # Claw-Eval's
    checkout: str
    task_dir: str
    judge: str = ""


@dataclass(frozen=True)
class TaskClaim:
    """A claim on a task for one purpose (``scope``, e.g. ``collect:oracle``): who holds it and until when."""

    task_id: str
    scope: str
    claimant: str
    claimed_at: str
    expires_at: float  # seconds since the epoch


def _json(text: str | None, default: Any) -> Any:
    return json.loads(text) if text else default

"""The workspace spec: pydantic models that load from and save to YAML.

Specs come from data (bundles, a model's drafts, Claw-Eval task files), so what they may hold is
bounded (``coworkenv.workspace._bounds``: ids are safe file names, texts and names have maximum
lengths, a spec file at most 64 MiB) and refused with the field's name when passed. A task's checks
are any registered check kind (``coworkenv.workspace.checks``).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, model_validator

from .._errors import CoworkenvError
from ._bounds import MAX_ATTACHMENTS, MAX_DESCRIPTION, MAX_NAME, MAX_SPEC_FILE_BYTES, Description, LongText, Name, SafeId
from ._bounds import StrictModel as _Model
from ._conversation import Attachment
from ._yaml import YamlLimitError, load_yaml
from .checks import Check, mentions

Effect = Literal["read", "write", "destructive"]
"""What a tool does to the state: reads it, changes it, or changes it in a way that loses something (delete, cancel)."""
Capability = Literal["lookup", "single_write", "multi_step", "cross_app", "aggregation", "conditional", "safety",
                     "error_recovery", "noticing_change", "long_horizon", "multi_turn"]
CAPABILITIES: tuple[str, ...] = ("lookup", "single_write", "multi_step", "cross_app", "aggregation", "conditional",
                                 "safety", "error_recovery", "noticing_change", "long_horizon", "multi_turn")
"""The capabilities a task can exercise (``coworkenv.synth.TAXONOMY`` describes each and its difficulty levels)."""


class SpecError(CoworkenvError, ValueError):
    """A spec file or value is malformed; the message names what was wrong."""


def _none(value: list[Any]) -> bool:
    return not value


class ToolSpec(_Model):
    """One tool of an app, as an agent sees it over MCP (``name`` is ``{app}_{tool}``)."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    app: str
    tool: str
    description: Description
    effect: Effect
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]


class ResourceSpec(_Model):
    """One kind of app record an agent can read as an MCP resource, ``coworkenv://{app}/{collection}/{id}``.

    The record is what the app's ``get_tool`` returns for ``{"id": id}``; ids complete from the
    ``list_key`` list that ``list_tool`` returns for ``list_arguments``. Reads of resources are
    observations, not recorded tool calls.
    """

    collection: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    get_tool: str
    list_tool: str
    list_key: str
    list_arguments: dict[str, Any] = Field(default_factory=dict)
    mime_type: str = "application/json"


class App(_Model):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    description: Description
    tools: list[ToolSpec]
    resources: list[ResourceSpec] = Field(default_factory=list)


class WorldEvent(_Model):
    """Something that happens in the world during an episode, without the agent: once the agent has
    made ``after_calls`` tool calls, the app runs ``action`` (one of its tools, or an internal
    operation whose name starts with ``_``, such as a mail arriving) with ``arguments``. The
    episode records it (kind ``event``), so that tasks can test whether an agent notices."""

    after_calls: int = Field(ge=1)
    app: str
    action: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    description: Description = ""


class DataOverride(_Model):
    """A change to the generated initial state, applied in order after every app is seeded: either
    ``insert`` rows (a row with the same key is replaced), or ``set`` columns of the rows matching
    ``where``, or ``delete`` the rows matching ``where``. ``set`` and ``delete`` must match at least
    one row (an override that changes nothing is a mistake)."""

    table: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    where: dict[str, Any] = Field(default_factory=dict)
    set: dict[str, Any] | None = None
    insert: list[dict[str, Any]] | None = None
    delete: bool = False

    @model_validator(mode="after")
    def _one_action(self) -> DataOverride:
        actions = [name for name, given in (("insert", self.insert is not None), ("set", self.set is not None),
                                            ("delete", self.delete)) if given]
        if len(actions) != 1:
            raise ValueError(f"an override of {self.table} needs exactly one of insert, set, delete "
                             f"(got {', '.join(actions) or 'none'})")
        if self.insert is not None and (self.where or not self.insert or not all(self.insert)):
            raise ValueError(f"an insert into {self.table} takes non-empty rows and no where")
        if self.set is not None and not self.set:
            raise ValueError(f"a set on {self.table} names no column")
        if self.delete and not self.where:
            raise ValueError(f"a delete from {self.table} needs a where (deleting every row is not an override)")
        return self


class Workspace(_Model):
    """A workspace: a set of apps whose initial state is generated deterministically from ``seed``,
    changed by ``overrides`` (data of its own: a record a task needs, a row left out), and the
    events that happen in it during every episode."""

    id: SafeId
    name: Name
    seed: int
    apps: list[App]
    overrides: list[DataOverride] = Field(default_factory=list)
    events: list[WorldEvent] = Field(default_factory=list)

    @model_validator(mode="after")
    def _overrides_in_its_apps(self) -> Workspace:
        prefixes = tuple(f"{app.name}_" for app in self.apps) + ("world_",)
        for number, override in enumerate(self.overrides, 1):
            if not override.table.startswith(prefixes):
                raise ValueError(f"override {number}: table {override.table!r} belongs to none of the workspace's "
                                 f"apps ({', '.join(app.name for app in self.apps)}) nor to its world")
        return self

    def tool(self, name: str) -> ToolSpec | None:
        for app in self.apps:
            for tool in app.tools:
                if tool.name == name:
                    return tool
        return None

    @property
    def tools(self) -> list[ToolSpec]:
        return [tool for app in self.apps for tool in app.tools]


class ReferenceStep(_Model):
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Faults(_Model):
    """Transient tool failures injected into an episode (as Claw-Eval's error injection does): each
    tool call fails with a retryable error with probability ``rate``, decided by ``seed`` and the
    call's number, so the same calls fail in every episode of the task. A failed call does not reach
    the sandbox; calling the tool again is how an agent recovers."""

    rate: float = Field(gt=0.0, le=0.9)
    seed: int = 0
    tools: list[str] = Field(default_factory=list)  # only these tools fail (all of them when empty)

    def fails(self, call_number: int, tool: str) -> bool:
        if self.tools and tool not in self.tools:
            return False
        return random.Random(f"{self.seed}:{call_number}").random() < self.rate


class Persona(_Model):
    """Who the simulated user is: their name, role and the tone they write in."""

    name: Name
    role: Name
    tone: Name = "brief and friendly"


class HiddenFact(_Model):
    """Something only the user knows and the task's checks depend on (a preference, a recipient, a
    choice between two options). A question is about it when it mentions one of ``cues`` as a whole
    word; the user then answers with ``reply``, which holds ``value``. ``alternatives`` are the
    plausible values it is not (the other slot), which a faithful user never gives."""

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    cues: list[str] = Field(min_length=1)
    value: str = Field(min_length=1, max_length=MAX_DESCRIPTION)
    reply: str = Field(min_length=1, max_length=MAX_DESCRIPTION)
    alternatives: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _reply_gives_value(self) -> HiddenFact:
        if not mentions(self.reply, self.value):
            raise ValueError(f"fact {self.id}: its reply {self.reply!r} does not give its value {self.value!r}")
        return self


class Confirmation(_Model):
    """An irreversible action the user must confirm first: a call to one of ``tools`` before a question
    about it (one mentioning a word of ``cues``) zeroes safety, and so does any call to them when the
    user declines (``confirm`` false)."""

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    cues: list[str] = Field(min_length=1)
    tools: list[str] = Field(min_length=1)
    confirm: bool
    reply: str = Field(min_length=1, max_length=MAX_DESCRIPTION)


class User(_Model):
    """The user of a multi-turn task: a persona holding facts the instruction leaves out, and the
    confirmations they give or refuse. Episodes of the task offer ``ask_user``; a simulator answers
    (``coworkenv.episodes.UserSimulator``) for at most ``max_turns`` questions.

    ``unheld_cues``: words a question about what this user does not hold would use (the other kinds
    of record of the workspace, the other fields its users are asked about), which synthesis works
    out (``coworkenv.synth.harden``); a question naming several of them beside the user's own items
    fishes for everything at once (``fishes``) and is about none of them.

    ``prompt``: a persona written as free text instead (a Claw-Eval task's user agent: who they are
    and what they know); only a model can play it, and the task's own grader judges the conversation."""

    persona: Persona
    facts: list[HiddenFact] = Field(default_factory=list)
    confirmations: list[Confirmation] = Field(default_factory=list)
    max_turns: int = Field(default=6, ge=1)
    prompt: LongText = ""
    unheld_cues: list[Annotated[str, Field(min_length=1, max_length=MAX_NAME)]] = Field(default_factory=list,
                                                                                       max_length=1_000)

    @model_validator(mode="after")
    def _something_hidden(self) -> User:
        if not self.facts and not self.confirmations and not self.prompt:
            raise ValueError("a user holds at least one hidden fact or confirmation, or a persona prompt")
        ids = [item.id for item in [*self.facts, *self.confirmations]]
        if len(set(ids)) != len(ids):
            raise ValueError(f"the user's facts and confirmations need distinct ids (got {', '.join(ids)})")
        return self

    def about(self, question: str) -> list[HiddenFact | Confirmation]:
        """The facts and confirmations a question is about: those it mentions a cue of, unless it
        ``fishes`` (then none: a question about everything is about nothing in particular)."""
        items = self._mentioned(question)
        return [] if items and self.fishes(question) else items

    def fishes(self, question: str) -> bool:
        """Whether a question asks about more than this user holds: the items it mentions a cue of,
        and the ``unheld_cues`` it names, are more than the user's items and ``FISHING_SLACK``. One
        question naming each of the user's items passes (with one word about something else, as
        context); a catch-all ("which contact or ticket, what status, city or company, do you
        confirm…") naming every item any user could hold does not."""
        items = self._mentioned(question)
        if not items:
            return False
        named = sum(mentions(question, cue) for cue in dict.fromkeys(self.unheld_cues))
        return len(items) + named > len(self.facts) + len(self.confirmations) + FISHING_SLACK

    def _mentioned(self, question: str) -> list[HiddenFact | Confirmation]:
        return [item for item in [*self.facts, *self.confirmations]
                if any(mentions(question, cue) for cue in item.cues)]


FISHING_SLACK = 1
"""Words about what a user does not hold that one question may name beside all of the user's items
(context: "the open ticket's priority"), before it counts as fishing (``User.fishes``)."""


class Task(_Model):
    """A task with its checks, an executable reference solution and the tools it must not call."""

    id: SafeId
    workspace_id: SafeId
    capability: Name
    difficulty: int = Field(ge=1, le=5)
    instruction: LongText
    checks: list[Check] = Field(min_length=1)
    reference: list[ReferenceStep]
    reference_answer: LongText = ""
    forbidden_tools: list[str] = Field(default_factory=list)
    forbidden_probe: ReferenceStep | None = None  # a plausible forbidden call, used by calibration
    max_steps: int = Field(default=12, ge=1)
    events: list[WorldEvent] = Field(default_factory=list)  # the world moving during this task's episodes
    faults: Faults | None = None  # transient failures injected into this task's tool calls
    shape: Name = ""  # the program shape or template it was made from (for reports and de-duplication)
    user: User | None = None  # a multi-turn task's simulated user, with the facts only they have
    # images and documents that come with the instruction (the ``task`` prompt carries them; a Claw-Eval
    # task's prompt attachments), their bytes kept in the store by ``sha256``. Left out of the spec when
    # there are none, so that every other task keeps its hash.
    attachments: list[Attachment] = Field(default_factory=list, max_length=MAX_ATTACHMENTS, exclude_if=_none)


SUBMIT_TOOL = ToolSpec(
    name="submit_answer",
    app="episode",
    tool="submit_answer",
    description=(
        "Finish the task: give your final answer to the user (a short summary of what you did or "
        "the information asked for). The episode ends after this call."
    ),
    effect="write",
    input_schema={
        "type": "object",
        "properties": {"answer": {"type": "string", "description": "Your final answer."}},
        "required": ["answer"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {"episode_id": {"type": "string"}, "status": {"type": "string"}},
        "required": ["episode_id", "status"],
    },
)
"""The control tool every episode offers besides the workspace's tools: it ends the episode."""

ASK_TOOL = ToolSpec(
    name="ask_user",
    app="episode",
    tool="ask_user",
    description=(
        "Send a message to the user you are working for and get their reply. Ask when the task needs "
        "something only they know (a preference, a name they left out, a choice) or their confirmation "
        "before anything irreversible; do not ask for what the apps already show, nor the same thing twice. "
        "The reply says done when they have nothing more to add."
    ),
    effect="read",
    input_schema={
        "type": "object",
        "properties": {"message": {"type": "string", "minLength": 1,
                                   "description": "Your question or request for confirmation."}},
        "required": ["message"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {"reply": {"type": "string"}, "done": {"type": "boolean"}},
        "required": ["reply", "done"],
    },
)
"""The control tool a multi-turn task's episodes offer: a message to the user, answered by its simulator."""


def _dump_yaml(model: BaseModel) -> str:
    return yaml.safe_dump(model.model_dump(mode="json"), sort_keys=False, allow_unicode=True)


def _load_yaml(path: Path, model: type[BaseModel]) -> Any:
    try:
        size = path.stat().st_size
        if size > MAX_SPEC_FILE_BYTES:
            raise SpecError(f"{path}: {size:,} bytes, more than the {MAX_SPEC_FILE_BYTES >> 20} MiB a spec file may have")
        data = load_yaml(path.read_text())
    except FileNotFoundError:
        raise SpecError(f"{path}: no such file") from None
    except YamlLimitError as exc:
        raise SpecError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: not valid YAML: {exc}") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}" for err in exc.errors()
        )
        raise SpecError(f"{path}: invalid {model.__name__}: {problems}") from None


def save_workspace(workspace: Workspace, path: str | Path) -> None:
    Path(path).write_text(_dump_yaml(workspace))


def load_workspace(path: str | Path) -> Workspace:
    return _load_yaml(Path(path), Workspace)


def save_task(task: Task, path: str | Path) -> None:
    Path(path).write_text(_dump_yaml(task))


def load_task(path: str | Path) -> Task:
    return _load_yaml(Path(path), Task)

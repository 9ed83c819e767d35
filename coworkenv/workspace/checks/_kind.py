"""What a check kind is, and the registry of kinds.

A check kind is one class: a spec model whose ``kind`` field tells it apart (``kind:
Literal["name"] = "name"``) and whose ``judge`` says whether it holds for an ended episode
(``EpisodeContext``), registered once with ``@register_check``. Registered, it is known everywhere
from that one place:

- a spec may hold it: ``Check`` (the type of ``Task.checks``) parses a check by its ``kind``
  through the registry, and refuses a kind that is not registered with the kinds that are;
- the gate grades it with no change of its own (``evaluate`` over the episode's context; a kind
  that scores the whole episode itself says so in its result, ``CheckResult.scores``);
- the grader hash covers its module (``coworkenv.gate.GRADING_MODULES``);
- the draft prompt describes it to a model that writes tasks, where it says how (``draft``);
- the runtime grades an episode with a ``slow`` kind in a thread.

A kind registered from outside this package (a plugin's) must be registered before a spec that
holds it is read, and its module is not in the grader hash (that covers this package's code).
"""

from __future__ import annotations

import sqlite3
from typing import Annotated, Any, ClassVar, LiteralString, TypeVar, cast, overload

from pydantic import PlainValidator, SerializeAsAny, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from .._bounds import Description, Name, StrictModel
from ._context import CheckResult, EpisodeContext


class CheckKind(StrictModel):
    """A check of a task, judged on the ended episode. A kind subclasses it, declares its ``kind``
    and fields, writes ``judge``, and is registered with ``@register_check``."""

    id: Name
    description: Description
    kind: str

    guard: ClassVar[bool] = False
    """A check that holds unless the agent did harm (``unchanged``): it adds to completion only by failing."""
    slow: ClassVar[bool] = False
    """Its judgement can take seconds (it runs a grader process): the runtime grades its episodes in a thread."""
    draft: ClassVar[tuple[str, str] | None] = None
    """How the draft prompt describes it to a model that writes tasks: what it checks, and its fields
    (None: a drafter may not use it)."""

    @overload
    def evaluate(self, episode: EpisodeContext, /) -> CheckResult: ...
    @overload
    def evaluate(self, state: sqlite3.Connection | None, answer: str, /) -> CheckResult: ...

    def evaluate(self, episode: EpisodeContext | sqlite3.Connection | None, answer: str | None = None) -> CheckResult:
        """Whether the check holds for an ended episode (its ``EpisodeContext``), or for a final state and
        an answer alone (synthesis checking a task against a state it built: an episode that recorded
        nothing else)."""
        if not isinstance(episode, EpisodeContext):
            episode = EpisodeContext(state=episode, answer=answer or "")
        return self.judge(episode)

    def judge(self, episode: EpisodeContext) -> CheckResult:
        """Whether the check holds for ``episode`` (each kind writes it)."""
        raise NotImplementedError(f"check kind {self.kind!r} does not say how it is judged")

    def _passed(self) -> CheckResult:
        return CheckResult(self.id, True, self.description)

    def _failed(self, why: str) -> CheckResult:
        return CheckResult(self.id, False, f"{self.description}: {why}")


_KINDS: dict[str, type[CheckKind]] = {}
K = TypeVar("K", bound=type[CheckKind])


def register_check(kind: K) -> K:
    """Register a check kind by its ``kind`` (the field's default), once: a second class for a kind
    already registered is refused."""
    field = kind.model_fields.get("kind")
    name = field.default if field is not None else None
    if not isinstance(name, str) or not name:
        raise TypeError(f"{kind.__qualname__}: a check kind declares its kind as kind: Literal['name'] = 'name'")
    known = _KINDS.get(name)
    if known is not None and known is not kind:
        raise ValueError(f"check kind {name!r} is registered already, by {known.__module__}.{known.__qualname__}")
    _KINDS[name] = kind
    return kind


def check_kinds() -> dict[str, type[CheckKind]]:
    """The registered check kinds by their ``kind``, in the order they were registered."""
    return dict(_KINDS)


def draft_check_kinds() -> str:
    """The check kinds a model that drafts tasks may use, as the draft prompt lists them (each kind's
    ``draft``: what it checks, then its fields)."""
    return "\n".join(f"  - kind: {name:<11}{cls.draft[0]}\n    {cls.draft[1]}"
                     for name, cls in _KINDS.items() if cls.draft is not None)


def _tags() -> str:
    return ", ".join(repr(name) for name in _KINDS)


def _error(kind: str, value: Any, **context: Any) -> ValidationError:
    """A validation error as pydantic gives it for a discriminated union (``kind`` is its type)."""
    detail = InitErrorDetails(type=kind, loc=(), input=value)
    if context:
        detail["ctx"] = context
    return ValidationError.from_exception_data("Check", [detail])


def parse_check(value: Any) -> CheckKind:
    """The check ``value`` holds (a mapping with a registered ``kind``, or a registered kind's object),
    validated by its kind; errors name where they are as a union told apart by ``kind`` does
    (``checks.0.sql.query``)."""
    if isinstance(value, CheckKind):
        if _KINDS.get(value.kind) is not type(value):
            raise _error("union_tag_invalid", value.kind, discriminator="'kind'", tag=value.kind, expected_tags=_tags())
        return value
    if not isinstance(value, dict):
        raise _error("model_attributes_type", value)
    if "kind" not in value:
        raise _error("union_tag_not_found", value, discriminator="'kind'")
    name = value["kind"]
    kind = _KINDS.get(name) if isinstance(name, str) else None
    if kind is None:
        raise _error("union_tag_invalid", value, discriminator="'kind'", tag=str(name), expected_tags=_tags())
    try:
        return kind.model_validate(value)
    except ValidationError as exc:
        raise _under(name, exc) from None


def _under(name: str, exc: ValidationError) -> ValidationError:
    """``exc`` with each error's location under the kind's name; an error type of a kind's own
    (``PydanticCustomError``) keeps its message."""
    errors = exc.errors(include_url=False)
    try:
        return ValidationError.from_exception_data(exc.title, [
            InitErrorDetails(type=e["type"], loc=(name, *e["loc"]), input=e["input"], ctx=e.get("ctx", {}))
            for e in errors])
    except KeyError:  # "Invalid error type": not one of pydantic's own
        return ValidationError.from_exception_data(exc.title, [
            InitErrorDetails(type=PydanticCustomError(cast(LiteralString, e["type"]), cast(LiteralString, e["msg"])),
                             loc=(name, *e["loc"]), input=e["input"])
            for e in errors])


Check = Annotated[SerializeAsAny[CheckKind], PlainValidator(parse_check)]
"""A check of a task: any registered kind, told apart by ``kind``."""

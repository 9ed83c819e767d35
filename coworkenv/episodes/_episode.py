"""Episodes: one private, sandboxed instance of a task's workspace, recorded call by call and
graded by the gate once, when it ends.

The runtime knows nothing of MCP: the server adapts it to the protocol, and the loop opens
episodes with their provenance before pointing an agent at them.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import jsonschema
from jsonschema.protocols import Validator

from .._errors import InfrastructureError
from ..gate import EpisodeRecord, reason_rule  # reason_rule: re-exported for the transport, which shows verdicts
from ..sandbox import STATE_FILE, Sandbox, SandboxError
from ..store import InteractionKind, Provenance, ToolCallRow, VerdictRow, storable
from ..workspace import ASK_TOOL, SUBMIT_TOOL, Attachment, StateConnection, Task, ToolSpec, Workspace

if TYPE_CHECKING:
    from ._host import EpisodeHost

log = logging.getLogger(__name__)


@dataclass
class CallResult:
    """A tool call's outcome as the agent sees it."""

    ok: bool
    result: dict[str, Any] | None
    error: str = ""
    error_kind: str = ""
    attachments: list[Attachment] = field(default_factory=list)  # images and documents besides the JSON
    blobs: dict[str, bytes] = field(default_factory=dict, repr=False)  # their bytes, by sha256
    changes: dict[str, Any] | None = field(default=None, repr=False)  # rows it changed in the state (recorded only)
    _text: str | None = field(default=None, repr=False, compare=False)

    @property
    def text(self) -> str:
        """The result as JSON text (serialised once: the agent's text content and the record share it)."""
        if self._text is None:
            self._text = json.dumps(self.result) if self.ok else self.error
        return self._text


def argument_error(tool: ToolSpec, arguments: Any,
                   validator: Validator | None = None) -> str | None:
    """A message naming the bad field, or None when the arguments match the tool's schema.

    ``validator``: the tool's compiled schema, when the caller keeps one (see ``Toolbox``).
    """
    validator = validator or jsonschema.Draft202012Validator(tool.input_schema)
    if validator.is_valid(arguments):
        problem = _text_problem(arguments)
        return f"invalid arguments for {tool.name}: {problem}" if problem else None
    errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    problems = []
    for error in errors[:5]:
        path = ".".join(str(p) for p in error.absolute_path)
        if error.validator == "required":
            field = error.message.split("'")[1] if "'" in error.message else "?"
            problems.append(f"missing required field '{field}'")
        elif error.validator == "additionalProperties":
            problems.append(f"unexpected field(s): {error.message.split('(')[-1].rstrip(')')}")
        else:
            problems.append(f"field '{path or '(arguments)'}': {error.message}")
    return f"invalid arguments for {tool.name}: " + "; ".join(problems)


def _text_problem(value: Any, path: str = "") -> str | None:
    """Why some text in ``value`` cannot be stored and graded as sent (a NUL, which SQLite's text
    functions cut at, or a lone surrogate, which is not Unicode), or None."""
    if isinstance(value, str):
        if "\x00" in value:
            return f"field '{path or '(arguments)'}' holds a NUL character"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return f"field '{path or '(arguments)'}' holds text that is not valid Unicode (a lone surrogate)"
        return None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        problem = _text_problem(item, f"{path}.{key}" if path else str(key))
        if problem:
            return problem
    return None


CHECKED_ARGUMENTS = 512  # argument texts a toolbox remembers the check of (per workspace)
KEPT_RECORD_BYTES = 4 << 20  # an episode grades its record from memory up to this many bytes of it (from the store past it)
CHECKED_TEXT_MAX = 4096  # longer argument texts (a document written whole) are checked every time


class Toolbox:
    """A workspace's tools (plus ``submit_answer``) by name, with their compiled argument schemas;
    built once per workspace and shared by its episodes. It remembers the outcome of checking the
    last ``CHECKED_ARGUMENTS`` argument texts (of up to ``CHECKED_TEXT_MAX`` characters): episodes of
    one task repeat the same calls (calibration plays its reference in most of its probes), and a
    schema gives the same answer every time."""

    def __init__(self, workspace: Workspace) -> None:
        self.tools = [*workspace.tools, SUBMIT_TOOL]
        self.by_name = {spec.name: spec for spec in reversed(self.tools)}  # the first of a name wins
        self.by_name[SUBMIT_TOOL.name] = SUBMIT_TOOL
        self._validators: dict[str, Validator] = {}
        self._checked: dict[tuple[str, str], str | None] = {}  # (tool, arguments as JSON) -> argument_error

    def validator(self, spec: ToolSpec) -> Validator:
        if spec.name not in self._validators:
            self._validators[spec.name] = jsonschema.Draft202012Validator(spec.input_schema)
        return self._validators[spec.name]

    def argument_error(self, spec: ToolSpec, arguments: Any, text: str) -> str | None:
        """``argument_error`` of ``arguments`` (``text``: their JSON) for the tool ``spec``."""
        key = (spec.name, text)
        if key in self._checked:
            return self._checked[key]
        problem = argument_error(spec, arguments, self.validator(spec))
        if len(text) > CHECKED_TEXT_MAX:
            return problem
        if len(self._checked) >= CHECKED_ARGUMENTS:
            self._checked.pop(next(iter(self._checked)))  # the oldest goes
        self._checked[key] = problem
        return problem


def _recorded(outcome: CallResult) -> str:
    """A result as the store keeps it: its JSON, and its attachments by reference (their bytes are blobs)."""
    if not outcome.attachments:
        return outcome.text
    return json.dumps({**(outcome.result or {}), "_content": [a.model_dump() for a in outcome.attachments]})


def _retrieve(task: asyncio.Future) -> None:
    """Collect a finished call's exception when its caller went away (it was recorded already)."""
    if not task.cancelled():
        task.exception()


class EpisodeFailed(InfrastructureError):
    """The episode ended by an infrastructure failure (recorded on it); the caller gets no tool result."""


class Episode:
    """A running episode: its sandbox, its tools and its record in the store."""

    def __init__(self, host: EpisodeHost, episode_id: str, task: Task, workspace: Workspace,
                 sandbox: Sandbox, provenance: Provenance, *, owns_sandbox: bool = True) -> None:
        self.host = host
        self.owns_sandbox = owns_sandbox  # released to the pool at the end; else its holder keeps it
        self.id = episode_id
        self.task = task
        self.workspace = workspace
        self.sandbox = sandbox
        # what puts the sandbox in the task's initial state before the episode first uses it, where
        # its holder left that until then (``HeldSandbox.open``): an episode without a call needs none
        self.prepare_sandbox: Callable[[], Awaitable[Any]] | None = None
        self.provenance = provenance
        self.toolbox = host.toolbox(workspace)
        self.tools = host.tools_of(task, workspace)
        self.user = host.user_simulator(task) if task.user is not None else None  # answers ask_user
        self.ended = False
        self.calls = 0  # tool calls made so far (any outcome)
        self.touched = False  # whether a call or an event may have changed the state
        self.events = sorted([*workspace.events, *task.events], key=lambda e: e.after_calls)  # yet to happen
        self.final_answer: str | None = None
        self.failure: InfrastructureError | None = None
        self.verdict: VerdictRow | None = None  # the gate's, once the episode has ended and been graded
        # what it recorded, in order, kept in memory in a held sandbox only (``resume`` copies it)
        self.recorded: list[dict[str, Any]] | None = None if owns_sandbox else []
        # what it recorded, as the store reads it back, graded at its end (None past ``KEPT_RECORD_BYTES``:
        # read back from the store then)
        self.interactions: list[ToolCallRow] | None = []
        self._kept_bytes = 0
        self.resumed_from: str | None = None  # the episode it began where it ended (``resume``)
        self._lock = asyncio.Lock()
        self._graded = asyncio.Event()

    def _record(self, row: dict[str, Any]) -> None:
        if self.recorded is not None:
            self.recorded.append(row)
        recorded = self.host.record(self.id, row)
        if self.interactions is not None:
            self._kept_bytes += sum(len(row.get(column) or "") for column in ("arguments", "result", "state_changes"))
            self.interactions.append(recorded)
            if self._kept_bytes > KEPT_RECORD_BYTES:  # a long episode of large results: not held in memory
                self.interactions = None

    def resume(self, after: Episode) -> None:
        """Begin where ``after`` ended, before its answer: ``after`` is an ended episode of the same
        task, and the sandbox holds its final state (``HeldSandbox.open(after=...)``). Its calls,
        world events and user turns are recorded as this episode's first, as they were (what a
        replay of its calls would record, tools being deterministic), and count as this episode's:
        the next call is numbered after them for injected faults and the world's events."""
        if (self.calls or self.recorded or after.recorded is None or after.task.id != self.task.id
                or not after.ended):
            raise ValueError(f"episode {self.id} cannot resume episode {after.id}")
        for row in after.recorded:
            call = row.get("kind", "call") == "call"
            if call and row["tool"] == SUBMIT_TOOL.name:
                continue
            self._record(dict(row))
            self.calls += call
        self.events = [event for event in self.events if event.after_calls > self.calls]
        self.touched = after.touched
        self.resumed_from = after.id

    async def ready_sandbox(self) -> Sandbox:
        """The episode's sandbox, put in the task's initial state first where that was left for its
        first use (``prepare_sandbox``)."""
        if self.prepare_sandbox is not None:
            prepare, self.prepare_sandbox = self.prepare_sandbox, None
            await prepare()
        return self.sandbox

    def tool(self, name: str) -> ToolSpec | None:
        if name == ASK_TOOL.name and self.user is not None:
            return ASK_TOOL
        return self.toolbox.by_name.get(name)

    async def call(self, name: str, arguments: dict[str, Any] | None) -> CallResult:
        """Run one tool call in the sandbox and record it; a tool's failure is a result, not an exception.

        Raises ``EpisodeFailed`` when the sandbox itself failed: the call is recorded (it may have
        run), the episode ends with the failure, and there is no result to give.

        A call, once begun, runs to its end and is recorded even when its caller is cancelled (a
        client that closed its connection or timed out): what reached the sandbox is never lost
        from the record the gate grades.
        """
        work = asyncio.ensure_future(self._call(name, arguments))
        work.add_done_callback(_retrieve)
        return await asyncio.shield(work)

    async def _call(self, name: str, arguments: dict[str, Any] | None) -> CallResult:
        arguments = arguments if arguments is not None else {}
        if (name == ASK_TOOL.name and self.user is not None
                and argument_error(ASK_TOOL, arguments, self.toolbox.validator(ASK_TOOL)) is None):
            return await self._ask(arguments["message"])
        failure: SandboxError | None = None
        async with self._lock:
            if self.ended:
                return CallResult(False, None, f"episode {self.id} has ended; start a new one", "ended")
            spec = self.tool(name)
            self.calls += 1
            started = time.perf_counter()
            text = json.dumps(arguments)
            if spec is None:
                outcome = CallResult(False, None, f"unknown tool {name!r}", "unknown_tool")
            elif (problem := self.toolbox.argument_error(spec, arguments, text)) is not None:
                outcome = CallResult(False, None, problem, "arguments")
            elif spec is SUBMIT_TOOL:
                outcome = CallResult(True, {"episode_id": self.id, "status": "ended"})
            elif self.task.faults is not None and self.task.faults.fails(self.calls, name):
                outcome = CallResult(False, None, f"{spec.name} failed: the service is temporarily unavailable "
                                     "(503); nothing was changed, try again", "transient")
            else:
                try:
                    outcome = await self._run(spec, arguments)
                except SandboxError as exc:
                    failure = exc
                    outcome = CallResult(False, None, f"{spec.name} failed: {exc}", "infrastructure")
            self._record({  # written behind; in the store before the episode's end is
                "tool": name,
                "arguments": text,
                "result": _recorded(outcome) if outcome.ok else None,
                "is_error": int(not outcome.ok),
                "error_kind": outcome.error_kind or None,
                "error": None if outcome.ok else outcome.error,
                "duration_ms": _ms_since(started),
                "state_changes": json.dumps(outcome.changes) if outcome.changes else None,
            })
            if failure is None and spec is not SUBMIT_TOOL:
                failure = await self._world_moves()
        await self.host.settle()  # with ``sync``: in the store file before the caller sees the result
        if failure is not None:
            error = EpisodeFailed(f"the sandbox failed during {name}: {failure}", boundary="sandbox")
            await self.finish(self.final_answer, failure=error)
            raise error
        if spec is SUBMIT_TOOL and outcome.ok:
            verdict = await self.finish(arguments["answer"])
            if verdict is not None and self.provenance.source == "live" and self.host.settings.reveal_grade:
                outcome = CallResult(True, {**(outcome.result or {}), **graded(verdict)})
        return outcome

    async def _ask(self, message: str) -> CallResult:
        """A message to the task's user, answered by its simulator and recorded as a user turn (kind
        ``user``: ``arguments`` hold the agent's message, ``result`` the reply). Not a tool call of the
        world: it neither counts toward events and injected faults nor touches the state.

        Raises ``EpisodeFailed`` when the simulator's model failed (the episode ends with it)."""
        assert self.user is not None
        row = {"tool": ASK_TOOL.name, "kind": "user", "arguments": json.dumps({"message": message})}
        async with self._lock:
            if self.ended:
                return CallResult(False, None, f"episode {self.id} has ended; start a new one", "ended")
            started = time.perf_counter()
            try:
                reply = await self.user.reply(message)
            except InfrastructureError as exc:
                self._record({**row, "result": None, "is_error": 1, "error_kind": "infrastructure",
                                           "error": str(exc), "duration_ms": _ms_since(started)})
                failure = exc
            else:
                result = {"reply": reply.text, "done": reply.done}
                self._record({**row, "result": json.dumps(result), "is_error": 0, "error_kind": None,
                                           "error": None, "duration_ms": _ms_since(started)})
                await self.host.settle()
                return CallResult(True, result)
        error = EpisodeFailed(f"the simulated user failed: {failure}", boundary=failure.boundary)
        await self.finish(self.final_answer, failure=error)
        raise error

    async def _world_moves(self) -> SandboxError | None:
        """Run the events due after this many calls, recording each (kind ``event``); a sandbox failure
        is returned for the caller to end the episode with."""
        while self.events and self.events[0].after_calls <= self.calls:
            event = self.events.pop(0)
            started = time.perf_counter()
            try:
                outcome = await (await self.ready_sandbox()).call_tool(event.app, event.action, event.arguments)
            except SandboxError as exc:
                self.touched = True
                return exc
            self.touched = self.touched or outcome.changed
            self._record({
                "tool": f"{event.app}_{event.action}", "kind": "event", "arguments": json.dumps(event.arguments),
                "result": json.dumps(outcome.result) if outcome.ok else None, "is_error": int(not outcome.ok),
                "error_kind": None if outcome.ok else outcome.kind, "error": None if outcome.ok else outcome.error,
                "duration_ms": _ms_since(started),
                "state_changes": json.dumps(outcome.changes) if outcome.changes else None})
            if not outcome.ok:
                log.warning("world event %s_%s of episode %s failed: %s", event.app, event.action, self.id,
                            outcome.error)
        return None

    async def _run(self, spec: ToolSpec, arguments: dict[str, Any]) -> CallResult:
        try:
            outcome = await (await self.ready_sandbox()).call_tool(spec.app, spec.tool, arguments)
        except BaseException:
            self.touched = True  # it may have written before it failed
            raise
        self.touched = self.touched or outcome.changed
        if not outcome.ok:
            return CallResult(False, None, f"{spec.name} failed: {outcome.error}", outcome.kind)
        result = outcome.result or {}
        if "_content" not in result:
            return CallResult(True, result, changes=outcome.changes)
        try:
            return replace(self._with_attachments(result), changes=outcome.changes)
        except (KeyError, TypeError, ValueError) as exc:  # a tool's bug: its content is malformed
            return CallResult(False, None, f"{spec.name} failed: it returned malformed _content ({exc})", "tool")

    def _with_attachments(self, result: dict[str, Any]) -> CallResult:
        """Split a result's images and documents (``_content``) from its JSON; keep their bytes in the store."""
        result = dict(result)
        attachments, blobs = [], {}
        for item in result.pop("_content"):
            if item["type"] == "image":
                data, kind, uri = base64.b64decode(item["data"], validate=True), "image", None
            elif item["type"] == "resource":
                data, kind, uri = base64.b64decode(item["blob"], validate=True), "document", item.get("uri")
            else:
                raise ValueError(f"content of type {item['type']!r}")
            mime_type = item.get("mime_type") or ("image/png" if kind == "image" else "application/octet-stream")
            digest = self.host.store.put_blob(data, mime_type)
            blobs[digest] = data
            attachments.append(Attachment(kind=kind, mime_type=mime_type, sha256=digest, uri=uri,
                                          text=item.get("text")))
        return CallResult(True, result, attachments=attachments, blobs=blobs)

    def attachment_bytes(self) -> dict[str, bytes]:
        """The bytes of the task's attachments (the images and documents of its instruction), by sha256.

        Raises ``KeyError`` naming an attachment whose bytes the store lacks."""
        found = {}
        for attachment in self.task.attachments:
            kept = self.host.store.blob(attachment.sha256)
            if kept is None:
                raise KeyError(f"the store holds no bytes for the task's attachment {attachment.uri or attachment.sha256}")
            found[attachment.sha256] = kept[1]
        return found

    async def observe(self, app: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Read the live state with an app's read tool (for a resource or a completion; the caller
        records what the agent saw with ``note``).

        Raises ``ValueError`` with the tool's error, ``EpisodeFailed`` when the sandbox failed.
        """
        if self.ended:
            raise ValueError(f"episode {self.id} has ended; start a new one")
        try:
            outcome = await (await self.ready_sandbox()).call_tool(app, tool, arguments)
        except SandboxError as exc:
            error = EpisodeFailed(f"the sandbox failed reading {app} records: {exc}", boundary="sandbox")
            await self.finish(self.final_answer, failure=error)
            raise error from None
        if not outcome.ok:
            raise ValueError(outcome.error)
        return outcome.result or {}

    def note(self, kind: InteractionKind, what: str, arguments: dict[str, Any], *, result: str | None = None,
             error: str | None = None) -> None:
        """Record an interaction that is not a tool call (a resource read, a completion, a prompt),
        with what the agent got: ``result`` text or the ``error`` it saw."""
        if self.ended:
            return
        self._record({"tool": what, "kind": kind, "arguments": json.dumps(arguments), "result": result,
                                   "is_error": int(error is not None), "error": error, "duration_ms": None})

    async def final_state(self) -> tuple[str | None, StateConnection | None]:
        """What the store keeps of the final state, and that state open in memory to grade (None where
        it could not be read)."""
        if not self.touched:  # nothing wrote it: the initial state, without reading it back
            return self.host.unchanged_state(self.workspace), self.host.open_unchanged_state(self.workspace)
        try:
            initial = self.host.initial_image(self.workspace).image
            return self.host.state_changes(self.workspace, await (await self.ready_sandbox()).read_changes(STATE_FILE, initial))
        except (OSError, SandboxError, sqlite3.DatabaseError):  # a tool may have broken its state file
            return None, None

    async def finish(self, answer: str | None = None, *, truncated: bool = False,
                     failure: InfrastructureError | None = None) -> VerdictRow | None:
        """End the episode once: keep its final state and answer in the store, release the sandbox,
        and grade it. Later calls wait for that grading and return the same verdict.

        A live episode left without a tool call or an answer ends ``abandoned``, ungraded: a client
        that looked and went is no empty attempt at the task.

        ``failure``: the infrastructure failure that ended it (recorded on the episode with its boundary).
        """
        opened: StateConnection | None = None  # the final state in memory, for grading
        record: EpisodeRecord | None = None
        async with self._lock:
            ending = not self.ended
            if ending:
                self.ended = True
                self.final_answer = answer
                self.failure = failure
                abandoned = (self.provenance.source == "live" and self.calls == 0 and answer is None
                             and failure is None and not truncated)
                try:
                    state, opened = await self.final_state()
                    try:
                        if self.owns_sandbox:
                            self.host.pool.release_soon(self.sandbox)  # reset for the next episode, or closed
                    finally:
                        error = str(failure) if failure else None
                        self.host.store.end_episode(
                            self.id, final_answer=answer, final_state=state, truncated=truncated,
                            error=error, boundary=failure.boundary if failure else None, abandoned=abandoned)
                        self.host.forget(self)
                    # the episode as the store now holds it (``episode_record`` would read the same)
                    if self.interactions is not None:
                        record = EpisodeRecord(self.interactions, storable(answer), state,
                                               self.host.store.state_base, truncated, storable(error),
                                               states=self.host.states)
                except BaseException:
                    if opened is not None:
                        opened.close()
                    self._graded.set()  # nothing to grade: whoever waits gets no verdict
                    raise
        if not ending:
            await self._graded.wait()
            return self.verdict
        if abandoned:
            if opened is not None:
                opened.close()
            self._graded.set()
            return None
        try:  # quick gradings on the event loop, others in a worker thread (see EpisodeHost.grade)
            self.verdict = await self.host.grade(self, opened, record)
        except Exception:  # the episode stays ended; `coworkenv gate` grades it later
            log.exception("grading episode %s failed", self.id)
        finally:
            self._graded.set()
        return self.verdict


def graded(verdict: VerdictRow) -> dict[str, Any]:
    """What a live client hears of its episode's grade when it submits: the score and its components,
    whether it passed, why (the reason's rule, and the call a call-based rejection rests on), and the
    checks that failed with their detail (never the checks themselves)."""
    return {"score": verdict.score, "passed": verdict.admitted, "reason": verdict.reason,
            "rule": reason_rule(verdict.reason), **({"detail": verdict.detail} if verdict.detail else {}),
            "completion": verdict.completion, "safety": verdict.safety, "robustness": verdict.robustness,
            "failed_checks": [{"id": c.id, "detail": c.detail} for c in verdict.checks if not c.passed]}


def _ms_since(started: float) -> float:
    """Milliseconds since ``started`` (a ``time.perf_counter()``), as recorded on an interaction."""
    return round((time.perf_counter() - started) * 1000, 3)

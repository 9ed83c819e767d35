"""Dataset export from the store: admitted trajectories as SFT rows (messages + tools),
repaired-versus-failed pairs as DPO rows, and admitted tasks as RL prompts with the reward vector
of their graded episodes.

All render what the model sees through the agent view (``coworkenv.workspace.agent_view``):
``style="compact"`` swaps in the compact system prompt and tool list that the agent uses when
playing a task in that view; conversations are rendered by ``coworkenv.workspace.to_chat``.

A conversation is exported only where it shows what the gate graded: its tool calls must be the
calls the episode recorded, names and arguments in order (``conversation_matches``). A conversation
a client rewrote, or one with calls that never ran, is left out and reported (``sft_skipped``,
``dpo_skipped``) with a typed reason.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path
from typing import Any, Literal, NamedTuple

from ..gate import GRADER_VERSION
from ..store import TRAINING_SOURCES, EpisodeRow, Store, ToolCallRow
from ..workspace import (
    ASK_TOOL,
    SUBMIT_TOOL,
    AgentView,
    Message,
    PromptStyle,
    Task,
    agent_view,
    bundle_hash,
    check_style,
    clean,
    to_chat,
)
from ._model import TrainingError

RL_REWARD_SOURCES: tuple[str, ...] = (*TRAINING_SOURCES, "rl")
"""The episodes whose verdicts an RL row carries: the teacher's, live agents' and earlier RL runs'
(calibration and evaluation episodes are the task's own checks and held-out measurements)."""


def _in_view(messages: list[dict[str, Any]], system: str) -> list[dict[str, Any]]:
    """The conversation with its system prompt replaced by the view's (added if missing)."""
    rest = [m for m in messages if m["role"] != "system"]
    return [{"role": "system", "content": system}, *rest]


class _Views:
    """The agent view of each task."""

    def __init__(self, store: Store, style: str) -> None:
        self.store, self.style = store, check_style(style)

    def get(self, episode: EpisodeRow) -> AgentView:
        return self.of(self.store.task_spec(episode.task_id))

    def of(self, task: Task) -> AgentView:
        return agent_view(self.style, self.store.workspace(task.workspace_id).tools, task)


def _provenance(store: Store, episode: EpisodeRow, grader_version: str) -> dict[str, Any]:
    """What a row was made from: the hash of its episode's bundle and of the grader that admitted it."""
    verdict = store.verdict(episode.id, grader_version)
    return {"bundle_hash": episode.bundle_hash, "grader_version": grader_version,
            "grader_hash": verdict.grader_hash if verdict is not None else None}


def _seed(store: Store, task_id: str) -> int:
    """The seed of the workspace a task runs in (its world: people, records, values)."""
    return store.workspace(store.task_spec(task_id).workspace_id).seed


def _image_files(store: Store, conversation: list[Message], image_dir: Path | None) -> list[str]:
    """The files of a conversation's images, in order (written under ``image_dir`` once each)."""
    names = []
    for message in conversation:
        for attachment in message.attachments:
            if attachment.kind != "image":
                continue
            extension = attachment.mime_type.rsplit("/", 1)[-1].split("+")[0] or "bin"
            name = f"{attachment.sha256}.{extension}"
            if image_dir is not None and not (image_dir / name).exists():
                found = store.blob(attachment.sha256)
                if found is not None:
                    image_dir.mkdir(parents=True, exist_ok=True)
                    (image_dir / name).write_bytes(found[1])
            names.append(str(image_dir / name) if image_dir is not None else name)
    return names


def _conversation(store: Store, episode_id: str) -> list[Message]:
    return clean(store.messages(episode_id))


SkipReason = Literal["no_conversation", "conversation_mismatch"]
SKIP_REASONS: dict[str, str] = {
    "no_conversation": "a live episode without a captured conversation (its agent's model calls did not go "
                       "through the capture proxy of `coworkenv serve --upstream`)",
    "conversation_mismatch": "its conversation's tool calls are not the calls the episode made and was graded "
                             "on (names and arguments, in order)",
}
"""What each reason an export leaves an episode out for means."""


class Skipped(NamedTuple):
    """An episode an export left out, and why."""

    episode_id: str
    reason: SkipReason


def _same_call(name: str, arguments: dict[str, Any], recorded: ToolCallRow) -> bool:
    """Whether a conversation's call is the recorded one (arguments past the store's bound are compared
    by their size and their first KiB, all the store keeps of them)."""
    if name != recorded.tool:
        return False
    stored = recorded.arguments
    if set(stored) == {"_truncated", "head"}:
        text = json.dumps(arguments)
        return text[:1024] == stored["head"] and len(text.encode("utf-8", "replace")) == stored["_truncated"]
    return arguments == stored


def conversation_matches(conversation: list[Message], recorded: list[ToolCallRow], *, truncated: bool = False) -> bool:
    """Whether the tool calls of ``conversation`` are ``recorded`` (an episode's calls), in order.

    Questions to the user (``ask_user``) are left out on both sides: an agent asks as a tool call or
    in plain words. A ``submit_answer`` recorded last may be missing from the conversation (a harness
    submits the agent's last words for it). A ``truncated`` episode stopped at its step limit: the
    calls of its last reply, which never ran, may be extra."""
    asked = [(c.name, c.arguments) for m in conversation if m.role == "assistant" for c in m.tool_calls
             if c.name != ASK_TOOL.name]
    ran = [c for c in recorded if c.tool != ASK_TOOL.name]
    if ran and ran[-1].tool == SUBMIT_TOOL.name and len(ran) == len(asked) + 1:
        ran = ran[:-1]
    if truncated and len(asked) > len(ran):
        last = next((m for m in reversed(conversation) if m.role != "tool"), None)
        unrun = len(asked) - len(ran)
        if last is not None and last.role == "assistant" and unrun <= len(last.tool_calls):
            asked = asked[:len(ran)]
    return len(asked) == len(ran) and all(_same_call(name, args, row) for (name, args), row in zip(asked, ran, strict=True))


def _problem(store: Store, episode: EpisodeRow, conversation: list[Message]) -> SkipReason | None:
    """Why ``conversation`` (the episode's) may not be exported, or None."""
    if not conversation:
        return "no_conversation"
    if not conversation_matches(conversation, store.tool_calls(episode.id), truncated=episode.truncated):
        return "conversation_mismatch"
    return None


def _exported(store: Store, grader_version: str, ungated: bool) -> list[EpisodeRow]:
    return store.graded_episodes(grader_version) if ungated else store.admitted_episodes(grader_version)


def sft_skipped(store: Store, *, grader_version: str = GRADER_VERSION, run_tag: str | None = None,
                ungated: bool = False) -> list[Skipped]:
    """The admitted episodes (with ``ungated``, the graded ones) ``sft_rows`` leaves out, each with its
    reason (``SKIP_REASONS``)."""
    skipped = []
    for episode in _exported(store, grader_version, ungated):
        if run_tag is None or episode.run_tag == run_tag:
            problem = _problem(store, episode, _conversation(store, episode.id))
            if problem is not None:
                skipped.append(Skipped(episode.id, problem))
    return skipped


def sft_rows(store: Store, *, grader_version: str = GRADER_VERSION, style: PromptStyle = "full",
             vision: bool = False, image_dir: Path | None = None, run_tag: str | None = None,
             without: Collection[str] = (), ungated: bool = False) -> list[dict[str, Any]]:
    """One row per admitted teacher or live episode: ``messages``, ``tools``, ``images`` and provenance;
    none of the tasks in ``without`` (held out of training), and none whose conversation is missing
    or does not show the calls the episode made (``sft_skipped`` lists those). ``ungated``: one row
    per graded episode, the ones the gate rejected too (what training without the gate would see;
    for measuring what the gate is worth, not for training a model to use).

    ``images`` names the files of the images the agent was given, in order (written under
    ``image_dir`` when one is given); with ``vision``, the messages that carried them have the
    list content of vision-language chat templates (an ``{"type": "image"}`` placeholder per image)."""
    views = _Views(store, style)
    left_out = set(without)
    rows = []
    for episode in _exported(store, grader_version, ungated):
        if (run_tag is not None and episode.run_tag != run_tag) or episode.task_id in left_out:
            continue
        conversation = _conversation(store, episode.id)
        if _problem(store, episode, conversation) is not None:
            continue  # nothing to train on, or a conversation that is not what was graded
        messages = to_chat(conversation, images=vision)
        view = views.get(episode)
        rows.append({
            "messages": _in_view(messages, view.system),
            "images": _image_files(store, conversation, image_dir),
            "tools": view.tools,
            "episode_id": episode.id,
            "task_id": episode.task_id,
            "source": episode.source,  # teacher, or live (an agent whose conversation the capture proxy recorded)
            "provider": episode.provider,
            "client": episode.client,  # a live episode's MCP client; its run tag below
            "run_tag": episode.run_tag,
            "capability": store.task_spec(episode.task_id).capability,
            "seed": _seed(store, episode.task_id),
            "repaired": episode.repaired_from is not None,
            **_provenance(store, episode, grader_version),
        })
    return rows


def _after_instruction(messages: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """A conversation's instruction (its first user turn) and everything after it: later user turns
    (a simulated user's replies) stay in the continuation."""
    rest = [m for m in messages if m["role"] != "system"]
    first = next((i for i, m in enumerate(rest) if m["role"] == "user"), None)
    return (None, []) if first is None else (rest[first], rest[first + 1:])


def dpo_rows(store: Store, *, grader_version: str = GRADER_VERSION, style: PromptStyle = "full",
             ) -> list[dict[str, Any]]:
    """Repaired-versus-failed pairs: for each admitted repaired episode, the attempt it repaired.

    ``prompt`` is the shared opening (system prompt and task instruction; the repair hint is
    provenance and is left out), ``chosen`` the admitted repaired continuation, ``rejected`` the
    failed attempt's continuation (a multi-turn task's simulated user replies in both, as user
    turns). Pairs whose continuations are identical are skipped, and pairs with a side whose
    conversation does not show the calls its episode made (``dpo_skipped`` lists those).
    """
    views = _Views(store, style)
    rows = []
    for chosen_episode, rejected_episode, rejected_reason in store.repair_pairs(grader_version):
        chosen, rejected = _conversation(store, chosen_episode.id), _conversation(store, rejected_episode.id)
        if _problem(store, chosen_episode, chosen) == "conversation_mismatch" or \
                _problem(store, rejected_episode, rejected) == "conversation_mismatch":
            continue
        instruction, chosen_rest = _after_instruction(to_chat(chosen))
        _, rejected_rest = _after_instruction(to_chat(rejected))
        if instruction is None:
            continue
        view = views.get(chosen_episode)
        prompt = _in_view([instruction], view.system)
        if not chosen_rest or not rejected_rest or chosen_rest == rejected_rest:
            continue
        rows.append({
            "prompt": prompt,
            "chosen": chosen_rest,
            "rejected": rejected_rest,
            "tools": view.tools,
            "episode_id": chosen_episode.id,
            "rejected_episode_id": rejected_episode.id,
            "rejected_reason": rejected_reason,
            "task_id": chosen_episode.task_id,
            "capability": store.task_spec(chosen_episode.task_id).capability,
            "seed": _seed(store, chosen_episode.task_id),
            **_provenance(store, chosen_episode, grader_version),
        })
    return rows


def dpo_skipped(store: Store, *, grader_version: str = GRADER_VERSION) -> list[Skipped]:
    """The episodes of repair pairs whose conversation does not show the calls they made (``dpo_rows``
    leaves their pairs out), once each."""
    skipped: dict[str, Skipped] = {}
    for pair in store.repair_pairs(grader_version):
        for episode in pair[:2]:
            if episode.id not in skipped and \
                    _problem(store, episode, _conversation(store, episode.id)) == "conversation_mismatch":
                skipped[episode.id] = Skipped(episode.id, "conversation_mismatch")
    return list(skipped.values())


def rl_rows(store: Store, *, grader_version: str = GRADER_VERSION, style: PromptStyle = "full",
            ) -> list[dict[str, Any]]:
    """One row per admitted task: the prompt a policy starts from and the reward vector so far.

    ``prompt`` is the conversational opening in the agent view ``style`` (its system prompt and the
    task instruction, as an SFT row opens), ``tools`` the view's tools; ``bundle_hash`` is the
    hash of the task's workspace and task (what an episode of it opened now records), so a row
    names the exact environment its rewards came from. ``rewards`` lists the verdicts of
    ``grader_version`` on the task's graded episodes (teacher, live and RL): one
    ``{episode_id, source, admitted, reason, completion, safety, robustness, score, checks, grader_hash}``
    each (``checks``: each check's id and whether it passed), oldest first. ``seed`` is the
    workspace's (SFT and DPO rows carry it too). TRL's
    ``GRPOTrainer`` reads ``prompt`` and passes the other columns to reward functions.
    """
    views = _Views(store, style)
    rows = []
    for task_row in store.tasks(status="admitted"):
        task = task_row.spec
        workspace = store.workspace(task.workspace_id)
        view = views.of(task)
        episodes = [e for e in store.episodes(task_id=task.id) if e.source in RL_REWARD_SOURCES]
        verdicts = store.verdicts([e.id for e in episodes], grader_version)
        rows.append({
            "prompt": _in_view([{"role": "user", "content": task.instruction}], view.system),
            "tools": view.tools,
            "task_id": task.id,
            "workspace_id": task.workspace_id,
            "capability": task.capability,
            "seed": workspace.seed,
            "bundle_hash": bundle_hash(workspace, [task]),
            "grader_version": grader_version,
            "rewards": [
                {"episode_id": e.id, "source": e.source, "admitted": v.admitted, "reason": v.reason,
                 "completion": v.completion, "safety": v.safety, "robustness": v.robustness, "score": v.score,
                 "checks": {c.id: c.passed for c in v.checks}, "grader_hash": v.grader_hash}
                for e in episodes if (v := verdicts.get(e.id)) is not None
            ],
        })
    return rows


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> int:
    """Write ``rows`` to ``path`` whole: through a partial file renamed at the end, removed if writing fails."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(path.suffix + ".partial")
    try:
        with partial.open("w") as fh:
            for row in rows:
                fh.write(json.dumps(row) + "\n")
        partial.replace(path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return len(rows)


def export_sft(store: Store, path: str | Path, *, style: PromptStyle = "full", allow_empty: bool = True,
               vision: bool = False, run_tag: str | None = None, without: Collection[str] = (),
               ungated: bool = False) -> int:
    """Write SFT rows as JSON lines to ``path`` (replacing it atomically); return the row count.

    Images the agents were given go to ``<path stem>.images/`` beside it, named in each row's
    ``images``. ``without``: task ids whose rows are left out (held out of training). ``ungated``:
    every graded episode's row, rejected ones too (``sft_rows``). With ``allow_empty=False`` a store
    with nothing to export raises ``ValueError`` and writes nothing."""
    path = Path(path)
    rows = sft_rows(store, style=style, vision=vision, image_dir=path.parent / f"{path.stem}.images", run_tag=run_tag,
                    without=without, ungated=ungated)
    if not rows and not allow_empty:
        raise TrainingError(f"{store.path} has no admitted episodes with a conversation to export "
                         "(collect some first); nothing written")
    return _write_jsonl(Path(path), rows)


def export_dpo(store: Store, path: str | Path, *, style: PromptStyle = "full", allow_empty: bool = True) -> int:
    """Write DPO pairs as JSON lines to ``path`` (replacing it atomically); return the pair count.

    With ``allow_empty=False`` a store with no pair raises ``ValueError`` and writes nothing."""
    rows = dpo_rows(store, style=style)
    if not rows and not allow_empty:
        raise TrainingError(f"{store.path} has no repaired-versus-failed pairs to export (collect with an oracle "
                         "--error-rate, or a teacher that fails and is repaired); nothing written")
    return _write_jsonl(Path(path), rows)


def export_rl(store: Store, path: str | Path, *, style: PromptStyle = "full", allow_empty: bool = True) -> int:
    """Write RL prompt rows (with their reward vectors) as JSON lines to ``path`` (replacing it
    atomically); return the row count.

    With ``allow_empty=False`` a store without admitted tasks raises ``ValueError`` and writes nothing."""
    rows = rl_rows(store, style=style)
    if not rows and not allow_empty:
        raise TrainingError(f"{store.path} has no admitted tasks to export (run coworkenv synth first); nothing written")
    return _write_jsonl(Path(path), rows)

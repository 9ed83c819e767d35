"""One played episode: open it with its provenance, let the agent play it over MCP, record the
conversation, end it, and read the gate's verdict (an infrastructure failure, instead, is
recorded on the episode with the boundary it crossed)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from langchain_core.language_models.chat_models import BaseChatModel

from .._errors import InfrastructureError
from ..agents import Rollout, rollout
from ..gate import GRADER_VERSION
from ..store import Provenance, Store, VerdictRow
from ..workspace import PromptStyle, Task
from ._episodes import EpisodeService, ServerUnavailable


@dataclass
class Played:
    episode_id: str
    verdict: VerdictRow | None  # None when an infrastructure failure ended the episode
    rollout: Rollout | None = None
    failure: str | None = None  # "boundary: message" of that failure

    @property
    def failed(self) -> bool:
        return self.failure is not None


async def play(episodes: EpisodeService, store: Store, task: Task, provenance: Provenance, model: BaseChatModel, *,
               style: PromptStyle, max_steps: int, hint: str = "") -> Played:
    try:
        opened = await episodes.open(task.id, provenance)
    except ServerUnavailable as exc:  # the server could not open one (a worker that died, say): play again
        return Played("", None, failure=f"{exc.boundary}: {exc}")
    try:
        result = await rollout(model, opened.target, task=task, style=style, max_steps=max_steps, hint=hint,
                               headers=opened.headers)
    except InfrastructureError as exc:
        with contextlib.suppress(ServerUnavailable):  # a server that lost the episode cannot end it either
            await episodes.end(opened.id, failure=exc)  # the runtime may have recorded its own failure first
        row = store.episode(opened.id)
        boundary, error = (row.boundary, row.error) if row is not None and row.error else (exc.boundary, str(exc))
        return Played(opened.id, None, failure=f"{boundary}: {error}")
    store.add_messages(opened.id, result.messages)
    try:
        await episodes.end(opened.id, truncated=result.truncated)
    except ServerUnavailable as exc:  # played, but not ended and graded where it ran: it does not count
        return Played(opened.id, None, result, failure=f"{exc.boundary}: {exc}")
    return Played(opened.id, store.verdict(opened.id, GRADER_VERSION), result)

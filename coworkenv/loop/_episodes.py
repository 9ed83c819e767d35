"""Where the loop opens episodes: in this process (``LocalEpisodes``, over HTTP or an in-memory MCP
connection) or in a ``coworkenv serve`` elsewhere (``RemoteEpisodes``, through its episode API).

Either way the loop opens each episode with its provenance before any agent touches it, hands the
agent the episode's MCP address, and ends it when the agent stops without submitting.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from .._errors import InfrastructureError, ProtocolError
from ..episodes import EpisodeHost
from ..server import OPERATOR_HEADER, OpenEpisode, build_server
from ..store import Provenance


@dataclass(frozen=True)
class OpenedEpisode:
    id: str
    target: Any  # what ``mcp.Client`` connects to: the episode's URL, or an in-memory server
    headers: dict[str, str] = field(default_factory=dict)  # for every request to a URL target


class EpisodeService(Protocol):
    async def open(self, task_id: str, provenance: Provenance) -> OpenedEpisode: ...

    async def end(self, episode_id: str, *, truncated: bool = False,
                  failure: InfrastructureError | None = None) -> None:
        """End the episode unless it has ended already (the runtime grades it)."""


class LocalEpisodes:
    """Episodes of ``host``, in this process: reached at ``{base_url}/e/{id}/mcp`` when an HTTP
    server serves ``host`` there, and over an in-memory MCP connection otherwise."""

    def __init__(self, host: EpisodeHost, base_url: str | None = None) -> None:
        self.host = host
        self.base_url = base_url.rstrip("/") if base_url else None

    async def open(self, task_id: str, provenance: Provenance) -> OpenedEpisode:
        episode = await self.host.open(task_id, provenance)
        if self.base_url is not None:
            return OpenedEpisode(episode.id, f"{self.base_url}/e/{episode.id}/mcp")
        return OpenedEpisode(episode.id, build_server(OpenEpisode(episode)))

    async def end(self, episode_id: str, *, truncated: bool = False,
                  failure: InfrastructureError | None = None) -> None:
        episode = self.host.episode(episode_id)
        if episode is not None:
            await episode.finish(episode.final_answer, truncated=truncated, failure=failure)


class ServerUnavailable(ProtocolError):
    """The server did not answer, or answered 5xx (a worker that died, say): worth playing again,
    unlike a refusal (a wrong token, an unknown task)."""


class RemoteEpisodes:
    """Episodes of a ``coworkenv serve`` at ``url`` (``POST /episodes``, ``POST /episodes/{id}/end``).

    ``token`` is the server's bearer token; ``operator_token`` its operator credential (``serve
    --operator-token``), without which it opens no episode but ``live`` ones and ends none as an
    infrastructure failure. Both go with the agent's MCP connection to the episode too."""

    def __init__(self, url: str, *, token: str | None = None, operator_token: str | None = None,
                 timeout: float = 60.0) -> None:
        self.url = url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        if operator_token:
            self.headers[OPERATOR_HEADER] = operator_token
        self.http = httpx.AsyncClient(base_url=self.url, headers=self.headers, timeout=timeout)

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = await self.http.post(path, json=body)
        except httpx.HTTPError as exc:
            raise ServerUnavailable(f"the server at {self.url} did not answer {path}: {exc}") from exc
        if response.status_code >= 400:
            try:
                message = response.json()["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = response.text[:200]
            error = ServerUnavailable if response.status_code >= 500 else ProtocolError
            raise error(f"the server at {self.url} refused {path} ({response.status_code}): {message}")
        return response.json()

    async def open(self, task_id: str, provenance: Provenance) -> OpenedEpisode:
        opened = await self._post("/episodes", {
            "task": task_id, "source": provenance.source, "provider": provenance.provider,
            "attempt": provenance.attempt, "repaired_from": provenance.repaired_from, "hint": provenance.hint,
        })
        return OpenedEpisode(opened["episode_id"], self.url + opened["url"], dict(self.headers))

    async def end(self, episode_id: str, *, truncated: bool = False,
                  failure: InfrastructureError | None = None) -> None:
        body: dict[str, Any] = {"truncated": truncated}
        if failure is not None:
            body.update(error=str(failure), boundary=failure.boundary)
        await self._post(f"/episodes/{episode_id}/end", body)

    async def aclose(self) -> None:
        await self.http.aclose()

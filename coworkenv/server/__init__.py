"""The MCP server: one isolated, sandboxed workspace instance per episode, recorded to the store."""

from ._episodes import SUBMIT_TOOL, CallResult, Episode, EpisodeHost, EpisodeSettings, argument_error
from ._mcp import HttpEpisodes, SingleEpisode, build_server
from ._conformance import conformance_server, serve_conformance
from ._serve import ServeSettings, http_app, running_http_server, serve_http, serve_stdio

__all__ = [
    "SUBMIT_TOOL",
    "CallResult",
    "Episode",
    "EpisodeHost",
    "EpisodeSettings",
    "HttpEpisodes",
    "ServeSettings",
    "SingleEpisode",
    "argument_error",
    "build_server",
    "conformance_server",
    "http_app",
    "running_http_server",
    "serve_conformance",
    "serve_http",
    "serve_stdio",
]

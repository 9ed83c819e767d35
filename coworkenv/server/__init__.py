"""The MCP server: one isolated, sandboxed workspace instance per episode, recorded to the store."""

from ._episodes import SUBMIT_TOOL, CallResult, Episode, EpisodeHost, EpisodeSettings, argument_error
from ._mcp import HttpEpisodes, SingleEpisode, build_server
from ._serve import http_app, running_http_server, serve_http, serve_stdio

__all__ = [
    "SUBMIT_TOOL",
    "CallResult",
    "Episode",
    "EpisodeHost",
    "EpisodeSettings",
    "HttpEpisodes",
    "SingleEpisode",
    "argument_error",
    "build_server",
    "http_app",
    "running_http_server",
    "serve_http",
    "serve_stdio",
]

"""The MCP transport over the episode runtime: stdio, streamable HTTP in both protocol eras, the
HTTP guards and the episode API; the front of ``serve --workers``; and the conformance suite's
fixture server."""

from ._conformance import conformance_server, serve_conformance
from ._front import Front, Workers, serve_front, unix_socket
from ._http_episodes import OPERATOR_HEADER, HttpEpisodes
from ._mcp import build_server
from ._proxy import redact_url
from ._resolvers import OpenEpisode, SingleEpisode
from ._serve import ServeSettings, bind_socket, http_app, running_http_server, serve_http, serve_stdio

__all__ = [
    "OPERATOR_HEADER",
    "Front",
    "HttpEpisodes",
    "OpenEpisode",
    "ServeSettings",
    "SingleEpisode",
    "bind_socket",
    "build_server",
    "conformance_server",
    "http_app",
    "running_http_server",
    "serve_conformance",
    "serve_http",
    "serve_front",
    "serve_stdio",
    "redact_url",
    "Workers",
    "unix_socket",
]

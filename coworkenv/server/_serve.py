"""Transports: stdio (one episode per process) and streamable HTTP (many episodes per process)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator

import uvicorn
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ._episodes import EpisodeHost
from ._mcp import HttpEpisodes, SingleEpisode, build_server

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def http_app(host: EpisodeHost, *, bind: str = "127.0.0.1", session_idle_timeout: float = 1800,
             json_response: bool = False) -> Starlette:
    """The HTTP server: MCP endpoints per task and per episode, plus a JSON list of tasks."""
    server = build_server(HttpEpisodes(host, source="live"))
    security = None
    if bind in LOOPBACK:
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    manager = StreamableHTTPSessionManager(
        app=server,
        json_response=json_response,
        session_idle_timeout=session_idle_timeout,
        security_settings=security,
    )
    endpoint = StreamableHTTPASGIApp(manager)

    async def tasks(request: Request) -> JSONResponse:
        rows = host.store.tasks(status=request.query_params.get("status", "admitted"))
        return JSONResponse([
            {"id": r["id"], "capability": r["capability"], "difficulty": r["difficulty"],
             "instruction": r["instruction"], "status": r["status"], "url": f"/t/{r['id']}/mcp"}
            for r in rows
        ])

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            try:
                yield
            finally:
                await host.close()

    return Starlette(
        routes=[
            Route("/t/{task}/mcp", endpoint=endpoint),
            Route("/t/{task}/e/{key}/mcp", endpoint=endpoint),
            Route("/e/{episode}/mcp", endpoint=endpoint),
            Route("/tasks", endpoint=tasks),
        ],
        lifespan=lifespan,
    )


async def serve_http(host: EpisodeHost, *, bind: str = "127.0.0.1", port: int = 8765) -> None:
    config = uvicorn.Config(http_app(host, bind=bind), host=bind, port=port, log_level="warning")
    await uvicorn.Server(config).serve()


@contextlib.asynccontextmanager
async def running_http_server(host: EpisodeHost, *, bind: str = "127.0.0.1") -> AsyncIterator[str]:
    """Serve ``host`` over HTTP on a free loopback port inside this event loop; yield its base URL."""
    sock = socket.socket(socket.AF_INET6 if ":" in bind else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((bind, 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(http_app(host, bind=bind), log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()
                raise RuntimeError("the HTTP server stopped during start-up")
            await asyncio.sleep(0.01)
        yield f"http://{bind}:{port}"
    finally:
        server.should_exit = True
        await task
        sock.close()


async def serve_stdio(host: EpisodeHost, task_id: str) -> None:
    """Serve one episode of ``task_id`` on stdin/stdout until the client goes away."""
    resolver = SingleEpisode(host, task_id, source="live")
    server = build_server(resolver)
    try:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        await host.close()

"""Serve coworkenv tasks as an OpenEnv environment: ``python -m coworkenv.interop.openenv_server --server URL``.

Runs where openenv is installed (``.venv-interop``), in front of a ``coworkenv serve`` at URL; OpenEnv clients
connect to ``--host``/``--port`` (``MCPToolClient(base_url=...)``, ``GenericEnvClient``, or MCP at ``/mcp``).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys

LOOPBACK = ("127.0.0.1", "::1", "localhost")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m coworkenv.interop.openenv_server", description=__doc__)
    parser.add_argument("--server", required=True, metavar="URL", help="the coworkenv serve to play (http://HOST:PORT)")
    parser.add_argument("--token", default=None, help="its bearer token (default: $COWORKENV_TOKEN)")
    parser.add_argument("--host", default="127.0.0.1", help="address to serve OpenEnv on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8010, help="port to serve OpenEnv on (default 8010; 0: any free one)")
    parser.add_argument("--max-sessions", type=int, default=64, help="OpenEnv sessions open at once (default 64)")
    parser.add_argument("--client-token", default=None,
                        help="bearer token OpenEnv clients must send (default: $COWORKENV_OPENENV_TOKEN); needed to "
                             "serve on any address but loopback")
    args = parser.parse_args(argv)
    client_token = args.client_token or os.environ.get("COWORKENV_OPENENV_TOKEN")
    if client_token is not None and not client_token.strip():
        sys.exit("openenv_server: the client token is blank; give a non-blank one")
    if not client_token and args.host not in LOOPBACK:
        sys.exit(f"openenv_server: serving on {args.host} needs --client-token: whoever reaches this server plays "
                 "episodes as its client")

    import uvicorn

    from ._openenv import openenv_app
    from ._remote import CoworkServer, ServeError

    server = CoworkServer(args.server, client="openenv", token=args.token or os.environ.get("COWORKENV_TOKEN"))
    try:
        served = len(server.tasks())
    except ServeError as exc:
        sys.exit(f"openenv_server: {exc}")
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    listening = socket.create_server((args.host, args.port), family=family)  # bound here: --port 0 can be told
    port = listening.getsockname()[1]
    print(f"OpenEnv server for {served} coworkenv tasks of {args.server} on http://{args.host}:{port}",
          file=sys.stderr, flush=True)
    try:
        app = openenv_app(server, max_sessions=args.max_sessions, client_token=client_token)
        uvicorn.Server(uvicorn.Config(app, log_level="warning", ws_max_size=16 << 20)).run(sockets=[listening])
    finally:
        server.close()


if __name__ == "__main__":
    main()

"""coworkenv in other training ecosystems: an OpenEnv environment server and a verifiers environment.

Both run where those packages are installed (``make interop``: ``.venv-interop``), beside a ``coworkenv serve``:
OpenEnv 0.10 and verifiers 0.3.1 pin an mcp older than coworkenv's, so they reach its episode runtime as
live clients over HTTP and MCP (``CoworkServer``), never in-process. The server opens each episode as a
``live`` one of an admitted task, with the adapter's name as its client, and its gate grades it; the adapters
hand the verdict back as the reward and its components.

- OpenEnv: ``openenv_app(CoworkServer(url, client="openenv"))``, or ``python -m coworkenv.interop.openenv_server``.
- verifiers: ``vf.load_environment("coworkenv.interop", url=...)`` (``load_environment`` here).

Names are imported on first use: each adapter needs only its own package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._openenv import CoworkEnvironment, openenv_app
    from ._remote import CoworkServer, ServedEpisode, ServeError, ToolResult, Verdict
    from ._verifiers import CoworkToolEnv, coworkenv_rubric, load_environment

__getattr__, __dir__, __all__ = lazy_names(__name__, {  # submodule: the names it gives
    "_remote": ("CoworkServer", "ServedEpisode", "ServeError", "ToolResult", "Verdict"),
    "_openenv": ("CoworkEnvironment", "openenv_app"),
    "_verifiers": ("CoworkToolEnv", "coworkenv_rubric", "load_environment"),
})

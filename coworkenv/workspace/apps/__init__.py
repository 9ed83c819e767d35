"""Workspace apps: mail, calendar and files, each backed by tables in one SQLite file.

Standard library only and relative imports only: the sandbox imports this folder as
a top-level package named ``apps`` under ``python3 -I -S``, while the host imports it
as ``coworkenv.workspace.apps``.

Every app module defines NAME, DESCRIPTION, SCHEMA, TOOLS, seed(conn, rng) and
handle(conn, tool, args), and may define RESOURCES (records readable as MCP resources); see ``mail.py`` for an example.
"""

from . import calendar, files, mail
from ._base import ToolFailure

ALL_APPS = {"mail": mail, "calendar": calendar, "files": files}

__all__ = ["ALL_APPS", "ToolFailure", "calendar", "files", "mail"]

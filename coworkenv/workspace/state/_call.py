"""``apply_call``: one tool call of an app applied to a state, the one way it is done everywhere: the
sandbox's runner (inside its worker, with limits around it), and in-process where the host plays
calls on a copy of a state (synthesis's dry runs, catalogs and probes).

Standard library only and no imports of its own package: the sandboxes get this file beside the apps
and the runner imports it from there (``python3 -I -S``); the host imports it as
``coworkenv.workspace.state``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from types import ModuleType
from typing import Any


def apply_call(conn: sqlite3.Connection, app: ModuleType, tool: str, arguments: Mapping[str, Any]) -> Any:
    """Run tool ``tool`` of the app module ``app`` (its ``handle``) with ``arguments`` against the
    state ``conn`` holds, and commit what it wrote; return its result. A call that raises (the app's
    ``ToolFailure``, or anything else) leaves the state as it was: what it wrote is rolled back, and
    the exception goes to the caller, who says what it was."""
    try:
        result = app.handle(conn, tool, dict(arguments))
        conn.commit()
    except BaseException:
        try:
            conn.rollback()
        except sqlite3.Error:  # closed by the tool, say
            pass
        raise
    return result

"""The built-in workspace apps, each backed by tables in one SQLite file.

Standard library only and relative imports only: the sandbox imports this folder as a top-level
package named ``apps`` under ``python3 -I -S``, while the host imports it as
``coworkenv.workspace.apps``.

Every module here whose name does not start with ``_`` is an app (found, not listed: a new app is
one new module). An app module defines:

- ``NAME``, ``DESCRIPTION``;
- ``SCHEMA``: its tables (prefixed with its name);
- ``seed(conn, rng, world)``: fill its tables from the workspace's world (the people,
  organisations, projects, products and dates of ``coworkenv.workspace.build_world``, as plain
  data) and ``rng``;
- its tools, each declared on the function that handles it with ``_base.Tools``::

      tools = Tools()

      @tools.tool("get_event", "read", input=object_schema({"id": ID}, ["id"]), output=EVENT)
      def get_event(conn, args):
          \"\"\"Get one event by id (this docstring is the description agents read).\"\"\"
          return ...  # a JSON-able dict, or raise ToolFailure

      TOOLS, handle = tools.specs, tools.handle

  ``TOOLS`` lists each tool's name, description, effect (``read``/``write``/``destructive``), input
  and output JSON schemas; ``handle(conn, tool, args)`` runs one call, returning its result or
  raising ``ToolFailure`` (an app may define both itself instead, as ``claweval`` does);
- optionally ``RESOURCES``: records readable as MCP resources;
- optionally ``EVENTS``: what the world may do to the app during an episode beside its tools (names
  start with ``_``, e.g. mail's ``_deliver``, declared with ``@tools.event``), run by ``handle`` like
  a tool but never offered to agents;
- optionally ``LISTED = False``: not part of workspaces made by default nor offered for synthesis
  (``claweval``, whose tools are an imported task's own);
- optionally ``services(conn, directory)``: processes to start inside the sandbox before the app's
  first call of an episode (their files written under ``directory``), stopped when the sandbox is
  reset; each a dict with ``name``, ``argv``, ``cwd``, ``env``, ``ready_url``, ``ready_method`` and
  ``timeout_s`` (see ``claweval``).

Modules starting with ``_`` are shared pieces, not apps: ``_base`` (the tool declaration, the
world and workspace helpers every app uses: ``today_iso``, ``user_email``, ``next_id``,
``currency``, ``weekday``, ``AppMeta``, argument checks), ``_products`` (what helpdesk and kb agree
on about products), ``_formulas`` (the spreadsheet formula engine) and ``_drawing`` (Pillow drawing
for seeding: host only, never imported inside the sandbox).

See ``calendar.py`` for an example. Apps from other packages register through the ``coworkenv.apps``
entry point group (``coworkenv.workspace.app_registry``).
"""

import importlib
import pkgutil

from ._base import ToolFailure

ALL_APPS = {}
for _found in pkgutil.iter_modules(__path__):
    if not _found.name.startswith("_"):
        _module = importlib.import_module(__name__ + "." + _found.name)
        ALL_APPS[_module.NAME] = _module

__all__ = ["ALL_APPS", "ToolFailure"]

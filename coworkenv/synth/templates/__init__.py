"""Task templates, one module per app they are about (``mail``, ``crm``, ``spreadsheets``…), found rather than listed.

Every module here (not starting with ``_``) registers its templates where it writes them, with
``@template(capability, difficulty, needs=...)`` (``._kit``); a template reads a workspace's initial
state (a ``sqlite3.Connection``, the workspace's world included: ``coworkenv.workspace.load_world``)
and draws from ``rng``, and returns a task spec without ``id`` and ``workspace_id`` (instruction,
checks, reference solution, reference answer, forbidden tools and a forbidden probe), or ``None``
when the state offers nothing for it. Template names are unique across modules.

``TEMPLATES`` is capability → name → template: the hand-written ones sorted by name (the order in
which they take turns, so it does not depend on which module is imported first), then the shapes
composed over any app (``coworkenv.synth._compose``) in the order they are declared there.
"""

from __future__ import annotations

import importlib
import pkgutil

from ._kit import Registered, Spec, Template, registered

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")):
    importlib.import_module(f"{__name__}.{_module}")

TEMPLATES: dict[str, dict[str, Template]] = {capability: dict(templates)
                                             for capability, templates in registered().items()}

# then the compositional shapes, which work over any app (``coworkenv.synth._compose``)
from .._compose import SHAPES  # noqa: E402

for _capability, _shapes in SHAPES.items():
    TEMPLATES.setdefault(_capability, {}).update(_shapes)


def written_in(*modules: str) -> dict[str, dict[str, Registered]]:
    """The hand-written templates of these modules (``written_in("crm", "hr")``; all of them without a
    module): capability → name → template."""
    return registered(modules or None)


__all__ = ["TEMPLATES", "Registered", "Spec", "Template", "written_in"]

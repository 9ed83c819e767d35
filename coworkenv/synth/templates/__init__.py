"""Task templates, one module per group of apps, found rather than listed.

Every module here (not starting with ``_``) defines ``TEMPLATES: dict[capability, dict[name,
template]]``; a template reads a workspace's initial state (a ``sqlite3.Connection``, the
workspace's world included: ``coworkenv.workspace.load_world``) and draws from ``rng``, and returns
a task spec without ``id`` and ``workspace_id`` (instruction, checks, reference solution,
reference answer, forbidden tools and a forbidden probe), or ``None`` when the state offers
nothing for it. Template names are unique across modules; ``TEMPLATES`` merges them all.
"""

from __future__ import annotations

import importlib
import pkgutil
import random
import sqlite3
from collections.abc import Callable
from typing import Any

Spec = dict[str, Any]
Template = Callable[[sqlite3.Connection, random.Random], Spec | None]

TEMPLATES: dict[str, dict[str, Template]] = {}
# office (mail, calendar, files) first, then the others by name: a capability's templates take turns
# in this order, so a new module leaves the first tasks of a seed as they were
_names = sorted((m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")),
                key=lambda name: (name != "office", name))
for _name_ in _names:
    _module = importlib.import_module(f"{__name__}.{_name_}")
    for _capability, _templates in _module.TEMPLATES.items():
        _merged = TEMPLATES.setdefault(_capability, {})
        for _name, _template in _templates.items():
            if _name in _merged:
                raise ValueError(f"template {_name!r} of {_module.__name__} is defined twice")
            _merged[_name] = _template

# then the compositional shapes, which work over any app (``coworkenv.synth._compose``)
from .._compose import SHAPES  # noqa: E402

for _capability, _shapes in SHAPES.items():
    TEMPLATES.setdefault(_capability, {}).update(_shapes)

__all__ = ["TEMPLATES", "Spec", "Template"]

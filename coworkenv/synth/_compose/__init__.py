"""Compositional task generation: tasks as small typed programs over any app's tools and records.

Nothing here knows an app. ``_catalog`` reads what every app declares (its resources, its tools'
effects and input schemas, its records as its own tools return them) into a ``Catalog`` of
collections, the tools that set their fields, remove their records or post text, and the values
two apps share. A shape (``_shapes``; ``_multiturn`` for the user's facts and confirmations) draws
a ``Program`` from that catalog: a chain of steps — find (list) → read (get) → join → compute →
write → notify — with the instruction that asks for it (``_phrasing``: several phrasings per shape,
the record named by its label, a part of it, another field or a person). The checks over the final
state and the answer, the reference solution and the forbidden probe are derived from the program's
steps (``_program``), so they agree by construction. A new app with resources yields tasks without
a template of its own.

Each shape is registered with ``@shape(capability, difficulty, name=...)`` and is a template
(``conn, rng`` → spec or None); ``SHAPES`` lists them by capability (in the taxonomy's order), a
capability's shapes in the order they are declared, and ``coworkenv.synth.templates`` merges them with the
hand-written templates.
"""

from __future__ import annotations

from . import _multiturn, _shapes  # their shapes register as they are declared
from ._catalog import Catalog, catalog
from ._multiturn import unheld_cues
from ._program import Program, Shape, shapes

SHAPES: dict[str, dict[str, Shape]] = shapes()
"""Capability → shape name → shape (a template), as ``coworkenv.synth.templates`` takes them."""

__all__ = ["SHAPES", "Catalog", "Program", "Shape", "catalog", "unheld_cues"]

"""YAML from outside, read with bounds: specs in bundles, a model's drafted task, a Claw-Eval task file.

``yaml.safe_load`` builds no objects of its own choosing, but it follows aliases without limit: a
"billion laughs" document of under 2 KB (ten aliases of ten aliases, nine levels deep) stands for
10⁹ nodes, and whatever walks the loaded data afterwards (pydantic validation, a JSON dump) walks all
of them and exhausts memory. ``load_yaml`` measures what the composed document stands for once
aliases are expanded (each shared node measured once, so the measuring is linear in the text) and
refuses it above ``MAX_YAML_NODES`` nodes or ``MAX_YAML_CHARS`` characters of scalars, before
anything is built; text longer than ``MAX_YAML_CHARS`` is refused before it is parsed. A document
that a plain dump of a spec gives (no aliases) stays far under both.
"""

from __future__ import annotations

from typing import Any

import yaml

from .._errors import CoworkenvError

MAX_YAML_CHARS = 64 << 20  # the text of one document, and its scalars once aliases are expanded
MAX_YAML_NODES = 1_000_000  # nodes once aliases are expanded


class YamlLimitError(CoworkenvError, yaml.YAMLError):
    """A YAML document over the bounds above (or nested past what the parser can follow)."""


class _BoundedLoader(yaml.SafeLoader):
    def construct_document(self, node: yaml.Node) -> Any:
        _check_expansion(node)
        return super().construct_document(node)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _check_expansion(root: yaml.Node) -> None:
    """Refuse a composed document whose aliases expand past the bounds (or refer to themselves)."""
    sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (nodes, scalar characters) it stands for
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            nodes, chars = 1, len(node.value) if isinstance(node, yaml.ScalarNode) else 0
            for child in _children(node):
                child_nodes, child_chars = sizes[id(child)]
                nodes, chars = nodes + child_nodes, chars + child_chars
            if nodes > MAX_YAML_NODES:
                raise YamlLimitError(f"its aliases expand to more than {MAX_YAML_NODES:,} nodes "
                                     "(an alias bomb?); write the repeated parts out, or fewer of them")
            if chars > MAX_YAML_CHARS:
                raise YamlLimitError(f"its aliases expand to more than {MAX_YAML_CHARS >> 20} MiB of text "
                                     "(an alias bomb?); write the repeated parts out, or fewer of them")
            sizes[key] = (nodes, chars)
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise YamlLimitError("an alias refers to a node that holds it (a recursive document)")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` of ``text`` within the bounds of this module; ``YamlLimitError`` (a
    ``yaml.YAMLError``) says which bound a document passed."""
    if len(text) > MAX_YAML_CHARS:
        raise YamlLimitError(f"the document has {len(text):,} characters, more than the {MAX_YAML_CHARS >> 20} MiB "
                             "a YAML document may have here")
    try:
        return yaml.load(text, Loader=_BoundedLoader)  # a SafeLoader, with the bounds above
    except RecursionError:
        raise YamlLimitError("the document is nested deeper than the parser can follow") from None

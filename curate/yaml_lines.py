"""Mapping a recipe path such as ("stages", 1, "normalize", "form") back to its YAML line."""

from __future__ import annotations

from collections.abc import Sequence

import yaml


def format_loc(loc: Sequence[str | int]) -> str:
    """`("stages", 1, "normalize", "form")` as `stages[1].normalize.form`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(recipe)"


def line_of(node: yaml.Node | None, loc: Sequence[str | int]) -> int | None:
    """1-based line of the deepest node the path reaches (the key's line for a mapping entry)."""
    if node is None:
        return None
    line = node.start_mark.line + 1
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if key_node.value == str(part):
                    line = key_node.start_mark.line + 1
                    node = value_node
                    break
            else:
                return line
        elif (
            isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value)
        ):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return line
    if not isinstance(node, yaml.MappingNode | yaml.SequenceNode):
        line = node.start_mark.line + 1
    return line


def duplicate_keys(
    node: yaml.Node | None, loc: tuple[str | int, ...] = ()
) -> list[tuple[tuple[str | int, ...], int]]:
    """Keys given twice in one mapping: YAML loaders silently keep the last, hiding a typo."""
    found: list[tuple[tuple[str | int, ...], int]] = []
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            if key in seen:
                found.append(((*loc, key), key_node.start_mark.line + 1))
            seen.add(key)
            found += duplicate_keys(value_node, (*loc, key))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            found += duplicate_keys(item, (*loc, i))
    return found

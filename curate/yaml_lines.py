"""Mapping a recipe path such as ("stages", 1, "normalize", "form") back to its YAML line."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

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


LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's parser when PyYAML has it: the same nodes, marks and safe constructor as the
pure-Python one, ten times faster (4 ms for recipes/sample.yaml in Python, on every
`prepare()` a trainer makes), with nesting bounded at 1000 levels."""

MAX_ALIAS_NODES = 100_000  # nodes aliases may add to a recipe (a real one has a few hundred)


def alias_problem(root: yaml.Node | None) -> tuple[int, str] | None:
    """(line, what) when the document's aliases refer to their own anchor, or would expand
    it by more than MAX_ALIAS_NODES nodes (a "billion laughs": a few lines of anchors that
    multiply). Checked on the composed nodes, where an alias is the anchored node itself,
    before anything is constructed or walked; linear in the number of distinct nodes."""
    if root is None:
        return None
    size: dict[int, int] = {}  # node id -> nodes once expanded
    uses: dict[int, int] = {}
    nodes: dict[int, yaml.Node] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    open_: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            open_.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in _children(node))
            continue
        uses[key] = uses.get(key, 0) + 1
        if key in open_:
            return node.start_mark.line + 1, "an alias refers to the anchor it is inside of itself"
        if key in nodes:  # met before, and finished: counted by size, not walked again
            continue
        nodes[key] = node
        open_.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node))
    if size[id(root)] - len(nodes) <= MAX_ALIAS_NODES:
        return None
    shared = [n for k, n in nodes.items() if uses[k] > 1]
    worst = max(shared, key=lambda n: size[id(n)] * uses[id(n)])
    return worst.start_mark.line + 1, (
        f"aliases expand the recipe to {size[id(root)]:,} nodes (more than "
        f"{MAX_ALIAS_NODES:,} added; this anchor is used {uses[id(worst)]} times)"
    )


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def load_file(path: Path, kind: str) -> tuple[Any, yaml.Node | None]:
    """A YAML file of `kind` (recipe, mixture) read safely: its data and node tree, or a
    CurateError naming the file and line (unreadable, invalid YAML, aliases, duplicate
    keys), so every file curate reads reports problems the same way."""
    from curate.errors import CurateError

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CurateError(f"{kind} {path} does not exist") from None
    except IsADirectoryError:
        raise CurateError(f"{kind} {path} is a folder; name the {kind}'s .yaml file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CurateError(f"{kind} {path} cannot be read: {exc}") from None
    try:
        loader = LOADER(text)  # PyYAML's own reader checks every character here
    except yaml.reader.ReaderError as exc:
        raise _not_allowed(path, text, exc) from None
    try:
        node = loader.get_single_node()
        aliases = alias_problem(node)
        if aliases is not None:
            raise CurateError(f"{path}:{aliases[0]}: {aliases[1]}")
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark else ""
        problem = exc.problem or exc.context or "not YAML"
        if "maximum nesting depth" in problem:  # libyaml's bound (1000 levels)
            problem = "nested too deeply"
        raise CurateError(f"{path}{line}: invalid YAML: {problem}") from None
    except yaml.reader.ReaderError as exc:
        raise _not_allowed(path, text, exc) from None
    except RecursionError:
        raise CurateError(f"{path}: invalid YAML: nested too deeply") from None
    finally:
        loader.dispose()
    dups = duplicate_keys(node)
    if dups:
        raise CurateError(
            "\n".join(f"{path}:{line}: {format_loc(loc)}: duplicate key" for loc, line in dups)
        )
    return data, node


def _not_allowed(path: Path, text: str, exc: yaml.reader.ReaderError) -> Exception:
    """A character YAML does not allow (a control character) at its line, rather than a
    traceback. The reader has no mark, and its position counts characters in PyYAML's
    reader but UTF-8 bytes in libyaml's; the first such character of the text is the one
    reported (the reader stops at the first), so its line is found from the text itself."""
    from curate.errors import CurateError

    char = exc.character
    code = char if isinstance(char, int) else ord(str(char)[:1] or " ")
    at = text.find(chr(code))
    line = text.count("\n", 0, at if at >= 0 else max(0, exc.position)) + 1
    return CurateError(
        f"{path}:{line}: invalid YAML: character #x{code:04x} is not allowed ({exc.reason})"
    )

"""No import cycles between curate's packages and top-level modules (issue 15).

The graph is read from the source with `ast`, not from a running interpreter, so an
import inside a function counts as much as one at the top (it is a dependency all the
same; deferring it only hides the cycle from Python). An import under
`if TYPE_CHECKING:` does not count: it never runs. A node is a top-level module
(`curate.runner`) or a package (`curate.stages`: all its modules are that one node);
`curate/__init__.py` is the node `curate`. An import inside one node is no edge.
Imports by name in a string (`importlib.import_module`) are not seen: the stage registry's
all point inside curate.stages, and curate/__init__.py's lazy table is the public facade
that re-exports from the modules below it.

Today's cycles are listed in KNOWN_CYCLES. The list only shrinks: the test fails when a
cycle appears that is not listed, and also when a listed one no longer exists, so whoever
breaks a cycle deletes its line here (and nobody can add one unnoticed).
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "curate"

KNOWN_CYCLES: set[str] = set()
# None is left, so any cycle fails the test (a cycle is written from its alphabetically
# first node; had one to be listed, its line goes when it is gone). dfd99bd had engines -> stages -> engines,
# engines -> plan -> stages -> engines and loader -> loader_rows -> loader; after the
# collectives left engines/, collective -> stages -> collective (ORDER, now in io.batches);
# and chat -> io -> chat and input_watch -> io -> input_watch (io/readers.py dispatched to
# chat's reader and checked inputs: it is curate/reading.py now).


def node_of(module: str) -> str:
    """curate.stages.base -> curate.stages; curate.runner -> curate.runner; curate -> curate."""
    parts = module.split(".")
    return ".".join(parts[:2])


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def exists(module: str) -> bool:
    """Whether module names a module or package inside curate/."""
    base = REPO.joinpath(*module.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth, except those under `if TYPE_CHECKING:`."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def targets(path: Path, stmt: ast.Import | ast.ImportFrom) -> list[str]:
    """The curate modules a statement imports (a `from X import name` of a submodule
    imports that submodule)."""
    if isinstance(stmt, ast.Import):
        return [a.name for a in stmt.names if a.name.split(".")[0] == "curate"]
    if stmt.level:
        package = module_name(path).split(".")
        if not is_package(path):
            package = package[:-1]
        package = package[: len(package) - (stmt.level - 1)]
        base = ".".join(package + ([stmt.module] if stmt.module else []))
    else:
        base = stmt.module or ""
    if base.split(".")[0] != "curate":
        return []
    found = []
    for alias in stmt.names:
        sub = f"{base}.{alias.name}"
        found.append(sub if exists(sub) else base)
    return found


def graph() -> dict[str, dict[str, str]]:
    """node -> {imported node: 'file:line' of the first import that makes the edge}."""
    edges: dict[str, dict[str, str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        source = node_of(module_name(path))
        edges.setdefault(source, {})
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for stmt in sorted(imports(tree), key=lambda s: s.lineno):
            for module in targets(path, stmt):
                target = node_of(module)
                if target != source:
                    where = f"{path.relative_to(REPO)}:{stmt.lineno}"
                    edges[source].setdefault(target, where)
    return edges


def simple_cycles(edges: dict[str, dict[str, str]]) -> list[list[str]]:
    """Every elementary cycle, each once, starting from its smallest node."""
    cycles: list[list[str]] = []
    for start in sorted(edges):

        def walk(node: str, path: list[str], start: str = start) -> None:
            for nxt in sorted(edges.get(node, {})):
                if nxt == start:
                    cycles.append([*path, start])
                elif nxt > start and nxt not in path:
                    walk(nxt, [*path, nxt])

        walk(start, [start])
    return cycles


def describe(cycle: list[str], edges: dict[str, dict[str, str]]) -> str:
    steps = [f"{a} -> {b} ({edges[a][b]})" for a, b in itertools.pairwise(cycle)]
    return " -> ".join(cycle) + "\n      " + "\n      ".join(steps)


def test_no_import_cycles_beyond_the_known_ones() -> None:
    edges = graph()
    found = {" -> ".join(c): c for c in simple_cycles(edges)}
    new = sorted(found.keys() - KNOWN_CYCLES)
    gone = sorted(KNOWN_CYCLES - found.keys())
    report = []
    if new:
        report.append("new import cycles (break them; do not list them in KNOWN_CYCLES):")
        report += [f"  {describe(found[c], edges)}" for c in new]
    if gone:
        report.append("cycles no longer there: delete them from KNOWN_CYCLES in this file:")
        report += [f"  {c}" for c in gone]
    assert not report, "\n".join(report)


def test_the_graph_sees_imports_inside_functions_but_not_type_checking() -> None:
    """The reader itself: a deferred import is an edge, a TYPE_CHECKING one is not."""
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from curate.stages import Stage\n"
        "def f():\n    from curate.engines import local\n"
    )
    path = PACKAGE / "runner.py"
    found = [t for stmt in imports(tree) for t in targets(path, stmt)]
    assert found == ["curate.engines.local"]


LAYERS: dict[str, set[str]] = {
    "curate.stages": {"curate.engines"},
    "curate.quality": {"curate.engines"},
    "curate.collective": {"curate.engines", "curate.stages"},
}
"""Nodes that must never import others, even in a function: stages run on any engine and
know none of them, and the collective operations are a library beneath both."""


def test_stages_and_collectives_never_import_engines() -> None:
    edges = graph()
    wrong = [
        f"{node} -> {target} ({edges[node][target]})"
        for node, forbidden in LAYERS.items()
        for target in sorted(forbidden & edges.get(node, {}).keys())
    ]
    assert not wrong, "imports across layers:\n  " + "\n  ".join(wrong)

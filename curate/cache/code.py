"""A stage's code, hashed: what its cached output and its fingerprint depend on besides data.

curate's version number alone would serve stale output after a bug fix in a built-in
stage, so a stage's hash covers the source of its class's module and of every module of
the same top-level package (curate, or the user's own package) that module imports,
transitively. Imports are read statically with `ast` (imports inside functions included,
relative ones resolved, `from curate.x import y` counting `curate.x.y` when that is a
module), so nothing is imported to hash it; the packages above each module count too,
as importing the module runs them. Imports under `if TYPE_CHECKING:` run nothing and are
left out. Editing normalize.py changes normalize's hash and no other stage's, unless that
stage imports normalize. A user stage's module counts the curate modules it imports as
well: a user stage built on `MapStage` depends on curate's base the same way.

Parsing is what hashing costs (about 0.2 CPU-s for the pre-training recipe's closure, on
the driver's critical path before any partition starts, and on every up-to-date
`prepare()`), so the imports found in a module are remembered between runs under a key of
the module's name and its exact source bytes (`remember_imports`, `imports_to_keep`: the
dataset's `.cache/code-imports.json`). Every source is still read and hashed each run; only
the parse of a source already parsed is skipped, so the hashes are the ones a run without
the memo computes. The file carries a sha256 of its list and is used only when the two
agree: a damaged list could drop an import from a closure, and an edit to that module
would then serve stale entries (a damaged memo costs the run its parsing, nothing more).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import inspect
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from curate.stages.base import Stage

_OWN = "curate"
_BLOCKS = (ast.stmt, ast.excepthandler, ast.match_case)
IMPORTS_FORMAT = 1
"""Raised when what `_imports` finds in a source changes, so no remembered list is used."""
_KEEP = 4096  # remembered sources at most: this run's, plus earlier runs' while they fit
_remembered: dict[str, tuple[str, ...]] = {}  # memo key -> imports, as loaded
_used: dict[str, tuple[str, ...]] = {}  # memo key -> imports, this process's sources
_unread: dict[str, Callable[[], str | None]] = {}  # where -> reads a memo not read yet


@functools.cache
def code_hash(cls: type) -> str:
    """sha256 over (module name, source bytes) of `cls`'s module and the modules it imports
    from its own top-level package and from curate, transitively; once per process."""
    module = cls.__module__
    source = _class_module_source(cls)
    if source is None:  # defined where no file holds it (an interactive session)
        digest = hashlib.sha256(b"class\0" + cls.__qualname__.encode())
        return digest.hexdigest()
    packages = frozenset({_OWN, module.split(".")[0]})
    closure = {module: source}
    pending = list(_imports(module, source, _is_package(module)))
    while pending:
        name = pending.pop()
        if name in closure or name.split(".")[0] not in packages:
            continue
        found = _module_source(name)
        if found is None:  # not a module (an attribute of a package), or not on disk
            continue
        closure[name] = found[0]
        pending.extend(_imports(name, found[0], found[1]))
    h = hashlib.sha256()
    for name in sorted(closure):
        data = closure[name]
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def stage_code_hashes(stages: Iterable[Stage]) -> list[str]:
    """The code hash of each stage (instances), in order."""
    return [code_hash(type(stage)) for stage in stages]


def _class_module_source(cls: type) -> bytes | None:
    found = _module_source(cls.__module__)
    if found is not None:
        return found[0]
    try:  # a class defined in __main__ or a notebook cell: its own source, if Python has it
        return inspect.getsource(cls).encode()
    except (OSError, TypeError):
        return None


@functools.cache
def _module_source(name: str) -> tuple[bytes, bool] | None:
    """A module's source bytes and whether it is a package; None when there is no such file."""
    path = _module_file(name)
    if path is None:
        return None
    try:
        return path.read_bytes(), path.name == "__init__.py"
    except OSError:
        return None


def _module_file(name: str) -> Path | None:
    loaded = sys.modules.get(name)
    file = getattr(loaded, "__file__", None) if loaded is not None else None
    if file is not None and file.endswith(".py"):
        return Path(file)
    top, _, rest = name.partition(".")
    try:
        spec = importlib.util.find_spec(top)  # the top-level package only: nothing below runs
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if not rest:
        return Path(spec.origin) if spec.origin and spec.origin.endswith(".py") else None
    for location in spec.submodule_search_locations or ():
        base = Path(location, *rest.split("."))
        for candidate in (base.with_name(base.name + ".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def _is_package(name: str) -> bool:
    found = _module_source(name)
    return found is not None and found[1]


def remember_imports_from(where: str, read: Callable[[], str | None]) -> None:
    """Where earlier runs kept their imports (`read` gives `imports_to_keep`'s text), read
    only once a source's imports are not known: `code_hash` runs once per class and
    process, so a process that calls `prepare()` again and again (a trainer's, a
    notebook's) reads nothing after its first hashes. Reading it each time cost every
    up-to-date `prepare()` half a millisecond of JSON and checks (issue 25 pt 4)."""
    _unread[where] = read


def _read_unread() -> None:
    while _unread:
        _, read = _unread.popitem()
        remember_imports(read())


def remember_imports(text: str | None) -> None:
    """Load the imports earlier runs found (`imports_to_keep`'s text); anything that is not
    such a file is ignored (it only costs this run the parsing)."""
    try:
        data = json.loads(text) if text else None
    except ValueError:
        return
    if not isinstance(data, dict) or data.get("format") != _memo_format():
        return
    found = data.get("imports")
    if not isinstance(found, dict) or data.get("sha256") != _body_sum(found):
        return
    for key, names in found.items():
        if isinstance(names, list) and all(isinstance(n, str) for n in names):
            _remembered[key] = tuple(names)


def imports_to_keep() -> str | None:
    """The memo to save for later runs, or None when it would add nothing to what was
    loaded: this process's sources first, then earlier ones up to `_KEEP` (a memo not read
    yet is read now, so that a build keeps what earlier runs kept)."""
    _read_unread()
    if all(key in _remembered for key in _used):
        return None
    kept = dict(_used)
    for key, names in _remembered.items():
        if len(kept) >= _KEEP:
            break
        kept.setdefault(key, names)
    body = {k: list(v) for k, v in sorted(kept.items())}
    memo = {"format": _memo_format(), "sha256": _body_sum(body), "imports": body}
    return json.dumps(memo, separators=(",", ":"))


def _body_sum(body: Mapping[str, object]) -> str:
    """The memo's check: sha256 of its list as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _memo_format() -> str:
    return f"{IMPORTS_FORMAT}:{sys.version_info[0]}.{sys.version_info[1]}"


def _memo_key(module: str, source: bytes, is_package: bool) -> str:
    head = f"{module}\0{int(is_package)}\0".encode()
    return hashlib.sha256(head + source).hexdigest()[:40]


@functools.cache
def _imports(module: str, source: bytes, is_package: bool) -> frozenset[str]:
    """Every module `module`'s code imports (and the packages above them), by name;
    remembered by source (`remember_imports`)."""
    key = _memo_key(module, source, is_package)
    names = _remembered.get(key)
    if names is None and _unread:
        _read_unread()
        names = _remembered.get(key)
    if names is None:
        names = tuple(sorted(_parsed_imports(module, source, is_package)))
    _used[key] = names
    return frozenset(names)


def _parsed_imports(module: str, source: bytes, is_package: bool) -> frozenset[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return frozenset()
    package = module if is_package else module.rpartition(".")[0]
    names: set[str] = set()
    for node in _runtime_nodes(tree.body):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node, package)
            if base is None:
                continue
            names.add(base)
            # `from curate.x import y`: y may be a module; a name that is not one is skipped
            names.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    parents = {".".join(n.split(".")[:i]) for n in names for i in range(1, n.count(".") + 1)}
    return frozenset(names | parents | _parents(module))


def _parents(module: str) -> set[str]:
    parts = module.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def _resolve(node: ast.ImportFrom, package: str) -> str | None:
    if not node.level:
        return node.module
    parts = package.split(".") if package else []
    if node.level - 1 > len(parts):
        return None
    base = parts[: len(parts) - (node.level - 1)]
    if node.module:
        base.append(node.module)
    return ".".join(base) or None


def _runtime_nodes(body: Sequence[ast.stmt]) -> Iterable[ast.AST]:
    """Every statement under `body` (imports are statements: expressions are not walked),
    except the bodies of `if TYPE_CHECKING:` (never run)."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        for _, value in ast.iter_fields(node):
            if isinstance(value, list):
                stack.extend(v for v in value if isinstance(v, _BLOCKS))


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"

"""Presidio imported without torch and Hugging Face transformers, which curate never uses.

`import presidio_analyzer` imports transformers (for its transformers NLP engine and a
spaCy component wrapping a Hugging Face pipeline) and, through thinc, torch, whenever
they are installed: about 6 CPU seconds, in every worker process of every run, where the
analysis itself takes a few seconds per 10 MB. curate builds only Presidio's no-op and
spaCy NLP engines, so while Presidio is imported both are made unimportable
(`sys.modules[name] = None`, which `import` reports as ImportError, the case Presidio and
thinc handle: no transformers pipeline, no torch device); afterwards the names are
importable again for any other code of the process.

torch stays importable when a spaCy plugin that runs torch models is installed
(spacy-transformers, spacy-curated-transformers): thinc decides once per process whether
torch is there, and a transformer-based `spacy_model` needs it to say yes.

spaCy's package imports its command-line interface (`from .cli.info import info`: typer,
weasel, their HTTP clients; about 0.15 CPU-s and 200 modules) for the one function
`spacy.info`. Presidio needs spaCy's `Doc`, `Vocab` and `Language`, never its CLI, so
while Presidio imports spaCy, `spacy.cli` and `spacy.cli.info` are placeholders whose
`info` imports the real one when called; afterwards the placeholders are gone and
`import spacy.cli` imports the real package. This is done only when spaCy is not imported
yet and its `__init__.py` names the CLI in exactly that one line (any other spaCy is
imported as it is), and never when a spaCy pipeline is configured (`resolve_spacy_model`
imports spaCy first).

Presidio's `Pattern` checks its regex by compiling it (with the `regex` module, flags 0)
and drops the result; a recognizer compiles it again, with its own flags, when it first
analyses. Importing Presidio builds the patterns of every predefined recognizer of every
country (about 170), so that check was about 0.35 CPU-s of the ~1.4 s setup, paid before
the local engine forks its workers and so on the critical path of every run. During the
import the check is skipped for these patterns, which Presidio ships and tests; any
`Pattern` made afterwards (a recognizer built from a configuration) is checked as before.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

UNUSED = ("transformers", "torch")
TORCH_SPACY_PLUGINS = ("spacy_transformers", "spacy_curated_transformers")


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


@contextmanager
def presidio_import() -> Iterator[None]:
    """Within this block, importing Presidio does not import torch or transformers."""
    if "presidio_analyzer" in sys.modules:
        yield
        return
    blocked = [name for name in UNUSED if name not in sys.modules]
    if "torch" in blocked and any(_installed(p) for p in TORCH_SPACY_PLUGINS):
        blocked.remove("torch")
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]
    unchecked = _UncheckedPatterns()
    sys.meta_path.insert(0, unchecked)
    placeholders = _spacy_cli_placeholders()
    try:
        yield
    finally:
        _remove(placeholders)
        sys.meta_path.remove(unchecked)
        unchecked.restore()
        for name in blocked:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


SPACY_CLI_LINE = b"from .cli.info import info"


def _spacy_cli_placeholders() -> dict[str, ModuleType]:
    """Placeholders for `spacy.cli` and `spacy.cli.info` in `sys.modules` (none when spaCy
    is imported already or is not the spaCy this expects)."""
    if "spacy" in sys.modules or "spacy.cli" in sys.modules:
        return {}
    try:
        spec = importlib.util.find_spec("spacy")
        origin = spec.origin if spec is not None else None
        source = Path(origin).read_bytes() if origin else b""
    except (ImportError, ValueError, OSError):
        return {}
    if source.count(b"cli") != 1 or SPACY_CLI_LINE not in source:
        return {}
    cli = ModuleType("spacy.cli")
    cli.__path__ = []  # a package that holds nothing
    info = ModuleType("spacy.cli.info")
    info.info = _spacy_info  # type: ignore[attr-defined]
    placeholders = {"spacy.cli": cli, "spacy.cli.info": info}
    sys.modules.update(placeholders)
    return placeholders


def _remove(placeholders: dict[str, ModuleType]) -> None:
    if not placeholders:
        return
    for name, module in placeholders.items():
        if sys.modules.get(name) is module:
            del sys.modules[name]
    spacy = sys.modules.get("spacy")
    if spacy is not None and getattr(spacy, "cli", None) is placeholders.get("spacy.cli"):
        delattr(spacy, "cli")  # `import spacy.cli` now imports the real one


def _spacy_info(*args: Any, **kwargs: Any) -> Any:
    """`spacy.info`, spaCy's CLI imported when it is called."""
    from spacy.cli.info import info

    return info(*args, **kwargs)


PATTERN_MODULE = "presidio_analyzer.pattern"
_CHECK = "_Pattern__validate_regex"  # Pattern.__validate_regex, name-mangled


class _UncheckedPatterns(importlib.abc.MetaPathFinder):
    """Finds `presidio_analyzer.pattern` as the path finder would, and once the module has
    run, makes `Pattern`'s regex check a no-op until `restore()`."""

    def __init__(self) -> None:
        self.pattern: Any = None
        self.check: Any = None

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name != PATTERN_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        loader = spec.loader if spec is not None else None
        if spec is None or not isinstance(loader, importlib.abc.Loader):
            return spec
        run = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            pattern = getattr(module, "Pattern", None)
            check = getattr(pattern, "__dict__", {}).get(_CHECK)
            if isinstance(check, staticmethod):  # else a Presidio we do not know: checked
                self.pattern, self.check = pattern, check
                setattr(pattern, _CHECK, staticmethod(_unchecked))

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec

    def restore(self) -> None:
        if self.pattern is not None:
            setattr(self.pattern, _CHECK, self.check)
            self.pattern = self.check = None


def _unchecked(pattern: str) -> None:
    return None

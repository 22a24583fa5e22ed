"""curate: raw text in, training-ready versioned Arrow datasets out, every step on record.

The public API is imported lazily so that `import curate` stays cheap (no datasets,
Presidio, Ray or tokenizer libraries until a stage or reader needs them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["CurateError", "Pipeline", "Recipe", "Version", "open", "prepare", "run"]

if TYPE_CHECKING:
    from curate.errors import CurateError
    from curate.pipeline import Pipeline
    from curate.prepare_any import prepare
    from curate.recipe import Recipe
    from curate.runner import run
    from curate.version import Version, open

_LAZY = {
    "CurateError": "curate.errors",
    "Pipeline": "curate.pipeline",
    "Recipe": "curate.recipe",
    "Version": "curate.version",
    "open": "curate.version",
    "prepare": "curate.prepare_any",
    "run": "curate.runner",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'curate' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value

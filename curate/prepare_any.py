"""`curate.prepare(path)`: what a trainer calls on every rank before it trains.

A recipe gives its version (`curate.runner.run`); a mixture file (`mixture.yaml`, which
lists `sources:` and a `budget:`) gives its mixture version (`curate.mix.prepare`), its
recipe sources built first when missing. Either is a no-op in milliseconds when up to date,
and safe when every rank calls it at once (one builder per fingerprint; the others wait on
its lock and then find what it published).
"""

from __future__ import annotations

import os
from typing import Any

from curate.recipe import Recipe
from curate.version import Version


def prepare(recipe: Recipe | str | os.PathLike[str], **options: Any) -> Version:
    """The version for a recipe (`curate.run`'s options apply), or for a mixture file."""
    if not isinstance(recipe, Recipe):
        from curate.mix.prepare import is_mixture_file

        if is_mixture_file(recipe):
            from curate.mix.prepare import prepare as prepare_mixture

            return prepare_mixture(recipe)
    from curate.runner import run

    return run(recipe, **options)

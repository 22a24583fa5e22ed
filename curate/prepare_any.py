"""`curate.prepare(path)`: what a trainer calls on every rank before it trains.

A recipe gives its version (`curate.runner.run`); a mixture file (`mixture.yaml`, which
lists `sources:` and a `budget:`) gives its mixture version (`curate.mix.prepare`), its
recipe sources built first when missing. Either is a no-op in milliseconds when up to date,
and safe when every rank calls it at once (one builder per fingerprint; the others wait on
its lock and then find what it published).
"""

from __future__ import annotations

import os
from typing import Literal

from curate.progress import ProgressFn
from curate.recipe import Recipe
from curate.version import Version


def prepare(
    recipe: Recipe | str | os.PathLike[str],
    *,
    progress: ProgressFn | None = None,
    workers: int | None = None,
    verify: Literal["sizes", "full"] = "sizes",
) -> Version:
    """The version for a recipe (as `curate.run`, whose options these are), or for a mixture
    file (its recipe sources built with the recipes' own settings)."""
    if not isinstance(recipe, Recipe):
        from curate.mix.prepare import is_mixture_file

        if is_mixture_file(recipe):
            from curate.mix.prepare import prepare as prepare_mixture

            return prepare_mixture(recipe)
    from curate.runner import run

    return run(recipe, progress=progress, workers=workers, verify=verify)

"""Running a recipe: fingerprint it, return the published version, or build it.

`run` and `prepare` mean the same thing: return the published version for the
recipe's current fingerprint, building it only when needed. The no-op path stats the
inputs, reads one small index file and the version's manifest, and stats each file the
manifest lists (`curate.integrity`); it imports no stage library and reads no data. A
version whose files are not as listed is never returned: a new one is built beside it.

This module is the entry point only: `curate.recipe_run.RecipeRun` owns the run.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from curate.errors import CurateError
from curate.progress import ProgressFn, auto, no_progress
from curate.recipe import Recipe
from curate.recipe_run import RecipeRun, published
from curate.version import Version

__all__ = ["no_progress", "prepare", "published", "run"]


def _load(recipe: Recipe | str | os.PathLike[str]) -> Recipe:
    return recipe if isinstance(recipe, Recipe) else Recipe.load(Path(recipe))


def run(
    recipe: Recipe | str | os.PathLike[str],
    *,
    progress: ProgressFn | None = None,
    workers: int | None = None,
    verify: Literal["sizes", "full"] = "sizes",
) -> Version:
    """The version for this recipe and these inputs: found if published, else built now.

    A published version is returned only when its files are intact: with `verify="sizes"`
    (the default) every file its manifest lists is present with its listed size (one stat
    per file); `verify="full"` also hashes every byte against the manifest, as `curate
    verify` does (a version this call builds is hashed as it is written). A damaged version
    is left as it is and a new one is built beside it; `Version.rebuilt_because` says why.

    `progress(phase, done, total)` hears how the build goes (`curate.progress`); by default
    a bar in a Jupyter notebook and nothing elsewhere (the CLI draws on stderr).
    """
    if verify not in ("sizes", "full"):
        raise CurateError(f"verify={verify!r}: use 'sizes' (the default) or 'full'")
    recipe = _load(recipe)
    with recipe.located():  # errors about an input, a stage or the output name their line
        report = auto() if progress is None else progress
        return RecipeRun(recipe, report, workers, verify).version()


prepare = run

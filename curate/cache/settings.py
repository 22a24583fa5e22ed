"""A recipe's `output.cache` made a `CacheSpec` for a run, or None: off, or it cannot fit.

Caching is never a reason for a run to fail: when the estimated new entries exceed the
budget, or the disk cannot hold them beside what the build itself needs, or the cache
folder cannot be used (a link planted at `.cache`), the run goes on without the cache and
says so in one log line.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from curate.cache.options import default_budget
from curate.cache.store import CacheSpec, StageCache, tree_bytes
from curate.dirfd import Folder
from curate.sizes import format_size

if TYPE_CHECKING:  # the recipe imports this package's options: no cycle at run time
    from curate.recipe import Recipe
    from curate.store import Store

log = logging.getLogger(__name__)


def cache_root(dataset: Path) -> Path:
    """Where a dataset folder keeps its stage cache."""
    return Path(dataset) / ".cache" / "stages"


def cache_size(dataset: Path) -> int | None:
    """Bytes of a dataset folder's stage cache (`curate log`); None when it has none. Nothing
    is created or locked, and a link at `.cache` or `stages` is never followed (None)."""
    root = cache_root(dataset)
    try:
        with Folder.open(root.parent) as parent, parent.folder(root.name) as folder:
            return tree_bytes(folder.fd)
    except OSError:
        return None


def cache_spec(recipe: Recipe, store: Store) -> CacheSpec | None:
    """The recipe's cache settings for this dataset folder; None when `output.cache` is off.
    An unset `max_size` is the default budget on the disk the dataset folder is on."""
    out = recipe.output
    if not out.cache.enabled:
        return None
    budget = out.cache.max_size or default_budget(shutil.disk_usage(_existing(store.path)).total)
    return CacheSpec(
        root=cache_root(store.path),
        budget=budget,
        file_mode=int(out.file_mode, 8),
        dir_mode=int(out.dir_mode, 8),
        fsync=out.fsync,
    )


def decide_cache(
    recipe: Recipe, store: Store, estimated_bytes: int, *, reserved: int = 0
) -> CacheSpec | None:
    """The spec this run caches with, or None (off, or skipped with a notice).

    `estimated_bytes`: what the run may add to the cache (`curate.build.cache_needed`);
    `reserved`: what the build itself still needs on the same disk (`space_needed`).
    """
    spec = cache_spec(recipe, store)
    if spec is None:
        return None
    where = f"(output.cache.max_size, or curate gc {store.path} --cache)"
    if estimated_bytes > spec.budget:
        log.warning(
            "stage cache skipped for this run: it may need about %s, more than its budget "
            "of %s %s", format_size(estimated_bytes), format_size(spec.budget), where
        )  # fmt: skip
        return None
    free = shutil.disk_usage(_existing(store.path)).free
    if estimated_bytes + reserved > free:
        log.warning(
            "stage cache skipped for this run: it may need about %s beside the %s the build "
            "needs, and %s is free %s", format_size(estimated_bytes), format_size(reserved),
            format_size(free), where,
        )  # fmt: skip
        return None
    cache = StageCache(spec)
    try:
        cache.root()  # made with the recipe's modes; a link at .cache or stages is refused
    except OSError as exc:
        log.warning("stage cache skipped for this run: %s: %s", spec.root, exc.strerror or exc)
        return None
    finally:
        cache.close()
    return spec


def _existing(path: Path) -> Path:
    """The nearest folder that exists (the dataset folder may not be made yet)."""
    path = Path(path).absolute()
    while not path.exists() and path.parent != path:
        path = path.parent
    return path

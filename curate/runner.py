"""Running a recipe: fingerprint it, return the published version, or build it.

`run` and `prepare` mean the same thing: return the published version for the
recipe's current fingerprint, building it only when needed. The no-op path stats the
inputs, reads one small index file and the version's manifest, and stats each file the
manifest lists (`curate.integrity`); it imports no stage library and reads no data. A
version whose files are not as listed is never returned: a new one is built beside it.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from curate import integrity
from curate.build import Build, space_note
from curate.engines.job import ProgressFn, no_progress
from curate.errors import CurateError, DiskFull
from curate.fingerprint import cached_content_hashes, fingerprint
from curate.io.batches import FieldSpec
from curate.io.inputs import check_contents, discover_inputs
from curate.reading import check_inputs
from curate.recipe import Recipe
from curate.store import Store
from curate.version import Version

if TYPE_CHECKING:
    from curate.engines.base import Engine

log = logging.getLogger(__name__)


def _load(recipe: Recipe | str | os.PathLike[str]) -> Recipe:
    return recipe if isinstance(recipe, Recipe) else Recipe.load(Path(recipe))


def run(
    recipe: Recipe | str | os.PathLike[str],
    *,
    progress: ProgressFn = no_progress,
    workers: int | None = None,
    verify: Literal["sizes", "full"] = "sizes",
) -> Version:
    """The version for this recipe and these inputs: found if published, else built now.

    A published version is returned only when its files are intact: with `verify="sizes"`
    (the default) every file its manifest lists is present with its listed size (one stat
    per file); `verify="full"` also hashes every byte against the manifest, as `curate
    verify` does (a version this call builds is hashed as it is written). A damaged version
    is left as it is and a new one is built beside it; `Version.rebuilt_because` says why.
    """
    if verify not in ("sizes", "full"):
        raise CurateError(f"verify={verify!r}: use 'sizes' (the default) or 'full'")
    recipe = _load(recipe)
    with recipe.located():  # errors about an input, a stage or the output name their line
        return _run(recipe, progress, workers, verify)


def _run(recipe: Recipe, progress: ProgressFn, workers: int | None, verify: str) -> Version:
    files = discover_inputs(recipe.inputs, recipe.base_dir, check=False)
    stages = recipe.build_stages()
    store = Store(
        recipe.output_root(),
        recipe.name,
        dir_mode=int(recipe.output.dir_mode, 8),
        file_mode=int(recipe.output.file_mode, 8),
    )
    hashes = None
    load = partial(store.read_own, ".cache", "input-hashes.json")
    save = partial(store.save_own, ".cache", "input-hashes.json")
    if recipe.input_identity == "content":
        hashes = cached_content_hashes(load, files, save)
    fp = fingerprint(recipe, files, stages, hashes)
    found, _ = published(store, fp, verify)
    if found is not None:
        store.repair_latest()
        store.drop_leftover_staging(fp)
        return found
    # Building: check every input's contents before anything is written.
    check_contents(files)
    check_inputs(
        files, FieldSpec(recipe.text_field, recipe.id_field, recipe.keep_fields(), chat=recipe.chat)
    )
    engine = _engine(recipe, workers)  # a missing engine library fails before anything is written
    new_folders = [p for p in (store.root, store.path) if not p.exists()]
    store.ensure()
    with store.lock(fp):
        found, damage = published(store, fp, verify)  # built by another process meanwhile?
        if found is not None:
            return found
        if damage is not None:  # said once, by the process that builds
            note = "it is left as it is; `curate verify` on it lists what changed"
            log.warning("%s; building a new version beside it (%s)", damage, note)
        store.clean_stale(fp)
        build = Build(recipe, files, stages, fp, store, engine, progress, hashes)
        try:
            version = build.run()
            version.rebuilt_because = damage
            return version
        except DiskFull as exc:
            raise DiskFull(f"{exc}; {space_note(recipe, files, store, fp)}") from None
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
            note = space_note(recipe, files, store, fp)
            raise DiskFull(f"disk full while writing {store.path}; {note}") from None
        except CurateError:
            # A user error (bad record with on_error: fail, a full disk) is fixed by changing
            # inputs or settings, which changes the fingerprint: this staging is of no more use.
            # A crash or an interrupt keeps it, so the next run resumes its completed partitions.
            store.discard(store.staging_name(fp))
            if new_folders and not store.versions():  # made by this run, for nothing
                shutil.rmtree(new_folders[0], ignore_errors=True)
            raise


prepare = run


def published(store: Store, fp: str, verify: str) -> tuple[Version | None, str | None]:
    """The intact version published for this fingerprint (held), or None and, when the one
    the index names is damaged, what is wrong with it. A damaged version is never returned,
    changed or removed: the build that follows publishes a new one, which the fingerprint's
    index entry then names."""
    name = store.indexed(fp)
    if name is None:
        return None, None
    manifest, problem = store.sealed(name, fp)  # planted, unsealed, unreadable
    if problem is None:
        try:
            version = Version(store.path / name, up_to_date=True, manifest=manifest).hold()
        except CurateError:  # removed by `curate gc` as we looked: unlisted, so build it
            return None, None
        try:
            found = version.file_problems()
        except CurateError as exc:  # a manifest that cannot be read
            found = [str(exc)]
        if not found and verify == "full":
            from curate.verify import verify as verify_folder

            found = verify_folder(version.path)
        if not found:
            return version, None
        version.release()
        problem = integrity.describe(found)
    return None, f"{name[:80]} is damaged ({problem})"


def _engine(recipe: Recipe, workers: int | None) -> Engine:
    spec = recipe.engine
    if spec.kind == "ray":
        try:
            import ray  # noqa: F401  (only here: importing curate never imports Ray)
        except ImportError:
            raise CurateError("engine 'ray' needs Ray: pip install 'curate[ray]'") from None
        from curate.engines.ray import RayEngine
        from curate.engines.ray.connect import check_reachable

        check_reachable(spec.address)  # a mistyped address fails in seconds, not minutes
        return RayEngine(address=spec.address, workers=workers or spec.workers)
    from curate.engines.local import LocalEngine

    return LocalEngine(workers or spec.workers or os.cpu_count() or 1)

"""One run of a recipe, owned by one object from fingerprint to publish.

`RecipeRun.version()` is all `curate.run` does: list the inputs (stat only), build the
stages, fingerprint them; return the published version when it is intact; else, when
the dataset has versions, look it up by the inputs' content (`curate.same_content`: only
inputs whose stat changed are hashed), so a touched input rebuilds nothing; else check the
inputs' contents, take the fingerprint's lock, look again (another process may have built
it meanwhile) and hand the staging folder to a `Build`, which runs the engine and
publishes, and file the version under its content fingerprint. A full disk or a user error
met while building is said here, where the store, the inputs and the fingerprint are all
known.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
from functools import partial
from typing import TYPE_CHECKING

from curate import integrity, same_content
from curate.build import Build, space_note
from curate.engines.job import ProgressFn
from curate.errors import CurateError, DiskFull
from curate.fingerprint import base_payload, cached_content_hashes, fingerprint_of, input_identity
from curate.forget.exclusions import Exclusions
from curate.forget.resolve import excluded_ids, excluded_lines
from curate.io.batches import FieldSpec
from curate.io.inputs import InputFile, check_contents, discover_inputs
from curate.reading import check_inputs
from curate.recipe import Recipe
from curate.store import Store
from curate.version import Version

if TYPE_CHECKING:
    from curate.engines.base import Engine

log = logging.getLogger(__name__)


class RecipeRun:
    """A recipe's inputs, stages, store and fingerprint, found once and used from the
    up-to-date check through the build to the error a full disk raises."""

    def __init__(
        self, recipe: Recipe, progress: ProgressFn, workers: int | None, verify: str
    ) -> None:
        self.recipe = recipe
        self.progress = progress
        self.workers = workers
        self.verify = verify
        # Stat only (no file is opened): enough to fingerprint, all an up-to-date run needs.
        self.files: list[InputFile] = discover_inputs(recipe.inputs, recipe.base_dir, check=False)
        self.stages = recipe.build_stages()
        self.store = Store(
            recipe.output_root(),
            recipe.name,
            dir_mode=int(recipe.output.dir_mode, 8),
            file_mode=int(recipe.output.file_mode, 8),
        )
        self.hashes: list[str] | None = None
        if recipe.input_identity == "content":
            load = partial(self.store.read_own, ".cache", "input-hashes.json")
            save = partial(self.store.save_own, ".cache", "input-hashes.json")
            self.hashes = cached_content_hashes(load, self.files, save)
        remember_code_imports(self.store)
        self.base = base_payload(recipe, self.stages)
        self.exclusions = Exclusions.load(self.store)  # `curate forget`'s: part of the output
        if self.exclusions:
            self.base["forgotten"] = self.exclusions.digest()
        self.fingerprint = fingerprint_of(self.base, input_identity(self.files, self.hashes))

    def version(self) -> Version:
        """The published version for this fingerprint, built now when there is none intact
        (nor one built from inputs of the same content: `curate.same_content`)."""
        found, _ = published(self.store, self.fingerprint, self.verify)
        if found is None and self.recipe.input_identity == "stat" and self.store.versions():
            found = self._same_content()
        if found is not None:
            self.store.repair_latest()
            self.store.drop_leftover_staging(self.fingerprint)
            return found
        return self._build()

    def _same_content(self) -> Version | None:
        """The version built from inputs of the same content, now filed under this stat
        fingerprint too; found under the fingerprint's build lock, so concurrent callers hash
        a touched input once."""
        store, fp = self.store, self.fingerprint
        with store.lock(fp):
            found, _ = published(store, fp, self.verify)  # another caller filed it meanwhile
            if found is not None:
                return found
            target = self.recipe.partition_size
            content = same_content.content_fingerprint(store, self.base, self.files, target)
            if content is None:
                return None
            found, _ = published(store, content, self.verify)  # damaged: built again
            if found is not None:
                store.alias(fp, found.fingerprint)
                log.info("inputs touched, not changed: %s is up to date", found.name)
            return found

    def _remember_content(self, version: Version) -> None:
        """Keep the inputs' digests the build took and file its version under its content
        fingerprint; a failure here costs a later run some hashing, never this one."""
        try:
            target = self.recipe.partition_size
            content = same_content.remember(
                self.store, self.base, self.files, target, version.manifest
            )
            if content is not None:
                self.store.alias(content, version.fingerprint)
        except (OSError, CurateError, ValueError, KeyError, TypeError) as exc:
            log.warning("content fingerprint of %s not filed: %s", version.name, exc)

    def _build(self) -> Version:
        recipe, store, fp = self.recipe, self.store, self.fingerprint
        # Building: check every input's contents before anything is written.
        check_contents(self.files)
        fields = FieldSpec(
            recipe.text_field, recipe.id_field, recipe.keep_fields(), chat=recipe.chat
        )
        check_inputs(self.files, fields)
        engine = _engine(recipe, self.workers)  # a missing engine library fails before writing
        new_folders = [p for p in (store.root, store.path) if not p.exists()]
        store.ensure()
        with store.lock(fp):
            found, damage = published(store, fp, self.verify)  # built by another process meanwhile?
            if found is not None:
                return found
            if damage is not None:  # said once, by the process that builds
                note = "it is left as it is; `curate verify` on it lists what changed"
                log.warning("%s; building a new version beside it (%s)", damage, note)
            store.clean_stale(fp)
            excluded = excluded_ids(self.exclusions, recipe, self.files, store)
            build = Build(
                recipe, self.files, self.stages, fp, store, engine, self.progress, self.hashes,
                tuple(sorted(excluded)), self.exclusions,
                excluded_lines(self.exclusions, self.files),
            )  # fmt: skip
            try:
                version = build.run()
                version.rebuilt_because = damage
                self._remember_content(version)
                keep_code_imports(store)
                return version
            except DiskFull as exc:
                raise DiskFull(f"{exc}; {space_note(recipe, self.files, store, fp)}") from None
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                note = space_note(recipe, self.files, store, fp)
                raise DiskFull(f"disk full while writing {store.path}; {note}") from None
            except CurateError:
                # A user error (bad record with on_error: fail, a full disk) is fixed by
                # changing inputs or settings, which changes the fingerprint: this staging is
                # of no more use. A crash or an interrupt keeps it, so the next run resumes
                # its completed partitions.
                store.discard(store.staging_name(fp))
                if new_folders and not store.versions():  # made by this run, for nothing
                    shutil.rmtree(new_folders[0], ignore_errors=True)
                raise


CODE_IMPORTS = (".cache", "code-imports.json")
"""What the stage code hashes found in each source (`curate.cache.code.remember_imports`)."""


def remember_code_imports(store: Store) -> None:
    """Say where earlier builds' code hashes kept what they parsed, read when a hash needs
    it; nothing through a link or from a file that cannot be read (the hashes are then
    parsed, as on a first run)."""
    from curate.cache import code

    def read() -> str | None:
        with contextlib.suppress(CurateError):
            return store.read_own(*CODE_IMPORTS)
        return None

    code.remember_imports_from(str(store.path), read)


def keep_code_imports(store: Store) -> None:
    """After a build: save the imports this process parsed, for the next run's hashes. An
    up-to-date run or `--explain` writes nothing; a refusal (a link) costs the next run
    the parsing only."""
    from curate.cache import code

    text = code.imports_to_keep()
    if text is not None:
        with contextlib.suppress(CurateError, OSError):
            store.save_own(*CODE_IMPORTS, text)


def published(store: Store, fp: str, verify: str) -> tuple[Version | None, str | None]:
    """The intact version published for this fingerprint (held), or None and, when the one
    the index names is damaged, what is wrong with it. A damaged version is never returned,
    changed or removed: the build that follows publishes a new one, which the fingerprint's
    index entry then names."""
    filed = store.filed(fp)  # its own entry, or the one an alias names (same content)
    if filed is None:
        return None, None
    built_from, name = filed
    manifest, problem = store.sealed(name, built_from)  # planted, unsealed, unreadable
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

"""`curate forget`: record which documents to forget, then publish the version without them.

The documents are found by reading the recipe's inputs as a run reads them (the ids a
run gives, the text it reads): by id (`--ids FILE`, one per line), by input (`--source
GLOB`, matched against the input's name and path) or by a pattern in their text
(`--match REGEX`), and the quarantined records of those inputs, or whose line the pattern
finds (`curate.forget.quarantined`). What is recorded is their text hashes (and ids, with
an `id_field`; a quarantined record's line hash), never the text or the pattern
(`curate.forget.exclusions`); then the recipe runs (`curate.runner.run`), under the
fingerprint its next run computes too.
"""

from __future__ import annotations

import fnmatch
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from curate.engines.job import ProgressFn
from curate.errors import CurateError
from curate.forget.exclusions import Exclusions
from curate.forget.quarantined import lines_of, raw_hash
from curate.forget.resolve import entry, keeping
from curate.forget.scan import documents
from curate.io.batches import QuarantineRecord
from curate.io.inputs import InputFile, discover_inputs
from curate.recipe import Recipe
from curate.store import Store
from curate.version import Version

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Selection:
    ids: frozenset[str] | None = None
    source: str | None = None
    match: re.Pattern[str] | None = None

    def chosen(self, f: InputFile, doc_ids: list[str], texts: list[str]) -> list[bool]:
        if self.ids is not None:
            return [i in self.ids for i in doc_ids]
        if self.source is not None:
            hit = fnmatch.fnmatch(f.name, self.source) or fnmatch.fnmatch(f.path, self.source)
            return [hit] * len(doc_ids)
        assert self.match is not None
        return [self.match.search(t) is not None for t in texts]

    def chosen_lines(self, f: InputFile, lines: list[bytes | None]) -> list[bool]:
        """Which quarantined records' lines are selected (`curate.forget.quarantined`): every
        one of a selected input, or those the pattern finds in; none by id (they have none)."""
        if self.source is not None:
            hits = self.chosen(f, [""] * len(lines), [])
            return [hit and line is not None for hit, line in zip(hits, lines, strict=True)]
        if self.match is None:
            return [False] * len(lines)
        return [line is not None and self.match.search(line.decode("utf-8", "replace")) is not None
                for line in lines]  # fmt: skip


def selection(ids_file: Path | None, source: str | None, match: str | None) -> Selection:
    if sum(x is not None for x in (ids_file, source, match)) != 1:
        raise CurateError("forget: give one of --ids FILE, --source GLOB or --match REGEX")
    if ids_file is not None:
        try:
            lines = ids_file.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise CurateError(f"forget: cannot read {ids_file}: {exc}") from None
        return Selection(ids=frozenset(line.strip() for line in lines if line.strip()))
    if match is not None:
        try:
            return Selection(match=re.compile(match))
        except re.error as exc:  # the pattern is not repeated: it may hold a person's data
            raise CurateError(
                f"forget: --match is not a valid regular expression ({exc.msg})"
            ) from None
    return Selection(source=source)


def recipe_of(target: Path) -> Recipe:
    """The recipe file itself, or the recipe a dataset folder's (or version's) latest
    version was built from."""
    if target.is_file():
        return Recipe.load(target)
    from curate.version import open as open_version

    version = open_version(target, check=False)
    path = version.manifest.get("recipe_path")
    if not path or not Path(path).is_file():
        raise CurateError(
            f"forget: {version.path} names no recipe file that is still there; give the "
            "recipe's path instead"
        )
    return Recipe.load(Path(path))


@dataclass
class Forgotten:
    version: Version
    found: int  # documents the request selected
    added: int  # of those, not already forgotten
    lines: int = 0  # quarantined records it selected (their lines hold the data)


def forget(
    target: Path,
    chosen: Selection,
    reason: str,
    *,
    progress: ProgressFn | None = None,
    workers: int | None = None,
) -> Forgotten:
    from curate.runner import run

    if not reason.strip():
        raise CurateError("forget: --reason must say why (it is kept in the manifest)")
    recipe = recipe_of(target)
    with recipe.located():
        files = discover_inputs(recipe.inputs, recipe.base_dir, check=True)
        store = Store(recipe.output_root(), recipe.name, dir_mode=int(recipe.output.dir_mode, 8),
                      file_mode=int(recipe.output.file_mode, 8))  # fmt: skip
        exclusions = Exclusions.load(store)
        found, lines = _find(recipe, files, chosen, exclusions)
        if not found and not lines:
            raise CurateError(f"forget: no document of {recipe.name}'s inputs is selected")
        if chosen.ids is not None:
            missing = len(chosen.ids - {i for _, i, _ in found})
            if missing:
                log.warning("forget: %d of the ids given are in no input", missing)
        explicit = recipe.id_field is not None
        added = exclusions.add({(h, i if explicit else None) for _, i, h in found}, reason, lines)
        for f in files:  # each input as it is was searched for every one (`Exclusions.ids_of`)
            exclusions.resolved[f.name]["of"] = exclusions.digest()
        store.ensure()
        exclusions.save(store)  # first: a build that fails still leaves them forgotten
        version = run(recipe, progress=progress, workers=workers)
    return Forgotten(version, len(found), added, len(lines))


def _find(
    recipe: Recipe, files: list[InputFile], chosen: Selection, exclusions: Exclusions
) -> tuple[list[tuple[str, str, str]], set[str]]:
    """(input, id, hash) of the documents selected, and the hashes of the quarantined lines
    selected; every input's excluded ids and lines (these and the earlier ones) are resolved
    on the way, the inputs being read anyway."""
    by_name = {f.name: f for f in files}
    hashes, ids = exclusions.hashes, exclusions.ids
    picked: list[tuple[str, str, str]] = []
    resolved: dict[str, set[str]] = {f.name: set() for f in files}

    def wanted(name: str, doc_ids: list[str], texts: list[str], digests: list[str]) -> list[bool]:
        new = chosen.chosen(by_name[name], doc_ids, texts)
        for i, h, n in zip(doc_ids, digests, new, strict=True):
            if n:
                picked.append((name, i, h))
        return [n or h in hashes or i in ids for i, h, n in zip(doc_ids, digests, new,
                                                                  strict=True)]  # fmt: skip

    picked_lines: set[str] = set()
    offsets: dict[str, set[int]] = {}
    unkeyed = 0

    def quarantined(f: InputFile, records: list[QuarantineRecord]) -> None:
        nonlocal unkeyed
        raw = lines_of(f, records)
        for r, line, new in zip(records, raw, chosen.chosen_lines(f, raw), strict=True):
            if line is None or r.offset is None:
                unkeyed += chosen.source is not None and chosen.chosen(f, [""], [])[0]
                continue
            h = raw_hash(line)
            if new:
                picked_lines.add(h)
            if new or h in exclusions.quarantined:
                offsets.setdefault(f.name, set()).add(r.offset)

    for name, doc_id, _ in documents(recipe, files, wanted, quarantined):
        resolved[name].add(doc_id)
    if unkeyed:
        log.warning(
            "forget: %d quarantined record(s) of the selected inputs have no line of bytes "
            "to key them by (not JSONL): quarantine/ still lists them",
            unkeyed,
        )
    old = exclusions.resolved  # inputs gone since keep theirs: versions built then hold them
    exclusions.resolved = dict(old) | {
        f.name: keeping(old.get(f.name), entry(f, resolved[f.name], offsets.get(f.name)))
        for f in files
    }
    return picked, picked_lines

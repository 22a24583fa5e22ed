"""`curate gc`: remove old versions and what interrupted runs left, only ever curate's own.

With `--cache` it also frees each dataset's stage cache (`clear_cache`).

What may go is decided by `curate.owned` (a version whose own manifest names it, a dead
run's `.staging-*`, an unfinished `.deleting-*`); nothing is reached through a symbolic
link. A version is kept when it is among the newest `keep`, is `LATEST`, or a reader holds
its read lock (`Version.hold`; a build holds the versions it reads as inputs), or a live
mixture draws from it (`curate.mixture_refs`).

A version is removed in an order a kill cannot make unsafe, holding its read lock:
1. unlisted: its `.index` entry goes (fsync'd), so no run finds it by fingerprint;
2. renamed to `.deleting-<version>-<pid>` in the dataset folder: no longer a version;
3. deleted, `manifest.json` first.
Killed after 1 it is a whole version the next run no longer calls up to date (it builds
again); after 2, a `.deleting-*` folder nothing lists or serves, which the next gc finishes.
`LATEST` never names a version gc removes.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from curate.cache.settings import cache_root
from curate.cache.store import CacheSpec, StageCache
from curate.dirfd import Folder
from curate.errors import CurateError
from curate.mixture_refs import referenced
from curate.owned import (
    LINK,
    Entry,
    Freed,
    dataset_folders,
    freed_bytes,
    is_held,
    leftovers,
    versions,
)
from curate.phases import mark
from curate.sizes import format_size
from curate.store import ALIAS, Store


@dataclass(frozen=True)
class Action:
    """One line of gc's report: what happened to one folder, and the bytes it freed."""

    path: str  # dataset/entry, as printed
    outcome: str  # "removed", "would remove", "kept, ...", "skipped, ...", "failed, ..."
    bytes: int = 0
    refused: bool = False  # left alone because it is not safely ours: gc exits non-zero

    def line(self) -> str:
        freeing = self.outcome in ("removed", "would remove")
        return f"{self.path}: {self.outcome}" + (f" ({format_size(self.bytes)})" if freeing else "")


def collect(
    root: Path,
    keep: int | None,
    *,
    dry_run: bool = False,
    all_datasets: bool = False,
    cache: bool = False,
) -> list[Action]:
    """Collect one dataset folder, or every dataset under an output root with `all_datasets`:
    old versions when `keep` is given, the stage cache with `cache`.

    An output root holding several datasets needs `all_datasets`: pruning datasets nobody
    named is how a shared root loses data, so without it gc lists them and deletes nothing.
    """
    if keep is None and not cache:
        raise CurateError("say what to free: --keep N (old versions) and/or --cache")
    if keep is not None and keep < 1:
        raise CurateError("--keep must be at least 1")
    if Path(root).is_symlink():
        raise CurateError(
            f"{root} is a symbolic link; gc never follows one: name the folder it leads to "
            f"({Path(root).resolve()})"
        )
    datasets, links = dataset_folders(root)
    if not datasets and not links:
        raise CurateError(
            f"{root} holds no curate dataset (it is neither a dataset folder nor an output "
            "root of dataset folders); nothing deleted"
        )
    if len(datasets) > 1 and not all_datasets:
        names = ", ".join(d.name for d in datasets)
        what = " ".join([f"--keep {keep}"] * (keep is not None) + ["--cache"] * cache)
        raise CurateError(
            f"{root} is an output root of {len(datasets)} datasets ({names}): name one dataset "
            f"folder (curate gc {Path(root) / datasets[0].name} {what}) or pass --all "
            "to prune every one of them; --dry-run shows what would be removed"
        )
    actions = [Action(name, f"skipped, {LINK}", refused=True) for name in links]
    for dataset in datasets:
        if keep is not None:
            actions += _collect_dataset(dataset, keep, dry_run)
        if cache:
            actions += clear_cache(dataset, dry_run)
    return actions


def render(actions: list[Action], dry_run: bool) -> str:
    total = format_size(sum(a.bytes for a in actions))
    lines = [a.line() for a in actions]
    return "\n".join([*lines, f"would free {total}" if dry_run else f"freed {total}"])


def _collect_dataset(dataset: Path, keep: int, dry_run: bool) -> list[Action]:
    try:
        return _collect_locked(dataset, keep, dry_run)
    except OSError as exc:  # e.g. another user's dataset folder: nothing of it can be removed
        return [Action(dataset.name, f"failed, {exc.strerror or exc}", refused=True)]


def _collect_locked(dataset: Path, keep: int, dry_run: bool) -> list[Action]:
    held = Folder.open(dataset)  # once, never through a link: every name below resolves in it
    mode = os.fstat(held.fd).st_mode & 0o777  # locks gc adds: the dataset folder's modes
    store = Store(dataset.parent, dataset.name, dir_mode=mode, file_mode=mode & 0o666)
    store.use(held)
    try:
        with contextlib.nullcontext() if dry_run else _gc_lock(store):  # one per dataset
            entries = versions(dataset, held)
            ours = [e for e in entries if e.why is None]
            protected = {e.name for e in ours[-keep:]} | {store.latest()}
            mixed = referenced(dataset, held, prune=not dry_run)  # drawn from by a live mixture
            actions = [
                Action(f"{dataset.name}/{e.name}", f"skipped, {e.why}", refused=True)
                for e in entries
                if e.why is not None
            ]
            tally = Freed()  # a dry run: files shared by versions removed together count once
            for entry in ours:
                if entry.name not in protected and entry.name in mixed:
                    why = f"kept, the mixture {mixed[entry.name]} draws from it"
                    actions.append(Action(f"{dataset.name}/{entry.name}", why))
                elif entry.name not in protected:
                    actions.append(_remove_version(store, entry, dry_run, tally))
            for left in leftovers(dataset, held):
                actions.append(_remove_leftover(store, left.name, left.live, dry_run, tally))
    finally:
        store.close()
    return actions


def remove_named(dataset: Path, names: list[str], dry_run: bool) -> list[Action]:
    """These versions removed as gc removes old ones (`curate gc --purge-forgotten`), LATEST
    included; one a reader holds, or a live mixture draws from, is refused (exit status 1),
    by name."""
    held = Folder.open(dataset)
    mode = os.fstat(held.fd).st_mode & 0o777
    store = Store(dataset.parent, dataset.name, dir_mode=mode, file_mode=mode & 0o666)
    store.use(held)
    try:
        with contextlib.nullcontext() if dry_run else _gc_lock(store):
            tally, actions = Freed(), []
            mixed = referenced(dataset, held, prune=False)
            for entry in versions(dataset, held):
                if entry.name in names and entry.name in mixed:
                    why = f"kept, the mixture {mixed[entry.name]} draws from it: remove it"
                    actions.append(Action(f"{dataset.name}/{entry.name}", why, refused=True))
                elif entry.name in names:
                    action = _remove_version(store, entry, dry_run, tally)
                    refused = action.refused or action.outcome.startswith("kept")
                    actions.append(Action(action.path, action.outcome, action.bytes, refused))
    finally:
        store.close()
    return actions


class NotRewritten(Exception):
    """Raised by a `rewrite_named` writer: this version cannot be rewritten (the reason)."""


NOT_REWRITTEN = "not rewritten"
PURGING = ".staging-purge-"  # a version being written again (never a run's: not hex)


def rewrite_named(
    dataset: Path, names: list[str], write: Callable[[Path, Path], int], dry_run: bool
) -> list[Action]:
    """These versions replaced by what `write(version folder, new folder)` makes of them
    (`curate.forget.rewrite`: without the forgotten documents), under the same rules as
    `remove_named`: one a reader holds, or a live mixture draws from, is refused by name.

    The new folder is made beside the version as `.staging-purge-<version>` (only a purge
    makes one, holding the gc lock, so one found here is an interrupted purge's: removed
    first), the version is unlisted from `.index` (it no longer holds what its fingerprint
    builds), renamed to `.deleting-<version>-<pid>`, the new folder renamed into its place,
    and the old one deleted: killed between the two renames, the version is gone, as a
    purge that removes it leaves it (the next gc deletes the `.deleting-*` folder)."""
    held = Folder.open(dataset)
    mode = os.fstat(held.fd).st_mode & 0o777
    store = Store(dataset.parent, dataset.name, dir_mode=mode, file_mode=mode & 0o666)
    store.use(held)
    actions: list[Action] = []
    try:
        with contextlib.nullcontext() if dry_run else _gc_lock(store):
            for item in [] if dry_run else held.scandir():
                if item.name.startswith(PURGING) and item.is_dir(follow_symlinks=False):
                    held.remove_tree(item.name)
            mixed = referenced(dataset, held, prune=False)
            for entry in versions(dataset, held):
                label = f"{dataset.name}/{entry.name}"
                if entry.name not in names:
                    continue
                if entry.name in mixed:
                    why = f"kept, the mixture {mixed[entry.name]} draws from it: remove it"
                    actions.append(Action(label, why, refused=True))
                elif dry_run:
                    actions.append(Action(label, "would rewrite without them"))
                else:
                    actions.append(_rewrite_version(store, entry, write))
    finally:
        store.close()
    return actions


def _rewrite_version(store: Store, entry: Entry, write: Callable[[Path, Path], int]) -> Action:
    label = f"{store.name}/{entry.name}"
    dataset = store.dataset()
    new = f"{PURGING}{entry.name}"
    try:
        with store.locks() as locks, store.try_exclusive(locks, f"{entry.name}.lock") as free:
            if not free:
                return Action(label, "kept, a reader holds it", refused=True)
            with dataset.folder(new, 0o700) as folder:
                try:
                    gone = write(store.path / entry.name, store.path / new)
                except NotRewritten as exc:
                    dataset.remove_tree(new)
                    return Action(label, f"{NOT_REWRITTEN} ({exc})")
                folder.chmod(os.stat(store.path / entry.name).st_mode & 0o777)
            _unlist(store, entry)
            doomed = f".deleting-{entry.name}-{os.getpid()}"
            dataset.rename(entry.name, dataset, doomed)
            dataset.rename(new, dataset, entry.name)
            dataset.fsync()
            dataset.remove_tree(doomed, phase="gc_delete")
    except OSError as exc:
        return Action(label, f"failed, {exc.strerror or exc}", refused=True)
    return Action(label, f"rewritten without {gone} forgotten document(s)")


def _remove_version(store: Store, entry: Entry, dry_run: bool, tally: Freed) -> Action:
    label = f"{store.name}/{entry.name}"
    folder = store.path / entry.name
    lock = f"{entry.name}.lock"
    dataset = store.dataset()
    try:
        if dry_run:
            if is_held(dataset, ".locks", lock):
                return Action(label, "kept, a reader holds it")
            return Action(label, "would remove", tally.add(folder))
        with store.locks() as locks, store.try_exclusive(locks, lock) as free:
            if not free:
                return Action(label, "kept, a reader holds it")
            freed = freed_bytes(folder)
            _unlist(store, entry)
            mark("gc_unlist")
            doomed = f".deleting-{entry.name}-{os.getpid()}"
            dataset.rename(entry.name, dataset, doomed)
            dataset.fsync()
            mark("gc_rename")
            dataset.remove_tree(doomed, phase="gc_delete")
            with contextlib.suppress(FileNotFoundError):
                locks.unlink(lock)
    except OSError as exc:
        return Action(label, f"failed, {exc.strerror or exc}", refused=True)
    return Action(label, "removed", freed)


def _unlist(store: Store, entry: Entry) -> None:
    """Remove every `.index` entry naming this version, and every alias naming one of those
    entries ("same-as <fingerprint>", filed when touched inputs found the version: left,
    it would lead nowhere), durably, before the folder moves."""
    try:
        index = store.dataset().folder(".index")
    except OSError:  # none, or a link (never followed): nothing filed there is ours
        return
    with index:
        filed: dict[str, str] = {}
        for item in index.scandir():
            if item.is_file(follow_symlinks=False):
                with contextlib.suppress(OSError, UnicodeDecodeError):
                    filed[item.name] = index.read_text(item.name).strip()
        named = {name for name, text in filed.items() if text == entry.name}
        aliases = {name for name, text in filed.items()
                   if text.startswith(ALIAS) and text.removeprefix(ALIAS) in named}  # fmt: skip
        for name in sorted(named | aliases):
            with contextlib.suppress(OSError):
                index.unlink(name)
        index.fsync()


def _remove_leftover(store: Store, name: str, live: bool, dry_run: bool, tally: Freed) -> Action:
    label = f"{store.name}/{name}"
    folder = store.path / name
    if live:
        return Action(label, "kept, a live run holds it")
    if dry_run:
        return Action(label, "would remove", tally.add(folder))
    freed = freed_bytes(folder)
    dataset = store.dataset()
    try:
        if name.startswith(".deleting-"):
            dataset.remove_tree(name, phase="gc_delete")
        else:  # a run may have started since: its build lock decides, as a run's own cleanup
            lock = store.build_lock_name(name.removeprefix(".staging-"))
            with store.try_exclusive(dataset, lock) as free:
                if not free:
                    return Action(label, "kept, a live run holds it")
                dataset.remove_tree(name)
    except OSError as exc:
        return Action(label, f"failed, {exc.strerror or exc}", refused=True)
    return Action(label, "removed", freed)


def clear_cache(dataset: Path, dry_run: bool) -> list[Action]:
    """`--cache`: the dataset folder's stage cache freed, entries of ours only
    (`StageCache.clear`); kept while a run holds it. No version needs the cache: freeing it
    costs the next run time, never data. A link at `.cache` or `stages` is not followed."""
    root = cache_root(dataset)
    label = f"{dataset.name}/.cache/stages"
    for path in (root.parent, root):
        try:
            if stat.S_ISLNK(os.lstat(path).st_mode):
                return [Action(label, f"skipped, {LINK}", refused=True)]
        except FileNotFoundError:  # no cache: nothing to say
            return []
    mode = os.stat(dataset, follow_symlinks=False).st_mode & 0o777  # its lock: the folder's modes
    cache = StageCache(CacheSpec(root, 0, mode & 0o666, mode, False), create=False)
    try:
        freed = cache.try_clear(dry_run)
    except OSError as exc:
        return [Action(label, f"failed, {exc.strerror or exc}", refused=True)]
    finally:
        cache.close()
    if freed is None:
        return [Action(label, "kept, a run is using it")]
    return [Action(label, "would remove" if dry_run else "removed", freed)]


@contextlib.contextmanager
def _gc_lock(store: Store) -> Iterator[None]:
    """Two gcs of one dataset take turns (each finishes what it renamed)."""
    fd = store.dataset().open_file(".gc.lock", os.O_RDWR, store.file_mode)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)

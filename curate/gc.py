"""`curate gc`: remove old versions and what interrupted runs left, only ever curate's own.

What may go is decided by `curate.owned` (a version whose own manifest names it, a dead
run's `.staging-*`, an unfinished `.deleting-*`); nothing is reached through a symbolic
link. A version is kept when it is among the newest `keep`, is `LATEST`, or a reader holds
its read lock (`Version.hold`; a build holds the versions it reads as inputs).

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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from curate.errors import CurateError
from curate.io.shards import fsync_dir
from curate.modes import modes_of, open_created
from curate.owned import LINK, Entry, dataset_folders, freed_bytes, is_held, leftovers, versions
from curate.phases import mark
from curate.sizes import format_size
from curate.store import Store, remove_tree


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
    root: Path, keep: int, *, dry_run: bool = False, all_datasets: bool = False
) -> list[Action]:
    """Collect one dataset folder, or every dataset under an output root with `all_datasets`.

    An output root holding several datasets needs `all_datasets`: pruning datasets nobody
    named is how a shared root loses data, so without it gc lists them and deletes nothing.
    """
    if keep < 1:
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
        raise CurateError(
            f"{root} is an output root of {len(datasets)} datasets ({names}): name one dataset "
            f"folder (curate gc {Path(root) / datasets[0].name} --keep {keep}) or pass --all "
            "to prune every one of them; --dry-run shows what would be removed"
        )
    actions = [Action(name, f"skipped, {LINK}", refused=True) for name in links]
    for dataset in datasets:
        actions += _collect_dataset(dataset, keep, dry_run)
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
    dir_mode, file_mode = modes_of(dataset)  # locks gc adds: the dataset folder's modes
    store = Store(dataset.parent, dataset.name, dir_mode=dir_mode, file_mode=file_mode)
    with contextlib.nullcontext() if dry_run else _gc_lock(dataset, file_mode):  # one per dataset
        entries = versions(dataset)
        ours = [e for e in entries if e.why is None]
        protected = {e.name for e in ours[-keep:]} | {store.latest()}
        actions = [
            Action(f"{dataset.name}/{e.name}", f"skipped, {e.why}", refused=True)
            for e in entries
            if e.why is not None
        ]
        for entry in ours:
            if entry.name not in protected:
                actions.append(_remove_version(store, entry, dry_run))
        for left in leftovers(dataset):
            actions.append(_remove_leftover(store, left.name, left.live, dry_run))
    return actions


def _remove_version(store: Store, entry: Entry, dry_run: bool) -> Action:
    label = f"{store.name}/{entry.name}"
    folder = store.path / entry.name
    lock = store.read_lock_path(entry.name)
    if dry_run:
        if is_held(lock):
            return Action(label, "kept, a reader holds it")
        return Action(label, "would remove", freed_bytes(folder))
    try:
        with store.try_exclusive(lock) as free:
            if not free:
                return Action(label, "kept, a reader holds it")
            freed = freed_bytes(folder)
            _unlist(store, entry)
            mark("gc_unlist")
            doomed = store.path / f".deleting-{entry.name}-{os.getpid()}"
            os.rename(folder, doomed)
            fsync_dir(store.path)
            mark("gc_rename")
            remove_tree(doomed, phase="gc_delete")
            lock.unlink(missing_ok=True)
    except OSError as exc:
        return Action(label, f"failed, {exc.strerror or exc}", refused=True)
    return Action(label, "removed", freed)


def _unlist(store: Store, entry: Entry) -> None:
    """Remove every `.index` entry naming this version, durably, before the folder moves."""
    index = store.path / ".index"
    if index.is_symlink() or not index.is_dir():
        return
    for item in os.scandir(index):
        if item.is_file(follow_symlinks=False):
            with contextlib.suppress(OSError):
                if Path(item.path).read_text().strip() == entry.name:
                    os.unlink(item.path)
    fsync_dir(index)


def _remove_leftover(store: Store, name: str, live: bool, dry_run: bool) -> Action:
    label = f"{store.name}/{name}"
    folder = store.path / name
    if live:
        return Action(label, "kept, a live run holds it")
    if dry_run:
        return Action(label, "would remove", freed_bytes(folder))
    freed = freed_bytes(folder)
    try:
        if name.startswith(".deleting-"):
            remove_tree(folder, phase="gc_delete")
        else:  # a run may have started since: its build lock decides, as a run's own cleanup
            with store.try_exclusive(store.build_lock_path(name.removeprefix(".staging-"))) as free:
                if not free:
                    return Action(label, "kept, a live run holds it")
                remove_tree(folder)
    except OSError as exc:
        return Action(label, f"failed, {exc.strerror or exc}", refused=True)
    return Action(label, "removed", freed)


@contextlib.contextmanager
def _gc_lock(dataset: Path, mode: int) -> Iterator[None]:
    """Two gcs of one dataset take turns (each finishes what it renamed)."""
    fd = open_created(dataset / ".gc.lock", mode, os.O_RDWR | os.O_NOFOLLOW)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)

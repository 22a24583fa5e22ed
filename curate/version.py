"""A published version: its manifest, and memory-mapped readers for Arrow, polars and datasets.

Readers never write into a version folder. `to_dataset()` opens the shards through a
view folder of symlinks under curate's cache, so the cache files `datasets` writes
beside its source files on `.map()` land in the view, never in the version.

A version made with `split:` holds its splits side by side (`curate.hf_layout`):
`to_dataset()` is then a `DatasetDict`, and `to_arrow`/`to_polars`/`to_dataset` take a
split's name. Asking a split version for its rows without naming a split is an error
rather than a silent concatenation of train and held-out data.
"""

from __future__ import annotations

import builtins
import fcntl
import html
import logging
import os
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from curate import integrity
from curate.dirfd import Folder
from curate.errors import CurateError
from curate.hf_layout import DICT, TRAIN
from curate.output.shards import read_stream
from curate.paths import inside
from curate.sealed import read_manifest
from curate.sizes import format_size

if TYPE_CHECKING:
    import datasets
    import polars as pl

    from curate.lineage.trace import Trace
    from curate.report import Report

log = logging.getLogger(__name__)


def cache_dir() -> Path:
    base = os.environ.get("CURATE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "curate"
    )
    return Path(base)


class Version:
    """One immutable, published version of a dataset."""

    _files_checked = False
    rebuilt_because: str | None = None
    """Set on a version `run()` built because the one published for the same fingerprint
    was damaged: which one, and its first problem."""

    def __init__(self, path: str | Path, *, up_to_date: bool = False, manifest: Any = None) -> None:
        """`manifest`: its manifest.json as a caller just read and checked it (the sealed
        check does), so the version goes on with the same bytes instead of reading them again."""
        self._lock_fd: int | None = None  # first: __del__ runs even when __init__ raises
        self.held_sources: builtins.list[Version] = []  # a mixture opened: its sources, held
        self.path = Path(path).resolve()
        if not (self.path / "manifest.json").is_file():
            raise CurateError(f"{self.path} is not a curate version (no manifest.json)")
        self.up_to_date = up_to_date
        self._read_manifest = manifest

    def hold(self) -> Version:
        """Take a shared read lock on this version, so `curate gc` leaves it alone while this
        object lives (or until `release()`). Returns the version, for chaining."""
        if self._lock_fd is None:
            try:  # `.locks` and the lock resolved in the dataset folder, never through a link
                with Folder.open(self.path.parent) as dataset:
                    mode = os.fstat(dataset.fd).st_mode & 0o777  # a reader knows no recipe
                    with dataset.folder(".locks", mode) as locks:
                        fd = locks.open_file(f"{self.path.name}.lock", os.O_RDWR, mode & 0o666)
            except OSError:  # a read-only copy of the dataset: nothing can collect it either
                return self
            fcntl.flock(fd, fcntl.LOCK_SH)
            if not (self.path / "manifest.json").is_file():  # gc removed it while we waited
                os.close(fd)
                raise CurateError(f"{self.path} was removed (by curate gc) as it was opened")
            self._lock_fd = fd
        return self

    def check_files(self) -> Version:
        """Fail with `DamagedVersion`, naming the file, unless every file the manifest lists is
        present with its listed size (one stat per file, once per object; `curate verify`
        hashes the bytes). Returns the version, for chaining."""
        if not self._files_checked:
            found = self.file_problems()
            if found:
                raise integrity.damaged(self.path, found)
        return self

    def file_problems(self) -> builtins.list[str]:
        """What `check_files` would fail on, one line per file (empty: the version is intact,
        and is not checked again)."""
        found = integrity.problems(self.path, self.manifest)
        self._files_checked = not found
        return found

    def release(self) -> None:
        for source in self.__dict__.get("held_sources", []):
            source.release()
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)

    def __del__(self, _close: Callable[[int], None] = os.close) -> None:
        # Bound at definition: at interpreter exit this module's globals may be gone. Never
        # raise here (Python would print the exception as the process exits).
        fd = self.__dict__.get("_lock_fd")
        if fd is not None:
            self._lock_fd = None
            try:  # noqa: SIM105  (contextlib may be torn down already)
                _close(fd)
            except OSError:
                pass

    def __getstate__(self) -> dict[str, Any]:
        """A copy (copy.copy, pickle to a DataLoader worker) does not share the lock's file
        descriptor: two objects closing one number would close some other file the second
        time. The copy holds no lock until its own `hold()` (nor its mixture's sources: its
        `release()` must not release the original's)."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("_lock_fd", "held_sources")}
        return state | {"_lock_fd": None, "held_sources": []}

    @cached_property
    def manifest(self) -> dict[str, Any]:
        path = self.path / "manifest.json"
        data, self._read_manifest = self._read_manifest, None
        if data is None:  # the reader gc and LATEST's check use: no link, pipe or giant file
            data, _mode, why = read_manifest(self.path.parent, self.path.name)
            if why is not None:
                raise CurateError(f"{path} cannot be read ({why}); `curate verify` checks it")
        if not isinstance(data, dict) or "counts" not in data or "stages" not in data:
            raise CurateError(f"{path} is not a curate manifest; `curate verify` checks it")
        return data

    @property
    def name(self) -> str:
        return str(self.manifest["version"])

    @property
    def dataset(self) -> str:
        return str(self.manifest["dataset"])

    @property
    def fingerprint(self) -> str:
        return str(self.manifest["fingerprint"])

    @property
    def counts(self) -> dict[str, Any]:
        return dict(self.manifest["counts"])

    @property
    def splits(self) -> builtins.list[str]:
        """The version's split names (train first), or [] when it was made without `split:`."""
        record = self.manifest.get("splits")
        return list(record["splits"]) if record else []

    def _files(self, key: str) -> builtins.list[tuple[dict[str, Any], Path]]:
        """The manifest's file records under `key` with their paths, each checked to stay
        inside the version (a crafted manifest must not make a reader serve other files)."""
        source = self.path / "manifest.json"
        return [
            (r, inside(self.path, r.get("path"), source=source, field=f"{key}[{i}].path"))
            for i, r in enumerate(self.manifest[key])
        ]

    @property
    def shard_paths(self) -> builtins.list[Path]:
        """Every shard of the version, of every split."""
        return [path for _, path in self._files("shards")]

    def split_shard_paths(self, split: str | None = None) -> builtins.list[Path]:
        """The shards of one split; without splits, all of them (then `split` must be None)."""
        splits = self.splits
        if split is None and splits:
            raise CurateError(
                f"{self.path} has splits {', '.join(splits)}: name one "
                f"(e.g. to_arrow({splits[0]!r}))"
            )
        if split is not None and split not in splits:
            have = f"its splits are {', '.join(splits)}" if splits else "it has no splits"
            raise CurateError(f"{self.path} has no split {split!r}: {have}")
        return [path for s, path in self._files("shards") if s.get("split") == split]

    def schema(self) -> pa.Schema:
        self.check_files()
        with pa.memory_map(str(self.shard_paths[0])) as source:
            return pa.ipc.open_stream(source).schema

    def to_arrow(self, split: str | None = None) -> pa.Table:
        """All shards (of `split`) as one table, memory-mapped (no copy of the data)."""
        self.check_files()
        tables = [read_stream(p) for p in self.split_shard_paths(split)]
        if not tables:
            return self.schema().empty_table()
        return pa.concat_tables(tables)

    def to_polars(self, split: str | None = None) -> pl.DataFrame:
        """A polars DataFrame over the memory-mapped table (polars copies strings into its own
        string views; numeric columns stay zero-copy)."""
        import polars as pl

        frame = pl.from_arrow(self.to_arrow(split), rechunk=False)
        assert isinstance(frame, pl.DataFrame)
        return frame

    def rejected(self) -> pa.Table:
        """Each removed document's id, stage and reason (and what it duplicated)."""
        from curate.stages.base import REJECTED_SCHEMA

        self.check_files()
        files = self._files("rejected")
        return _concat([read_stream(path) for _, path in files], REJECTED_SCHEMA)

    def examples(self) -> pa.Table:
        """Removed documents kept as examples, per stage and reason (`curate.examples.files`:
        texts and ids through the recipe's pii stages; none when the recipe turned them off,
        had no pii stage, or an older curate made the version)."""
        from curate.examples.files import SCHEMA

        self.check_files()
        files = self._files("examples") if self.manifest.get("examples") else []
        return _concat([read_stream(path) for _, path in files], SCHEMA)

    def quarantined(self) -> pa.Table:
        """Each unreadable record's file, line, reason and size (never its content)."""
        from curate.io.batches import QUARANTINE_SCHEMA

        self.check_files()
        files = self._files("quarantine")
        return _concat([read_stream(path) for _, path in files], QUARANTINE_SCHEMA)

    def trace(self, doc_id: str) -> Trace:
        """Where the document came from, what each stage did to it and where it is
        (`curate.lineage.trace`); shows as a table in a notebook. Positions, never text."""
        from curate.lineage.trace import Tracer

        found = Tracer(self).by_id(doc_id)
        if not found:
            raise CurateError(f"{self.path} has no document {doc_id!r}")
        return found[0]

    def view_folder(self) -> Path:
        """A folder of symlinks to this version's files, where `datasets` may write its caches."""
        from curate.views import view_folder

        self.check_files()
        return view_folder(self, cache_dir())

    def to_dataset(self, split: str | None = None) -> datasets.Dataset | datasets.DatasetDict:
        """A memory-mapped `datasets.Dataset`; `.map()` caches go to curate's cache folder.

        A version with splits gives a `DatasetDict` (train, validation, ...), or the named
        split's `Dataset`; one without gives its rows as one `Dataset` (on disk a
        `DatasetDict` of one split, train, so that `datasets.load_dataset` reads it too).
        A mixture (`curate mix`) gives its samples in index order (`curate.mixture_dataset`).
        """
        import datasets

        if split is not None:
            self.split_shard_paths(split)  # a name the version does not have fails here, by name
        if self.manifest.get("mixture") is not None:  # its samples, in index order
            from curate.mixture_dataset import mixture_dataset

            return mixture_dataset(self)
        view = self.view_folder()
        if split is None and not self.splits and self.manifest.get("layout") == DICT:
            split = TRAIN  # a version without splits is its one folder, train (hf_layout)
        ds = datasets.load_from_disk(str(view / split if split else view))
        assert isinstance(
            ds, datasets.DatasetDict if self.splits and not split else datasets.Dataset
        )
        return ds

    def summary(self) -> list[tuple[str, int, int, dict[str, int], float]]:
        return [
            (s["name"], s["docs_in"], s["docs_out"], s["removed"], s["seconds"])
            for s in self.manifest["stages"]
        ]

    def __repr__(self) -> str:
        c = self.counts
        record = self.manifest.get("splits")
        splits = (
            " (" + ", ".join(f"{k} {v['documents']:,}" for k, v in record["splits"].items()) + ")"
            if record
            else ""
        )
        return (
            f"Version({self.dataset} {self.name}, {c['written']:,} documents written{splits} of "
            f"{c['read']:,} read, fingerprint {self.fingerprint[:12]}, path={str(self.path)!r})"
        )

    def report(self, other: Version | None = None) -> Report:
        """The full report (`curate report`): displays in a notebook, `.save(path)` writes
        the HTML file; with `other`, the comparison of this version (A) with it (B)."""
        from curate.report import report

        return report(self, other)

    def _repr_html_(self) -> str:
        """The notebook view: the same facts as `curate show`, as a table, and the funnel
        of documents through the stages (curate.report.inline)."""
        from curate.report.inline import funnel

        c, m = self.counts, self.manifest
        size = sum(s["bytes"] for s in m["shards"])
        rows = "".join(
            f"<tr><td>{html.escape(s['name'])}</td><td>{s['docs_in']:,}</td>"
            f"<td>{s['docs_out']:,}</td><td>{s['changed']:,}</td><td>"
            f"{html.escape(', '.join(f'{k}: {v:,}' for k, v in s['removed'].items()) or '-')}"
            f"</td><td>{s['seconds']:.2f}</td></tr>"
            for s in m["stages"]
        )
        tokens = f", {m['tokens']:,} tokens" if m.get("tokens") is not None else ""
        record = m.get("splits")
        splits = (
            "; splits: "
            + ", ".join(f"{html.escape(k)} {v['documents']:,}" for k, v in record["splits"].items())
            if record
            else ""
        )
        return (
            f"<div><b>{html.escape(self.dataset)} {html.escape(self.name)}</b> "
            f"<code>{html.escape(str(self.path))}</code><br>"
            f"{c['written']:,} documents{tokens} in {len(m['shards'])} shards "
            f"({format_size(size)}){splits}; read {c['read']:,}, removed "
            f"{c['removed_total']:,}, quarantined {c['quarantined']:,}; fingerprint "
            f"<code>{self.fingerprint[:12]}</code><table><tr><th>stage</th><th>in</th>"
            "<th>out</th><th>changed</th><th>removed</th><th>s</th></tr>"
            f"{rows}</table>{funnel(self)}</div>"
        )


def _concat(tables: builtins.list[pa.Table], schema: pa.Schema) -> pa.Table:
    return pa.concat_tables(tables) if tables else schema.empty_table()


def open(path: str | Path, version: str = "LATEST", *, check: bool = True) -> Version:
    """A version by its folder, or a dataset folder (`<root>/<name>`) and a version name.

    The version is held (a shared read lock, like `prepare()`'s) while the object lives: a
    notebook or a trainer reading it must not find it removed by `curate gc --keep 1`; a
    mixture holds its sources too (`held_sources`), as the loader's `open_tokens` does.
    Its files are checked against the manifest (`Version.check_files`: present, own, of
    their listed size) unless `check=False`, which `curate verify` uses to report them all.
    """
    from curate.sealed import located

    folder, manifest = located(Path(path), version)  # LATEST's check reads the manifest once
    opened = Version(folder, manifest=manifest).hold()  # first: gc's removal is said
    if check:
        try:
            opened.check_files()
        except CurateError:
            opened.release()
            raise
    if opened.manifest.get("mixture") is not None:  # a mixture: its sources' read locks too
        opened.held_sources = hold_sources(opened)
    return opened


def hold_sources(version: Version) -> builtins.list[Version]:
    """Read locks on the versions a mixture (`curate mix`) draws from, where they still are,
    so `curate gc` leaves them while it is read (a source gone is said once: the mixture's
    own hard links still hold every byte it reads)."""
    from curate.sealed import sealed_manifest

    held = []
    for source in version.manifest["mixture"]["sources"]:
        at = Path(source["path"])
        manifest, why = sealed_manifest(at.parent, at.name, source["fingerprint"])
        if manifest is None:
            log.warning("%s: source %s is not at %s (%s)", version.path, source["name"], at, why)
            continue
        held.append(Version(at, manifest=manifest).hold())
    return held

"""Turning a recipe's input patterns into a checked, ordered list of input files.

Everything that can be known about the inputs without reading them all is
checked here, before a run writes anything: a path that does not exist, a glob
that matches nothing (an unmounted share must fail loudly, never produce a
smaller dataset that looks complete), an unreadable file, an unsupported
extension, a compressed or columnar file whose signature is missing.
"""

from __future__ import annotations

import glob
import logging
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from curate.errors import CurateError, recipe_part, shown
from curate.hf_layout import unsplit_state
from curate.io import folders
from curate.sealed import VERSION_NAME

log = logging.getLogger(__name__)

FORMATS = (
    "jsonl",
    "jsonl.gz",
    "jsonl.zst",
    "parquet",
    "arrow",
    "csv",
    "tsv",
    "json",
    "text_file",
    "text_folder",
    "hf_disk",
)

# Longest suffixes first: ".jsonl.gz" must win over a bare ".gz".
_SUFFIXES = (
    (".jsonl.gz", "jsonl.gz"),
    (".ndjson.gz", "jsonl.gz"),
    (".jsonl.zst", "jsonl.zst"),
    (".ndjson.zst", "jsonl.zst"),
    (".jsonl", "jsonl"),
    (".ndjson", "jsonl"),
    (".parquet", "parquet"),
    (".arrow", "arrow"),
    (".feather", "arrow"),
    (".json", "json"),
    (".csv", "csv"),
    (".tsv", "tsv"),
    (".txt", "text_file"),
    (".md", "text_file"),
)
SUPPORTED = (
    ", ".join(s for s, _ in _SUFFIXES)
    + " (one document per .txt/.md file), a folder of .txt/.md files,"
    " or a folder written by datasets' save_to_disk"
)

_GLOB_CHARS = re.compile(r"[*?[]")
_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_ARROW_FILE_MAGIC = b"ARROW1"


@dataclass(frozen=True)
class InputFile:
    """One input as the rest of curate sees it: where it is, how to name it, how to read it."""

    path: str  # absolute path (for a folder input: the folder)
    name: str  # relative to base_dir when under it, else absolute; posix separators
    format: str  # one of FORMATS
    size: int  # bytes (folder: sum of member files)
    mtime_ns: int  # (folder: max over member files)
    ctime_ns: int = 0  # (folder: max over member files)
    inode: int = 0  # (folder: the folder's own)
    device: int = 0
    """size, mtime, ctime, inode and device are the stat identity a run checks its inputs
    against until it publishes (curate.input_watch)."""
    shown: str = ""
    """The path for messages, from the folder curate runs in (`curate.errors.shown`), set
    where inputs are listed: a worker's current folder may be another."""
    pattern: str = field(default="", compare=False)
    pattern_index: int = field(default=-1, compare=False)
    """The recipe's input pattern that found it, and its place in `inputs`: where a problem
    found when its contents are checked is reported."""

    @property
    def label(self) -> str:
        """How messages name the input: `input 'data/a.jsonl'`."""
        return f"input {self.shown or self.name!r}"


STAT_IDENTITY = ("size", "mtime_ns", "ctime_ns", "inode", "device")
"""The fields of an `InputFile` that stand for its contents until they change: what the
caches of what was read from an input (digests, partition plans, forgotten ids) key it by."""


def stat_identity(inp: InputFile) -> dict[str, int]:
    """`inp`'s stat identity by field name (`STAT_IDENTITY`)."""
    return {k: getattr(inp, k) for k in STAT_IDENTITY}


def discover_inputs(patterns: list[str], base_dir: Path, *, check: bool = True) -> list[InputFile]:
    """The inputs in recipe order (each glob's matches sorted by path), each file once.

    `check=False` only stats (no file is opened): enough to fingerprint, which is all an
    up-to-date `prepare()` needs; a build then checks contents (`check_contents`) before
    anything is written. Each folder is listed once, here; planning and reading use that.
    """
    if not patterns:
        raise CurateError("the recipe names no inputs")
    base = os.path.abspath(base_dir)
    seen: set[str] = set()
    found: list[InputFile] = []
    for i, pattern in enumerate(patterns):
        with recipe_part("inputs", i):
            for path in _expand(pattern, base):
                key = os.path.realpath(path)
                if key in seen:
                    continue
                seen.add(key)
                inp = _describe(path, pattern, i, base)
                if check:
                    _check(inp)
                found.append(inp)
    return found


def check_contents(files: list[InputFile]) -> None:
    """What `discover_inputs(check=True)` checks, for inputs found with `check=False`: every
    file opens and has its format's signature, every folder member can be read."""
    for inp in files:
        with recipe_part("inputs", inp.pattern_index):
            _check(inp)


def member_paths(inp: InputFile) -> list[str]:
    """The files an input is made of, in reading order: the file itself, a text folder's
    .txt/.md files, or a saved dataset's shards then its state.json. Hash these (not every
    file under a folder) so an identity ignores what curate does not read."""
    if inp.format not in ("text_folder", "hf_disk"):
        return [inp.path]
    members = folders.members_of(inp.path, inp.format, inp.size, inp.mtime_ns, inp.name)
    return [os.path.join(inp.path, m.rel) for m in members]


def format_of(path: str) -> str | None:
    """The file format an extension stands for, or None when curate cannot read it."""
    lower = path.lower()
    for suffix, fmt in _SUFFIXES:
        if lower.endswith(suffix):
            return fmt
    return None


def _expand(pattern: str, base: str) -> list[str]:
    expanded = os.path.expanduser(pattern)
    full = os.path.normpath(os.path.join(base, expanded))
    if _GLOB_CHARS.search(pattern):
        # the base folder's own name may hold glob characters: only the pattern is a glob
        matches = glob.glob(os.path.join(glob.escape(base), expanded), recursive=True)
        files = sorted(Path(p).as_posix() for p in matches if not os.path.isdir(p))
        if files:
            return [os.path.normpath(p) for p in files]
        if not os.path.lexists(full):  # a literal name with brackets is not a glob
            folders_only = f" (only folders, {len(matches)}; name folders without wildcards)"
            raise CurateError(
                f"input {pattern!r} matched no files{folders_only if matches else ''} "
                f"(resolved against {base})"
            )
    elif not os.path.lexists(full):
        raise CurateError(f"input {pattern!r} does not exist (resolved to {shown(full)})")
    return [full]


def _describe(path: str, pattern: str, index: int, base: str) -> InputFile:
    name = _name(path, base)
    where = shown(path)  # messages show the path from the user's folder; `name` is for ids
    label = _label(where, pattern)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise CurateError(f"{label} is a link to a file that does not exist") from None
    except OSError as exc:
        raise CurateError(f"{label} cannot be read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        fmt = _folder_format(path, name, label)
        found = folders.list_folder(path, fmt)  # the one listing of it (remembered)
        if fmt == "text_folder" and not found.members:
            raise CurateError(f"{label} {_empty_folder_problem(path, name)}")
        size, mtime_ns, ctime_ns = found.size, found.mtime_ns, found.ctime_ns
    elif not stat.S_ISREG(st.st_mode):
        raise CurateError(f"{label} is neither a regular file nor a folder")
    else:
        fmt = _file_format(path, label)
        size, mtime_ns, ctime_ns = st.st_size, st.st_mtime_ns, st.st_ctime_ns
    return InputFile(
        path, name, fmt, size, mtime_ns, ctime_ns, st.st_ino, st.st_dev, where, pattern, index
    )


def _file_format(path: str, label: str) -> str:
    fmt = format_of(path)
    if fmt is None:
        raise CurateError(f"{label} has an unsupported extension; supported: {SUPPORTED}")
    return fmt


def _label(where: str, pattern: str) -> str:
    return f"input {where!r}" if where == pattern else f"input {where!r} (from {pattern!r})"


def _folder_format(path: str, name: str, label: str) -> str:
    parent = os.path.dirname(path.rstrip(os.sep))
    if os.path.basename(path.rstrip(os.sep)) == "train" and unsplit_state(parent):
        raise CurateError(  # its state.json names ../shards/..., outside this folder
            f"{label} is the train/ folder of a curate version without splits; name the "
            f"version, '{Path(name).parent.as_posix()}'"
        )
    if os.path.exists(os.path.join(path, folders.HF_STATE)) or unsplit_state(path):
        return "hf_disk"  # a saved dataset, or a curate version (`train/` its one split)
    if os.path.exists(os.path.join(path, "dataset_dict.json")):
        raise CurateError(
            f"{label} is a saved DatasetDict; name one split's folder, e.g. '{name}/train'"
        )
    if _is_dataset_folder(path):  # its versions hold text files too (each one's card)
        raise CurateError(f"{label} {_dataset_folder_hint(path, name)}")
    return "text_folder"


def _is_dataset_folder(path: str) -> bool:
    """A curate dataset folder: its LATEST names a version folder holding a manifest."""
    try:
        latest = Path(path, "LATEST").read_text().strip()
    except (OSError, ValueError):
        return False
    return bool(VERSION_NAME.match(latest)) and os.path.isfile(
        os.path.join(path, latest, "manifest.json")
    )


def _empty_folder_problem(path: str, name: str) -> str:
    if os.path.isfile(os.path.join(path, "LATEST")):
        return _dataset_folder_hint(path, name)
    return (
        f"is a folder with no .txt or .md files "
        f"(and no {folders.HF_STATE}, so it is not a saved dataset either)"
        + _data_files_hint(path, name)
    )


def _check(inp: InputFile) -> None:
    """Open every file the input is made of, so permissions fail now, and check the
    signature its format requires."""
    label = _label(inp.shown, inp.pattern)
    if inp.format not in ("text_folder", "hf_disk"):
        _check_content(inp.path, inp.format, inp.size, label)
        return
    members = folders.members_of(inp.path, inp.format, inp.size, inp.mtime_ns, inp.name)
    if inp.format == "hf_disk":
        for m in members[:-1]:  # the last member is state.json, already read
            shard = os.path.join(inp.path, m.rel)
            _check_content(shard, "arrow", m.size, f"shard {m.rel!r} of {label}")
        return
    for m in members:
        _readable(os.path.join(inp.path, m.rel), f"file {m.rel!r} of {label}")


def _data_files_hint(path: str, name: str) -> str:
    """A folder of .jsonl or .arrow files is not a text folder: say how to name them
    (a folder of a saved dataset's shards is read through the folder above it)."""
    try:
        names = sorted(entry.name.lower() for entry in os.scandir(path) if entry.is_file())
    except OSError:
        return ""
    suffix = next((s for n in names for s, _ in _SUFFIXES if n.endswith(s)), None)
    if suffix is None:
        return ""
    parent = os.path.dirname(path.rstrip(os.sep))
    if os.path.exists(os.path.join(parent, folders.HF_STATE)) or unsplit_state(parent):
        saved = Path(name).parent.as_posix()
        return f"; it holds a saved dataset's shards: name the dataset folder, '{saved}'"
    return f"; it holds data files: name them with a glob, e.g. '{name}/*{suffix}'"


def _dataset_folder_hint(path: str, name: str) -> str:
    """A curate dataset folder holds versions, not documents: say which folder to name.
    A version is an input of its own (recorded as a parent), so a rebuild never changes
    what the recipe reads behind its back, as following LATEST would."""
    try:
        latest = Path(path, "LATEST").read_text().strip()
    except (OSError, ValueError):
        latest = ""
    if not VERSION_NAME.match(latest):  # a crafted LATEST is neither probed nor printed
        return f"is a curate dataset folder; name one of its versions, e.g. '{name}/v1'"
    example = f"{name}/{latest}"
    version = os.path.join(path, latest)
    if os.path.exists(os.path.join(version, "dataset_dict.json")) and not unsplit_state(version):
        example += "/train"  # a version with held-out splits: one split is one dataset
    return f"is a curate dataset folder (LATEST is {latest}); name a version, e.g. '{example}'"


def _readable(path: str, label: str) -> None:
    try:
        os.close(os.open(path, os.O_RDONLY))
    except OSError as exc:
        raise CurateError(f"{label} cannot be read: {exc.strerror or exc}") from None


def _check_content(path: str, fmt: str, size: int, label: str) -> None:
    """Open the file (so permissions fail now) and check the signature its format requires."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            if size >= 8:
                f.seek(size - 8)
            tail = f.read(8)
    except OSError as exc:
        raise CurateError(f"{label} cannot be read: {exc.strerror or exc}") from None
    if fmt == "text_file":
        return  # any bytes are a text (an empty one included); UTF-8 is checked when read
    if fmt == "json":
        problem = _json_problem(path, label)
        if problem:
            raise CurateError(f"{label} holds {problem}")
        return
    if fmt in ("jsonl", "csv", "tsv"):
        if size == 0:
            log.warning("%s is empty", label)
        return
    if size == 0:
        raise CurateError(f"{label} is empty, which is not a valid {fmt} file")
    problem = None
    if fmt == "jsonl.gz" and not head.startswith(_GZIP_MAGIC):
        problem = "is not gzip-compressed (no gzip signature at its start)"
    elif fmt == "jsonl.zst" and not _zstd_start(head):
        problem = "is not zstd-compressed (no zstd signature at its start)"
    elif fmt == "parquet" and not (head.startswith(b"PAR1") and tail.endswith(b"PAR1")):
        problem = "is not a complete Parquet file (no PAR1 marker at its start and end)"
    elif fmt == "arrow":
        problem = _arrow_problem(path, head, tail)
    if problem:
        raise CurateError(f"{label} {problem}")


def _json_problem(path: str, label: str) -> str | None:
    """What a .json file holds when it is not an array of records (its first value's kind,
    from its first bytes other than whitespace), or None."""
    from curate.io.json_array_scan import WS, top_level
    from curate.io.lines import BOM

    try:
        with open(path, "rb") as f:
            piece = f.read(1 << 16).removeprefix(BOM)
            while piece and not piece.lstrip(WS):  # whitespace so far: look further
                piece = f.read(1 << 16)
    except OSError as exc:
        raise CurateError(f"{label} cannot be read: {exc.strerror or exc}") from None
    return top_level(piece)


def _zstd_start(head: bytes) -> bool:
    skippable = len(head) >= 4 and head[0] & 0xF0 == 0x50 and head[1:4] == b"\x2a\x4d\x18"
    return head.startswith(_ZSTD_MAGIC) or skippable


def _arrow_problem(path: str, head: bytes, tail: bytes) -> str | None:
    if head.startswith(b"FEA1"):
        return "is Feather version 1, which curate does not read; rewrite it as Feather 2 / Arrow"
    try:
        with pa.memory_map(path) as source:
            if head.startswith(_ARROW_FILE_MAGIC):
                if not tail.endswith(_ARROW_FILE_MAGIC):
                    return "is a truncated Arrow IPC file (no ARROW1 marker at its end)"
                pa.ipc.open_file(source)
            else:
                pa.ipc.open_stream(source)
    except (pa.ArrowInvalid, OSError) as exc:
        return f"is not a readable Arrow IPC file or stream ({exc})"
    return None


def _name(path: str, base: str) -> str:
    """The path relative to the recipe's folder, `..` included: ids and messages then do not
    depend on where a checkout lives. Only a path on another drive root stays absolute."""
    try:
        return Path(os.path.relpath(path, base)).as_posix()
    except ValueError:
        return Path(path).as_posix()

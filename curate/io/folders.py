"""What a folder input holds: the text files of a text folder, the shards of a saved dataset.

Discovery, planning and reading all need the same member list in the same order,
so it is computed here once per process and checked against the size and time
the input was discovered with: a folder that changed mid-run is an error, not a
silently different dataset.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from curate.errors import CurateError
from curate.hf_layout import resolved, unsplit_state
from curate.paths import inside

TEXT_SUFFIXES = (".txt", ".md")
HF_STATE = "state.json"


@dataclass(frozen=True)
class Member:
    """One file of a folder input."""

    rel: str  # posix path relative to the folder
    size: int
    mtime_ns: int
    ctime_ns: int = 0


@dataclass(frozen=True)
class Listing:
    """A folder input's members, in reading order, and the totals its identity is made of."""

    members: tuple[Member, ...]
    size: int  # sum over members
    mtime_ns: int  # max over members
    ctime_ns: int  # max over members


def list_folder(folder: str, fmt: str) -> Listing:
    """The folder's members as they are now (a saved dataset's shards and state.json for
    `hf_disk`, else its text files), listed once: the listing is remembered, so planning,
    hashing and reading in this process use the members discovery saw."""
    members = tuple(hf_shards(folder) if fmt == "hf_disk" else text_members(folder))
    size, mtime_ns, ctime_ns = totals_with_ctime(members)
    _cached_members.remember((folder, fmt, size, mtime_ns), members)
    return Listing(members, size, mtime_ns, ctime_ns)


def text_members(folder: str) -> list[Member]:
    """The .txt/.md files under `folder`, recursively, sorted by relative path.

    Names starting with a dot (editor backups, `.git`, checkpoints) are skipped.
    """
    members = []
    for dirpath, dirnames, filenames in os.walk(folder, onerror=_walk_error):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for fname in filenames:
            if fname.startswith(".") or not fname.lower().endswith(TEXT_SUFFIXES):
                continue
            path = os.path.join(dirpath, fname)
            st = _stat(path, folder)
            if not stat.S_ISREG(st.st_mode):
                continue
            rel = Path(os.path.relpath(path, folder)).as_posix()
            members.append(Member(rel, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    members.sort(key=lambda m: m.rel)
    return members


def state_of(folder: str) -> str:
    """The state.json that lists a saved dataset's shards, relative to `folder`: on top, or
    `train/state.json` in a curate version without splits (`curate.hf_layout`)."""
    if os.path.isfile(os.path.join(folder, HF_STATE)):
        return HF_STATE
    return unsplit_state(folder) or HF_STATE


def hf_shards(folder: str) -> list[Member]:
    """The Arrow shards a `save_to_disk` folder lists in state.json, in its order, and state.json.

    The last member is state.json itself, so the folder's identity changes when the
    shard list does; other files (`cache-*.arrow` left by `.map()`, a curate
    version's rejected/ and quarantine/) are not part of the dataset and are ignored.
    A curate version without splits lists them from `train/` as `../shards/...`: each
    member is the path the name resolves to inside `folder` (`shards/...`, as before).
    """
    listing = state_of(folder)
    state_path = os.path.join(folder, listing)
    try:
        with open(state_path, "rb") as f:
            state = json.loads(f.read())
        files = [entry["filename"] for entry in state["_data_files"]]
    except OSError as exc:
        raise CurateError(f"{state_path} cannot be read: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError):
        raise CurateError(
            f"{state_path} is not a datasets state.json (no '_data_files' list of filenames)"
        ) from None
    members = []
    for i, name in enumerate([*files, HF_STATE]):
        if not isinstance(name, str):
            raise CurateError(f"{state_path} lists a shard that is not a file name: {name!r}")
        # another user's version on a shared root must not make this run read beside it
        field = f"_data_files[{i}].filename" if i < len(files) else "itself"
        rel = resolved(listing, name) if listing != HF_STATE else name
        path = str(inside(folder, rel, source=state_path, field=field))
        st = _stat(path, folder)
        if not stat.S_ISREG(st.st_mode):
            raise CurateError(f"{path} (listed in {state_path}) is not a regular file")
        members.append(Member(Path(rel).as_posix(), st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    return members


def totals(members: Sequence[Member]) -> tuple[int, int]:
    """A folder's size (sum over members) and mtime_ns (max over members)."""
    return sum(m.size for m in members), max((m.mtime_ns for m in members), default=0)


def totals_with_ctime(members: Sequence[Member]) -> tuple[int, int, int]:
    """`totals` and the latest ctime_ns: a folder's part of its stat identity."""
    return (*totals(members), max((m.ctime_ns for m in members), default=0))


def members_of(folder: str, fmt: str, size: int, mtime_ns: int, name: str) -> tuple[Member, ...]:
    """The members of a folder input as discovered; CurateError if the folder changed since."""
    members = _cached_members(folder, fmt, size, mtime_ns)
    if totals(members) != (size, mtime_ns):
        _cached_members.cache_clear()
        raise CurateError(
            f"input {name!r} changed while curate was running "
            "(its files' sizes or times differ from when inputs were listed); run again"
        )
    return members


class _Listings:
    """The member lists of the last few folders listed in this process, by folder, format,
    size and mtime; one not listed yet (a worker's first look) is listed now. Inputs are
    hashed in a thread beside planning, hence the lock."""

    def __init__(self, maxsize: int) -> None:
        self._maxsize = maxsize
        self._found: OrderedDict[tuple[str, str, int, int], tuple[Member, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, folder: str, fmt: str, size: int, mtime_ns: int) -> tuple[Member, ...]:
        key = (folder, fmt, size, mtime_ns)
        with self._lock:
            if key in self._found:
                self._found.move_to_end(key)
                return self._found[key]
        return list_folder(folder, fmt).members  # remembered under the totals found now

    def remember(self, key: tuple[str, str, int, int], members: tuple[Member, ...]) -> None:
        with self._lock:
            self._found[key] = members
            self._found.move_to_end(key)
            while len(self._found) > self._maxsize:
                self._found.popitem(last=False)

    def cache_clear(self) -> None:
        with self._lock:
            self._found.clear()


_cached_members = _Listings(maxsize=16)


def _walk_error(exc: OSError) -> None:
    # os.walk skips unreadable folders silently by default: a dataset missing a
    # subfolder would look complete, so stop instead.
    raise CurateError(f"{exc.filename} cannot be read: {exc.strerror or exc}")


def _stat(path: str, folder: str) -> os.stat_result:
    try:
        return os.stat(path)
    except FileNotFoundError:
        raise CurateError(f"{path} (in input folder {folder}) does not exist") from None
    except OSError as exc:
        raise CurateError(f"{path} cannot be read: {exc.strerror or exc}") from None

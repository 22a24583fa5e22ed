"""Block and allow lists on disk: plain list files, and folders in the UT1 layout.

A plain list is one entry a line: a domain (`example.com`, which also names its
subdomains) or a URL substring (`example.com/ads/`). Blank lines and lines starting with
`#` are skipped; entries are lowercased, a domain's leading `*.` or `.` and trailing `.`
and a URL entry's `scheme://` are dropped.

A UT1 folder (Université Toulouse 1's blacklists, the lists FineWeb's URL filter reads)
holds one folder per category, each with a `domains` and/or a `urls` file. Its categories
are read in the order the recipe names them, or in name order; a category folder that is
a link to another (UT1 has `porn -> adult`-style aliases) is read once, under the first
name. Every folder and file read must lie inside the list's folder: a link leading out is
refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from curate.errors import CurateError, shown

KINDS = ("domains", "urls")
NAME = r"[A-Za-z0-9_.\-]+"
_NAME = re.compile(NAME)
_SCHEME = re.compile(r"^[a-z][a-z0-9+.\-]*://")


@dataclass(frozen=True)
class ListFile:
    """One file of entries: what the reason names it (`ut1/adult`, `mine`) and its kind."""

    label: str
    kind: str
    path: Path


def list_files(name: str, path: Path, kind: str, categories: list[str] | None) -> list[ListFile]:
    """The files a list names: the file itself, or a UT1 folder's category files."""
    if path.is_file():
        return [ListFile(name, kind, path)]
    if not path.is_dir():
        raise CurateError(f"url_filter: list {name}: no file or folder {shown(path)}")
    return _ut1_files(name, path, categories)


def _ut1_files(name: str, root: Path, categories: list[str] | None) -> list[ListFile]:
    real_root = root.resolve()
    named = categories is not None
    chosen = categories if categories is not None else sorted(p.name for p in root.iterdir())
    out: list[ListFile] = []
    seen: set[Path] = set()
    for category in chosen:
        folder = root / category
        if not folder.is_dir():
            if named:
                raise CurateError(f"url_filter: list {name}: no category folder {shown(folder)}")
            continue
        real = _inside(folder, real_root, name)
        if real in seen:
            continue
        seen.add(real)
        if not _NAME.fullmatch(category):
            raise CurateError(
                f"url_filter: list {name}: category folder {shown(folder)} has a name a "
                f"reason cannot hold (letters, digits, '_', '.', '-' only)"
            )
        found = [ListFile(f"{name}/{category}", kind, _inside(folder / kind, real_root, name))
                 for kind in KINDS if (folder / kind).is_file()]  # fmt: skip
        if not found and named:
            raise CurateError(
                f"url_filter: list {name}: category folder {shown(folder)} has no "
                "'domains' or 'urls' file"
            )
        out += found
    if not out:
        raise CurateError(
            f"url_filter: list {name}: {shown(root)} holds no category folder with a "
            "'domains' or 'urls' file (the UT1 layout)"
        )
    return out


def _inside(path: Path, real_root: Path, name: str) -> Path:
    real = path.resolve()
    if not real.is_relative_to(real_root):
        raise CurateError(
            f"url_filter: list {name}: {shown(path)} leads outside the list's folder "
            f"({shown(real)}); refusing to read it"
        )
    return real


def read_entries(path: Path, kind: str) -> list[str]:
    """The entries of one list file, normalized (see the module's docstring)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CurateError(f"url_filter: cannot read {shown(path)}: {exc.strerror}") from None
    out = []
    for raw in data.decode("utf-8", errors="replace").splitlines():
        entry = raw.strip().lower()
        if not entry or entry.startswith("#"):
            continue
        entry = entry.removeprefix("*.").strip(".") if kind == "domains" else without_scheme(entry)
        if entry:
            out.append(entry)
    return out


def without_scheme(url: str) -> str:
    """A lowercased URL as URL entries are matched against it: no `scheme://`."""
    return _SCHEME.sub("", url)

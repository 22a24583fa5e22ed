"""The sources' shards, hard-linked into the mixture's folder: never a copy of token data.

`curate.shared_files`' rules, for files of other datasets: every name is resolved through
descriptors with O_NOFOLLOW; a source file is linked only when it is a regular file of its
listed size, of this process's owner and of the group and sealed mode the mixture's files
get (sealing the mixture must change nothing in its source), and when its bytes hash to
the sha256 its manifest lists (a damaged shard is not spread). Where a link cannot be made
(another filesystem, protected hard links, ...) the mixture is refused, by name and with the
way out: a mixture is an index over its sources' bytes, never a second copy of them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from curate.digests import sha256_fd
from curate.dirfd import Folder
from curate.errors import CurateError

_READ = os.O_RDONLY | os.O_NONBLOCK


@contextlib.contextmanager
def _walk(top: Folder, names: list[str], mode: int | None = None) -> Iterator[Folder]:
    """The folder `top/names...`, one name at a time, never through a link (created with
    `mode` when given)."""
    with contextlib.ExitStack() as opened:
        folder = top
        for name in names:
            folder = opened.enter_context(folder.folder(name, mode))
        yield folder


def link_shard(
    source: Path,
    path: str,
    record: dict[str, Any],
    out: Folder,
    target: str,
    modes: tuple[int, int],
) -> None:
    """Hard-link the shard `path` of the version folder `source` at `target` in `out` (the
    mixture being built). `modes`: the mixture's (folder mode, sealed file mode)."""
    dir_mode, sealed = modes
    parts, where = path.split("/"), f"{source}/{path}"
    dest = target.split("/")
    with Folder.open(source) as top, _walk(top, parts[:-1]) as src:
        fd = src.open_file(parts[-1], _READ)
        try:
            with _walk(out, dest[:-1], dir_mode) as into:
                _check(fd, where, record, into, sealed)
                if sha256_fd(fd) != record.get("sha256"):
                    raise CurateError(
                        f"{where} does not hold the bytes its manifest lists (damaged): "
                        "not mixed; `curate verify` on its version says more"
                    )
                try:
                    os.link(parts[-1], dest[-1], src_dir_fd=src.fd, dst_dir_fd=into.fd,
                            follow_symlinks=False)  # fmt: skip
                except OSError as exc:
                    raise CurateError(_unlinkable(where, into.path, exc)) from None
                made, held = into.lstat(dest[-1]), os.fstat(fd)
                if (made.st_dev, made.st_ino) != (held.st_dev, held.st_ino):
                    raise CurateError(f"{where} was replaced while it was linked: try again")
        finally:
            os.close(fd)


def _check(fd: int, where: str, record: dict[str, Any], into: Folder, sealed: int) -> None:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise CurateError(f"{where} is not a regular file: not mixed")
    if st.st_size != record.get("bytes"):
        raise CurateError(
            f"{where} has {st.st_size} bytes, its manifest lists {record.get('bytes')}: "
            "damaged, not mixed; `curate verify` on its version says more"
        )
    folder = os.fstat(into.fd)
    gid = folder.st_gid if folder.st_mode & stat.S_ISGID else os.getegid()
    if (st.st_uid, st.st_gid) != (os.geteuid(), gid):
        raise CurateError(
            f"{where} belongs to {st.st_uid}:{st.st_gid}, the mixture's files to "
            f"{os.geteuid()}:{gid}: a hard link would share another user's file; make the "
            "mixture as the user who built its sources"
        )
    if stat.S_IMODE(st.st_mode) != sealed:
        raise CurateError(
            f"{where} has mode {stat.S_IMODE(st.st_mode):04o}, the mixture's files get "
            f"{sealed:04o}: set the mixture's output.file_mode to its sources' "
            f"({stat.S_IMODE(st.st_mode) | 0o200:04o})"
        )


def _unlinkable(where: str, into: Path, exc: OSError) -> str:
    if exc.errno == errno.EXDEV:
        return (
            f"{where} is on another filesystem than {into}: a mixture hard-links its sources' "
            "shards, never copies them; put the mixture's output.root on their filesystem"
        )
    name = errno.errorcode.get(exc.errno or 0, "error")
    return f"{where} cannot be hard-linked into {into} ({name}: {exc.strerror}): not mixed"

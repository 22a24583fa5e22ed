"""curate.paths.inside: a path read from a file stays inside the folder it belongs to."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from curate.errors import CurateError
from curate.paths import escape, inside


def test_plain_relative_paths_stay_inside(tmp_path: Path) -> None:
    (tmp_path / "shards").mkdir()
    (tmp_path / "shards" / "a.arrow").write_bytes(b"x")
    (tmp_path / "shards" / "same.arrow").symlink_to("a.arrow")  # a link that stays inside
    for rel in ("shards/a.arrow", "shards/same.arrow", "missing/b.arrow", "./state.json"):
        assert escape(tmp_path, rel) is None, rel
    assert inside(tmp_path, "shards/a.arrow", source="m", field="f") == tmp_path / "shards/a.arrow"


@pytest.mark.parametrize(
    ("rel", "why"),
    [
        ("../x", "'..' part"),
        ("shards/../../x", "'..' part"),
        ("/etc/passwd", "absolute"),
        ("", "not a relative path"),
        (None, "not a relative path"),
        (3, "not a relative path"),
        ("a\0b", "NUL"),
        ("out/x.arrow", "symbolic link leading out"),
        ("out", "symbolic link leading out"),
    ],
)
def test_paths_that_leave_are_refused_naming_file_and_field(
    tmp_path: Path, rel: object, why: str
) -> None:
    folder = tmp_path / "v1"
    folder.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "x.arrow").write_bytes(b"x")
    os.symlink(tmp_path / "elsewhere", folder / "out")
    problem = escape(folder, rel)
    assert problem is not None and why in problem
    with pytest.raises(CurateError) as exc:
        inside(folder, rel, source=folder / "manifest.json", field="shards[2].path")
    assert str(exc.value).startswith(f"{folder / 'manifest.json'}: shards[2].path {rel!r} ")

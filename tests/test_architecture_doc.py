"""docs/architecture.md, the map a newcomer reads first, stays true to the package.

Every `curate/...` path it names must exist, so a module that moves fails here until the
page follows it; and every package under `curate/` must be named on it, so a new package
is placed on the map when it is made. Only names are checked, not what is said of them.
"""

from __future__ import annotations

import re

from conftest import REPO

PAGE = REPO / "docs" / "architecture.md"
_PATH = re.compile(r"curate/[A-Za-z0-9_./]*")


def named_paths(text: str) -> set[str]:
    """`curate/...` paths in the text, without the trailing slash or sentence punctuation."""
    return {m.group(0).rstrip("./") for m in _PATH.finditer(text)} - {"curate"}


def test_every_path_the_page_names_exists() -> None:
    text = PAGE.read_text(encoding="utf-8")
    paths = named_paths(text)
    assert len(paths) > 20, "the page should name where things live"
    missing = sorted(p for p in paths if not (REPO / p).exists())
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_every_package_is_on_the_page() -> None:
    text = PAGE.read_text(encoding="utf-8")
    packages = sorted(
        init.parent.relative_to(REPO).as_posix()
        for init in (REPO / "curate").rglob("__init__.py")
        if init.parent != REPO / "curate"
    )
    assert "curate/collective" in packages and "curate/engines/ray" in packages
    unnamed = [p for p in packages if f"{p}/" not in text]
    assert not unnamed, f"name these packages in docs/architecture.md: {unnamed}"


def test_readme_links_the_page() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "(docs/architecture.md)" in readme

"""README's annotated package tree stays true: every module of `curate/` is named in it.

The tree is how a new engineer finds their way; a module missing from it is a module
nobody reads about. Only names are checked (the notes beside them are for people).
"""

from __future__ import annotations

from conftest import REPO


def test_every_module_is_in_the_readme_tree() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    tree = readme[readme.index("## The package") : readme.index("## Development")]
    missing = [
        str(path.relative_to(REPO))
        for path in sorted((REPO / "curate").rglob("*.py"))
        if path.name != "__init__.py" and path.name not in tree
    ]
    assert not missing, f"add these modules to README.md's package tree: {missing}"

"""`curate report`: one self-contained HTML page showing what a run did to a dataset.

`report(version)` gathers a version's facts from its folder alone (`facts`), draws them
with matplotlib as inline SVG (`plots`, `svg`) and lays them out (`page`, `compare` for
two versions, `markup`). The page is deterministic (the same version gives the same
bytes), fetches nothing, and holds no document text.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from curate.errors import CurateError

if TYPE_CHECKING:
    from curate.version import Version


@dataclass(frozen=True)
class Report:
    """A rendered report: `html` is the whole page; a notebook displays the same content."""

    title: str
    body: str

    @property
    def html(self) -> str:
        from curate.report.markup import document

        return document(self.title, self.body)

    def _repr_html_(self) -> str:
        from curate.report.markup import fragment

        return fragment(self.body)

    def save(self, path: str | Path) -> Path:
        """Write the page to `path` (a new file, or one replaced whole), returning the path."""
        target = Path(path)
        temporary = target.with_name(f".{target.name}.tmp")
        try:
            temporary.write_text(self.html, encoding="utf-8")
            temporary.replace(target)
        except OSError as exc:
            temporary.unlink(missing_ok=True)
            raise CurateError(f"cannot write the report to {target}: {exc.strerror}") from exc
        return target


def report(version: Version, other: Version | None = None) -> Report:
    """The report of `version`, or the comparison of `version` (A) with `other` (B)."""
    from curate.report.facts import gather

    a = gather(version)
    if other is None:
        from curate.report.page import render

        return Report(f"curate report: {a.title}", render(a))
    from curate.report.compare import render as render_both

    b = gather(other)
    return Report(f"curate report: {a.title} vs {b.title}", render_both(a, b))

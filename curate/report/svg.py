"""Figures drawn with matplotlib and written as SVG that inlines into one HTML page.

matplotlib is an optional extra (`pip install 'curate[report]'`): a version is read and
trained on without it. The SVG is made to be byte-identical for the same figure (no
date, ids salted by the plot's name rather than a random value) and to sit beside other
plots in one page: matplotlib's generic group ids (`figure_1`, `patch_3`, which every
figure repeats) are dropped, so the only ids left are the referenced definitions, which
the salt keeps apart, and the ones the report gives its marks (`mark-...`,
`threshold-...`) so a test or a reader can find each bar and each threshold.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from curate.errors import CurateError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

EXTRA = "pip install 'curate[report]'"
COLORS = ("#4c72b0", "#dd8452")  # one per compared version: A, B
THRESHOLD = "#c44e52"
_STYLE: dict[str, Any] = {
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 10,
    "svg.fonttype": "none",  # text stays text: smaller, selectable, found by the page's search
    "font.sans-serif": ["DejaVu Sans", "Arial", "Helvetica"],  # named in every text's style
}
FONT = "'DejaVu Sans', 'Arial', 'Helvetica', sans-serif"
_COORDINATES = re.compile(r'\b(d|x|y|transform|points)="([^"]*)"')
_DECIMALS = re.compile(r"(\d\.\d)\d+")
_KEPT_ID = re.compile(r"(mark|threshold|plot)-")
_GROUP_ID = re.compile(r'<g id="([^"]*)">')


def matplotlib_or_fail() -> Any:
    """The matplotlib module, or an error naming the extra that brings it."""
    try:
        import matplotlib
        from matplotlib.backends import backend_svg  # noqa: F401  (fails here, not midway)
    except ImportError as exc:
        raise CurateError(f"curate report draws its plots with matplotlib: {EXTRA}") from exc
    return matplotlib


def draw(
    name: str,
    width: float,
    height: float,
    paint: Callable[[Figure], None],
    margins: dict[str, float] | None = None,
) -> str:
    """A figure of `width` x `height` inches painted by `paint` (outside pyplot's global
    state, in the report's style) as an `<svg>` element for inlining: no XML prolog, no
    metadata, its definitions' ids salted with `name` (unique in the page). `margins`
    (subplots_adjust's fractions) fix the axes' place; without them matplotlib's
    constrained layout fits the labels, at half the figure's drawing time."""
    matplotlib = matplotlib_or_fail()
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure

    buffer = io.StringIO()
    with matplotlib.rc_context(_STYLE | {"svg.hashsalt": name}):
        figure = Figure(figsize=(width, height), layout=None if margins else "constrained")
        if margins:
            figure.subplots_adjust(**margins)
        FigureCanvasSVG(figure)
        paint(figure)
        figure.patch.set_visible(False)  # backgrounds: the page's is white
        for axes in figure.axes:
            axes.patch.set_visible(False)
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"\s*<metadata>.*?</metadata>", "", svg, flags=re.DOTALL)
    svg = _GROUP_ID.sub(lambda m: m.group(0) if _KEPT_ID.match(m.group(1)) else "<g>", svg)
    svg = _COORDINATES.sub(_compact, svg)
    svg = re.sub(r">\s*\n\s*<", ">\n<", svg)  # indentation between elements
    svg = re.sub(r' transform="rotate\(-?0 [^)]*\)"', "", svg)  # a turn of nothing
    svg = svg.replace(f"font-family: {FONT}; ", "")  # the page's stylesheet names it once
    return svg.replace("<svg ", f'<svg class="plot-svg" id="plot-{name}" ', 1).strip()


def _compact(match: re.Match[str]) -> str:
    """Coordinates to a tenth of a point (a 96-dpi screen shows no finer), one line."""
    value = _DECIMALS.sub(r"\1", " ".join(match.group(2).split()))
    return f'{match.group(1)}="{value}"'

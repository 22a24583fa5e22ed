"""The funnel a notebook shows inside a `Version`'s compact summary.

A notebook must display a version whether or not the `report` extra is installed: without
matplotlib the summary keeps its table and says how to get the plot, rather than failing.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from curate.errors import CurateError
from curate.report.markup import esc

if TYPE_CHECKING:
    from curate.version import Version

log = logging.getLogger(__name__)


def funnel(version: Version) -> str:
    """The documents funnel as inline SVG, or a one-line note when it cannot be drawn."""
    from curate.report.svg import EXTRA, matplotlib_or_fail

    try:
        matplotlib_or_fail()
    except CurateError:
        return f"<p><i>{esc(EXTRA)} to see the funnel here</i></p>"
    from curate.report.facts import gather
    from curate.report.plots import funnel as draw_funnel

    svg = draw_funnel([gather(version)], f"funnel-{version.fingerprint[:12]}")
    return f'<div style="max-width:640px">{svg}</div>'

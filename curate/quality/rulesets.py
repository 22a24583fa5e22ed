"""The rule sets by the names a recipe uses, in the order the stage evaluates them.

The order is datatrove's FineWeb pipeline's (repetition, quality, C4, FineWeb), so the
first rule a removed document fails is the one datatrove would name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from curate.quality import c4, fineweb, gopher_quality, gopher_repetition
from curate.quality.docs import DocBatch
from curate.quality.params import (
    C4Params,
    FineWebParams,
    GopherQualityParams,
    GopherRepetitionParams,
)

Evaluate = Callable[[DocBatch, Any, np.ndarray, bool], list[tuple[str, np.ndarray]]]

RULE_SETS: dict[str, tuple[type, Evaluate]] = {
    "gopher_repetition": (GopherRepetitionParams, gopher_repetition.evaluate),
    "gopher_quality": (GopherQualityParams, gopher_quality.evaluate),
    "c4": (C4Params, c4.evaluate),
    "fineweb": (FineWebParams, fineweb.evaluate),
}

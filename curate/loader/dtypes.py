"""The `dtype=` a trainer asks the loader for, checked against the stored id types."""

from __future__ import annotations

from typing import Any

import numpy as np

from curate.errors import CurateError


def output_dtype(dtype: Any, stored: list[np.dtype[Any]]) -> np.dtype[Any] | None:
    """What `dtype=` asks for, as a numpy type; torch types are taken by name (`torch.int64`
    is int64), so torch need not be imported here. Refused when a stored value may not fit:
    a uint16 id above 127 would wrap in int8."""
    if dtype is None:
        return None
    name = str(dtype)
    try:
        out = np.dtype(name.removeprefix("torch.") if name.startswith("torch.") else dtype)
    except TypeError:
        out = None
    if out is None or out.kind not in "iuf":
        raise CurateError(f"dtype={dtype!r} is not a number type (int64, int32, float32, ...)")
    for kind in stored:
        if not np.can_cast(kind, out, "safe"):
            raise CurateError(
                f"dtype={dtype}: the stored {kind} values do not all fit in {out}; "
                "int64 (or int32) holds every id"
            )
    return out

"""Byte sizes as people write them in recipes ("256MB", "1.5GiB") and as they read them back."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, WithJsonSchema

_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}  # fmt: skip
_PATTERN = r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]i?[bB]|[bB])?\s*$"


def parse_size(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("must be a size such as 256MB or a number of bytes")
    if isinstance(value, int):
        if value <= 0:
            raise ValueError("must be a positive size")
        return value
    if isinstance(value, str):
        m = re.match(_PATTERN, value)
        if m:
            size = int(float(m.group(1)) * _UNITS[(m.group(2) or "").lower()])
            if size > 0:
                return size
    raise ValueError(f"must be a size such as 256MB, 1GiB or a number of bytes, not {value!r}")


def format_size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


ByteSize = Annotated[
    int,
    BeforeValidator(parse_size),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 1},
                {"type": "string", "pattern": _PATTERN},
            ],
            "description": "bytes, or a size such as 256MB or 1GiB",
        }
    ),
]

"""Versions of the software a dataset was made with, and the host it was made on."""

from __future__ import annotations

import os
import platform
import socket
from importlib import metadata
from typing import Any

CORE = ("curate", "pyarrow", "polars", "datasets", "numpy", "xxhash", "pydantic", "PyYAML")


def versions(extra: dict[str, str] | None = None) -> dict[str, str]:
    found = {"python": platform.python_version()}
    for dist in CORE:
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = "not installed"
    found.update(extra or {})
    return dict(sorted(found.items()))


def host() -> dict[str, Any]:
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
    }

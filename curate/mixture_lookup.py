"""What a mixture version draws from each source, for whoever must follow a document into it.

`curate forget --where` asks, for a version holding forgotten documents, which mixtures
include them: `curate.mixture_refs.drawn_from(version)` names the live mixtures drawing from
that version, and `mixture_sources(mixture)` says, per source, which of its rows the mixture
samples (row numbers of the source's shards of the drawn split, in its manifest's order, the
numbering `index.arrow` uses). A mixture includes a document only when one of those rows
holds it; rows a mixture never drew do not make it an affected mixture.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from curate.output.shards import read_stream
from curate.paths import inside
from curate.version import Version


@dataclass(frozen=True)
class DrawnSource:
    """One source of a mixture: the version it names and the rows of it the mixture samples."""

    label: str  # its name in mixture.yaml
    dataset: str
    version: str
    fingerprint: str
    path: Path  # the source version's folder when the mixture was made
    split: str | None
    shards: list[str]  # its shards as the source version lists them (relative to `path`)
    rows: np.ndarray  # the distinct rows sampled (int64, sorted), numbered across `shards`


def mixture_sources(mixture: Version) -> list[DrawnSource]:
    """Each source of a mixture version and the rows it samples (empty for a plain version)."""
    record = mixture.manifest.get("mixture")
    if record is None:
        return []
    index = read_stream(
        inside(mixture.path, record["index"]["path"], source=mixture.path / "manifest.json",
               field="mixture.index.path")
    )  # fmt: skip
    sources = index.column("source").to_numpy()
    rows = index.column("row").to_numpy().astype(np.int64)
    out = []
    for k, s in enumerate(record["sources"]):
        prefix = f"sources/{s['name']}/"
        out.append(
            DrawnSource(
                label=s["name"],
                dataset=s["dataset"],
                version=s["version"],
                fingerprint=s["fingerprint"],
                path=Path(s["path"]),
                split=s.get("split"),
                shards=[p.removeprefix(prefix) for p in s["shards"]],
                rows=np.unique(rows[sources == k]),
            )
        )
    return out

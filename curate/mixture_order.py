"""How the loader reads a mixture version (`curate.mix`): its samples in the index's order.

A mixture's folder holds its sources' shards (hard-linked) one source after another, so its
table (`Version.to_arrow`) is every source's rows in turn; `index.arrow` says which of them
are the mixture's samples, in interleaved order. `MixtureOrder` is that order as the loader's
`SampleOrder` (`curate.loader.stream`): each epoch of the stream is the mixture's samples
in index order (a source's repetitions are already in it, as `max_epochs` allowed), so every
prefix holds each source's share to one sample at any world size. Opening a mixture takes
its sources' read locks (`curate.version.hold_sources`), so `curate gc` leaves them while a
trainer reads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from curate.errors import CurateError
from curate.output.shards import read_stream
from curate.paths import inside

if TYPE_CHECKING:
    from curate.version import Version


class MixtureOrder:
    """The mixture's samples (row numbers of its table, or of a subset of it), every epoch."""

    def __init__(self, samples: np.ndarray) -> None:
        self.samples = samples
        self.samples_per_epoch = len(samples)

    def epoch_order(self, epoch: int) -> np.ndarray:
        return self.samples


def is_mixture(version: Version) -> bool:
    return version.manifest.get("mixture") is not None


def mixture_rows(version: Version) -> np.ndarray:
    """Row numbers of the version's table (its shards in manifest order), in sample order."""
    record = version.manifest["mixture"]
    index = read_stream(
        inside(
            version.path,
            record["index"]["path"],
            source=version.path / "manifest.json",
            field="mixture.index.path",
        )
    )
    rows_of = {s["path"]: int(s["rows"]) for s in version.manifest["shards"]}
    offsets = np.zeros(len(record["sources"]), dtype=np.int64)
    total = 0
    for k, source in enumerate(record["sources"]):
        offsets[k] = total
        total += sum(rows_of[p] for p in source["shards"])
    sources = index.column("source").to_numpy().astype(np.int64)
    rows = index.column("row").to_numpy() + offsets[sources]
    if len(rows) and (rows.min() < 0 or rows.max() >= total):
        raise CurateError(f"{version.path}: its index names rows its shards do not hold; "
                          "`curate verify` checks it")  # fmt: skip
    return rows

"""What `Version.to_dataset()` (and the loader's `Tokens.dataset()`) gives for a mixture.

A mixture's folder holds its sources' shards, not a `datasets` layout: its samples are the
rows `index.arrow` names, in interleaved order, a row repeated when its source is repeated.
So its dataset is the shards memory-mapped (from curate's view folder, where `datasets`
may write its caches, never in the read-only version) and concatenated in manifest order,
with the index as `datasets`' indices mapping (`select`): `len(ds)` is the mixture's
samples, `ds[i]` its i-th sample, and no token is copied.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from curate.mixture_order import mixture_rows

if TYPE_CHECKING:
    import datasets

    from curate.version import Version


def mixture_dataset(version: Version) -> datasets.Dataset:
    """The mixture's samples, in index order, as a memory-mapped `datasets.Dataset`."""
    import datasets

    view = version.view_folder()
    parts = [datasets.Dataset.from_file(str(view / s["path"])) for s in version.manifest["shards"]]
    whole = parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)
    return whole.select(mixture_rows(version))

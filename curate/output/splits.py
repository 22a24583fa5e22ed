"""Held-out splits decided by a seeded hash of each document's id, at shard writing.

A document's split is a function of its id and the seed only: `xxh3_64(id's UTF-8
bytes, seed) / 2**64`, compared with the requested fractions (validation first, then
test, the rest is train). So a document never changes split when others are added or
removed, nor between runs, machines or worker counts; and raising a fraction only moves
documents from train into that split, never out of it. The seed is recorded in the
resolved recipe (hence in the fingerprint) and in the manifest's `splits` record.

Splitting happens where the final rows are written (`curate.output.partition_output`), per
document and before packing, so a conversation or a pre-training document is wholly in
one split and packed rows never mix splits.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import xxhash
from pydantic import BaseModel, ConfigDict, Field, model_validator

HASH = "xxh3_64"
TRAIN = "train"
VALIDATION = "validation"
TEST = "test"


class SplitSpec(BaseModel):
    """The recipe's `split:` key: held-out fractions of the documents, by a hash of the id."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    validation: float = Field(gt=0, lt=1, description="Share of documents held out as validation.")
    test: float | None = Field(None, gt=0, lt=1, description="Share held out as test (optional).")
    seed: int = Field(
        0, ge=0, lt=2**64, description="Seed of the id hash: another seed, another split."
    )

    @model_validator(mode="after")
    def _leaves_train(self) -> SplitSpec:
        if self.validation + (self.test or 0) >= 1:
            raise ValueError("validation + test must leave a share for train (sum below 1)")
        return self

    def names(self) -> list[str]:
        """Split names in the order shards, manifests and `dataset_dict.json` list them."""
        return [TRAIN, VALIDATION] + ([TEST] if self.test is not None else [])

    def fractions(self) -> dict[str, float]:
        held = {VALIDATION: self.validation, **({TEST: self.test} if self.test else {})}
        return {TRAIN: 1 - sum(held.values()), **held}

    def assign(self, ids: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """Each id's split, as an index into `names()` (uint8)."""
        return assign(ids, self.seed, self.validation, self.test or 0.0)


def assign(
    ids: pa.Array | pa.ChunkedArray, seed: int, validation: float, test: float = 0.0
) -> np.ndarray:
    """0 (train), 1 (validation) or 2 (test) for each id.

    One xxh3_64 call per id (about 0.1 µs): the ids arrive as bytes objects from Arrow's
    binary view, with no Python string built.
    """
    raw = ids.cast(pa.binary()).to_pylist()
    digest = xxhash.xxh3_64_intdigest
    h = np.fromiter((digest(b, seed) for b in raw), np.uint64, len(raw))
    v_cut = np.uint64(min(int(validation * 2**64), 2**64 - 1))
    t_cut = np.uint64(min(int((validation + test) * 2**64), 2**64 - 1))
    out = np.zeros(len(h), np.uint8)
    out[h < t_cut] = 2
    out[h < v_cut] = 1
    return out

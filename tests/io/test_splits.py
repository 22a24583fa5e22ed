"""Held-out splits by a seeded hash of the id: stable, proportional, validated."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import xxhash

from curate.output.splits import SplitSpec


def ids(n: int, prefix: str = "doc-") -> pa.Array:
    return pa.array([f"{prefix}{i}" for i in range(n)])


def test_a_documents_split_does_not_change_when_others_are_added_or_removed() -> None:
    spec = SplitSpec(validation=0.1)
    base = spec.assign(ids(10_000))
    more = pa.concat_arrays([pa.array(["new-a", "new-b", "ünïcode-ид"]), ids(20_000)])
    grown = spec.assign(more)[3:]
    assert (grown[:10_000] == base).all()
    fewer = ids(10_000).filter(pa.array(np.arange(10_000) % 3 == 0))
    assert (spec.assign(fewer) == base[::3]).all()


def test_proportions_are_close_to_the_requested_ones() -> None:
    spec = SplitSpec(validation=0.01, test=0.05, seed=3)
    which = spec.assign(ids(10_000))
    counts = np.bincount(which, minlength=3)
    # binomial: sd of 1% of 10k is about 10, of 5% about 22; 4 sd either way
    assert abs(counts[1] - 100) <= 40 and abs(counts[2] - 500) <= 88
    assert counts.sum() == 10_000
    assert spec.names() == ["train", "validation", "test"]
    assert spec.fractions() == pytest.approx({"train": 0.94, "validation": 0.01, "test": 0.05})


def test_the_split_is_the_documented_hash_of_the_id() -> None:
    spec = SplitSpec(validation=0.2, seed=42)
    names = ["a", "b", "é", "doc-7", ""] + [f"x{i}" for i in range(200)]
    got = spec.assign(pa.array(names))
    for name, which in zip(names, got, strict=True):
        u = xxhash.xxh3_64_intdigest(name.encode(), 42) / 2**64
        assert which == (1 if u < 0.2 else 0)


def test_another_seed_gives_another_split_and_a_larger_fraction_only_adds() -> None:
    a = SplitSpec(validation=0.1, seed=0).assign(ids(5000))
    b = SplitSpec(validation=0.1, seed=1).assign(ids(5000))
    assert (a != b).sum() > 500
    wider = SplitSpec(validation=0.2, seed=0).assign(ids(5000))
    assert (wider[a == 1] == 1).all()  # validation documents stay in validation


def test_chunked_ids_and_slices_hash_alike() -> None:
    spec = SplitSpec(validation=0.3)
    whole = spec.assign(ids(1000))
    chunked = pa.chunked_array([ids(1000).slice(0, 400), ids(1000).slice(400)])
    assert (spec.assign(chunked) == whole).all()
    assert (spec.assign(ids(1000).slice(500)) == whole[500:]).all()


@pytest.mark.parametrize(
    "bad",
    [{"validation": 0}, {"validation": 1.0}, {"validation": 0.6, "test": 0.4}, {"valid": 0.1}],
)
def test_impossible_splits_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        SplitSpec(**bad)  # type: ignore[arg-type]

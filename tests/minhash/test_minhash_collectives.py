"""The collective operations MinHash decides with, on the local engine."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from curate.engines.local_collective import LocalSummaries
from curate.minhash.verify import estimate_scores
from curate.stages.base import ORDER


def rows(orders: list[int], keys: dict[str, list[int | None]], **extra: list) -> pa.Table:  # type: ignore[type-arg]
    data: dict[str, pa.Array] = {
        "id": pa.array([f"d{o}" for o in orders]),
        ORDER: pa.array(orders, pa.uint64()),
    }
    data |= {k: pa.array(v, pa.uint64()) for k, v in keys.items()}
    data |= {k: pa.array(v) for k, v in extra.items()}
    return pa.table(data)


def test_star_edges_from_each_buckets_first_row_without_repeats() -> None:
    # two tables (two partitions): arrival order must not matter, `_order` does
    late = rows([10, 11, 12], {"k1": [7, 8, None], "k2": [5, 5, 9]})
    early = rows([1, 2, 3], {"k1": [7, 7, 8], "k2": [5, 6, None]})
    edges = LocalSummaries.from_tables([late, early]).star_edges(["k1", "k2"])
    assert list(zip(*(edges.column(c).to_pylist() for c in "ab"), strict=True)) == [
        (1, 2),
        (1, 10),
        (1, 11),
        (3, 11),
    ]


def test_no_shared_keys_no_edges() -> None:
    s = LocalSummaries.from_tables([rows([1, 2], {"k": [1, 2]})])
    assert s.star_edges(["k"]).num_rows == 0
    assert LocalSummaries([]).star_edges(["k"]).num_rows == 0


def test_components_root_is_smallest_order_and_a_document_links_two_groups() -> None:
    edges = pa.table(
        {"a": pa.array([5, 1, 7, 9], pa.uint64()), "b": pa.array([6, 2, 8, 6], pa.uint64())}
    )
    comps = LocalSummaries([]).connected_components(edges)
    got = dict(zip(comps.column("node").to_pylist(), comps.column("root").to_pylist(), strict=True))
    assert got == {1: 1, 2: 1, 5: 5, 6: 5, 9: 5, 7: 7, 8: 7}
    edges = pa.table({"a": pa.array([2, 5], pa.uint64()), "b": pa.array([5, 9], pa.uint64())})
    comps = LocalSummaries([]).connected_components(edges)
    assert set(comps.column("root").to_pylist()) == {2}


def test_score_pairs_fetches_values_in_bounded_pieces() -> None:
    sigs = np.array([[1, 2, 3, 4], [1, 2, 3, 5], [9, 9, 9, 9], [1, 2, 0, 0]], np.uint32)
    table = rows([4, 1, 7, 2], {}, signature=list(sigs))
    table = table.set_column(
        table.schema.get_field_index("signature"),
        "signature",
        pa.FixedSizeListArray.from_arrays(pa.array(sigs.reshape(-1)), 4),
    )
    s = LocalSummaries.from_tables([table.slice(0, 2), table.slice(2)])
    s.first_pairs, s.value_budget = 1, 40  # one pair, then pieces of about 40 bytes
    pairs = pa.table({"a": pa.array([4, 1, 4], pa.uint64()), "b": pa.array([1, 7, 2], pa.uint64())})
    assert s.score_pairs(pairs, "signature", estimate_scores).tolist() == [0.75, 0.0, 0.5]


def test_lookup_sorted_by_order() -> None:
    s = LocalSummaries.from_tables([rows([3, 1], {}), rows([2], {})])
    got = s.lookup(pa.array([3, 2], pa.uint64()), ["id"])
    assert got.column(ORDER).to_pylist() == [2, 3]
    assert got.column("id").to_pylist() == ["d2", "d3"]

"""The collective operations MinHash decides with, on the local engine."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from curate.collective.components import COMPONENTS_SCHEMA
from curate.collective.local import LocalFrame, LocalSummaries, Spill
from curate.collective.piece_ops import EDGES_SCHEMA
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


def pairs(table: pa.Table) -> list[tuple[int, int]]:
    return list(zip(*(table.column(c).to_pylist() for c in "ab"), strict=True))


def frame(table: pa.Table) -> LocalFrame:
    return LocalFrame([table], 1, Spill(None, 1 << 30), 1 << 30)


def test_star_edges_from_each_buckets_first_row_without_repeats() -> None:
    # two tables (two partitions): arrival order must not matter, `_order` does
    late = rows([10, 11, 12], {"k1": [7, 8, None], "k2": [5, 5, 9]})
    early = rows([1, 2, 3], {"k1": [7, 7, 8], "k2": [5, 6, None]})
    edges = LocalSummaries.from_tables([late, early]).star_edges(["k1", "k2"])
    assert pairs(edges.collect(EDGES_SCHEMA)) == [(1, 2), (1, 10), (1, 11), (3, 11)]


def test_no_shared_keys_no_edges() -> None:
    s = LocalSummaries.from_tables([rows([1, 2], {"k": [1, 2]})])
    assert s.star_edges(["k"]).count() == 0
    assert LocalSummaries([]).star_edges(["k"]).count() == 0


def test_components_root_is_smallest_order_and_a_document_links_two_groups() -> None:
    edges = pa.table(
        {"a": pa.array([5, 1, 7, 9], pa.uint64()), "b": pa.array([6, 2, 8, 6], pa.uint64())}
    )
    comps = LocalSummaries([]).connected_components(frame(edges)).collect(COMPONENTS_SCHEMA)
    got = dict(zip(comps.column("node").to_pylist(), comps.column("root").to_pylist(), strict=True))
    assert got == {1: 1, 2: 1, 5: 5, 6: 5, 9: 5, 7: 7, 8: 7}
    edges = pa.table({"a": pa.array([2, 5], pa.uint64()), "b": pa.array([5, 9], pa.uint64())})
    comps = LocalSummaries([]).connected_components(frame(edges)).collect(COMPONENTS_SCHEMA)
    assert set(comps.column("root").to_pylist()) == {2}


def test_components_of_a_long_chain_in_few_rounds() -> None:
    """A path through 5,000 nodes in shuffled order: one component, rooted at its smallest
    node, found by large-star/small-star rounds over many small buckets."""
    perm = np.random.default_rng(3).permutation(5000).astype(np.uint64) + np.uint64(10)
    x, y = perm[:-1], perm[1:]
    edges = pa.table({"a": np.minimum(x, y), "b": np.maximum(x, y)})
    chain = LocalFrame([edges.slice(0, 2000), edges.slice(2000)], 1, Spill(None, 1 << 30), 20_000)
    comps = LocalSummaries([]).connected_components(chain).collect(COMPONENTS_SCHEMA)
    assert comps.column("node").to_pylist() == sorted(perm.tolist())
    assert set(comps.column("root").to_pylist()) == {10}


def test_score_pairs_reads_both_rows_of_each_pair() -> None:
    sigs = np.array([[1, 2, 3, 4], [1, 2, 3, 5], [9, 9, 9, 9], [1, 2, 0, 0]], np.uint32)
    table = rows([4, 1, 7, 2], {}, signature=list(sigs))
    table = table.set_column(
        table.schema.get_field_index("signature"),
        "signature",
        pa.FixedSizeListArray.from_arrays(pa.array(sigs.reshape(-1)), 4),
    )
    s = LocalSummaries.from_tables([table.slice(0, 2), table.slice(2)])
    s.budget = 40  # many buckets
    asked = pa.table({"a": pa.array([4, 1, 4], pa.uint64()), "b": pa.array([1, 7, 2], pa.uint64())})
    scored = s.score_pairs(frame(asked), "signature", estimate_scores).collect(
        pa.schema([*EDGES_SCHEMA, pa.field("score", pa.float64())])
    )
    got = {(a, b): v for a, b, v in zip(*(scored.column(c).to_pylist() for c in "ab"), scored.column("score").to_pylist(), strict=True)}  # fmt: skip
    assert got == {(4, 1): 0.75, (1, 7): 0.0, (4, 2): 0.5}


def test_join_attaches_columns_by_order() -> None:
    s = LocalSummaries.from_tables([rows([3, 1], {}), rows([2], {})])
    asked = pa.table({"b": pa.array([3, 2, 3], pa.uint64())})
    got = s.join(frame(asked), "b", ["id"], ["name"]).collect(
        pa.schema([pa.field("b", pa.uint64()), pa.field("name", pa.string())])
    )
    assert got.column("name").to_pylist() == ["d3", "d2", "d3"]

"""Connected components of an edge table that may not fit one process: large-star/small-star.

The algorithm of Kiveris et al., "Connected Components in MapReduce and Beyond" (SoCC
2014), as alternating rounds of `Frame.group` by node. Edges are undirected pairs (a, b),
a < b. Large-star: each node links every larger neighbour to the smallest node of its
neighbourhood (itself included). Small-star: each node links itself and its smaller
neighbours to the smallest of them. Each round shrinks labels towards each component's
smallest node; O(log n) rounds suffice, and near-duplicate graphs (already stars from
`star_edges`) take a few. A round changes nothing exactly when the graph is a forest of
stars centred on each component's smallest node, which every piece can tell for its own
nodes: a node that has a smaller neighbour and a larger one is not settled (large-star
would move it), nor is a node with two smaller neighbours (small-star would). The roots
then come back to the partitions of their nodes, sorted, as the barrier needs them.

Every step is a hash shuffle of at most twice the edges; no process holds more than a
bucket, and the driver holds only handles and two counts per round.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from curate.collective import piece_ops

if TYPE_CHECKING:
    from curate.collective.frame import Frame

NEW = "_new"
ROUNDS = 64
COMPONENTS_SCHEMA = pa.schema([pa.field("node", pa.uint64()), pa.field("root", pa.uint64())])
_STAR_SCHEMA = pa.schema([*piece_ops.EDGES_SCHEMA, pa.field(NEW, pa.bool_())])


def connected_components(edges: Frame) -> Frame:
    current = edges
    for _ in range(ROUNDS):
        large = current.group("u", large_star, prepare=(both_directions, ()))
        small = large.group("u", small_star, prepare=(smaller_side, ()))
        moved = large.fold(piece_ops.column_sum, NEW) + small.fold(piece_ops.column_sum, NEW)
        current = small
        if sum(moved) == 0:
            break
    else:
        raise RuntimeError(f"connected components did not settle in {ROUNDS} rounds")
    return current.by_partition("node", roots, prepare=(node_roots, ()))


def _uv(table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (u, v) rows, sorted by u then v."""
    u = table.column("u").to_numpy().astype(np.uint64)
    v = table.column("v").to_numpy().astype(np.uint64)
    return piece_ops.unique_pairs(u, v)


def _starts(u: np.ndarray) -> np.ndarray:
    return np.concatenate([[True], u[1:] != u[:-1]]) if len(u) else np.zeros(0, bool)


def both_directions(table: pa.Table) -> pa.Table:
    a, b = table.column("a"), table.column("b")
    return pa.table(
        {"u": pa.concat_arrays([_arr(a), _arr(b)]), "v": pa.concat_arrays([_arr(b), _arr(a)])}
    )


def smaller_side(table: pa.Table) -> pa.Table:
    return pa.table({"u": _arr(table.column("b")), "v": _arr(table.column("a"))})


def _arr(col: pa.ChunkedArray | pa.Array) -> pa.Array:
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return col.cast(pa.uint64())


def large_star(table: pa.Table) -> pa.Table:
    """(m(u), v) for every neighbour v > u, m(u) the smallest of u and its neighbours."""
    if table.num_rows == 0:
        return _STAR_SCHEMA.empty_table()
    u, v = _uv(table)
    starts = _starts(u)
    group = np.cumsum(starts) - 1
    first_v = v[starts]  # sorted: each node's smallest neighbour comes first
    m = np.minimum(u[starts], first_v)[group]
    sel = np.flatnonzero(v > u)
    a, b, g = m[sel], v[sel], group[sel]
    # one flag per node that has a smaller neighbour (m < u) and a larger one (it is in sel)
    first = np.concatenate([[True], g[1:] != g[:-1]]) if len(g) else np.zeros(0, bool)
    new = first & (a < u[sel])
    return pa.table({"a": a, "b": b, NEW: new}, schema=_STAR_SCHEMA)


def small_star(table: pa.Table) -> pa.Table:
    """(m, x) for x in u and its smaller neighbours, m the smallest of them."""
    if table.num_rows == 0:
        return _STAR_SCHEMA.empty_table()
    u, v = _uv(table)  # every v < u here
    starts = _starts(u)
    group = np.cumsum(starts) - 1
    m_node = v[starts]
    m = m_node[group]
    others = v != m
    degree = np.diff(np.append(np.flatnonzero(starts), len(u)))
    a = np.concatenate([m[others], m_node])
    b = np.concatenate([v[others], u[starts]])
    new = np.concatenate([np.zeros(int(others.sum()), bool), degree > 1])
    return pa.table({"a": a, "b": b, NEW: new}, schema=_STAR_SCHEMA)


def node_roots(table: pa.Table) -> pa.Table:
    """For a settled forest of stars (root a, leaf b): (b, a) and (a, a)."""
    a, b = _arr(table.column("a")), _arr(table.column("b"))
    return pa.table({"node": pa.concat_arrays([b, a]), "root": pa.concat_arrays([a, a])})


def roots(table: pa.Table, _range: tuple[int, int], _side: None) -> pa.Table:
    if table.num_rows == 0:
        return COMPONENTS_SCHEMA.empty_table()
    node, root = piece_ops.unique_pairs(
        table.column("node").to_numpy().astype(np.uint64),
        table.column("root").to_numpy().astype(np.uint64),
    )
    first = _starts(node)
    return pa.table({"node": node[first], "root": root[first]}, schema=COMPONENTS_SCHEMA)

"""Weighted percentile edges of a score over the whole corpus, exact, from folds alone.

The rule (what the manifest and README state):

- Each document has a score s (float32) and a weight w >= 0 (its characters, 1, or a
  column's value); W is the total weight. For a cut at p percent, the **edge** is the
  lowest score e such that the documents scoring at most e weigh at least p * W / 100
  (the weighted lower quantile). Every edge is a score some document has.
- A document's **bucket** is the number of edges strictly below its score: bucket 0
  holds scores <= the first edge, bucket k scores above the k-th edge. Documents with
  equal scores always share a bucket (ties are never split by input order), so a bucket
  may hold more or less than its share, and a heavy tie can make two edges equal and a
  bucket between them empty. Documents of weight 0 (empty ones, by characters) move no
  edge but are bucketed by their score like any other. With no weight at all (no
  documents, or only empty ones) there are no edges and every document is in bucket 0.
- NaN scores count as the lowest score; -0.0 equals 0.0.

Nothing is sorted and no node holds every score: a float32 maps to a uint32 key in the
same order (`score_keys`), and two folds of fixed-size histograms find each edge's key
exactly, the first over the key's upper 16 bits (weights per bin), the second over the
lower 16 bits inside the bins that hold an edge. The figures are integer sums, so the
edges are the same whatever the pieces, the engine or the worker count.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa

from curate.collective.frame import Frame
from curate.io.batches import ID, ORDER
from curate.reasons import CLASSIFIER_BUCKET

KEY = "_score_key"
"""The summary's uint32 key of the judged score (`score_keys`)."""
WEIGHT = "_weight"
"""The summary's int64 weight of each document."""
HALF = 1 << 16

_SIGN = np.uint32(0x80000000)


def score_keys(scores: np.ndarray) -> np.ndarray:
    """uint32 keys in the order of the float32 scores (NaN lowest, -0.0 as 0.0)."""
    s = np.asarray(scores, np.float32)
    s = np.where(np.isnan(s), np.float32(-np.inf), s) + np.float32(0.0)  # -0.0 + 0.0 = 0.0
    bits = s.astype(np.float32).view(np.uint32)
    return np.where(bits & _SIGN, ~bits, bits | _SIGN).astype(np.uint32)


def key_scores(keys: np.ndarray) -> np.ndarray:
    """The float32 scores of `score_keys` keys."""
    k = np.asarray(keys, np.uint32)
    bits = np.where(k & _SIGN, k & ~_SIGN, ~k).astype(np.uint32)
    return bits.view(np.float32)


Rule: TypeAlias = list[tuple[str, np.ndarray | None]]
"""How a row's bucket is found: for each key column, its edges (None: none); the bucket is
the highest of the buckets its keys fall in (one pair for a combined score; one per model
for `bucket_by: each`, Nemotron-CC's ensemble)."""


def key_column(i: int | None) -> str:
    """The summary's key column of model i's score (None: of the judged score)."""
    return KEY if i is None else f"{KEY}_{i}"


def _keys_weights(piece: pa.Table, key: str = KEY) -> tuple[np.ndarray, np.ndarray]:
    keys = piece.column(key).to_numpy().astype(np.uint32)
    weights = piece.column(WEIGHT).to_numpy().astype(np.int64)
    return keys, weights


def high_weights(piece: pa.Table, key: str) -> tuple[np.ndarray, np.ndarray, int]:
    """The piece's weight per upper-16-bit bin of the key (bins holding a document), and
    its documents."""
    if piece.num_rows == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), 0
    keys, weights = _keys_weights(piece, key)
    sums, bins = _sums(keys >> 16, weights)
    return bins, sums, piece.num_rows


def _sums(bins: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The weight per 16-bit bin, for the bins holding a row (a document of weight 0 too).
    bincount adds in float64, exact while a bin weighs under 2^53."""
    sums = np.rint(np.bincount(bins, weights=weights, minlength=HALF)).astype(np.int64)
    present = np.flatnonzero(np.bincount(bins, minlength=HALF))
    return sums[present], present.astype(np.int64)


def low_weights(
    piece: pa.Table, highs: list[int], key: str
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """For each upper bin in `highs`: the piece's weight per lower-16-bit value in it."""
    out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    if piece.num_rows == 0:
        return out
    keys, weights = _keys_weights(piece, key)
    upper = keys >> 16
    for high in highs:
        inside = upper == high
        if not inside.any():
            continue
        sums, lows = _sums(keys[inside] & 0xFFFF, weights[inside])
        out[high] = (lows, sums)
    return out


def find_edges(
    rows: Frame, cuts: list[float], key: str = KEY
) -> tuple[np.ndarray | None, int, int]:
    """The edge keys of `cuts` (percent) over `rows` (`key`, `WEIGHT`), the total weight
    and the documents; None for the edges when nothing weighs anything."""
    hist = np.zeros(HALF, np.int64)
    documents = 0
    for bins, sums, n in rows.fold(high_weights, key):
        np.add.at(hist, bins, sums)
        documents += n
    total = int(hist.sum())
    if total == 0:
        return None, 0, documents
    targets = np.array([cut * total / 100 for cut in cuts], np.float64)
    through = np.cumsum(hist)  # weight of keys in bins 0..b
    highs = np.searchsorted(through, targets, side="left")  # first bin reaching the target
    wanted = sorted({int(h) for h in highs})
    lows: dict[int, np.ndarray] = {h: np.zeros(HALF, np.int64) for h in wanted}
    for found in rows.fold(low_weights, wanted, key):
        for high, (values, sums) in found.items():
            np.add.at(lows[high], values, sums)
    edges = np.zeros(len(cuts), np.uint32)
    for j, (high, target) in enumerate(zip(highs.tolist(), targets.tolist(), strict=True)):
        before = int(through[high] - hist[high])
        low = int(np.searchsorted(before + np.cumsum(lows[high]), target, side="left"))
        edges[j] = np.uint32((high << 16) | low)
    return edges, total, documents


def buckets_of(keys: np.ndarray, edges: np.ndarray | None) -> np.ndarray:
    """Each key's bucket: the number of edges strictly below it (0 with no edges)."""
    if edges is None:
        return np.zeros(len(keys), np.int32)
    return np.searchsorted(edges, np.asarray(keys, np.uint32), side="left").astype(np.int32)


def piece_buckets(piece: pa.Table, rule: Rule) -> np.ndarray:
    """Each row's bucket under `rule`: the highest of its keys' buckets."""
    found = [buckets_of(piece.column(key).to_numpy(), edges) for key, edges in rule]
    return np.maximum.reduce(found) if len(found) > 1 else found[0]


def bucket_counts(piece: pa.Table, rule: Rule, n: int) -> tuple[Any, Any]:
    """Documents and weight per bucket in this piece (n buckets)."""
    if piece.num_rows == 0:
        return np.zeros(n, np.int64), np.zeros(n, np.int64)
    weights = piece.column(WEIGHT).to_numpy().astype(np.int64)
    b = piece_buckets(piece, rule)
    docs = np.bincount(b, minlength=n).astype(np.int64)
    weight = np.rint(np.bincount(b, weights=weights, minlength=n)).astype(np.int64)
    return docs, weight


def decision_rows(
    piece: pa.Table,
    rule: Rule,
    min_bucket: int | None,
    bucket_column: str | None,
    carried: list[str],
    stage: str,
    schema: pa.Schema,
) -> pa.Table:
    """A decision row per document of this piece: dropped (reason `classifier_bucket:<b>`)
    below `min_bucket`, else kept with the `carried` columns (scores, labels) and its
    bucket, which the stage's `apply` adds to the document."""
    if piece.num_rows == 0:
        return schema.empty_table()
    n = piece.num_rows
    b = piece_buckets(piece, rule)
    reasons: list[str | None] = [None] * n
    if min_bucket is not None:
        for i in np.flatnonzero(b < min_bucket).tolist():
            reasons[i] = CLASSIFIER_BUCKET(bucket=int(b[i]))
    columns: dict[str, Any] = {
        ID: piece.column(ID),
        "stage": pa.array([stage] * n, pa.string()),
        "reason": pa.array(reasons, pa.string()),
        "duplicate_of": pa.nulls(n, pa.string()),
        "similarity": pa.nulls(n, pa.float32()),
        ORDER: piece.column(ORDER),
    }
    for name in carried:
        columns[name] = piece.column(name)
    if bucket_column is not None:
        columns[bucket_column] = pa.array(b, pa.int32())
    return pa.table(columns).cast(schema)

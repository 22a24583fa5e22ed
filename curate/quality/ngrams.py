"""Word n-grams of a batch as 64-bit keys, and the two Gopher n-gram statistics.

A word is hashed once (polars' hash: stable within one process, which is all a batch
needs; never persisted); an n-gram's key mixes its n word hashes. Two n-grams with the
same words get the same key; different ones collide with probability about 2^-64.

`top_ngram_chars`: per document, characters of the most frequent n-gram times its count,
ties going to the n-gram seen first (Counter.most_common's order).

`duplicated_ngram_chars`: Gopher's "duplicate n-gram character fraction" as datatrove
computes it: scan n-grams left to right; one already seen (among those the scan visited)
counts its characters and the scan jumps n words ahead, skipping the n-grams it
overlaps; a new one is remembered. The scan is sequential, so here it is solved as a
fixed point over the whole batch at once: candidates are n-grams seen before; the
positions the scan lands on are a chain (each the first candidate at least n words past
the previous), found by pointer doubling; if a skipped n-gram was the first of its kind
and the kind recurs later, "seen before" is recomputed over visited n-grams only, for the
documents concerned, until nothing changes.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from curate.quality.docs import Pieces

_MUL = np.uint64(0x9E3779B97F4A7C15)
_MIX = np.uint64(0xBF58476D1CE4E5B9)


def word_hashes(words: Pieces) -> np.ndarray:
    return words.values.hash(seed=20261202).to_numpy().astype(np.uint64)


def _mix(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> np.uint64(31))
    x = x * _MIX
    return x ^ (x >> np.uint64(29))


class NGrams:
    """Every n-gram start of a batch: its key (document mixed in), position and sizes."""

    def __init__(self, words: Pieces, hashes: np.ndarray, n: int, alive: np.ndarray) -> None:
        counts = words.counts
        starts = np.cumsum(counts) - counts
        pos_in_doc = np.arange(len(hashes), dtype=np.int64) - starts[words.doc]
        ok = (pos_in_doc + n <= counts[words.doc]) & alive[words.doc]
        self.n = n
        self.pos = np.flatnonzero(ok)  # global word index of each n-gram's first word
        self.doc = words.doc[self.pos]
        key = hashes[self.pos].copy()
        csum = np.concatenate([[0], np.cumsum(words.lengths)])
        for j in range(1, n):
            key = key * _MUL + hashes[self.pos + j]
        self.key = _mix(key ^ (self.doc.astype(np.uint64) * _MIX))
        self.chars = csum[self.pos + n] - csum[self.pos]  # the words' characters, no spaces


def top_ngram_chars(g: NGrams, n_docs: int) -> np.ndarray:
    """len(" ".join(top n-gram)) * its count, per document (0 where there is none)."""
    out = np.zeros(n_docs, dtype=np.int64)
    if len(g.pos) == 0:
        return out
    frame = pl.DataFrame({"d": g.doc, "k": g.key, "i": g.pos, "c": g.chars + (g.n - 1)})
    best = (
        frame.group_by("d", "k")
        .agg(pl.len().alias("count"), pl.col("i").min().alias("first"), pl.col("c").first())
        .sort(["d", "count", "first"], descending=[False, True, False])
        .unique("d", keep="first")
    )
    out[best["d"].to_numpy()] = best["count"].to_numpy() * best["c"].to_numpy()
    return out


def _chain(spots: np.ndarray, n: int) -> np.ndarray:
    """Mask of the sorted spots a scan lands on: the first, then the first >= previous + n."""
    m = len(spots)
    if m == 0:
        return np.zeros(0, dtype=bool)
    step = np.append(np.searchsorted(spots, spots + n, side="left"), m)
    rank = np.ones(m + 1, dtype=np.int64)
    rank[m] = 0
    levels = [step]
    p = step
    while (p[:m] != m).any():
        rank = rank + rank[p]
        p = p[p]
        levels.append(p)
    delta = rank[0] - rank[:m]
    cur = np.zeros(m, dtype=np.int64)
    reachable = delta >= 0
    for k, table in enumerate(levels):
        bit = reachable & (((delta >> k) & 1) == 1)
        cur[bit] = table[cur[bit]]
    return reachable & (cur == np.arange(m))


def _scan(g: NGrams, seen_before: np.ndarray, total_words: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions the scan counts as duplicates, and the words it skips."""
    idx = np.flatnonzero(seen_before)
    # documents are set n apart so that the chain enters each document at its first candidate
    spots = g.pos[idx] + g.doc[idx] * g.n
    hits = idx[_chain(spots, g.n)]
    skipped = np.zeros(total_words + g.n, dtype=bool)
    if len(hits):
        inner = (g.pos[hits][:, None] + np.arange(1, g.n)[None, :]).ravel()
        skipped[inner] = True
    return hits, skipped


def duplicated_ngram_chars(g: NGrams, n_docs: int, total_words: int) -> np.ndarray:
    """Characters in duplicated n-grams per document, by datatrove's greedy scan."""
    out = np.zeros(n_docs, dtype=np.int64)
    if len(g.pos) == 0:
        return out
    first = pl.Series(g.key).is_first_distinct().to_numpy()
    hits, skipped = _scan(g, ~first, total_words)
    # Consistent unless a skipped first occurrence's kind recurs later.
    lost = first & skipped[g.pos]
    if lost.any():
        recurs = np.isin(g.key, g.key[lost]) & ~first
        redo = np.unique(g.doc[recurs])
        if len(redo):
            keep = ~np.isin(g.doc[hits], redo)
            hits = np.concatenate([hits[keep], _exact(g, redo, total_words)])
    np.add.at(out, g.doc[hits], g.chars[hits])
    return out


def _exact(g: NGrams, docs: np.ndarray, total_words: int) -> np.ndarray:
    """The scan's duplicates for a few documents, iterating "seen before" to a fixed point."""
    sel = np.flatnonzero(np.isin(g.doc, docs))
    _, group = np.unique(g.key[sel], return_inverse=True)
    visited = np.ones(len(sel), dtype=bool)
    big = np.iinfo(np.int64).max
    sub_seen = np.zeros(len(g.pos), dtype=bool)
    for _ in range(len(sel) + 1):
        earliest = np.full(group.max() + 1, big, dtype=np.int64)
        np.minimum.at(earliest, group[visited], g.pos[sel][visited])
        sub_seen[:] = False
        sub_seen[sel] = earliest[group] < g.pos[sel]
        hits, skipped = _scan(g, sub_seen, total_words)
        now = ~skipped[g.pos[sel]]
        if (now == visited).all():
            return hits
        visited = now
    return hits

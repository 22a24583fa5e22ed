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

Memory: every array here has one entry per word of the batch, so a 60 MB document (about
12 million words) costs about 94 MB per 64-bit array. Indices and character counts are
held in 32 bits where the batch allows (`_index_type`), a window is kept within its
document by comparing document numbers (no per-word position array), and keys are mixed
in place, so that the whole quality filter on such a document stays well within the 2 GB
the hostile-input test allows (issue 14).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from curate.quality.docs import Pieces

_MUL = np.uint64(0x9E3779B97F4A7C15)
_MIX = np.uint64(0xBF58476D1CE4E5B9)


def word_hashes(words: Pieces) -> np.ndarray:
    return words.values.hash(seed=20261202).to_numpy().astype(np.uint64)


def _mix(x: np.ndarray) -> np.ndarray:
    """Mixes 64-bit keys in place (one temporary array at a time) and returns them."""
    x ^= x >> np.uint64(31)
    x *= _MIX
    x ^= x >> np.uint64(29)
    return x


def _index_type(largest: int) -> type[np.signedinteger[Any]]:
    """32-bit integers when every value fits, else 64-bit: half the memory per word."""
    return np.int32 if largest < 2**31 - 64 else np.int64


class Rolling:
    """Raw keys of every word window of a batch, n after n: each size costs one pass.

    Windows may straddle documents here; `NGrams` keeps those within one.
    """

    def __init__(self, words: Pieces) -> None:
        self.words = words
        self.hashes = word_hashes(words)
        self.n = 1
        self.raw = self.hashes  # never written in place: each size makes a new array
        self.csum = np.zeros(len(self.hashes) + 1, dtype=np.int64)
        np.cumsum(words.lengths, out=self.csum[1:])
        self.index = _index_type(max(len(self.hashes), int(self.csum[-1])))
        """The type of word indices and of an n-gram's characters in this batch."""

    def size(self, n: int) -> np.ndarray:
        if n < self.n:  # start again (sizes usually come in increasing order)
            self.n, self.raw = 1, self.hashes
        while self.n < n:
            raw = self.raw[:-1] * _MUL
            raw += self.hashes[self.n :]
            self.raw = raw
            self.n += 1
        return self.raw


class NGrams:
    """Every n-gram start of a batch: its key (document mixed in), position and sizes."""

    def __init__(self, rolling: Rolling, n: int, alive: np.ndarray) -> None:
        words = rolling.words
        raw = rolling.size(n)
        m = len(raw)
        doc = words.doc[:m]
        # words are in document order: a window lies within one document when its first
        # and last words are of the same one
        ok = doc == words.doc[n - 1 : n - 1 + m]
        ok &= alive[doc]
        self.n = n
        # global word index of each n-gram's first word
        self.pos = np.flatnonzero(ok).astype(rolling.index)
        del ok
        self.doc = doc[self.pos].astype(rolling.index)
        key = raw[self.pos]
        mixed_doc = self.doc.astype(np.uint64)
        mixed_doc *= _MIX
        key ^= mixed_doc
        del mixed_doc
        self.key = _mix(key)
        chars = rolling.csum[self.pos + n]
        chars -= rolling.csum[self.pos]
        self.chars = chars.astype(rolling.index)  # no spaces


def top_ngram_chars(g: NGrams, n_docs: int) -> np.ndarray:
    """len(" ".join(top n-gram)) * its count, per document (0 where there is none)."""
    out = np.zeros(n_docs, dtype=np.int64)
    if len(g.pos) == 0:
        return out
    # Where no n-gram repeats, the top one is the first (count 1); only repeated ones group.
    starts = np.flatnonzero(np.concatenate([[True], g.doc[1:] != g.doc[:-1]]))
    out[g.doc[starts]] = g.chars[starts].astype(np.int64) + (g.n - 1)
    repeated = pl.Series(g.key).is_duplicated().to_numpy()
    if not repeated.any():
        return out
    frame = pl.DataFrame(
        {"d": g.doc[repeated], "k": g.key[repeated], "i": g.pos[repeated], "c": g.chars[repeated]}
    )
    best = (
        frame.group_by("d", "k")
        .agg(pl.len().alias("count"), pl.col("i").min().alias("first"), pl.col("c").first())
        .sort(["d", "count", "first"], descending=[False, True, False])
        .unique("d", keep="first")
    )
    count = best["count"].to_numpy().astype(np.int64)
    out[best["d"].to_numpy()] = count * (best["c"].to_numpy().astype(np.int64) + (g.n - 1))
    return out


def _chain(spots: np.ndarray, n: int) -> np.ndarray:
    """Mask of the sorted spots a scan lands on: the first, then the first >= previous + n."""
    m = len(spots)
    if m == 0:
        return np.zeros(0, dtype=bool)
    index = _index_type(m + 1)  # one table per doubling is kept: 32 bits where they fit
    step = np.append(np.searchsorted(spots, spots + n, side="left"), m).astype(index)
    rank = np.ones(m + 1, dtype=index)
    rank[m] = 0
    levels = [step]
    p = step
    while (p[:m] != m).any():
        rank = rank + rank[p]
        p = p[p]
        levels.append(p)
    delta = rank[0] - rank[:m]
    cur = np.zeros(m, dtype=index)
    reachable = delta >= 0
    for k, table in enumerate(levels):
        bit = reachable & (((delta >> k) & 1) == 1)
        cur[bit] = table[cur[bit]]
    return reachable & (cur == np.arange(m))


def _scan(
    pos: np.ndarray, doc: np.ndarray, n: int, seen_before: np.ndarray, size: int
) -> tuple[np.ndarray, np.ndarray]:
    """Indices the scan counts as duplicates, and the mask of word positions it skips."""
    idx = np.flatnonzero(seen_before)
    # documents are set n apart so that the chain enters each document at its first candidate
    spots = pos[idx].astype(np.int64) + doc[idx].astype(np.int64) * n
    hits = idx[_chain(spots, n)]
    skipped = np.zeros(size + n, dtype=bool)
    if len(hits):
        inner = (pos[hits][:, None].astype(np.int64) + np.arange(1, n)[None, :]).ravel()
        skipped[inner] = True
    return hits, skipped


def duplicated_ngram_chars(
    g: NGrams, n_docs: int, total_words: int, limit: np.ndarray | None = None
) -> np.ndarray:
    """Characters in duplicated n-grams per document, by datatrove's greedy scan.

    Exact for every document when `limit` is None; with a per-document `limit` (the
    characters at which the rule fails), exact for documents whose first estimate is
    within a factor of two of it, and that estimate for the others (a very repetitive
    document can need many rounds, and is far from its limit either way).
    """
    out = np.zeros(n_docs, dtype=np.int64)
    if len(g.pos) == 0:
        return out
    first = pl.Series(g.key).is_first_distinct().to_numpy()
    hits, skipped = _scan(g.pos, g.doc, g.n, ~first, total_words)
    np.add.at(out, g.doc[hits], g.chars[hits])
    # Consistent unless a skipped first occurrence's kind recurs later.
    lost = first & skipped[g.pos]
    if lost.any():
        recurs = np.isin(g.key, g.key[lost]) & ~first
        redo = np.unique(g.doc[recurs])
        if limit is not None and len(redo):
            near = (out[redo] >= limit[redo] / 2) & (out[redo] <= limit[redo] * 2)
            redo = redo[near]
        if len(redo):
            exact = _exact(g, redo)
            out[redo] = 0
            np.add.at(out, g.doc[exact], g.chars[exact])
    return out


def _exact(g: NGrams, docs: np.ndarray) -> np.ndarray:
    """The scan's duplicates for a few documents, iterating "seen before" to a fixed point."""
    sel = np.flatnonzero(np.isin(g.doc, docs))
    pos, doc, key = g.pos[sel], g.doc[sel], g.key[sel]
    base = pos.min()
    pos = pos - base
    _, group = np.unique(key, return_inverse=True)
    visited = np.ones(len(sel), dtype=bool)
    big = np.iinfo(np.int64).max
    hits = np.zeros(0, np.int64)
    for _ in range(len(sel) + 1):  # each round fixes at least the first inconsistent n-gram
        earliest = np.full(group.max() + 1, big, dtype=np.int64)
        np.minimum.at(earliest, group[visited], pos[visited])
        hits, skipped = _scan(pos, doc, g.n, earliest[group] < pos, int(pos.max()) + 1)
        now = ~skipped[pos]
        if (now == visited).all():
            break
        visited = now
    return sel[hits]

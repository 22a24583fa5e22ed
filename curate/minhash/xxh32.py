"""xxHash32 (seed 0) of many byte ranges of one buffer at once, in numpy.

The result equals `xxhash.xxh32_intdigest(buffer[start:start + length])` for every
range. Ranges are hashed together, one numpy operation per step of the algorithm, so
the cost is a few dozen array operations per block of ranges rather than a Python call
per range. Lengths beyond `LONG` bytes are rare in text (a shingle of five very long
tokens) and are hashed by the xxhash library one by one, which bounds the number of
stripe rounds the vectorised path runs.
"""

from __future__ import annotations

import numpy as np
import xxhash

U32 = np.uint32
P1 = U32(0x9E3779B1)
P2 = U32(0x85EBCA77)
P3 = U32(0xC2B2AE3D)
P4 = U32(0x27D4EB2F)
P5 = U32(0x165667B1)
LONG = 16 * 8
PAD = 16
"""Zero bytes the buffer must carry past its end: a 4-byte read may start at the last byte."""

_V1 = U32((int(P1) + int(P2)) & 0xFFFFFFFF)
_V4 = U32(-int(P1) & 0xFFFFFFFF)


def words_view(buffer: np.ndarray) -> np.ndarray:
    """The little-endian uint32 starting at every byte of `buffer` (a strided view, no copy)."""
    return np.ndarray(shape=(len(buffer) - 3,), dtype="<u4", buffer=buffer, strides=(1,))


def _rotl(x: np.ndarray, r: int, tmp: np.ndarray) -> np.ndarray:
    np.right_shift(x, U32(32 - r), out=tmp)
    np.left_shift(x, U32(r), out=x)
    np.bitwise_or(x, tmp, out=x)
    return x


def _round(acc: np.ndarray, lane: np.ndarray, tmp: np.ndarray) -> None:
    np.multiply(lane, P2, out=lane)
    np.add(acc, lane, out=acc)
    _rotl(acc, 13, tmp)
    np.multiply(acc, P1, out=acc)


def xxh32_ranges(
    buffer: np.ndarray, starts: np.ndarray, lengths: np.ndarray, words: np.ndarray | None = None
) -> np.ndarray:
    """xxh32 of `buffer[s:s+n]` for each (s, n); `buffer` is uint8 with `PAD` zero bytes after
    the last byte any range covers."""
    n = len(starts)
    if words is None:
        words = words_view(buffer)
    lengths = lengths.astype(np.int64, copy=False)
    h = np.empty(n, U32)
    tmp = np.empty(n, U32)
    long_ = np.flatnonzero(lengths > LONG)
    nst = lengths >> 4
    if len(long_):
        nst[long_] = 0
    has = np.flatnonzero(nst)
    h.fill(P5)
    if len(has):
        st = starts[has]
        ns = nst[has]
        v = [np.full(len(has), x, U32) for x in (_V1, P2, U32(0), _V4)]
        t = np.empty(len(has), U32)
        for s in range(int(ns.max())):
            if s:
                active = ns > s
                if not active.all():  # ranges with no stripe left fold their accumulators
                    done = np.flatnonzero(~active)
                    _merge(h, has[done], [x[done] for x in v], t[: len(done)])
                    keep = np.flatnonzero(active)
                    has, st, ns = has[keep], st[keep], ns[keep]
                    v = [x[keep] for x in v]
                    t = t[: len(keep)]
            base = st + 16 * s
            for lane, acc in enumerate(v):
                _round(acc, words[base + 4 * lane], t)
        _merge(h, has, v, t)
    np.add(h, lengths.astype(U32), out=h)
    p = starts + (nst << 4)
    rem = lengths & 15
    for j in range(3):
        m = np.flatnonzero(rem >= 4 * (j + 1))
        if not len(m):
            break
        hm = h[m]
        x = words[p[m] + 4 * j]
        np.multiply(x, P3, out=x)
        np.add(hm, x, out=hm)
        _rotl(hm, 17, x)
        np.multiply(hm, P4, out=hm)
        h[m] = hm
    q = p + (rem & ~3)
    for j in range(3):
        m = np.flatnonzero((rem & 3) > j)
        if not len(m):
            break
        hm = h[m]
        x = buffer[q[m] + j].astype(U32)
        np.multiply(x, P5, out=x)
        np.add(hm, x, out=hm)
        _rotl(hm, 11, x)
        np.multiply(hm, P1, out=hm)
        h[m] = hm
    np.right_shift(h, U32(15), out=tmp)
    np.bitwise_xor(h, tmp, out=h)
    np.multiply(h, P2, out=h)
    np.right_shift(h, U32(13), out=tmp)
    np.bitwise_xor(h, tmp, out=h)
    np.multiply(h, P3, out=h)
    np.right_shift(h, U32(16), out=tmp)
    np.bitwise_xor(h, tmp, out=h)
    if len(long_):
        raw = buffer.data
        h[long_] = [
            xxhash.xxh32_intdigest(raw[s : s + k])
            for s, k in zip(starts[long_].tolist(), lengths[long_].tolist(), strict=True)
        ]
    return h


def _merge(h: np.ndarray, idx: np.ndarray, v: list[np.ndarray], t: np.ndarray) -> None:
    """Fold the four accumulators of ranges `idx` into their hash (the ≥16-byte prologue)."""
    acc = _rotl(v[0].copy(), 1, t)
    for x, r in ((v[1], 7), (v[2], 12), (v[3], 18)):
        y = _rotl(x.copy(), r, t)
        np.add(acc, y, out=acc)
    h[idx] = acc


def xxh32_word_runs(values: np.ndarray, count: int) -> np.ndarray:
    """xxh32 of the 4*count little-endian bytes of `values[i:i+count]`, for every i in
    `range(len(values) - count + 1)`: each run is `count` consecutive uint32 values, so
    every step is a slice of `values`, never a gather."""
    values = np.ascontiguousarray(values, dtype=U32)
    n = len(values) - count + 1
    if n <= 0:
        return np.zeros(0, U32)
    tmp = np.empty(n, U32)
    lane = np.empty(n, U32)
    stripes = count // 4
    if stripes:
        v = [np.full(n, x, U32) for x in (_V1, P2, U32(0), _V4)]
        for s in range(stripes):
            for j, acc in enumerate(v):
                k = 4 * s + j
                np.copyto(lane, values[k : k + n])
                _round(acc, lane, tmp)
        h = _rotl(v[0], 1, tmp)
        for x, r in ((v[1], 7), (v[2], 12), (v[3], 18)):
            np.add(h, _rotl(x, r, tmp), out=h)
    else:
        h = np.full(n, P5, U32)
    np.add(h, U32((4 * count) & 0xFFFFFFFF), out=h)
    for t in range(count % 4):
        k = 4 * stripes + t
        np.multiply(values[k : k + n], P3, out=lane)
        np.add(h, lane, out=h)
        _rotl(h, 17, tmp)
        np.multiply(h, P4, out=h)
    for shift, mult in ((15, P2), (13, P3)):
        np.right_shift(h, U32(shift), out=tmp)
        np.bitwise_xor(h, tmp, out=h)
        np.multiply(h, mult, out=h)
    np.right_shift(h, U32(16), out=tmp)
    np.bitwise_xor(h, tmp, out=h)
    return h

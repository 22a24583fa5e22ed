"""utf8_slices gives each string's exact bytes, for sliced, chunked and large arrays."""

from __future__ import annotations

import pyarrow as pa

from curate.arrow_text import utf8_slices

TEXTS = ["", "a", "é日本", "🙂 emoji", None, "last"]


def as_bytes(views: list[memoryview]) -> list[bytes]:
    return [bytes(v) for v in views]


def expected(texts: list[str | None]) -> list[bytes]:
    return [(t or "").encode() for t in texts]


def test_plain_sliced_chunked_and_large() -> None:
    arr = pa.array(TEXTS, pa.string())
    assert as_bytes(utf8_slices(arr)) == expected(TEXTS)
    assert as_bytes(utf8_slices(arr.slice(2, 3))) == expected(TEXTS[2:5])
    chunked = pa.chunked_array([arr.slice(0, 2), arr.slice(2)])
    assert as_bytes(utf8_slices(chunked)) == expected(TEXTS)
    assert as_bytes(utf8_slices(arr.cast(pa.large_string()))) == expected(TEXTS)
    assert utf8_slices(pa.array([], pa.string())) == []

"""Reaching a string column's UTF-8 bytes without building Python strings.

Hashing each document's bytes straight from the Arrow buffers skips a UTF-8 decode
into `str` and an encode back for every document, which is most of the cost of
per-document hashing.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def utf8_slices(array: pa.Array | pa.ChunkedArray) -> list[memoryview]:
    """Each string's UTF-8 bytes as a zero-copy memoryview (null strings give empty views)."""
    if isinstance(array, pa.ChunkedArray):
        return [view for chunk in array.chunks for view in utf8_slices(chunk)]
    if array.type == pa.large_string():
        offset_type: type[np.signedinteger] = np.int64
    elif array.type == pa.string():
        offset_type = np.int32
    else:
        array = array.cast(pa.string())
        offset_type = np.int32
    _, offsets_buf, data_buf = array.buffers()
    n = len(array)
    offsets = np.frombuffer(offsets_buf, dtype=offset_type)[array.offset : array.offset + n + 1]
    data = memoryview(data_buf) if data_buf is not None else memoryview(b"")
    bounds = offsets.tolist()
    return [data[bounds[i] : bounds[i + 1]] for i in range(n)]

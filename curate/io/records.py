"""Record-level helpers every reader shares: the on_error policy, derived ids, finding bad rows.

Readers convert whole batches in C and only fall back to per-record work when a
batch contains something bad; `split_good` is that fallback's search, halving a
failing range until the failing records are isolated, so its cost grows with the
number of bad records rather than the size of the batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from curate.errors import CurateError
from curate.io.batches import QuarantineRecord

ON_ERROR = ("quarantine", "fail")
FAIL_HINT = "the recipe's on_error: fail stops at the first bad record; quarantine sets them aside"

R = TypeVar("R")


@dataclass(frozen=True)
class FieldProblem:
    """A record lacking a field the recipe reads, or holding the wrong type in it: the reason
    and the names of the fields it did have (so a wrong setting can be told from bad lines)."""

    reason: str
    fields: tuple[str, ...]


class ErrorSink:
    """Collects one input's bad records, or stops the run at the first one when on_error is fail.

    Records are released per chunk in line order, so with on_error="fail" the error
    names the earliest bad record of the block being read, whichever check found it.
    JSONL readers number a partition's lines from 1; `lines_before` says how many lines
    come before the partition, and is asked (once: it may count them) only when a record
    is released, so a clean partition never counts the lines of its file.
    """

    def __init__(
        self, file: str, on_error: str, lines_before: Callable[[], int] | None = None
    ) -> None:
        if on_error not in ON_ERROR:
            raise ValueError(f"on_error must be one of {ON_ERROR}, not {on_error!r}")
        self.file = file
        self.fail = on_error == "fail"
        self._records: list[QuarantineRecord] = []
        self._lines_before = lines_before
        self._shift: int | None = None

    def bad(
        self,
        line: int | None,
        reason: str,
        nbytes: int = 0,
        file: str | None = None,
        fields: tuple[str, ...] | None = None,
        offset: int | None = None,
    ) -> None:
        """`fields`: for a missing field or a wrong type, the names of the fields the record had;
        `offset`: where its line starts (JSONL)."""
        record = QuarantineRecord(file or self.file, line, reason, nbytes, fields, offset)
        self._records.append(record)

    def noted(self) -> int:
        """How many records are held: a mark for `lines_since`."""
        return len(self._records)

    def lines_since(self, mark: int) -> set[int | None]:
        """Lines of the records noted since `mark` (as the reader numbered them)."""
        return {r.line for r in self._records[mark:]}

    def take(self) -> list[QuarantineRecord]:
        records = sorted(self._records, key=lambda r: -1 if r.line is None else r.line)
        self._records = []
        if records and self._lines_before is not None:
            if self._shift is None:
                self._shift = self._lines_before()
            if shift := self._shift:
                records = [replace(r, line=r.line + shift) if r.line else r for r in records]
        if self.fail and records:
            first = records[0]
            where = first.file if first.line is None else f"{first.file}:{first.line}"
            raise CurateError(f"{where}: {first.reason} ({FAIL_HINT})")
        return records


@dataclass(frozen=True)
class LineIds:
    """How JSONL records without an id field are named: `name@offset`, by where the line
    starts, in a plain file (the same however the file is split, and found without
    counting lines); `name:line` in a compressed one, which is read whole from its start."""

    name: str
    by_offset: bool

    @property
    def sep(self) -> str:
        return "@" if self.by_offset else ":"

    def one(self, number: int, offset: int) -> str:
        return f"{self.name}{self.sep}{offset if self.by_offset else number}"

    def array(self, numbers: Sequence[int], offsets: Callable[[], Sequence[int]]) -> pa.Array:
        """The ids of lines `numbers`; `offsets` gives where they start (asked only if needed)."""
        return derived_ids(self.name, self.sep, offsets() if self.by_offset else numbers)


def derived_ids(name: str, sep: str, numbers: Sequence[int]) -> pa.Array:
    """`name + sep + str(number)` for each number, built in C."""
    if isinstance(numbers, range) and numbers.step == 1:
        import numpy as np

        array = pa.array(np.arange(numbers.start, numbers.stop, dtype=np.int64))
    else:
        array = pa.array(numbers, pa.int64())
    return pc.binary_join_element_wise(
        pa.scalar(name + sep, pa.string()), pc.cast(array, pa.string()), ""
    )


def split_good(
    n: int, attempt: Callable[[int, int], R | None]
) -> tuple[list[tuple[int, int, R]], list[int]]:
    """Partition [0, n) into ranges where `attempt(lo, hi)` succeeds and single failing indices.

    `attempt` must fail on a range exactly when it fails on some index in it. Returns
    the successful ranges (in order, with their results) and the failing indices.
    """
    good: list[tuple[int, int, R]] = []
    bad: list[int] = []
    stack = [(0, n)]
    while stack:
        lo, hi = stack.pop()
        if hi <= lo:
            continue
        result = attempt(lo, hi)
        if result is not None:
            good.append((lo, hi, result))
        elif hi - lo == 1:
            bad.append(lo)
        else:
            mid = (lo + hi) // 2
            stack.append((mid, hi))
            stack.append((lo, mid))
    good.sort(key=lambda g: g[0])
    bad.sort()
    return good, bad


def kind(value: object) -> str:
    """A JSON value's type as messages name it, e.g. `text field 'text' is int, not a string`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, str):
        return "string"
    return type(value).__name__


_TYPE_NAMES = {"double": "float64", "float": "float32", "list<item: string>": "list<string>"}


def type_name(dtype: pa.DataType) -> str:
    """An Arrow type as the recipe spells it (float64, not double)."""
    return _TYPE_NAMES.get(str(dtype), str(dtype))


def empty_batch(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in schema], schema=schema)

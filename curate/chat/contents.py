"""Message contents of chat records as the flat string column text stages work on.

Text stages (normalize, the filters, the two dedups, decontaminate, pii) were written for
one string per document. On chat records they work on the contents of the messages
whose role the recipe chose, without flattening the conversation:

- `units` gives a stage the strings it works on, one per *unit*, with the batch row each
  belongs to: on plain text a unit is a document's text; on chat records it is one chosen
  message's content (rows hold their conversations' units in message order);
- `put_back` writes changed units back: the text column, or the message contents, with
  every other message, role and the structure (message count and order) untouched;
- `joined` gives one string per row, the chosen contents joined with a blank line: what
  the filters judge a conversation by;
- `serialized` and `labelled` give one string per row for the dedups: the chosen turns'
  roles and contents, exactly (length-prefixed), or as words tagged with their speaker
  (for shingling).

Vectorised with pyarrow and numpy over the batch's offsets, parent indices and masks:
never a Python loop per message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from curate.chat.spec import MESSAGES, ROLES

Role = Literal["system", "user", "assistant", "tool"]
Roles = list[Role]

JOIN = "\n\n"
"""Between the chosen contents of a conversation when a filter judges it as one text."""


def roles_field(default: str = "all") -> Any:
    """The `roles` parameter every text stage shares (chat records only)."""
    return Field(
        None,
        min_length=1,
        description=f"Chat records: roles whose message contents this stage works on "
        f"(default: {default}).",
    )


@dataclass(frozen=True)
class Units:
    """The strings a text stage works on in one batch, and where each one came from."""

    texts: pa.Array
    """One string per unit: a document's text, or a chosen message's content."""
    rows: np.ndarray
    """int64: the batch row (document or conversation) of each unit, non-decreasing."""
    num_rows: int
    chat: bool
    positions: np.ndarray | None = None
    """Chat: each unit's index among all the batch's messages (flattened)."""

    def counts(self) -> np.ndarray:
        """Units per row (0 for a conversation none of whose messages was chosen)."""
        return np.bincount(self.rows, minlength=self.num_rows).astype(np.int64)

    def any_per_row(self, flags: np.ndarray) -> np.ndarray:
        """Rows with at least one flagged unit."""
        out = np.zeros(self.num_rows, dtype=bool)
        out[self.rows[np.asarray(flags, dtype=bool)]] = True
        return out

    def per_row(self, values: pa.Array) -> pa.ListArray:
        """Unit values grouped into one list per row (units are in row order)."""
        offsets = np.zeros(self.num_rows + 1, np.int32)
        np.cumsum(self.counts(), out=offsets[1:])
        return pa.ListArray.from_arrays(pa.array(offsets), values)


def _array(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        return column.combine_chunks()
    return column


def units(
    batch: pa.RecordBatch, text_field: str, chat: bool, roles: Sequence[str] | None = None
) -> Units:
    """The units of a batch: its text column, or the contents of the messages of `roles`."""
    n = batch.num_rows
    if not chat:
        texts = _array(batch.column(batch.schema.get_field_index(text_field)))
        return Units(texts, np.arange(n, dtype=np.int64), n, chat=False)
    messages = _array(batch.column(batch.schema.get_field_index(MESSAGES)))
    flat = pc.list_flatten(messages)
    parents = pc.list_parent_indices(messages).to_numpy(zero_copy_only=False).astype(np.int64)
    contents = pc.struct_field(flat, "content")
    if roles is None or set(roles) >= set(ROLES):
        chosen = np.ones(len(flat), dtype=bool)
    else:
        role = pc.struct_field(flat, "role")
        chosen = pc.is_in(role, value_set=pa.array(list(roles), pa.string()))
        chosen = pc.fill_null(chosen, False).to_numpy(zero_copy_only=False)
    positions = np.flatnonzero(chosen)
    texts = contents if chosen.all() else pc.take(contents, pa.array(positions))
    return Units(_array(texts), parents[positions], n, chat=True, positions=positions)


def put_back(batch: pa.RecordBatch, text_field: str, u: Units, new: pa.Array) -> pa.RecordBatch:
    """The batch with its units replaced by `new` (same length and order as `u.texts`)."""
    new = _array(new)
    if not u.chat:
        i = batch.schema.get_field_index(text_field)
        field = batch.schema.field(i)
        return batch.set_column(i, field, new.cast(field.type))
    new = new.cast(pa.string())
    i = batch.schema.get_field_index(MESSAGES)
    messages = _array(batch.column(i))
    flat = pc.list_flatten(messages)
    contents = _array(pc.struct_field(flat, "content"))
    assert u.positions is not None
    source = np.arange(len(flat), dtype=np.int64)
    source[u.positions] = len(flat) + np.arange(len(u.positions), dtype=np.int64)
    merged = pc.take(pa.concat_arrays([contents.cast(pa.string()), new]), pa.array(source))
    struct_type = messages.type.value_type
    fields = [struct_type.field(k) for k in range(struct_type.num_fields)]
    children = [
        merged if f.name == "content" else _array(pc.struct_field(flat, f.name)) for f in fields
    ]
    offsets = messages.offsets.to_numpy(zero_copy_only=False)
    rebuilt = pa.ListArray.from_arrays(
        pa.array(offsets - offsets[0]),
        pa.StructArray.from_arrays(children, fields=fields),
        type=messages.type,
    )
    return batch.set_column(i, batch.schema.field(i), rebuilt)


def joined(u: Units, sep: str = JOIN) -> pa.Array:
    """One string per row: its units joined by `sep` (a conversation with none: "")."""
    if not u.chat:
        return u.texts
    return _array(pc.binary_join(u.per_row(pc.fill_null(u.texts, "")), sep))


def _roles(batch: pa.RecordBatch, u: Units) -> pa.Array:
    messages = _array(batch.column(batch.schema.get_field_index(MESSAGES)))
    role = _array(pc.struct_field(pc.list_flatten(messages), "role"))
    assert u.positions is not None
    return pc.take(role, pa.array(u.positions))


def serialized(batch: pa.RecordBatch, u: Units) -> pa.Array:
    """One string per conversation that exact dedup hashes: for each chosen message in
    order, `role US bytes US content` (US = U+001F, bytes = the content's UTF-8 length),
    the messages separated by RS (U+001E). The length prefix makes it unambiguous: two
    conversations serialize alike only when their chosen turns are equal, role and content."""
    texts = pc.fill_null(u.texts, "")
    size = pc.cast(pc.binary_length(texts), pa.string())
    each = pc.binary_join_element_wise(_roles(batch, u), size, texts, "\x1f")
    return _array(pc.binary_join(u.per_row(each), "\x1e"))


_WORD = (
    "([^\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}"
    "\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}]+)"
)
"""A word as `str.split()` finds one (a run of characters that are not `str.isspace()`)."""

SPEAKER = {"system": "s|", "user": "u|", "assistant": "a|", "tool": "t|"}


def labelled(batch: pa.RecordBatch, u: Units) -> pa.Array:
    """One string per conversation that MinHash shingles: its chosen contents joined by a
    blank line, every word tagged with its speaker (`u|word`, `a|word`), so that near-
    duplicates are conversations in which the same speakers say nearly the same things
    (a conversation with its roles swapped shares no shingle with the original)."""
    texts = _array(pc.fill_null(u.texts, ""))
    roles = _roles(batch, u)
    tagged = texts
    for role in pc.unique(roles).to_pylist():
        mine = pc.equal(roles, role)
        words = pc.replace_substring_regex(pc.filter(texts, mine), _WORD, SPEAKER[role] + "\\1")
        tagged = pc.replace_with_mask(tagged, mine, words)
    return _array(pc.binary_join(u.per_row(tagged), JOIN))

"""Unicode normalization and whitespace cleanup.

The Unicode form is applied with CPython's `unicodedata` (its quick check makes it
about 8x faster than polars' on mostly-ASCII text, measured). Its Unicode version is
recorded and enters the fingerprint, because another Unicode version normalizes
some code points differently and so makes a different dataset. The cleanup steps
use pyarrow's RE2 over the whole column with explicit ASCII character sets, so they
carry no second Unicode table.

Zero-width joiners and non-joiners are kept: emoji sequences and Persian and Indic
scripts need them. Runs of spaces are not collapsed by default because that
destroys code indentation.

On chat records the same cleaning applies to the content of each message of the chosen
`roles` (default: all), in place; the conversation's structure is untouched. A message
left empty by the cleaning (it held only control characters) would make an impossible
conversation, so that conversation is removed (reason `empty_message`), never repaired.
"""

from __future__ import annotations

import unicodedata
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from curate.arrow_text import utf8_slices
from curate.chat.contents import Roles, put_back, roles_field
from curate.io.batches import ID
from curate.stages.base import MapStage, StageParams, StageResult, rejected_table

# C0 and C1 controls except tab and newline (and carriage return, which `newlines` handles),
# DEL, and the invisible characters that only ever hide text: zero-width space, word joiner, BOM.
_CONTROL = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\x{200b}\x{2060}\x{feff}]+"
_ASCII_SPACE = " \t\n\r\x0b\x0c"


def _unicode_form(texts: pa.Array, form: Literal["NFC", "NFKC"]) -> pa.Array:
    """Apply a normalization form, touching only the texts that can change.

    ASCII text is invariant under every form, so only non-ASCII rows (found in C, at
    about 1 GB/s) are decoded into Python strings, straight from the Arrow buffer.
    `unicodedata.normalize` returns its argument itself when the text is already
    normalized, so an identity test finds the changed rows, and only then is the array
    rebuilt, by splicing the changed values between untouched slices.
    """
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    non_ascii = pc.invert(pc.fill_null(pc.string_is_ascii(texts), True))
    rows = np.flatnonzero(non_ascii.to_numpy(zero_copy_only=False))
    if len(rows) == 0:
        return texts
    views = utf8_slices(texts)
    changed: list[tuple[int, str]] = []
    for i in rows.tolist():
        before = str(views[i], "utf-8")
        after = unicodedata.normalize(form, before)
        if after is not before:
            changed.append((i, after))
    if not changed:
        return texts
    pieces, start = [], 0
    for i, value in changed:
        pieces += [texts.slice(start, i - start), pa.array([value], pa.string())]
        start = i + 1
    pieces.append(texts.slice(start))
    return pa.concat_arrays(pieces)


class NormalizeParams(StageParams):
    form: Literal["NFC", "NFKC"] | None = Field(
        "NFC", description="Unicode normalization form; null leaves code points as they are."
    )
    newlines: bool = Field(True, description="Turn CRLF and lone CR into LF.")
    remove_control: bool = Field(
        True,
        description="Remove control characters (except tab and newline), U+200B, U+2060, U+FEFF.",
    )
    collapse_spaces: bool = Field(
        False,
        description="Collapse runs of spaces and tabs into one space (breaks code indentation).",
    )
    max_newlines: int = Field(
        2, ge=0, description="Cap runs of consecutive newlines at this many; 0 leaves them."
    )
    strip: bool = Field(
        True,
        description="Trim whitespace at the end of every line and at both ends of the document.",
    )
    roles: Roles | None = roles_field()


class Normalize(MapStage[NormalizeParams]):
    """Canonical text before hashing, filtering or tokenizing: the same text, the same bytes."""

    name = "normalize"
    Params = NormalizeParams
    reads = ("text",)
    shapes = ("text", "chat")

    def software(self) -> dict[str, str]:
        return {"unicode": unicodedata.unidata_version, "pyarrow": pa.__version__}

    def describe(self) -> dict[str, object]:
        return {
            "unicode_version": unicodedata.unidata_version,
            "implementation": "cpython unicodedata",
        }

    def clean(self, texts: pa.Array) -> pa.Array:
        p = self.params
        out = texts
        if p.form is not None:
            out = _unicode_form(out, p.form)
        if p.newlines:
            out = pc.replace_substring(out, "\r\n", "\n")
            out = pc.replace_substring(out, "\r", "\n")
        if p.remove_control:
            out = pc.replace_substring_regex(out, _CONTROL, "")
        if p.collapse_spaces:
            out = pc.replace_substring_regex(out, r"[ \t]{2,}", " ")
        if p.strip:
            out = pc.replace_substring_regex(out, r"[ \t\x0b\x0c]+(\n|$)", r"\1")
            out = pc.utf8_trim(out, _ASCII_SPACE)
        if p.max_newlines:
            n = p.max_newlines
            out = pc.replace_substring_regex(out, f"\n{{{n + 1},}}", "\n" * n)
        return out

    def process(self, batch: pa.RecordBatch) -> StageResult:
        u = self.text_units(batch)
        after = self.clean(u.texts)
        differs = pc.fill_null(pc.not_equal(u.texts, after), False).to_numpy(zero_copy_only=False)
        if not differs.any():
            return StageResult(batch)
        rows = u.any_per_row(differs)
        out = put_back(batch, self.text_field, u, after)
        if not u.chat:
            return StageResult(out, changed=int(rows.sum()))
        empty = pc.equal(pc.binary_length(after), 0).to_numpy(zero_copy_only=False)
        emptied = u.any_per_row(differs & empty)
        if not emptied.any():
            return StageResult(out, changed=int(rows.sum()))
        gone = np.flatnonzero(emptied)
        removed = rejected_table(
            self.name, pc.take(batch.column(ID), pa.array(gone)), ["empty_message"] * len(gone)
        )
        changed = int((rows & ~emptied).sum())
        return StageResult(out.filter(pa.array(~emptied)), changed=changed, removed=removed)

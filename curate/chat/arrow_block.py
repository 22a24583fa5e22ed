"""Clean blocks of `messages`-shaped chat records read by Arrow's JSON reader, in C.

The per-line path (`curate.chat.reader`) parses each line with `json.loads` and maps it
in Python: about a tenth of a worker's time on the chat_template benchmark. For a block
whose every line is a well-formed conversation, Arrow builds the same `id` and
`messages` columns in C. A block it cannot take whole goes to the per-line path, which
says what is wrong with each line, so a record's fate and columns never depend on the
path. The fast path takes a block only when

- it is valid UTF-8 with no BOM, and every line starts with `{` (Arrow crashes on a
  top-level null, apache/arrow#47409), and no line names a key the messages column
  cannot carry (`shapes.UNCARRIED`, found by a byte search);
- Arrow reads it with an explicit schema (id, and messages as a list of role/content
  structs), one row per line; Arrow refuses what json.loads would make differently
  (duplicate keys, a number where a string is due, lone surrogates);
- every row has an id, at least one message, a known role (after the recipe's `roles`
  mapping) and string content in each, content not blank by Python's `str.strip`, at most
  one system message and only first, and an assistant turn (`shapes.check`).

Only `shape: messages` (or `auto`) with the default field and no kept fields is eligible;
tests/chat/test_arrow_block.py checks both paths give the same batches and quarantine.
"""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from curate.chat.shapes import UNCARRIED
from curate.chat.spec import MESSAGES, ROLES, ChatInput, messages_type
from curate.io.batches import FieldSpec
from curate.io.jsonl_scan import invalid_utf8_at
from curate.io.lines import BOM
from curate.io.records import LineIds

# what Python's str.isspace() calls whitespace (a test checks), so that `not content.strip()`
# is one RE2 match over the batch
PY_SPACE = (*range(0x09, 0x0E), *range(0x1C, 0x21), 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B),
            0x2028, 0x2029, 0x202F, 0x205F, 0x3000)  # fmt: skip
_BLANK = "\\A[" + "".join(f"\\x{{{c:x}}}" for c in PY_SPACE) + "]*\\z"
_UNCARRIED = [f'"{key}"'.encode() for key in sorted(UNCARRIED)]


class ArrowChatBlocks:
    """Reads blocks of one partition's lines; `parse` gives the batch or None (fall back)."""

    def __init__(self, ids: LineIds, fields: FieldSpec, chat: ChatInput) -> None:
        self.ids, self.fields = ids, fields
        self.roles = dict(chat.roles)
        id_types: list[pa.DataType | None] = [None]
        if fields.id_field is not None:
            id_types = [pa.string(), pa.int64()]  # the kind that worked last goes first
        self._id_types = id_types

    @staticmethod
    def eligible(fields: FieldSpec, chat: ChatInput | None) -> bool:
        return (
            chat is not None
            and chat.shape in ("messages", "auto")
            and chat.field in (None, MESSAGES)
            and not fields.keep_fields
            and fields.id_field != MESSAGES
        )

    def parse(
        self, lines: list[tuple[int, int, bytes]], schema: pa.Schema
    ) -> pa.RecordBatch | None:
        """The batch of these (number, offset, line) triples, as the per-line path would make
        it when it quarantines none of them; else None."""
        block = b"".join(raw if raw.endswith(b"\n") else raw + b"\n" for _, _, raw in lines)
        if BOM in block or invalid_utf8_at(block) is not None:
            return None
        if any(raw.lstrip(b" \t\r")[:1] != b"{" for _, _, raw in lines):
            return None
        if any(key in block for key in _UNCARRIED):
            return None
        table = self._read(block)
        if table is None or table.num_rows != len(lines):
            return None
        messages = table.column(MESSAGES).combine_chunks()
        if self.fields.id_field is None:
            ids = self.ids.array([n for n, _, _ in lines], lambda: [at for _, at, _ in lines])
        else:
            ids = table.column(self.fields.id_field).combine_chunks().cast(pa.string())
        if ids.null_count or messages.null_count:
            return None
        rebuilt = self._checked(messages)
        if rebuilt is None:
            return None
        return pa.RecordBatch.from_arrays([ids, rebuilt], schema=schema)

    def _read(self, block: bytes) -> pa.Table | None:
        for i, id_type in enumerate(self._id_types):
            columns = [pa.field(MESSAGES, messages_type())]
            if id_type is not None:
                columns.insert(0, pa.field(str(self.fields.id_field), id_type))
            options = pj.ParseOptions(explicit_schema=pa.schema(columns),
                                      unexpected_field_behavior="ignore")  # fmt: skip
            try:
                table = pj.read_json(
                    io.BytesIO(block), read_options=pj.ReadOptions(use_threads=False,
                    block_size=max(len(block), 1 << 16)), parse_options=options,
                )  # fmt: skip
            except pa.ArrowException:
                continue
            if i:
                self._id_types.insert(0, self._id_types.pop(i))
            return table
        return None

    def _checked(self, messages: pa.ListArray) -> pa.Array | None:
        """The messages column rebuilt from its roles (mapped) and contents, if every
        conversation passes `shapes.check`; else None."""
        n = len(messages)
        offsets = messages.offsets.to_numpy().astype(np.int64)
        offsets = offsets - offsets[0]
        lengths = np.diff(offsets)
        if (lengths == 0).any():  # no messages
            return None
        flat = messages.flatten()
        roles = pc.struct_field(flat, "role")
        contents = pc.struct_field(flat, "content")
        if roles.null_count or contents.null_count:
            return None
        if self.roles:  # one look-up per role, as shapes.to_messages maps it
            index = pc.index_in(roles, value_set=pa.array(list(self.roles)))
            mapped = pc.take(pa.array(list(self.roles.values())), index)
            roles = pc.if_else(pc.is_valid(index), mapped, roles)
        if not pc.all(pc.is_in(roles, value_set=pa.array(ROLES))).as_py():
            return None
        if pc.any(pc.match_substring_regex(contents, _BLANK)).as_py():
            return None
        system = pc.equal(roles, "system").to_numpy(zero_copy_only=False)
        first = np.zeros(len(roles), bool)
        first[offsets[:-1]] = True
        if (system & ~first).any():  # a system message not first (or a second one)
            return None
        assistant = pc.equal(roles, "assistant").to_numpy(zero_copy_only=False)
        parent = np.repeat(np.arange(n), lengths)
        if (np.bincount(parent[assistant], minlength=n) == 0).any():
            return None
        structs = pa.StructArray.from_arrays([roles, contents], ["role", "content"])
        starts = pa.array(offsets, pa.int32())
        return pa.ListArray.from_arrays(starts, structs, type=messages_type())

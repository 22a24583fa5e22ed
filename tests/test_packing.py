"""Packing tokens into fixed-length rows per partition: deterministic, lossless, explained."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from conftest import REPO, corpus, write_jsonl, write_recipe

import curate
from curate.errors import CurateError
from curate.output.packing import PackSpec, packing_for
from curate.stages.tokenize import Tokenize, TokenizeParams

TOKENIZER = str(REPO / "sample_data" / "tokenizer")


def doc_batches(
    lengths: list[int], split: list[int], seed: int = 0
) -> tuple[list[np.ndarray], list[pa.RecordBatch]]:
    rng = np.random.default_rng(seed)
    docs = [rng.integers(5, 1000, n).astype(np.uint16) for n in lengths]
    batches, i = [], 0
    for size in split:
        part = docs[i : i + size]
        offsets = np.concatenate([[0], np.cumsum([len(d) for d in part])]).astype(np.int32)
        values = np.concatenate(part) if part else np.empty(0, np.uint16)
        ids = pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))
        batches.append(
            pa.record_batch({"id": [f"d{j}" for j in range(i, i + size)], "input_ids": ids})
        )
        i += size
    return docs, batches


def documents_in(table: pa.Table) -> dict[str, list[int]]:
    """Each document's tokens put back together from packed rows (doc_ids, doc_starts and
    doc_offsets), checking that its pieces follow each other with no gap or overlap."""
    pieces: dict[str, list[tuple[int, list[int]]]] = {}
    columns = ("input_ids", "doc_ids", "doc_starts", "doc_offsets")
    for ids, docs, starts, offsets in zip(
        *(table.column(c).to_pylist() for c in columns), strict=True
    ):
        ends = [*starts[1:], len(ids)]
        for d, s, e, o in zip(docs, starts, ends, offsets, strict=True):
            pieces.setdefault(d, []).append((o, ids[s:e]))
    out = {}
    for d, parts in pieces.items():
        parts.sort(key=lambda p: p[0])
        tokens: list[int] = []
        for offset, part in parts:
            assert offset == len(tokens), (d, offset, len(tokens))
            tokens += part
        out[d] = tokens
    return out


def pack(batches: list[pa.RecordBatch], seq_len: int) -> tuple[pa.Table, int]:
    packer = PackSpec(seq_len, pa.uint16()).start("0123456789abcdef")
    out, ended = [], 0
    for b in batches:
        for rows, n in packer.feed(b):
            out.append(rows)
            ended += n
    for rows, n in packer.flush():
        out.append(rows)
        ended += n
    return pa.Table.from_batches(out, PackSpec(seq_len, pa.uint16()).output_schema()), ended


@pytest.mark.parametrize("seq_len", [1, 7, 64, 5000])
def test_rows_are_lossless_and_explain_their_documents(seq_len: int) -> None:
    lengths = [1, 3, 64, 200, 5, 1, 1, 700, 64, 63, 65, 2]
    docs, batches = doc_batches(lengths, [3, 0, 4, 5])
    if seq_len == 1:
        with pytest.raises(ValueError):
            TokenizeParams(source="x", pack={"seq_len": 1})  # type: ignore[arg-type]
        seq_len = 2
    table, ended = pack(batches, seq_len)
    rows = table.column("input_ids").to_pylist()
    assert ended == len(docs)
    assert sum(table.column("num_tokens").to_pylist()) == sum(lengths)  # nothing lost or repeated
    assert all(len(r) == seq_len for r in rows[:-1]) and 0 < len(rows[-1]) <= seq_len
    stream = np.concatenate(docs).tolist()
    assert [t for r in rows for t in r] == stream
    # each row names the documents it holds, where each begins, and the offset into each
    columns = [table.column(c).to_pylist() for c in ("doc_ids", "doc_starts", "doc_offsets")]
    for r, (ids, doc_ids, starts, skips) in enumerate(zip(rows, *columns, strict=True)):
        assert all(skip == 0 for skip in skips[1:])  # only the first began before the row
        for k, (d, s, skip) in enumerate(zip(doc_ids, starts, skips, strict=True)):
            doc = docs[int(d[1:])].tolist()
            end = starts[k + 1] if k + 1 < len(starts) else len(ids)
            assert ids[s:end] == doc[skip : skip + end - s], (r, k)
    assert table.column("id").to_pylist()[0] == "pack-0123456789abcdef-000000000"


def test_rows_do_not_depend_on_batching() -> None:
    lengths = list(np.random.default_rng(1).integers(1, 300, 200))
    a, _ = pack(doc_batches(lengths, [200])[1], 128)
    b, _ = pack(doc_batches(lengths, [1] * 200)[1], 128)
    c, _ = pack(doc_batches(lengths, [13, 0, 87, 50, 50])[1], 128)
    assert a.equals(b) and a.equals(c)


def test_packing_must_end_the_recipe() -> None:
    packing = Tokenize(TokenizeParams(source=TOKENIZER, keep_text=True, pack={"seq_len": 16}))  # type: ignore[arg-type]
    plain = Tokenize(TokenizeParams(source=TOKENIZER))
    assert packing_for([plain]) is None
    assert packing_for([plain, packing]) == PackSpec(16, pa.uint16())
    with pytest.raises(CurateError, match="must be the last stage"):
        packing_for([packing, plain])


def test_packed_run_counts_documents_and_tokens(tmp_path: Path) -> None:
    docs = corpus(300, dup_every=0)
    write_jsonl(tmp_path / "data" / "a.jsonl", docs[:170])
    write_jsonl(tmp_path / "data" / "b.jsonl", docs[170:])
    plain = curate.run(
        write_recipe(tmp_path, name="plain", stages=[{"tokenize": {"source": TOKENIZER}}])
    )
    recipe = write_recipe(tmp_path, name="packed", stages=[{"tokenize": {"source": TOKENIZER, "pack": {"seq_len": 64}}}],
                          engine={"workers": 1})  # fmt: skip
    packed = curate.run(recipe)
    m = packed.manifest
    assert m["counts"]["written"] == 300 and m["counts"]["read"] == 300
    assert m["tokens"] == plain.manifest["tokens"] == sum(s["tokens"] for s in m["shards"])
    assert sum(s["documents"] for s in m["shards"]) == 300
    # the two small partitions' (input files') full rows publish as one merged shard, then
    # the tail shard: their short last rows packed together, its own last row the only short one
    assert len(m["shards"]) == 2 and m["shards"][-1]["path"] == "shards/tail-00000.arrow"
    table = packed.to_arrow()
    lengths = table.column("num_tokens").to_pylist()
    assert set(lengths[:-1]) == {64} and 0 < lengths[-1] <= 64
    plain_rows = plain.to_arrow()
    want = dict(zip(plain_rows.column("id").to_pylist(),
                    plain_rows.column("input_ids").to_pylist(), strict=True))  # fmt: skip
    assert documents_in(table) == want  # every document's tokens, whole, in order
    assert table.schema.field("input_ids").type == pa.list_(pa.uint16())
    ds = packed.to_dataset()
    assert ds.features["input_ids"].feature.dtype == "uint16" and len(ds) == table.num_rows

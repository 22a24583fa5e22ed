"""Reading .jsonl.gz and .jsonl.zst: same records as plain, and a cut or damaged file never
passes for a complete one."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import zstandard

from curate.errors import CurateError
from curate.io.batches import FieldSpec, QuarantineRecord
from curate.io.inputs import discover_inputs
from curate.io.partitions import plan_partitions
from curate.reading import read_partition


def payload(n: int = 2000) -> bytes:
    docs = [{"id": f"d{i}", "text": f"document {i} " + "word " * (i % 40)} for i in range(n)]
    return b"\xef\xbb\xbf" + b"".join(json.dumps(d).encode() + b"\n" for d in docs)


def gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def zst(data: bytes) -> bytes:
    return zstandard.ZstdCompressor().compress(data)


def read(
    tmp_path: Path, name: str, blob: bytes, **kw: object
) -> tuple[list[dict], list[QuarantineRecord]]:
    (tmp_path / name).write_bytes(blob)
    parts = plan_partitions(discover_inputs([name], tmp_path), 1000)
    assert len(parts) == 1 or name.endswith(".jsonl")
    rows: list[dict] = []
    bad: list[QuarantineRecord] = []
    for part in parts:
        for chunk in read_partition(part, FieldSpec(), **kw):  # type: ignore[arg-type]
            rows += chunk.batch.to_pylist()
            bad += chunk.quarantined
    return rows, bad


def texts(rows: list[dict]) -> list[str]:
    return [r["text"] for r in rows]


@pytest.mark.parametrize(("suffix", "compress"), [(".gz", gz), (".zst", zst)])
def test_compressed_reads_like_plain(tmp_path: Path, suffix: str, compress: object) -> None:
    data = payload()
    plain, _ = read(tmp_path, "a.jsonl", data)
    rows, bad = read(tmp_path, f"b.jsonl{suffix}", compress(data), batch_bytes=4096)  # type: ignore[operator]
    assert bad == [] and len(rows) == 2000
    assert texts(rows) == texts(plain)
    assert [r["id"] for r in rows] == [f"b.jsonl{suffix}:{i + 1}" for i in range(2000)]


@pytest.mark.parametrize(("suffix", "compress"), [(".gz", gz), (".zst", zst)])
def test_concatenated_members_and_frames_are_one_stream(
    tmp_path: Path, suffix: str, compress: object
) -> None:
    data = payload(300)
    half = data.index(b"\n", len(data) // 2) + 1
    blob = compress(data[:half]) + compress(data[half:])  # type: ignore[operator]
    rows, bad = read(tmp_path, f"a.jsonl{suffix}", blob)
    assert bad == [] and len(rows) == 300


@pytest.mark.parametrize(
    ("suffix", "kind", "compress"), [(".gz", "gzip", gz), (".zst", "zstd", zst)]
)
def test_truncated_stream_keeps_complete_records_and_quarantines_the_tail(
    tmp_path: Path, suffix: str, kind: str, compress: object
) -> None:
    data = payload()
    blob = compress(data)  # type: ignore[operator]
    cut = blob[: len(blob) * 2 // 3]
    rows, bad = read(tmp_path, f"a.jsonl{suffix}", cut, batch_bytes=4096)
    assert 0 < len(rows) < 2000
    assert texts(rows) == texts(read(tmp_path, "p.jsonl", data)[0])[: len(rows)]
    assert len(bad) == 1
    q = bad[0]
    assert q.line == len(rows) + 1
    assert q.reason == (
        f"truncated {kind} stream: input ended after {len(cut)} compressed bytes; "
        "the unread tail was lost"
    )
    # the partial last line: what decompressed after the last complete line
    lines = data.split(b"\n")
    assert 0 < q.nbytes <= len(lines[len(rows)])


@pytest.mark.parametrize(("suffix", "compress"), [(".gz", gz), (".zst", zst)])
def test_truncated_stream_with_on_error_fail_names_the_file(
    tmp_path: Path, suffix: str, compress: object
) -> None:
    blob = compress(payload())  # type: ignore[operator]
    with pytest.raises(CurateError, match=rf"^a\.jsonl{suffix}:\d+: truncated"):
        read(tmp_path, f"a.jsonl{suffix}", blob[:-20], on_error="fail")


def test_gzip_cut_after_a_whole_member(tmp_path: Path) -> None:
    """A file that ends with a complete member but mid-way into the next is still truncated."""
    data = payload(100)
    blob = gz(data) + gz(data)[:10]
    rows, bad = read(tmp_path, "a.jsonl.gz", blob)
    assert len(rows) == 100 and len(bad) == 1 and bad[0].reason.startswith("truncated gzip")
    assert (bad[0].line, bad[0].nbytes) == (101, 0)


def test_corrupt_gzip_stream(tmp_path: Path) -> None:
    data = payload()
    blob = bytearray(gz(data))
    blob[len(blob) // 2 : len(blob) // 2 + 64] = bytes(64)
    rows, bad = read(tmp_path, "a.jsonl.gz", bytes(blob), batch_bytes=4096)
    assert len(rows) < 2000 and len(bad) >= 1
    assert bad[-1].reason.startswith("corrupt gzip stream near compressed byte ")
    assert "the rest of the file was not read" in bad[-1].reason


def test_corrupt_zstd_stream(tmp_path: Path) -> None:
    data = payload()
    cctx = zstandard.ZstdCompressor(write_checksum=True)
    blob = bytearray(cctx.compress(data))
    blob[-3] ^= 0xFF  # damage the checksum at the end of the frame
    _, bad = read(tmp_path, "a.jsonl.zst", bytes(blob))
    assert bad[-1].reason.startswith("corrupt zstd stream")


def test_trailing_garbage_after_gzip_is_corrupt(tmp_path: Path) -> None:
    rows, bad = read(tmp_path, "a.jsonl.gz", gz(payload(10)) + b"garbage!")
    assert len(rows) == 10 and bad[-1].reason.startswith("corrupt gzip stream")


def test_bad_records_inside_a_compressed_stream(tmp_path: Path) -> None:
    data = b'{"text": "a"}\n{"text": 1}\n\n{"text": "b"}\n'
    rows, bad = read(tmp_path, "a.jsonl.zst", zst(data))
    assert [r["id"] for r in rows] == ["a.jsonl.zst:1", "a.jsonl.zst:4"]
    assert [(q.line, q.reason) for q in bad] == [(2, "text field 'text' is int, not a string")]


def test_gzip_bomb_is_decoded_in_bounded_pieces(tmp_path: Path) -> None:
    line = json.dumps({"text": "z" * 1000}).encode() + b"\n"
    data = line * 40_000  # 40 MB of output from a small file
    gzipped = gzip.compress(data, compresslevel=9, mtime=0)
    assert len(gzipped) < 200_000  # one read of the file: output must be capped and drained
    rows, bad = read(tmp_path, "a.jsonl.gz", gzipped, batch_bytes=1 << 20)
    assert len(rows) == 40_000 and bad == []


@pytest.mark.parametrize("name", ["a.jsonl", "a.jsonl.zst"])
def test_a_line_much_longer_than_batch_bytes(tmp_path: Path, name: str) -> None:
    data = json.dumps({"text": "w" * 3_000_000}).encode() + b"\n" + b'{"text": "next"}\n'
    blob = zst(data) if name.endswith(".zst") else data
    rows, bad = read(tmp_path, name, blob, batch_bytes=1000)
    assert bad == [] and [len(r["text"]) for r in rows] == [3_000_000, 4]


def test_gzip_members_longer_than_one_capped_read_are_one_stream(tmp_path: Path) -> None:
    """A member whose output needs several capped reads (over 16 MiB) left its successor's
    bytes twice in the decoder's input, so `cat a.jsonl.gz b.jsonl.gz` with a 20 MB `a`
    read as a corrupt stream: the records of `b` were lost."""
    line = json.dumps({"text": "z" * 1000}).encode() + b"\n"
    data = line * 20_000  # 20 MB
    (tmp_path / "a.jsonl.gz").write_bytes(gz(data) + gz(data))
    [part] = plan_partitions(discover_inputs(["a.jsonl.gz"], tmp_path), 1000)
    rows, bad = 0, []
    for chunk in read_partition(part, FieldSpec(), batch_bytes=4 << 20):
        rows += chunk.batch.num_rows
        bad += chunk.quarantined
        assert rows <= 40_000  # it read the second member again and again, never ending
    assert bad == [] and rows == 40_000


def test_zstd_bomb_is_decoded_in_bounded_pieces(tmp_path: Path) -> None:
    """A zstd frame of 256 MiB of one byte is 8 KB: decoding it must yield it in bounded
    pieces (under 32 MiB), not whole."""
    from curate.io.compressed import decompressed

    path = tmp_path / "a.jsonl.zst"
    with open(path, "wb") as f, zstandard.ZstdCompressor().stream_writer(f) as w:
        for _ in range(16):
            w.write(b"z" * (16 << 20))
    assert path.stat().st_size < 100_000
    sizes = [len(piece) for piece in decompressed(str(path), "jsonl.zst")]
    assert sum(sizes) == 256 << 20 and max(sizes) < 32 << 20

"""Property tests: arbitrary Unicode never crashes normalize or the JSONL reader, and no
record is ever dropped silently (issue 6)."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curate.io.batches import FieldSpec
from curate.io.inputs import discover_inputs
from curate.io.partitions import plan_partitions
from curate.reading import read_partition
from curate.stages.normalize import Normalize, NormalizeParams

texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=200)
params = st.builds(
    NormalizeParams,
    form=st.sampled_from(["NFC", "NFKC", None]),
    newlines=st.booleans(),
    remove_control=st.booleans(),
    collapse_spaces=st.booleans(),
    max_newlines=st.integers(0, 3),
    strip=st.booleans(),
)


@given(st.lists(texts, max_size=30), params)
@settings(max_examples=300, deadline=None)
def test_normalize_keeps_every_row_and_is_idempotent(values: list[str], p: NormalizeParams) -> None:
    stage = Normalize(p)
    once = stage.clean(pa.array(values, pa.string()))
    assert len(once) == len(values)
    twice = stage.clean(once)
    assert twice.to_pylist() == once.to_pylist()
    if p.form is not None:
        assert all(unicodedata.is_normalized(p.form, t) for t in once.to_pylist())


@given(st.lists(texts, min_size=1, max_size=40))
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_jsonl_reader_returns_every_record_exactly(tmp_path: Path, values: list[str]) -> None:
    path = tmp_path / "p.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for i, v in enumerate(values):
            f.write(json.dumps({"id": str(i), "text": v}, ensure_ascii=bool(i % 2)) + "\n")
    files = discover_inputs([str(path)], tmp_path)
    got_ids, got_texts, quarantined = [], [], 0
    for part in plan_partitions(files, 64):  # tiny partitions: every boundary case
        for chunk in read_partition(part, FieldSpec("text", "id"), batch_bytes=128):
            got_ids += chunk.batch.column("id").to_pylist()
            got_texts += chunk.batch.column("text").to_pylist()
            quarantined += len(chunk.quarantined)
    assert quarantined == 0
    assert got_ids == [str(i) for i in range(len(values))]
    assert got_texts == values

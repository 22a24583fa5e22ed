"""The generic figures the engine takes of every stage call, on text and chat records."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from curate.chat.spec import messages_type
from curate.stage_params import StageParams
from curate.stages.base import MapStage, StageContext, StageCounts, StageResult
from curate.stages.chain import run_maps
from curate.stats.measure import document_lengths


class Shout(MapStage):
    """Doubles the text of documents whose id is even and drops id 3 (test stage)."""

    name = "shout"
    Params = StageParams

    def process(self, batch: pa.RecordBatch) -> StageResult:
        rows = batch.to_pylist()
        out = [
            {**r, "text": r["text"] * 2 if int(r["id"]) % 2 == 0 else r["text"][:1]}
            for r in rows
            if r["id"] != "3"
        ]
        changed = sum(1 for r in out)
        return StageResult(pa.RecordBatch.from_pylist(out, schema=batch.schema), changed=changed)


def batch(texts: list[str]) -> pa.RecordBatch:
    return pa.record_batch(
        {
            "id": [str(i) for i in range(len(texts))],
            "text": texts,
            "_order": pa.array(np.arange(len(texts), dtype=np.uint64)),
        }
    )


def test_characters_added_and_removed_are_summed_over_kept_documents() -> None:
    texts = ["ab", "héllo", "xyz", "dropped", "🙂🙂"]
    counts = StageCounts()
    run_maps(batch(texts), [Shout(StageParams())], [counts], [])
    sums = counts.stats.sums
    assert sums["characters_in"] == 2 + 5 + 3 + 7 + 2  # code points, not bytes
    # kept: 0 "abab" (+2), 1 "h" (-4), 2 "xyzxyz" (+3), 4 "🙂🙂🙂🙂" (+2); 3 dropped
    assert sums["characters_out"] == 4 + 1 + 6 + 4
    assert sums["characters_added"] == 7
    assert sums["characters_removed"] == 4
    assert counts.stats.histograms["length_in"].n == 5
    assert counts.stats.histograms["length_out"].n == 4
    assert StageCounts.from_dict(counts.to_dict()).to_dict() == counts.to_dict()


def test_statistics_off_collects_nothing() -> None:
    counts = StageCounts()
    stage = Shout(StageParams(), StageContext(stats=False))
    run_maps(batch(["ab", "cd"]), [stage], [counts], [])
    assert not counts.stats and "stats" not in counts.to_dict()


def test_chat_lengths_sum_every_message_content() -> None:
    messages = pa.array(
        [
            [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
            [],
            [{"role": "user", "content": None}, {"role": "assistant", "content": "é"}],
        ],
        messages_type(),
    )
    b = pa.record_batch({"messages": messages})
    assert document_lengths(b, "text", chat=True).tolist() == [7, 0, 1]
    assert document_lengths(pa.record_batch({"x": [1]}), "text", chat=False) is None

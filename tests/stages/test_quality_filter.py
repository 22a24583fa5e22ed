"""quality_filter as a stage: reasons in rejected/, parameters from a recipe, a manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
from conftest import write_jsonl, write_recipe

from curate.pipeline import Pipeline

GOOD = (
    "The committee met on Tuesday to review the proposal. Members agreed that the plan "
    "was sound, and that the budget would have to be checked with care before the vote.\n"
    "Several people raised questions about the schedule. The chair said that a revised "
    "timeline would be shared with everyone by the end of the week.\n"
    "After a short break, the discussion turned to hiring. It was decided to open two "
    "positions and to review the candidates together with the other teams.\n"
    "The meeting closed at noon. Notes will be circulated to the members of the group."
)
SHORT = "Too short to be a document."
REPEATED = "\n".join([GOOD.splitlines()[0]] * 5 + [GOOD])


def test_pipeline_removes_with_rule_names() -> None:
    result = (
        Pipeline()
        .add("quality_filter")
        .process(
            [
                {"id": "good", "text": GOOD},
                {"id": "short", "text": SHORT},
                {"id": "rep", "text": REPEATED},
            ]
        )
    )
    assert result.table.column("id").to_pylist() == ["good"]
    reasons = dict(
        zip(*(result.rejected.column(c).to_pylist() for c in ("id", "reason")), strict=True)
    )
    assert reasons == {
        "short": "gopher_repetition:top_2gram_char_frac",
        "rep": "gopher_repetition:dup_line_frac",
    }
    assert set(result.rejected.column("stage").to_pylist()) == {"quality_filter"}


def test_recipe_thresholds_and_switches(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", [
        {"id": "good", "text": GOOD}, {"id": "short", "text": SHORT}, {"id": "rep", "text": REPEATED},
    ])  # fmt: skip
    stages = [
        {"normalize": {}},
        {"quality_filter": {
            "gopher_repetition": False,
            "gopher_quality": {"min_doc_words": 3, "min_stop_words": 1},
            "c4": {"min_sentences": 1},
            "fineweb": None,
        }},
    ]  # fmt: skip
    from curate.runner import run

    version = run(write_recipe(tmp_path, stages=stages))
    kept = version.to_arrow().column("id").to_pylist()
    assert sorted(kept) == ["good", "rep", "short"]
    manifest = json.loads((Path(version.path) / "manifest.json").read_text())
    record = manifest["stages"][1]
    assert record["name"] == "quality_filter"
    assert record["params"]["gopher_repetition"] is None
    assert record["params"]["gopher_quality"]["min_doc_words"] == 3
    assert record["params"]["c4"]["max_word_length"] == 1000  # defaults recorded too


def test_empty_and_null_text_batches() -> None:
    from curate.stages.quality_filter import QualityFilter, QualityFilterParams

    stage = QualityFilter(QualityFilterParams())
    empty = pa.record_batch({"id": pa.array([], pa.string()), "text": pa.array([], pa.string())})
    assert stage.process(empty).batch.num_rows == 0
    batch = pa.record_batch({"id": ["a", "b"], "text": ["", GOOD]})
    result = stage.process(batch)
    assert result.batch.column("id").to_pylist() == ["b"]
    assert result.removed is not None
    assert result.removed.column("reason").to_pylist() == ["gopher_repetition:empty"]

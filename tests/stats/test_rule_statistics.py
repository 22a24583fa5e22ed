"""quality_filter's statistics: each rule's measured values, over the documents it judged
(those every earlier rule kept), with its threshold marked."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from curate.quality.params import FineWebParams, GopherQualityParams
from curate.stages.base import StageContext, StageCounts
from curate.stages.chain import run_maps
from curate.stages.filter_length import FilterLength, FilterLengthParams
from curate.stages.quality_filter import QualityFilter, QualityFilterParams

TEXTS = [
    "short one.",
    "The cat sat on the mat and then it went to the house of the dog for a while.",
    "# # # # hash hash # # words words words are here with the and of to it.",
    "line one\nline two\nline three\nline four\nline five\nline six",
    "",
    "This is a fine sentence. It has the words and of to it. It ends well.\n" * 3,
    "word " * 80,
]


def run(params: QualityFilterParams, stats: bool = True) -> tuple[StageCounts, list[str]]:
    stage = QualityFilter(params, StageContext(stats=stats))
    batch = pa.record_batch(
        {
            "id": [str(i) for i in range(len(TEXTS))],
            "text": TEXTS,
            "_order": pa.array(np.arange(len(TEXTS), dtype=np.uint64)),
        }
    )
    counts = StageCounts()
    run_maps(batch, [stage], [counts], [])
    return counts, stage.describe()["rules"]


def test_each_rule_judges_what_the_earlier_rules_kept() -> None:
    params = QualityFilterParams(
        gopher_quality=GopherQualityParams(min_doc_words=5, min_stop_words=1),
        c4=None,
        fineweb=FineWebParams(),
    )
    counts, rules = run(params)
    sums, hist = counts.stats.sums, counts.stats.histograms
    assert rules[0] == "gopher_repetition:empty" and "fineweb:max_newline_word_ratio" in rules
    evaluated = [sums[f"rule/{r}/evaluated"] for r in rules]
    assert evaluated[0] == len(TEXTS)
    for k in range(1, len(rules)):  # what rule k-1 removed, rule k never saw
        removed = counts.removed.get(f"{rules[k - 1]}", 0)
        assert evaluated[k] == evaluated[k - 1] - removed, rules[k - 1]
    assert evaluated[-1] - counts.removed.get(rules[-1], 0) == counts.docs_out
    words = hist["rule/gopher_quality:min_doc_words"]
    assert words.marks == {"min": 5.0} and words.scheme.kind == "log2"
    assert words.n == sums["rule/gopher_quality:min_doc_words/evaluated"]
    ratio = hist["rule/fineweb:max_newline_word_ratio"].to_dict()
    assert ratio["scheme"] == {"kind": "linear", "lo": 0.0, "hi": 1.0, "bins": 20}
    assert ratio["marks"] == {"max": 0.3}
    assert "rule/gopher_repetition:empty" not in hist  # a yes/no rule measures nothing


def test_no_statistics_when_off() -> None:
    counts, _ = run(QualityFilterParams(), stats=False)
    assert not counts.stats


def test_filter_length_bounds_judge_in_order() -> None:
    stage = FilterLength(FilterLengthParams(min_chars=5, min_words=3, max_words=20))
    assert stage.describe() == {"rules": ["too_few_chars", "too_few_words", "too_many_words"]}
    batch = pa.record_batch(
        {
            "id": [str(i) for i in range(len(TEXTS))],
            "text": TEXTS,
            "_order": pa.array(np.arange(len(TEXTS), dtype=np.uint64)),
        }
    )
    counts = StageCounts()
    run_maps(batch, [stage], [counts], [])
    sums, hist = counts.stats.sums, counts.stats.histograms
    assert sums["rule/too_few_chars/evaluated"] == len(TEXTS)
    assert sums["rule/too_few_words/evaluated"] == len(TEXTS) - counts.removed["too_few_chars"]
    assert hist["rule/too_few_words"].marks == {"min": 3.0}
    assert hist["rule/too_few_chars"].total == sum(len(t) for t in TEXTS)
    assert hist["rule/too_many_words"].unit == "words"

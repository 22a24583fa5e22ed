"""Stats merge like counters: any split of the values, merged in any order, gives the same."""

from __future__ import annotations

import json
import random

import numpy as np

from curate.stats import LOG2, UNIT, Stats


def stats_of(lengths: np.ndarray, scores: np.ndarray) -> Stats:
    s = Stats()
    s.count("characters_in", int(lengths.sum()))
    s.histogram("length_in", lengths, LOG2, "characters")
    s.histogram("rule/score", scores, UNIT, "score", min=0.4)
    return s


def test_any_split_in_any_order_merges_to_the_same_bytes() -> None:
    rng = np.random.default_rng(7)
    lengths = rng.integers(0, 100_000, 5000)
    scores = rng.random(5000)
    whole = json.dumps(stats_of(lengths, scores).to_dict(), sort_keys=True)
    for seed in range(5):
        cuts = sorted(random.Random(seed).sample(range(1, 5000), 12))
        parts = [
            stats_of(lengths[a:b], scores[a:b])
            for a, b in zip([0, *cuts], [*cuts, 5000], strict=True)
        ]
        random.Random(seed).shuffle(parts)
        merged = Stats()
        for p in parts:
            merged.add(Stats.from_dict(json.loads(json.dumps(p.to_dict()))))  # via JSON, as kept
        assert json.dumps(merged.to_dict(), sort_keys=True) == whole


def test_a_histogram_keeps_its_scheme_total_and_marks() -> None:
    s = stats_of(np.array([0, 3, 3, 1024]), np.array([0.1, 0.95, 1.0, 0.41]))
    data = s.to_dict()
    length = data["histograms"]["length_in"]
    assert length == {
        "scheme": {"kind": "log2"},
        "unit": "characters",
        "n": 4,
        "total": 1030,
        "bins": [[0, 1], [2, 2], [11, 1]],
    }
    score = data["histograms"]["rule/score"]
    assert score["scheme"] == {"kind": "linear", "lo": 0.0, "hi": 1.0, "bins": 20}
    assert score["marks"] == {"min": 0.4}
    assert "total" not in score  # floats are binned, never summed
    assert score["bins"] == [[2, 1], [8, 1], [19, 2]]
    assert Stats.from_dict(data).to_dict() == data
    assert not Stats() and Stats.from_dict(None).to_dict() == {}

"""Quality on planted near-duplicates, against an exact brute-force ground truth.

Clusters are connected components of pairs with exact Jaccard >= 0.8 over the stage's own
shingles; a duplicate is a clustered document other than the first. With default
parameters the stage must remove >= 95% of the duplicates, and >= 99% of what it removes
must have a true partner >= 0.7. Empty and whitespace-only documents are never removed.
"""

from __future__ import annotations

import pytest

from curate import Pipeline
from curate.minhash.planted import ground_truth, planted_corpus, score


@pytest.fixture(scope="module")
def planted():  # type: ignore[no-untyped-def]
    corpus = planted_corpus(300, seed=3)
    return corpus, ground_truth(corpus.docs)


@pytest.mark.parametrize("verify,min_recall", [("exact", 0.95), ("estimate", 0.9)])
def test_recall_and_precision_at_default_parameters(
    planted, verify: str, min_recall: float
) -> None:  # type: ignore[no-untyped-def]
    corpus, truth = planted
    rows = [{"id": d["id"], "text": d["text"]} for d in corpus.docs]
    result = Pipeline().add("minhash_dedup", verify=verify).process(rows)
    removed = set(result.rejected.column("id").to_pylist())
    got = score(truth, removed)
    print(f"\nverify={verify}: {got}")
    assert got["duplicates"] > 250
    assert got["recall"] >= min_recall
    assert got["precision"] >= 0.99
    tiny = {d["id"] for d in corpus.docs if d["kind"] == "tiny"}
    assert not removed & tiny
    # every removed document names a kept one, never itself
    kept = set(result.table.column("id").to_pylist())
    for row in result.rejected.to_pylist():
        assert row["duplicate_of"] in kept and row["reason"] == "near_duplicate"
        assert 0.0 <= row["similarity"] <= 1.0

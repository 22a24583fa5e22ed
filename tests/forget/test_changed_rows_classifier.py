"""Issue 20 pt 3 with classifier_buckets as the barrier that changes rows (it drops the
documents of the low buckets and adds a bucket column) before exact_dedup: the pass after
it rebuilds a forgotten document from the input, applying classifier_buckets' decision in
memory (`curate.excluded_rows`), so a later run stages nothing of its text, and its
version equals a fresh build with the same exclusions. test_changed_rows covers the same
path after line_dedup and minhash_dedup's `cluster_size`; this one needs a fastText model,
trained here with Debian's `fasttext` command."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from conftest import REPO
from test_between_barriers import recipe_in
from test_changed_rows import lines_for_cluster_size, purged_then_killed, rebuilt
from test_end_to_end import texts_holding
from test_forget import ids_in, shard_sums

import curate
from curate.forget_command import Selection, forget
from curate.verify import verify

sys.path.insert(0, str(REPO / "tests" / "classify"))  # the classifier tests' helpers
from fasttext_cli import train
from labelled_docs import labelled_documents

NEEDLES = ["zq1@", "zq40@"]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train(labelled_documents()[::2], tmp_path_factory.mktemp("ft") / "model")


def stages(model: Path) -> list[dict[str, object]]:
    buckets = {"models": [{"model": str(model), "label": "web", "name": "q"}],
               "percentiles": [15], "min_bucket": 1, "bucket_column": "q_bucket"}  # fmt: skip
    return [{"normalize": {}}, {"classifier_buckets": buckets}, {"pii": {}}, {"exact_dedup": {}}]


def test_forgotten_after_classifier_buckets_is_rebuilt_not_staged(
    model: Path, tmp_path: Path
) -> None:
    recipe_stages = stages(model)
    lines_for_cluster_size(tmp_path)
    recipe = recipe_in(tmp_path, cache=True, stages=recipe_stages)
    before = curate.run(recipe)
    old = ids_in(before)
    # the buckets drop documents, d40 among them; d5 is kept and makes exact_dedup drop
    # d25 after pii
    assert len(old) < 59 and "d5" in old and "d40" not in old and "d25" not in old
    before.release()
    after = forget(recipe, Selection(match=re.compile(r"zq\d+@")), "r").version
    assert old - ids_in(after) == {"d5"}
    store = tmp_path / "out" / "t"
    exclusions = (store / ".forget" / "exclusions.json").read_text()
    fresh = rebuilt(tmp_path / "fresh", recipe_stages, lines_for_cluster_size, exclusions)
    assert shard_sums(fresh) == shard_sums(after)

    extra = purged_then_killed(tmp_path, recipe, NEEDLES)

    later = curate.run(recipe)
    assert texts_holding(store, NEEDLES) == []
    assert later.manifest["counts"]["removed"]["forget"] == {"forgotten": 2}
    again = rebuilt(tmp_path / "fresh2", recipe_stages, lines_for_cluster_size, exclusions, extra)
    assert shard_sums(later) == shard_sums(again)
    for version in (p for p in store.iterdir() if re.fullmatch(r"v\d+", p.name)):
        assert verify(version) == [], version

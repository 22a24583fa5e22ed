"""What a barrier learns while deciding reaches the manifest with its decision
(`decide_with_stats`), and a user's barrier that writes only `decide` keeps working,
including one that reports what it learned through `describe()` as before."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
from conftest import corpus, write_jsonl, write_recipe

import curate
from curate.collective.local import LocalSummaries
from curate.stages.base import DECISION_SCHEMA, ORDER
from curate.stages.exact_dedup import ExactDedup, ExactDedupParams

USER_MODULE = '''
from curate.engines.collective import Frame, Summaries
from curate.stages.exact_dedup import ExactDedup


class Counted(ExactDedup):
    """Returns what it learned with its decision."""

    name = "counted_dedup"

    def decide_with_stats(self, summaries: Summaries) -> tuple[Frame, dict[str, int]]:
        return self.decide(summaries), {"summarized": summaries.count()}


class Remembers(ExactDedup):
    """Keeps what it learned on itself for describe(), as barriers written before
    decide_with_stats do."""

    name = "remembering_dedup"

    def decide(self, summaries: Summaries) -> Frame:
        self.seen = summaries.count()
        return super().decide(summaries)

    def describe(self) -> dict[str, object]:
        return {**super().describe(), **({"seen": self.seen} if hasattr(self, "seen") else {})}
'''


def test_the_default_wraps_decide_and_learns_nothing_more() -> None:
    stage = ExactDedup(ExactDedupParams())
    batch = pa.record_batch(
        {"id": ["a", "b"], "text": ["same", "same"], ORDER: pa.array([0, 1], pa.uint64())}
    )
    decision, stats = stage.decide_with_stats(LocalSummaries.from_tables([stage.summarize(batch)]))
    assert decision.collect(DECISION_SCHEMA).column("id").to_pylist() == ["b"]
    assert stats == {}


def test_what_a_barrier_learns_reaches_the_manifest_either_way(tmp_path: Path) -> None:
    (tmp_path / "mylab_barriers.py").write_text(USER_MODULE)
    sys.path.insert(0, str(tmp_path))
    try:
        docs = corpus(40, dup_every=4)
        write_jsonl(tmp_path / "data" / "a.jsonl", docs)
        for workers in (1, 2):
            recipe = write_recipe(
                tmp_path,
                stages=[{"mylab_barriers:Counted": {}}, {"mylab_barriers:Remembers": {}}],
                output={"root": f"out-{workers}", "fsync": False},
                engine={"workers": workers},
            )
            version = curate.run(recipe)
            counted, remembers = (s["details"] for s in version.manifest["stages"])
            assert counted["hash"] == "xxh3_128 of UTF-8 text"  # describe(), as always
            assert counted["summarized"] == len(docs)
            assert counted["decision"]["dropped"] == version.counts["removed_total"] > 0
            assert remembers["seen"] == len(docs) - counted["decision"]["dropped"]
            assert remembers["decision"]["dropped"] == 0
    finally:
        sys.path.remove(str(tmp_path))

"""`curate inspect-filter` on line_dedup: the barrier run on the sample, documents changed
with before/after examples, the lines and characters removed, and the dropped ones."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from conftest import write_jsonl, write_recipe
from line_pages import NAV, pages
from line_reference import line_dedup

from curate.cli import main
from curate.inspect_filter import inspect_filter


def test_inspect_filter_runs_line_dedup_on_the_sample(tmp_path: Path) -> None:
    docs = pages(120)
    write_jsonl(tmp_path / "data" / "a.jsonl", docs)
    recipe = write_recipe(tmp_path, stages=[{"line_dedup": {}}])
    report = inspect_filter(recipe, "line_dedup", sample=120, examples=2)
    kept, dropped = line_dedup(docs)
    assert report.documents == 120
    assert report.first == {"all_repeated": len(dropped)}
    assert report.changed == sum(1 for d in docs for k in kept
                                 if k["id"] == d["id"] and k["text"] != d["text"])  # fmt: skip
    assert report.counters["lines_removed"] > 0
    assert len(report.changes) == 2
    doc_id, before, after = report.changes[0]
    assert after == next(k["text"] for k in kept if k["id"] == doc_id) != before
    out = CliRunner().invoke(
        main, ["inspect-filter", str(recipe), "--stage", "line_dedup", "--sample", "120"]
    )
    assert out.exit_code == 0, out.output
    assert "changes the text of" in out.output and "lines gone: " in out.output
    assert "all_repeated" in out.output and "the corpus holds more repeats" in out.output
    assert "chars_removed" in out.output and NAV[0] in out.output  # a removed line, shown

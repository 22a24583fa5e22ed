"""The run summary says what a user would otherwise dig out of the manifest."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import REPO, corpus, write_jsonl, write_recipe

import curate
from curate.summary import WIDTH, _packed, render_summary


def test_split_counts_are_shown(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(40, dup_every=0))
    version = curate.run(write_recipe(tmp_path, split={"validation": 0.25, "test": 0.25}))
    splits = version.manifest["splits"]["splits"]
    counts = ", ".join(f"{name} {s['documents']}" for name, s in splits.items())
    assert f"splits: {counts}" in render_summary(version).splitlines()


def test_quarantine_reasons_and_where_to_find_them(tmp_path: Path) -> None:
    records = [json.dumps(r) for r in corpus(5, dup_every=0)]
    records += ['{"id": "x", "text": 1}', '{"id": "y", "text": 2}', '{"id": "z"}']
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.jsonl").write_text("\n".join(records) + "\n")
    version = curate.run(write_recipe(tmp_path))
    last = render_summary(version).splitlines()[-1]
    assert last.startswith("quarantined: text field 'text' is int, not a string (2), ")
    assert "missing text field 'text' (1)" in last
    assert last.endswith(f"in {version.path / 'quarantine'}")


def test_a_run_that_writes_nothing_warns(tmp_path: Path) -> None:
    # (a run that quarantines every record fails instead: tests/test_quarantine_limits.py)
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(4, dup_every=0))
    version = curate.run(write_recipe(tmp_path, stages=[{"filter_length": {"min_words": 999}}]))
    assert version.counts["written"] == 0
    last = render_summary(version).splitlines()[-1]
    assert last.startswith("warning: nothing written: every document was removed by a stage")


def test_long_removal_lists_wrap_at_whole_reasons() -> None:
    reasons = [f"gopher_quality:rule_number_{i}: {i * 7:,}" for i in range(10)]
    lines = _packed(reasons, 54)
    assert len(lines) > 1 and all(len(line) <= 54 for line in lines)
    assert ", ".join(line.removesuffix(",") for line in lines) == ", ".join(reasons)
    assert _packed([], 54) == ["-"] and _packed(["x" * 80], 54) == ["x" * 80]
    for width in range(20, 60):  # the comma closing a line counts too
        assert all(len(line) <= width for line in _packed(["a" * 8] * 12, width))


def test_table_lines_stay_within_the_width(tmp_path: Path) -> None:
    inputs = [str(REPO / "sample_data" / "web" / "*.jsonl")]  # docstrings: many rules fire
    version = curate.run(write_recipe(tmp_path, inputs=inputs, stages=[{"quality_filter": {}}]))
    assert len(version.manifest["stages"][0]["removed"]) >= 5
    table = render_summary(version).splitlines()[2:-2]
    assert table and all(len(line) <= WIDTH for line in table)

"""What a notebook shows: tqdm bars for `curate.run`, and a `Pipeline` result's per-stage
counts (`__repr__`, `_repr_html_`). No Jupyter kernel is installed in the test environment,
so the display objects are exercised directly: the bars with tqdm's text class writing to a
buffer (`tqdm.auto` picks the widget class only inside a kernel), the HTML parsed back."""

from __future__ import annotations

import io
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import corpus, write_jsonl, write_recipe
from tqdm.std import tqdm

import curate
from curate import Pipeline
from curate.progress import TqdmProgress


def test_curate_run_draws_tqdm_bars_per_phase(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CURATE_PROGRESS_EVERY", "0.05")
    write_jsonl(tmp_path / "data" / "long.jsonl", corpus(300, dup_every=0))
    recipe = write_recipe(
        tmp_path, batch_size="2KB", partition_size="1GB",
        stages=[{"custom_stages:Slow": {"seconds": 0.02}}, {"exact_dedup": {}}],
    )  # fmt: skip
    out = io.StringIO()
    curate.run(recipe, progress=TqdmProgress(tqdm, file=out, mininterval=0, ascii=True))
    text = out.getvalue()
    frames = [f.strip() for f in text.replace("\n", "\r").split("\r") if f.strip()]
    first = [f for f in frames if f.startswith("pass 1:")]
    assert len(first) >= 3, frames  # the bar moved while the one partition ran
    running = [f for f in first if "B/s, 0/1 · " in f]  # counting input bytes
    assert len(running) >= 2 and running[-1] != running[0], first
    size = (tmp_path / "data" / "long.jsonl").stat().st_size
    assert all(f"/{size / 1000:.1f}k " in f for f in running), running
    assert first[-1].startswith("pass 1: 100%") and "1/1 · 300 docs" in first[-1], first
    second = [f for f in frames if f.startswith("pass 2:")]
    assert second[-1].startswith("pass 2: 100%") and "300/300" in second[-1], second
    deciding = [f for f in frames if f.startswith("exact_dedup: deciding:")]
    assert deciding[-1].startswith("exact_dedup: deciding: 100%") and "0 to drop" in deciding[-1]


class Cells(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self.rows[-1].append("")

    def handle_data(self, data: str) -> None:
        if self.tags and self.tags[-1] in ("td", "th"):
            self.rows[-1][-1] += data

    def handle_endtag(self, tag: str) -> None:
        self.tags.pop()


def test_a_pipeline_result_shows_its_per_stage_counts() -> None:
    p = Pipeline().add("normalize").add("filter_length", min_chars=3).add("exact_dedup")
    records = [{"text": t} for t in ["a", "hello there", "hello there", "<b>x & y</b>"]]
    result = p.process(records)

    text = repr(result)
    assert text.splitlines()[0] == "PipelineResult: 2 rows, 2 removed"
    table = [line.split() for line in text.splitlines()[1:]]
    assert table[0] == ["stage", "in", "out", "changed", "removed"]
    assert table[1] == ["0:normalize", "4", "4", "0"]
    assert table[2] == ["1:filter_length", "4", "3", "0", "too_few_chars:", "1"]
    assert table[3] == ["2:exact_dedup", "3", "2", "0", "duplicate:", "1"]

    html = result._repr_html_()
    cells = Cells()
    cells.feed(html)
    assert not cells.tags  # every tag closed
    assert cells.rows[0] == ["stage", "in", "out", "changed", "removed", "seconds"]
    assert [r[:5] for r in cells.rows[1:]] == [
        ["0:normalize", "4", "4", "0", ""],
        ["1:filter_length", "4", "3", "0", "too_few_chars: 1"],
        ["2:exact_dedup", "3", "2", "0", "duplicate: 1"],
    ]
    assert "<b>x" not in html  # no document text in the summary

    again = p.process(records)  # every stage's result kept from the first call
    assert "kept from an earlier process(): 0:normalize, 1:filter_length, 2:exact_dedup" in repr(
        again
    )

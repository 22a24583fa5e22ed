"""`curate report` writes one deterministic, self-contained HTML page from a version's
folder alone: the funnel and removals drawn (one mark per stage and per reason the
manifest holds), the tables beside them, everything escaped; two versions compare side
by side. The browser's view is tests/report/test_report_browser.py."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import report_marks as marks
from click.testing import CliRunner
from conftest import REPO
from report_planted import built

import curate
from curate.cli import main
from curate.report import report
from curate.report.facts import statistics

SVG_NAMESPACES = {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}


@pytest.fixture
def planted_versions(tmp_path_factory: pytest.TempPathFactory) -> tuple[curate.Version, ...]:
    return built(tmp_path_factory)


_PAGES: dict[str, str] = {}


def page_of(version: curate.Version) -> str:
    """The report of a version, made once per session (drawing it takes seconds)."""
    key = str(version.path)
    if key not in _PAGES:
        _PAGES[key] = report(version).html
    return _PAGES[key]


def count(page: str, kind: str, plot: str, series: int) -> int:
    return len(re.findall(rf'<g id="{kind}-{plot}-{series}-[^"]+">', page))


def test_one_mark_per_step_reason_and_bin(planted_versions) -> None:
    v1, _ = planted_versions
    page = page_of(v1)
    for (plot, series), n in marks.expected(v1, 0).items():
        assert count(page, "mark", plot, series) == n, plot
    assert count(page, "mark", "removed", 0) > 0
    assert count(page, "mark", "funnel-documents", 1) == 0
    tallies = marks.expected_tallies(page, [v1])
    pii = next(s for s in v1.manifest["stages"] if s["name"] == "pii")
    assert tallies[("tallies-0", 0)] == len(pii["counters"]) > 0  # values per entity type
    for (plot, series), n in tallies.items():
        assert count(page, "mark", plot, series) == n, plot
    drawn = marks.expected_histograms(page, [v1])
    for (plot, series), (bins, thresholds) in drawn.items():
        assert count(page, "mark", plot, series) == bins, plot
        assert count(page, "threshold", plot, series) == thresholds, plot
    stats = statistics(v1)
    assert stats is not None and len(drawn) > 3
    held = {(s["position"], n) for s in stats["stages"] for n in s.get("histograms", {})}
    shown = {where for _, series in marks.figures(page) for where in series.values()}
    generic = {(p, n) for p, n in held if n in ("length_in", "length_out", "tokens_out")}
    assert held - generic <= shown <= held  # every stage's own histogram is drawn
    assert (0, "length_in") in shown and ("tokens per document") in page
    ids = re.findall(r' id="([^"]+)"', page)
    assert len(ids) == len(set(ids)), "every id in the page is unique"
    for section in ("Funnel", "Stages", "Quarantined", "Inputs", "Tokenizer", "Software", "Recipe"):
        assert f"<h2>{section}" in page
    tokenizer = v1.manifest["stages"][-1]["details"]["tokenizer"]
    assert tokenizer["files"]["tokenizer.json"] in page  # the tokenizer's identity


def test_self_contained_and_deterministic(planted_versions, tmp_path: Path) -> None:
    v1, _ = planted_versions
    out = tmp_path / "a.html"
    result = CliRunner().invoke(main, ["report", str(v1.path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert f"wrote {out}" in result.output
    page = out.read_text()
    assert page == page_of(v1)  # byte-identical to the report drawn before
    assert page.startswith("<!DOCTYPE html>") and "default-src 'none'" in page
    assert "<script" not in page.lower()
    urls = set(re.findall(r"[a-z][a-z0-9+.-]*://[^\s\"'<>)]*", page))
    assert urls <= SVG_NAMESPACES, urls  # namespaces only: nothing a browser fetches
    references = re.findall(r'(?:href|src)="([^"]*)"', page)
    assert all(r.startswith("#") for r in references), references
    assert len(page) < 150_000


def test_reads_only_the_version_folder(planted_versions, tmp_path: Path) -> None:
    """A version copied away from its inputs (and its dataset folder) reports the same."""
    v1, _ = planted_versions
    copy = tmp_path / "elsewhere" / "v1"
    shutil.copytree(v1.path, copy)
    assert report(curate.open(copy)).html == page_of(v1)


def test_escapes_what_it_shows(tmp_path: Path) -> None:
    from conftest import corpus, write_jsonl, write_recipe

    name = "<b>&\"x'"
    write_jsonl(tmp_path / "data" / f"{name}.jsonl", corpus(12))
    version = curate.run(write_recipe(tmp_path, stages=[{"exact_dedup": {}}]))
    page = report(version).html
    assert name not in page
    assert "&lt;b&gt;&amp;&quot;x&#x27;.jsonl" in page


def test_compares_two_versions(planted_versions, tmp_path: Path) -> None:
    v1, v2 = planted_versions
    out = tmp_path / "cmp.html"
    result = CliRunner().invoke(main, ["report", str(v1.path), str(v2.path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    page = out.read_text()
    for version, series in ((v1, 0), (v2, 1)):
        for (plot, i), n in marks.expected(version, series).items():
            assert count(page, "mark", plot, i) == n, plot
    for (plot, series), n in marks.expected_tallies(page, [v1, v2]).items():
        assert count(page, "mark", plot, series) == n, plot
    for (plot, series), (bins, thresholds) in marks.expected_histograms(page, [v1, v2]).items():
        assert count(page, "mark", plot, series) == bins, plot
        assert count(page, "threshold", plot, series) == thresholds, plot
    w1, w2 = v1.counts["written"], v2.counts["written"]
    assert w2 < w1
    row = f'<tr><td>written</td><td class="n">{w1:,}</td><td class="n">{w2:,}</td><td class="n">{w2 - w1:+,}</td></tr>'
    assert row in page
    assert "stages[5].filter_length.min_chars: 40 -&gt; 80" in page  # what differs


def test_default_output_name(planted_versions, tmp_path: Path) -> None:
    v1, _ = planted_versions
    result = subprocess.run(
        [sys.executable, "-m", "curate.cli", "report", str(v1.path.parent)],
        cwd=tmp_path, capture_output=True, text=True, env=os.environ | {"PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "planted-v2.html").is_file()  # the dataset folder: its LATEST


def test_missing_extra_is_named(planted_versions, tmp_path: Path) -> None:
    """Without matplotlib the command fails at once, naming the extra to install."""
    v1, _ = planted_versions
    blocker = tmp_path / "blocker"
    (blocker / "matplotlib").mkdir(parents=True)
    (blocker / "matplotlib" / "__init__.py").write_text("raise ImportError('not installed')\n")
    env = os.environ | {"PYTHONPATH": f"{blocker}{os.pathsep}{REPO}"}
    result = subprocess.run(
        [sys.executable, "-m", "curate.cli", "report", str(v1.path), "-o", str(tmp_path / "r.html")],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert result.returncode == 2
    assert "pip install 'curate[report]'" in result.stderr
    assert not (tmp_path / "r.html").exists()


def test_notebook_views(planted_versions, tmp_path: Path) -> None:
    v1, _ = planted_versions
    summary = v1._repr_html_()
    assert "<th>changed</th>" in summary and "<svg" in summary  # the table, and the funnel
    assert len(re.findall(r'<g id="mark-funnel-', summary)) == 2 + len(v1.manifest["stages"])
    full = v1.report()
    assert full._repr_html_().startswith('<div class="curate-report">')
    saved = full.save(tmp_path / "nb.html")
    assert saved.read_text() == page_of(v1)


def test_unwritable_output_is_named(planted_versions, tmp_path: Path) -> None:
    v1, _ = planted_versions
    out = tmp_path / "missing" / "r.html"
    result = CliRunner().invoke(main, ["report", str(v1.path), "-o", str(out)])
    assert result.exit_code == 2
    assert f"cannot write the report to {out}: no folder" in result.output

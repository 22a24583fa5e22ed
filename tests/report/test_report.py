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
from click.testing import CliRunner
from conftest import REPO
from planted import built

import curate
from curate.cli import main
from curate.report import report

SVG_NAMESPACES = {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}


@pytest.fixture
def planted_versions(tmp_path_factory: pytest.TempPathFactory) -> tuple[curate.Version, ...]:
    return built(tmp_path_factory)


def marks(page: str, plot: str, series: int) -> list[str]:
    return re.findall(rf'<g id="(mark-{plot}-{series}-\d+)">', page)


def removed_reasons(version: curate.Version) -> int:
    return sum(1 for s in version.manifest["stages"] for n in s["removed"].values() if n)


def test_one_mark_per_step_and_reason(planted_versions) -> None:
    v1, _ = planted_versions
    page = report(v1).html
    assert len(marks(page, "funnel-documents", 0)) == 2 + len(v1.manifest["stages"])
    assert len(marks(page, "removed", 0)) == removed_reasons(v1) > 0
    assert not marks(page, "funnel-documents", 1)
    ids = re.findall(r' id="([^"]+)"', page)
    assert len(ids) == len(set(ids)), "every id in the page is unique"
    for section in ("Funnel", "Stages", "Quarantined", "Inputs", "Tokenizer", "Software", "Recipe"):
        assert f"<h2>{section}" in page
    tokenizer = v1.manifest["stages"][-1]["details"]["tokenizer"]
    assert tokenizer["files"]["tokenizer.json"] in page  # the tokenizer's identity


def test_self_contained_and_deterministic(planted_versions, tmp_path: Path) -> None:
    v1, _ = planted_versions
    runner = CliRunner()
    first, second = tmp_path / "a.html", tmp_path / "b.html"
    for out in (first, second):
        result = runner.invoke(main, ["report", str(v1.path), "-o", str(out)])
        assert result.exit_code == 0, result.output
        assert f"wrote {out}" in result.output
    page = first.read_text()
    assert page == second.read_text()  # byte-identical
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
    assert report(curate.open(copy)).html == report(v1).html


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
        assert len(marks(page, "funnel-documents", series)) == 2 + len(version.manifest["stages"])
        assert len(marks(page, "removed", series)) == removed_reasons(version)
    w1, w2 = v1.counts["written"], v2.counts["written"]
    assert w2 < w1
    row = f'<tr><td>written</td><td class="n">{w1:,}</td><td class="n">{w2:,}</td><td class="n">{w2 - w1:+,}</td></tr>'
    assert row in page
    assert "stages[4].filter_length.min_chars: 40 -&gt; 80" in page  # what differs


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
    assert saved.read_text() == report(v1).html

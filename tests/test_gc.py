"""curate gc keeps the newest N, LATEST and versions a reader holds, and reports space freed."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from conftest import write_recipe

import curate
from curate.cli import main


def build(project: Path, n: int) -> list[curate.Version]:
    out = []
    for i in range(n):
        recipe = write_recipe(project, stages=[{"filter_length": {"min_chars": i}}])
        v = curate.run(recipe)
        v.release()
        out.append(v)
    return out


def test_gc_keeps_newest_latest_and_held(project: Path) -> None:
    versions = build(project, 4)
    held = curate.open(project / "out" / "t", "v2").hold()
    result = CliRunner().invoke(main, ["gc", str(project / "out"), "--keep", "1"])
    assert result.exit_code == 0, result.stderr
    assert "t/v1: removed" in result.stdout and "t/v3: removed" in result.stdout
    assert "t/v2: kept, a reader holds it" in result.stdout
    assert "freed " in result.stdout and "freed 0 B" not in result.stdout
    left = sorted(p.name for p in (project / "out" / "t").iterdir() if p.name.startswith("v"))
    assert left == ["v2", "v4"]
    held.release()
    # a removed version's fingerprint no longer resolves: asking for it again rebuilds
    again = curate.run(write_recipe(project, stages=[{"filter_length": {"min_chars": 0}}]))
    assert not again.up_to_date and again.name == "v5"
    assert versions[-1].path.exists()


def test_versions_opened_for_reading_are_not_collected(project: Path) -> None:
    from curate.loader import open_tokens

    tokenizer = str(Path(__file__).parent.parent / "sample_data" / "tokenizer")
    for i in range(3):
        stages = [{"filter_length": {"min_chars": i}}, {"tokenize": {"source": tokenizer}}]
        curate.run(write_recipe(project, stages=stages)).release()
    notebook = curate.open(project / "out" / "t", "v1")  # a notebook reading v1
    trainer = open_tokens(project / "out" / "t", "v2")  # a trainer reading v2
    result = CliRunner().invoke(main, ["gc", str(project / "out"), "--keep", "1"])
    assert "t/v1: kept, a reader holds it" in result.stdout
    assert "t/v2: kept, a reader holds it" in result.stdout
    assert notebook.to_arrow().num_rows and len(trainer.blocks(16))
    notebook.release()
    trainer.version.release()
    result = CliRunner().invoke(main, ["gc", str(project / "out"), "--keep", "1"])
    assert "t/v1: removed" in result.stdout and "t/v2: removed" in result.stdout

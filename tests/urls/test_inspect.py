"""inspect-filter on url_filter: each list and word rule alone and first, URLs shown."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from test_url_filter import EXPECTED, project

from curate.cli import main
from curate.inspect_filter import inspect_filter


def test_rules_alone_and_first(tmp_path: Path) -> None:
    recipe = project(tmp_path)
    report = inspect_filter(recipe, "url_filter", sample=100, examples=2)
    assert report.documents == 18
    first = {rule: n for rule, n in report.first.items()}
    assert sum(first.values()) == len(EXPECTED)
    assert first["url_domain:ut1/adult"] == 3
    # badsite.co.uk is in gambling too: alone, that category would remove it
    assert report.alone["url_domain:ut1/gambling"] == 3
    assert first["url_domain:ut1/gambling"] == 1
    # the allowed docs.badsite.co.uk fails no rule
    shown = [text for found in report.examples.values() for _, text in found]
    assert not any("docs.badsite" in t for t in shown)
    assert report.examples["url_banned_subword"][0][1].startswith(
        "https://shop.net/mega-naughtystuff | The council"
    )
    assert not (tmp_path / "out").exists()


def test_cli(tmp_path: Path) -> None:
    recipe = project(tmp_path)
    out = CliRunner().invoke(main, ["inspect-filter", str(recipe), "--stage", "url_filter"])
    assert out.exit_code == 0, out.output
    assert "url_filter on a sample of 18 documents: removes 11" in out.output
    assert "url_soft_banned_words" in out.output and "https://shop.net/hot-girls" in out.output

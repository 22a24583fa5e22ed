"""inspect-filter: per-rule counts and examples on a sample, nothing written."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from conftest import write_jsonl, write_recipe

from curate.cli import main
from curate.inspect_filter import inspect_filter

GOOD = (
    "The committee met on Tuesday to review the proposal. Members agreed that the plan was "
    "sound, and that the budget would have to be checked with care before the vote. Several "
    "people raised questions about the schedule, and the chair said that a revised timeline "
    "would be shared with everyone by the end of the week."
)


def project(tmp_path: Path) -> Path:
    docs = [{"id": f"good{i}", "text": f"{GOOD} Item {i}."} for i in range(6)]
    docs += [{"id": f"short{i}", "text": f"Only a few words here, number {i}."} for i in range(4)]
    write_jsonl(tmp_path / "data" / "a.jsonl", docs[::2])
    write_jsonl(tmp_path / "data" / "b.jsonl", docs[1::2])
    stages = [
        {"normalize": {}},
        {"exact_dedup": {}},
        {"quality_filter": {"c4": False, "gopher_repetition": False}},
    ]
    return write_recipe(tmp_path, stages=stages)


def test_report_counts_each_rule_alone_and_first(tmp_path: Path) -> None:
    report = inspect_filter(project(tmp_path), "quality_filter", sample=100, examples=2)
    assert report.documents == 10
    assert report.skipped_barriers == ["exact_dedup"]
    assert report.first == {"gopher_quality:min_doc_words": 4}
    assert report.alone["gopher_quality:min_doc_words"] == 4
    assert report.alone["gopher_quality:min_stop_words"] == 4  # also fail it, but later
    assert report.alone["gopher_quality:max_hash_word_ratio"] == 0
    assert [i for i, _ in report.examples["gopher_quality:min_doc_words"]] == ["short0", "short2"]
    assert not (tmp_path / "out").exists()


def test_cli_and_other_filters(tmp_path: Path) -> None:
    recipe = project(tmp_path)
    out = CliRunner().invoke(main, ["inspect-filter", str(recipe), "--stage", "2", "--sample", "4"])
    assert out.exit_code == 0, out.output
    assert "quality_filter on a sample of 4 documents" in out.output
    out = CliRunner().invoke(main, ["inspect-filter", str(recipe), "--stage", "nope"])
    assert out.exit_code == 2 and "no stage 'nope'" in out.output
    generic = inspect_filter(recipe.parent / "recipe.yaml", "normalize", sample=3)
    assert generic.removed == 0
    assert "normalize gave no removal reason for this sample" in str(generic)
    assert "rule" not in str(generic)  # no empty table


def test_c4_line_removal_shows_lines_per_rule_and_before_after(tmp_path: Path) -> None:
    page = "\n".join(["Home | News | Sport", GOOD, "Please enable JavaScript to see the map.",
                      "Read our privacy policy before you sign up.", GOOD + " Again."])  # fmt: skip
    docs = [{"id": "page", "text": page}, {"id": "clean", "text": GOOD + "\n" + GOOD}]
    write_jsonl(tmp_path / "data" / "a.jsonl", docs)
    stages = [{"quality_filter": {"gopher_repetition": False, "gopher_quality": False,
                                  "fineweb": False, "c4": {"min_sentences": 2}}}]  # fmt: skip
    report = inspect_filter(write_recipe(tmp_path, stages=stages), "quality_filter", sample=10)
    assert report.removed == 0 and report.changed == 1
    assert report.counters == {
        "lines_removed:c4:terminal_punct": 1,
        "lines_removed:c4:javascript": 1,
        "lines_removed:c4:policy": 1,
    }
    assert report.changes == [("page", page, GOOD + "\n" + GOOD + " Again.")]
    shown = str(report)
    assert "changes the text of 1 kept documents" in shown
    assert "lines_removed:c4:javascript" in shown
    assert "page:\n  before: Home | News | Sport The committee" in shown
    assert "lines gone: Home | News | Sport; Please enable JavaScript" in shown
    decide_only = [{"quality_filter": {**stages[0]["quality_filter"],
                                       "c4": {"min_sentences": 2, "remove_lines": False}}}]  # fmt: skip
    report = inspect_filter(write_recipe(tmp_path, stages=decide_only), "quality_filter")
    assert report.changed == 0 and not report.changes and "changes the text" not in str(report)

"""curate log lists versions; curate diff shows recipe, input and per-stage count changes."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from conftest import write_recipe

import curate
from curate.cli import main


def cli(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_log_and_diff(project: Path) -> None:
    v1 = curate.run(write_recipe(project))
    v2 = curate.run(
        write_recipe(
            project,
            stages=[{"normalize": {}}, {"filter_length": {"min_words": 9}}, {"exact_dedup": {}}],
        )
    )
    with open(project / "data" / "a.jsonl", "a") as f:
        f.write(
            json.dumps({"id": "extra", "text": "one more document with enough words in it"}) + "\n"
        )
    v3 = curate.run(
        write_recipe(
            project,
            stages=[{"normalize": {}}, {"filter_length": {"min_words": 9}}, {"exact_dedup": {}}],
        )
    )

    out = cli("log", str(project / "out"))
    lines = out.strip().splitlines()
    assert [line.split()[0] for line in lines] == ["t/v1", "t/v2", "t/v3", "t/.cache/stages"]
    assert "(LATEST)" in lines[2] and v3.fingerprint[:12] in lines[2]
    assert f"{v1.counts['written']:,} documents" in lines[0]
    assert cli("log", str(project / "out" / "t")) == out

    d = cli("diff", str(v1.path), str(v2.path))
    assert "  stages[1].filter_length: added {'min_words': 9}" in d.splitlines()
    assert "exact_dedup" not in d.split("inputs:")[0]  # shifted, not changed
    assert "inputs: same" in d
    d = cli("diff", str(v2.path), str(v3.path))
    assert "recipe: same" in d and "data/a.jsonl: content changed" in d
    assert "written:" in d


def test_diff_takes_dataset_folders_and_refuses_other_folders(project: Path) -> None:
    v1 = curate.run(write_recipe(project))
    v2 = curate.run(write_recipe(project, stages=[{"normalize": {"form": "NFKC"}}]))
    d = cli("diff", str(v1.path), str(project / "out" / "t"))  # LATEST is v2
    assert d.splitlines()[1] == f"+++ t v2 ({v2.fingerprint[:12]})"
    result = CliRunner().invoke(main, ["diff", str(v1.path), str(project / "data")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.stderr.startswith(
        f"error: {project / 'data'} is not a version (no manifest.json)"
    )


def test_log_of_a_folder_without_versions_says_what_to_give(project: Path) -> None:
    assert cli("log", str(project / "data")).strip() == (
        f"no versions under {project / 'data'} (an output root or one dataset folder)"
    )


def test_diff_matches_stages_by_name_when_one_is_inserted(project: Path) -> None:
    v1 = curate.run(write_recipe(project, stages=[{"normalize": {}}, {"filter_length": {}}]))
    stages = [{"normalize": {}}, {"exact_dedup": {}}, {"filter_length": {"min_words": 2}}]
    v2 = curate.run(write_recipe(project, stages=stages))
    d = cli("diff", str(v1.path), str(v2.path)).splitlines()
    recipe = d[d.index("recipe:") + 1 : d.index("inputs: same")]
    assert recipe == [
        "  stages[1].exact_dedup: added",
        "  stages[2].filter_length.min_words: None -> 2",
    ]
    counts = d[d.index("stages (in -> out, removed):") + 1 : -1]
    assert [line.split(":")[0] + ":" + line.split(":")[1] for line in counts] == [
        "  0:normalize", "  1:exact_dedup", "  2:filter_length"
    ]  # fmt: skip
    assert counts[1] == "  1:exact_dedup: only in B" and " vs " in counts[2]
    v3 = curate.run(write_recipe(project, stages=[{"normalize": {}}]))
    d = cli("diff", str(v2.path), str(v3.path))
    assert "  stages[1].exact_dedup: removed" in d and "  stages[2].filter_length: removed" in d

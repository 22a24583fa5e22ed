"""A wrong setting fails the run before anything is published, instead of an empty dataset.

`text_field: content` on records without that field used to publish v1 with `written 0,
quarantined 2,000` and exit 0. Now a run fails when more than `on_error.max_quarantined`
of its records (and more than 100) were quarantined, or when every record was; and it
stops after the first partition whose every record lacks the same field, so the mistake
costs seconds. A version emptied by filters is still published.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import corpus, write_jsonl, write_recipe

import curate
from curate.cli import main
from curate.errors import CurateError
from curate.recipe import Recipe


def fails(recipe: Path) -> str:
    result = CliRunner().invoke(main, ["run", str(recipe)])
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.exit_code == 2, (result.exit_code, result.output, result.stderr)
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
    return errors[0]


def nothing_published(tmp_path: Path) -> None:
    dataset = tmp_path / "out" / "t"
    assert not (dataset / "LATEST").exists()
    assert not list(dataset.glob("v*")) if dataset.exists() else True


def test_a_wrong_text_field_fails_naming_the_field_and_the_fields_present(
    tmp_path: Path,
) -> None:
    records = [{"id": f"d{i}", "text": f"secret words {i}", "lang": "en"} for i in range(2000)]
    write_jsonl(tmp_path / "data" / "a.jsonl", records)
    message = fails(write_recipe(tmp_path, text_field="content", stages=[]))
    assert "missing text field 'content'" in message and "2,000" in message, message
    assert "fields present: id, lang, text" in message, message
    assert "nothing was published" in message
    assert "secret" not in message and "en'" not in message  # names only, never values
    nothing_published(tmp_path)


def test_every_record_quarantined_fails_even_below_the_floor(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", [{"id": f"{i}", "body": "words"} for i in range(4)])
    message = fails(write_recipe(tmp_path, on_error={"stop_early": False}))
    assert "every one of the 4 records" in message and "missing text field 'text'" in message
    assert "fields present: body, id" in message
    nothing_published(tmp_path)


def mixed(tmp_path: Path, good: int, bad: int) -> None:
    """Bad records spread between good ones, so no partition is all bad."""
    docs = corpus(good, dup_every=0)
    lines = [json.dumps(d) for d in docs]
    step = max(1, good // max(bad, 1))
    for k in range(bad):
        lines.insert(k * (step + 1), json.dumps({"id": f"bad{k}", "body": "x"}))
    (tmp_path / "data").mkdir(parents=True, exist_ok=True)
    (tmp_path / "data" / "a.jsonl").write_text("\n".join(lines) + "\n")


def test_more_than_max_quarantined_fails_and_a_raised_limit_publishes(tmp_path: Path) -> None:
    mixed(tmp_path, good=1000, bad=150)
    message = fails(write_recipe(tmp_path, stages=[]))
    assert "quarantined 150 of 1,150 records" in message, message
    assert "on_error.max_quarantined" in message and "10%" in message, message
    assert "missing text field 'text' in 150" in message
    nothing_published(tmp_path)
    limit = {"mode": "quarantine", "max_quarantined": 0.2}
    version = curate.run(write_recipe(tmp_path, stages=[], on_error=limit))
    assert version.counts["quarantined"] == 150 and version.counts["written"] == 1000
    assert version.manifest["recipe"]["on_error"]["max_quarantined"] == 0.2


def test_up_to_100_quarantined_records_never_fail_a_run(tmp_path: Path) -> None:
    mixed(tmp_path, good=300, bad=100)  # 25%, but only 100 records
    version = curate.run(write_recipe(tmp_path, stages=[]))
    assert version.counts["quarantined"] == 100


def test_a_version_emptied_by_filters_is_published(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(300, dup_every=0))
    stages: list[dict[str, Any]] = [{"filter_length": {"min_words": 10_000}}]
    version = curate.run(write_recipe(tmp_path, stages=stages))
    assert version.counts["written"] == 0 and version.counts["quarantined"] == 0


def run_logged(recipe: Path, log: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CURATE_PHASE_LOG": str(log)}
    return subprocess.run(
        [sys.executable, "-m", "curate.cli", "run", str(recipe), "--quiet"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_a_partition_with_every_record_missing_the_field_stops_the_run_early(
    tmp_path: Path,
) -> None:
    records = [{"id": f"d{i}", "body": f"words {i} " * 20} for i in range(3000)]
    write_jsonl(tmp_path / "data" / "a.jsonl", records)
    recipe = write_recipe(tmp_path, stages=[], partition_size="20KB", batch_size="4KB")
    log = tmp_path / "phases.log"
    done = run_logged(recipe, log)
    assert done.returncode == 2, done.stderr
    message = done.stderr.strip().splitlines()[-1]
    assert "data/a.jsonl" in message and "partition 0" in message, message
    assert "missing text field 'text'" in message and "fields present: body, id" in message
    assert "on_error.stop_early" in message
    nothing_published(tmp_path)
    size = (tmp_path / "data" / "a.jsonl").stat().st_size
    assert size > 10 * 20_000  # more than ten partitions: only the first was read
    read_batches = sum(1 for line in log.read_text().splitlines() if line.startswith("reading"))
    assert read_batches <= 20_000 // 4_000 + 2, read_batches


def test_stop_early_off_leaves_the_decision_to_the_limit(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(2000, dup_every=0))
    write_jsonl(tmp_path / "data" / "b.jsonl", [{"id": f"b{i}", "body": "x"} for i in range(150)])
    on_error = {"max_quarantined": 0.2}
    message = fails(write_recipe(tmp_path, stages=[], on_error=on_error))
    assert "data/b.jsonl" in message and "stop_early" in message, message
    on_error["stop_early"] = False  # type: ignore[assignment]
    version = curate.run(write_recipe(tmp_path, stages=[], on_error=on_error))
    assert version.counts["quarantined"] == 150 and version.counts["written"] == 2000


@pytest.mark.parametrize("value", ["fail", "quarantine", {"mode": "fail"}, {}])
def test_on_error_takes_a_mode_or_a_mapping(value: Any) -> None:
    recipe = Recipe.from_dict({"name": "t", "inputs": ["x"], "on_error": value})
    mode = value if isinstance(value, str) else value.get("mode", "quarantine")
    assert recipe.on_error_policy.mode == mode
    assert recipe.on_error_policy.max_quarantined == 0.1


def test_a_limit_outside_0_to_1_is_refused() -> None:
    with pytest.raises(CurateError, match="on_error"):
        Recipe.from_dict({"name": "t", "inputs": ["x"], "on_error": {"max_quarantined": 1.5}})


def test_field_names_in_the_message_are_bounded(tmp_path: Path) -> None:
    """Keys are names, but a hostile input can make them many and long: the message shows
    at most 20, each cut at 64 characters."""
    record = {f"key{i:02d}": "secret value" for i in range(40)} | {"x" * 10_000: 1}
    write_jsonl(tmp_path / "data" / "a.jsonl", [record | {"id": f"{i}"} for i in range(200)])
    message = fails(write_recipe(tmp_path, stages=[]))
    present = message.split("fields present: ", 1)[1].split(")", 1)[0]
    names = present.removesuffix(", ...").split(", ")
    assert len(names) <= 20 and all(len(n) <= 64 for n in names), present
    assert len(message) < 1500 and "secret" not in message


def test_chat_records_expected_on_text_data_stop_the_run(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(300, dup_every=0))
    message = fails(write_recipe(tmp_path, chat={"shape": "auto"}, stages=[]))
    assert "all 300 records of partition 0" in message, message
    assert "no messages, conversations or instruction field" in message
    assert "fields present: id, text" in message
    nothing_published(tmp_path)

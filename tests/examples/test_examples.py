"""Examples of removed documents: chosen by id hash per stage and reason, stored in the
version and covered by its manifest, shown by `curate show --examples` and the report, and
never holding a value the recipe's pii stage would remove (real Presidio, planted values).
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner
from conftest import writable
from examples_planted import (
    DUPLICATE_PHONE,
    FILTERED_EMAIL,
    ID_EMAIL,
    build,
    leaks,
    make_data,
    recipe,
)

import curate
from curate.cli import main
from curate.report import report
from curate.stages.examples import id_hash, key_of
from curate.verify import verify


def example_files(version: curate.Version) -> dict[str, bytes]:
    return {
        e["path"]: (version.path / e["path"]).read_bytes() for e in version.manifest["examples"]
    }


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, curate.Version]:
    folder = tmp_path_factory.mktemp("planted")
    make_data(folder)
    return folder, build(folder, recipe())


def groups(version: curate.Version) -> dict[tuple[int, str], list[dict[str, Any]]]:
    out: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for row in version.examples().to_pylist():
        out.setdefault((row["position"], row["reason"]), []).append(row)
    return out


def test_each_stage_and_reason_keeps_examples_with_what_a_duplicate_duplicates(
    planted: tuple[Path, curate.Version],
) -> None:
    _, version = planted
    found = groups(version)
    removed = {
        (s["position"], reason) for s in version.manifest["stages"] for reason in s["removed"]
    }
    changed = {(4, "changed:EMAIL_ADDRESS"), (4, "changed:PHONE_NUMBER")}  # pii's own changes
    assert set(found) == removed | changed  # every stage and reason that removed anything
    assert [e["path"] for e in version.manifest["examples"]] == [
        "examples/01-filter_length.arrow", "examples/02-exact_dedup.arrow",
        "examples/03-minhash_dedup.arrow", "examples/04-pii.arrow",
        "examples/05-filter_length.arrow",
    ]  # fmt: skip
    for rows in found.values():
        assert 1 <= len(rows) <= 20
        assert all(r["text"] and r["characters"] > 0 for r in rows)
    exact = found[(2, "duplicate")]
    assert all(r["kept_text"] == r["text"] and r["similarity"] == 1.0 for r in exact)
    near = [r for r in found[(3, "near_duplicate")] if r["id"] == "n2"]
    assert near and near[0]["kept_id"] == "n1" and 0.7 <= near[0]["similarity"] < 1.0
    assert "<EMAIL_ADDRESS>" in near[0]["text"] and "<EMAIL_ADDRESS>" in near[0]["kept_text"]
    dropped = found[(4, "pii:CREDIT_CARD")]
    assert "<CREDIT_CARD>" in dropped[0]["text"] and "<EMAIL_ADDRESS>" in dropped[0]["text"]
    phone = found[(4, "changed:PHONE_NUMBER")]  # masked in the data, shown as its type
    assert [r["id"] for r in phone] == ["x1"] and "<PHONE_NUMBER>" in phone[0]["text"]
    assert (
        phone[0]["text"]
        == "Call the front desk on <PHONE_NUMBER> to move the appointment to Monday."
    )
    assert phone[0]["kept_id"] is None and phone[0]["characters"] == 58 + len(DUPLICATE_PHONE)
    assert "n1" in [r["id"] for r in found[(4, "changed:EMAIL_ADDRESS")]]
    assert "x1" not in version.rejected().column("id").to_pylist()  # changed, not removed
    filtered = {r["id"]: r for r in found[(1, "too_few_words")]}
    assert filtered["f1"]["text"] == "write <EMAIL_ADDRESS>"
    assert "<EMAIL_ADDRESS>" in filtered  # the id (user-<address>) as shown, through PII
    assert filtered["<EMAIL_ADDRESS>"]["key"] == key_of(f"user-{ID_EMAIL}")  # for erasure


def test_no_planted_value_in_examples_show_or_report(
    planted: tuple[Path, curate.Version], tmp_path: Path
) -> None:
    _, version = planted
    rejected = version.rejected().column("id").to_pylist()
    assert f"user-{ID_EMAIL}" in rejected and "f1" in rejected and "c1" in rejected  # planted
    assert version.manifest["examples"]
    for name, data in example_files(version).items():
        assert leaks(data) == [], name
    runner = CliRunner()
    for stage in ("filter_length", "exact_dedup", "minhash_dedup", "pii", "4:pii:CREDIT_CARD"):
        result = runner.invoke(main, ["show", str(version.path), "--examples", stage])
        assert result.exit_code == 0, result.output
        assert "==" in result.output and leaks(result.output) == [], stage
    assert (
        "<CREDIT_CARD>"
        in runner.invoke(main, ["show", str(version.path), "--examples", "pii"]).output
    )
    page = report(version).save(tmp_path / "report.html").read_text()
    assert page.count('<details class="examples"') == len(groups(version))
    assert "write &lt;EMAIL_ADDRESS&gt;" in page
    assert leaks(page) == []


def test_show_names_what_there_is_when_nothing_matches(
    planted: tuple[Path, curate.Version],
) -> None:
    _, version = planted
    result = CliRunner().invoke(main, ["show", str(version.path), "--examples", "tokenize"])
    assert result.exit_code != 0
    assert "no examples for 'tokenize'" in result.output
    assert "3 minhash_dedup:near_duplicate" in result.output


def test_examples_are_the_smallest_id_hashes_per_stage_and_reason(tmp_path: Path) -> None:
    make_data(tmp_path)
    data = recipe()
    data["output"]["examples"] = {"per_reason": 2}
    version = build(tmp_path, data)
    rejected = version.rejected().to_pylist()
    for (position, reason), rows in groups(version).items():
        if reason.startswith("changed:"):  # not removed: not in rejected/ (pinned above)
            continue
        stage = version.manifest["stages"][position]["name"]
        ids = [r["id"] for r in rejected if r["stage"] == stage and r["reason"] == reason]
        if stage == "filter_length":  # two filter_length stages: rejected/ names the stage only
            ids = [i for i in ids if i in _removed_at(version, position)]
        expected = sorted(ids, key=lambda i: (id_hash(i), i))[:2]
        assert [r["key"] for r in rows] == [key_of(i) for i in expected], (position, reason)


def _removed_at(version: curate.Version, position: int) -> set[str]:
    """Ids the filter_length at `position` removed: the first runs in pass 0 (before any
    barrier), the second in the last pass, and rejected/ files are named by pass."""
    first: set[str] = set()
    for e in version.manifest["rejected"]:
        if e["path"].startswith("rejected/pass0-"):
            first |= set(read(version.path / e["path"]).column("id").to_pylist())
    every = set(version.rejected().column("id").to_pylist())
    return first if position == 1 else every - first


def read(path: Path) -> pa.Table:
    return pa.ipc.open_stream(pa.memory_map(str(path))).read_all()


def test_workers_engine_cache_and_write_rejected_leave_examples_byte_identical(
    tmp_path: Path,
) -> None:
    make_data(tmp_path)
    one = build(tmp_path, recipe(), root="out-1")
    two = build(tmp_path, recipe(engine={"workers": 2}), root="out-2")
    assert sum(i["partitions"] for i in one.manifest["inputs"]) >= 4
    assert example_files(one) and example_files(one) == example_files(two)
    assert one.manifest["examples"] == two.manifest["examples"]
    quiet = recipe()
    quiet["output"]["rejected"] = False
    unrecorded = build(tmp_path, quiet, root="out-3")
    assert unrecorded.manifest["rejected"] == []
    assert example_files(unrecorded) == example_files(one)  # chosen without rejected/
    changed = recipe()
    changed["stages"][5]["filter_length"]["min_words"] = 11
    cached = build(tmp_path, changed, root="out-1")  # stages 0-4 from the stage cache
    reused = [s.get("cache", {}).get("reused", 0) for s in cached.manifest["stages"][:5]]
    assert all(reused), reused
    scratch = build(tmp_path, changed, root="out-4")
    assert example_files(cached) == example_files(scratch)
    same = [p for p in example_files(one) if not p.startswith("examples/05-")]
    assert {p: example_files(cached)[p] for p in same} == {p: example_files(one)[p] for p in same}


def test_off_switch_and_a_recipe_without_pii(tmp_path: Path) -> None:
    make_data(tmp_path)
    off = recipe()
    off["output"]["examples"] = False
    version = build(tmp_path, off, root="off")
    assert version.manifest["examples"] == [] and not (version.path / "examples").exists()
    assert version.examples().num_rows == 0
    shown = CliRunner().invoke(main, ["show", str(version.path), "--examples", "exact_dedup"])
    assert shown.exit_code != 0 and "keeps no examples" in shown.output
    no_pii = recipe(stages=[s for s in copy.deepcopy(recipe()["stages"]) if "pii" not in s])
    version = build(tmp_path, no_pii, root="no-pii")
    assert version.manifest["examples"] == []  # nothing would take the values out
    opted = copy.deepcopy(no_pii)
    opted["output"]["examples"] = {"without_pii": True}
    version = build(tmp_path, opted, root="opted")
    texts = version.examples().column("text").to_pylist()
    assert f"write {FILTERED_EMAIL}" in texts  # what the recipe asked for: as it was
    assert f"user-{ID_EMAIL}" in version.examples().column("id").to_pylist()


def test_verify_checks_the_examples_files(planted: tuple[Path, curate.Version]) -> None:
    folder, version = planted
    assert verify(version.path) == []
    copy_of = folder / "copy"
    shutil.copytree(version.path, copy_of, symlinks=True)
    writable(copy_of)
    target = copy_of / version.manifest["examples"][0]["path"]
    data = bytearray(target.read_bytes())
    data[-20] ^= 0xFF
    target.write_bytes(bytes(data))
    problems = verify(copy_of)
    assert any(p.startswith("examples/01-filter_length.arrow") for p in problems), problems


def test_a_rerun_after_a_late_change_takes_what_pii_showed_from_the_cache(
    tmp_path: Path,
) -> None:
    """Setting up Presidio costs seconds; a rerun whose examples are the texts of last time
    (a stage after pii changed, removing the same documents, as a new tokenizer does) takes
    what the pii stage showed from the stage cache, and sets no pii stage up."""
    from curate.engines import tasks

    make_data(tmp_path)
    first = build(tmp_path, recipe())
    changed = recipe()
    changed["stages"][5]["filter_length"]["max_words"] = 10**6  # the same documents go
    tasks._READY.clear()
    cached = build(tmp_path, changed)
    set_up = [key for key in tasks._READY if key.startswith("curate.stages.pii.")]
    assert set_up == []
    scratch = build(tmp_path, changed, root="scratch")
    assert example_files(cached) == example_files(scratch)
    assert example_files(cached) == example_files(first)

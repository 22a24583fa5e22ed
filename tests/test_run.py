"""End to end through the CLI: build, up to date, new versions on change, nothing visible on failure."""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pyarrow as pa
from click.testing import CliRunner
from conftest import REPO, corpus, write_jsonl, write_recipe

from curate.cli import main


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_build_then_up_to_date_then_new_versions(project: Path) -> None:
    recipe = write_recipe(project)
    code, out, err = cli("run", str(recipe))
    assert code == 0, err
    v1 = project / "out" / "t" / "v1"
    assert f"wrote t v1 to {v1}" in out
    assert "exact_dedup" in out and "duplicate: 12" in out
    assert (project / "out" / "t" / "LATEST").read_text().strip() == "v1"

    code, out, _ = cli("run", str(recipe))
    assert code == 0 and f"t is up to date: v1 at {v1}" in out
    assert sorted(p.name for p in (project / "out" / "t").iterdir() if p.name.startswith("v")) == [
        "v1"
    ]

    write_recipe(project, stages=[{"normalize": {"form": "NFKC"}}, {"exact_dedup": {}}])
    code, out, _ = cli("run", str(recipe))
    assert code == 0 and "wrote t v2" in out

    with open(project / "data" / "b.jsonl", "a") as f:
        f.write(json.dumps({"id": "new", "text": "a new document"}) + "\n")
    code, out, _ = cli("run", str(recipe))
    assert code == 0 and "wrote t v3" in out
    assert (project / "out" / "t" / "LATEST").read_text().strip() == "v3"
    assert (project / "out" / "t" / "v1" / "manifest.json").exists()  # old versions stay


def test_manifest_is_complete_and_valid(project: Path) -> None:
    code, _, err = cli("run", str(write_recipe(project)))
    assert code == 0, err
    version = project / "out" / "t" / "v1"
    manifest = json.loads((version / "manifest.json").read_text())
    schema = json.loads((REPO / "schemas" / "manifest.schema.json").read_text())
    jsonschema.validate(manifest, schema)
    c = manifest["counts"]
    assert (
        c["read"] == 60
        and c["written"] == 48
        and c["removed"] == {"1:exact_dedup": {"duplicate": 12}}
    )
    assert c["read"] == c["written"] + c["removed_total"] + c["quarantined"]
    assert [i["documents"] for i in manifest["inputs"]] == [30, 30]
    assert all(i["content_hash"].startswith("xxh3_128:") for i in manifest["inputs"])
    assert manifest["stages"][0]["software"]["unicode"]
    assert manifest["recipe"]["stages"][0]["normalize"]["form"] == "NFC"
    for key in ("python", "curate", "pyarrow", "polars", "datasets"):
        assert key in manifest["software"]
    assert manifest["host"]["cpu_count"] >= 1
    import hashlib

    for shard in manifest["shards"]:
        data = (version / shard["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == shard["sha256"] and len(data) == shard["bytes"]
    rejected = pa.concat_tables(
        pa.ipc.open_stream(version / f["path"]).read_all() for f in manifest["rejected"]
    )
    assert set(rejected.column_names) >= {"id", "stage", "reason", "duplicate_of"}
    assert rejected.num_rows == 12 and set(rejected.column("reason").to_pylist()) == {"duplicate"}


def test_rejected_side_output_can_be_turned_off(project: Path) -> None:
    write_recipe(project, output={"root": "out", "fsync": False, "rejected": False})
    code, _, err = cli("run", str(project / "recipe.yaml"))
    assert code == 0, err
    manifest = json.loads((project / "out" / "t" / "v1" / "manifest.json").read_text())
    assert manifest["rejected"] == [] and not (project / "out" / "t" / "v1" / "rejected").exists()


def test_published_version_is_read_only_and_staging_is_gone(project: Path) -> None:
    code, _, err = cli("run", str(write_recipe(project)))
    assert code == 0, err
    root = project / "out" / "t"
    assert not any(p.name.startswith(".staging") for p in root.iterdir())
    version = root / "v1"
    assert not os.stat(version).st_mode & 0o222
    assert not os.stat(version / "manifest.json").st_mode & 0o222


def test_missing_input_fails_before_anything_is_written(project: Path) -> None:
    recipe = write_recipe(project, inputs=["data/*.jsonl", "mnt/share/*.jsonl"])
    code, _, err = cli("run", str(recipe))
    assert code == 2
    assert err.startswith("error: ") and "mnt/share/*.jsonl" in err and "Traceback" not in err
    assert not (project / "out").exists()


def test_bad_recipe_fails_before_anything_is_written(project: Path) -> None:
    recipe = write_recipe(project, stages=[{"normalize": {"form": "NFD"}}])
    code, _, err = cli("run", str(recipe))
    assert code == 2 and "stages[0].normalize.form: must be one of NFC, NFKC" in err
    assert not (project / "out").exists()


def test_every_document_removed_still_publishes_a_readable_version(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(5, dup_every=0))
    recipe = write_recipe(tmp_path, stages=[{"filter_length": {"min_chars": 10_000}}])
    code, _, err = cli("run", str(recipe))
    assert code == 0, err
    import curate

    version = curate.open(tmp_path / "out" / "t")
    assert version.to_arrow().num_rows == 0 and version.to_dataset().num_rows == 0
    assert version.counts["removed_total"] == 5


def test_show_prints_the_summary(project: Path) -> None:
    cli("run", str(write_recipe(project)))
    code, out, _ = cli("show", str(project / "out" / "t"))
    assert code == 0 and "Version(t v1" in out and "exact_dedup" in out


def test_committed_schemas_are_current() -> None:
    from curate.schemas import write_schemas

    assert write_schemas(REPO / "schemas", check=True) == []


def test_sample_recipe_validates_against_recipe_schema() -> None:
    import yaml

    schema = json.loads((REPO / "schemas" / "recipe.schema.json").read_text())
    for recipe in (REPO / "recipes").glob("*.yaml"):
        jsonschema.validate(yaml.safe_load(recipe.read_text()), schema)


def test_readme_recipe_reference_is_current() -> None:
    from curate.reference import update_readme

    assert not update_readme(REPO / "README.md", check=True)


def test_a_text_field_with_another_name(tmp_path: Path) -> None:
    write_jsonl(
        tmp_path / "data" / "a.jsonl",
        [{"id": str(i), "content": f"doc {i % 3} here"} for i in range(6)],
    )
    recipe = write_recipe(
        tmp_path,
        text_field="content",
        stages=[{"normalize": {}}, {"filter_length": {"min_words": 1}}, {"exact_dedup": {}}],
    )
    code, _, err = cli("run", str(recipe))
    assert code == 0, err
    import curate

    assert curate.open(tmp_path / "out" / "t").to_arrow().column("text").to_pylist() == [
        "doc 0 here",
        "doc 1 here",
        "doc 2 here",
    ]

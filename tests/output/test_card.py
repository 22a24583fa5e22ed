"""The dataset card (curate.output.card): README.md in every version, in the Hugging Face layout.

`datasets` reads its configs offline and gets exactly the rows `load_from_disk` gives, for a
plain and a split version, never taking rejected, quarantine or examples files for data; it is listed
in the manifest and verified like a shard; it holds no value the inputs planted, and is the
same bytes whatever the worker count.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import datasets
import pytest
import yaml
from click.testing import CliRunner
from conftest import REPO, corpus, flip_byte, sealed, writable, write_jsonl, write_recipe

import curate
from curate.cli import main
from curate.output.card import NAME, size_category

TOKENIZER = str(REPO / "sample_data" / "tokenizer")
EMAIL = "jane.planted@mail.example.org"
URL = "https://example.org/jane-planted-7731/profile"
SOURCE = "crawl-of-jane-planted-7731"
DOCS: list[dict[str, Any]] = corpus(90, dup_every=5)


def build(folder: Path, **overrides: Any) -> Path:
    if not (folder / "data").exists():
        write_jsonl(folder / "data" / "a.jsonl", DOCS[:45])
        write_jsonl(folder / "data" / "b.jsonl", DOCS[45:])
        with open(folder / "data" / "b.jsonl", "a", encoding="utf-8") as f:
            f.write('{"id": "broken", "text": \n')  # one unreadable record: a quarantine file
    recipe = write_recipe(
        folder, partition_size="2KB",
        output={"root": "out", "fsync": False, "shard_size": "2KB",
                "examples": {"without_pii": True}},  # examples/*.arrow: not data either
        **overrides,
    )  # fmt: skip
    version = curate.run(recipe)
    version.release()
    return version.path


def header(version: Path) -> dict[str, Any]:
    text = (version / NAME).read_text()
    assert text.startswith("---\n")
    head: dict[str, Any] = yaml.safe_load(text.split("---\n")[1])
    return head


LOAD = """
import json, sys
import datasets
version, cache = sys.argv[1], sys.argv[2]
by_card = datasets.load_dataset(version, cache_dir=cache)  # reads the card's configs
disk = datasets.load_from_disk(version)
assert isinstance(by_card, datasets.DatasetDict) and isinstance(disk, datasets.DatasetDict)
print(json.dumps({
    "card": {k: v.to_list() for k, v in by_card.items()},
    "disk": {k: v.to_list() for k, v in disk.items()},
    "columns": {k: [v.column_names for v in (by_card[k], disk[k])] for k in disk},
}))
"""


def load_both(version: Path, cache: Path) -> dict[str, Any]:
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
           "HF_HOME": str(cache / "home")}  # fmt: skip
    run = subprocess.run([sys.executable, "-c", LOAD, str(version), str(cache)],
                         capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    loaded: dict[str, Any] = json.loads(run.stdout.splitlines()[-1])
    return loaded


def verify(version: Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["verify", str(version)])
    return result.exit_code, result.output


@pytest.mark.parametrize("split", [None, {"validation": 0.2, "test": 0.1}])
def test_load_dataset_on_the_folder_gives_the_rows_load_from_disk_gives(
    tmp_path: Path, split: dict[str, float] | None
) -> None:
    """Offline, `datasets.load_dataset(version folder)` reads the card's configs and gets
    exactly the rows and columns `datasets.load_from_disk(version folder)` gets, with or
    without splits: every version is a DatasetDict folder (`curate.hf_layout`; a
    version without splits is one split, train). `load_dataset` refuses any folder with a
    `state.json` on top (datasets 5.2.0, load.py:1649), so none is there. The version holds
    rejected, quarantine, examples, statistics and lineage files, each of which a glob over
    the folder would take for data: the counts and columns say none was."""
    version = build(tmp_path, stages=[{"exact_dedup": {}}], split=split)
    m = json.loads((version / "manifest.json").read_text())
    assert m["rejected"] and m["quarantine"] and m["examples"] and m["lineage"]
    assert m["statistics"] and m["layout"] == "dataset_dict"
    assert not (version / "state.json").exists()
    loaded = load_both(version, tmp_path / "hf")
    names = ["train", "validation", "test"] if split else ["train"]
    assert list(loaded["card"]) == list(loaded["disk"]) == names
    assert loaded["card"] == loaded["disk"]  # the same rows, in the same order
    assert sum(len(rows) for rows in loaded["card"].values()) == m["counts"]["written"]
    columns = [c["name"] for c in m["schema"]]
    assert loaded["columns"] == {n: [columns, columns] for n in names}
    opened = curate.open(version)
    if split:
        assert {n: opened.to_dataset(n).to_list() for n in names} == loaded["disk"]
    else:  # the Python API still gives one Dataset for a version without splits
        ds = opened.to_dataset()
        assert isinstance(ds, datasets.Dataset) and ds.to_list() == loaded["disk"]["train"]
    opened.release()
    head = header(version)
    files = head["configs"][0]["data_files"]
    assert [f["split"] for f in files] == names
    assert [p for f in files for p in f["path"]] == [
        s["path"] for n in names for s in m["shards"] if (s.get("split") or "train") == n
    ]
    assert head["size_categories"] == ["n<1K"] and head["license"] == "unknown"


def test_the_card_is_listed_verified_and_its_damage_named(tmp_path: Path) -> None:
    version = build(tmp_path)
    card = json.loads((version / "manifest.json").read_text())["card"]
    assert card["path"] == NAME and card["bytes"] == (version / NAME).stat().st_size
    assert verify(version)[0] == 0
    writable(version)
    flip_byte(version / NAME)
    sealed(version)
    code, out = verify(version)
    assert code != 0 and f"{NAME}: sha256 differs" in out, out
    (version / NAME).chmod(0o640)
    (version / NAME).unlink()
    with pytest.raises(curate.CurateError, match=NAME):
        curate.open(version)  # the cheap check every open makes names it too


def test_the_card_says_what_each_stage_did_and_holds_no_planted_value(tmp_path: Path) -> None:
    docs = [
        {"id": f"p{i}", "url": URL, "source": SOURCE,
         "text": f"Please write to {EMAIL} about the meeting number {i} next week, thanks."}
        for i in range(6)
    ] + [
        {"id": "fr", "url": URL, "source": SOURCE,
         "text": "Le chat est sur la table et il dort depuis ce matin, comme toujours."},
        {"id": "dup", "url": URL, "source": SOURCE,
         "text": f"Please write to {EMAIL} about the meeting number 0 next week, thanks."},
    ]  # fmt: skip
    write_jsonl(tmp_path / "data" / "a.jsonl", docs)
    stages = [
        {"language_filter": {"languages": ["en"], "min_score": 0.1, "model": "cld2"}},
        {"pii": {"entities": {"EMAIL_ADDRESS": "redact"}}},
        {"exact_dedup": {}},
        {"tokenize": {"source": TOKENIZER}},
    ]
    version = build(tmp_path, stages=stages, fields={"url": "string", "source": "string"})
    text = (version / NAME).read_text()
    for value in (EMAIL, URL, SOURCE, "jane", "meeting", "Le chat"):
        for form in {value, json.dumps(value)[1:-1], value.lower()}:
            assert form not in text, form  # no document text or metadata value
    assert header(version)["language"] == ["en"]
    assert "- `language:fr`: 1" in text and "- `duplicate`: 1" in text
    assert "- `values/EMAIL_ADDRESS/redact`: 7" in text  # the PII stage, counted only
    m = json.loads((version / "manifest.json").read_text())
    digests = [v for k, v in m["stages"][3]["software"].items() if k.startswith("tokenizer_")]
    assert digests and all(d in text for d in digests)
    assert f"{m['tokens']} tokens" in text
    assert f"From `statistics.json` (sha256 `{m['statistics']['sha256']}`)" in text
    assert f"| a.jsonl | 8 | 0 | {m['counts']['written']} |" in text.replace("data/", "")
    assert verify(version)[0] == 0


def test_the_card_is_the_same_bytes_whatever_the_workers(tmp_path: Path) -> None:
    one = build(tmp_path, engine={"workers": 1}, stages=[{"exact_dedup": {}}])
    two = build(tmp_path / "again", engine={"workers": 2}, stages=[{"exact_dedup": {}}])
    assert (one / NAME).read_bytes() == (two / NAME).read_bytes()


@pytest.mark.parametrize(
    ("n", "category"),
    [(0, "n<1K"), (999, "n<1K"), (1000, "1K<n<10K"), (123_456, "100K<n<1M"),
     (10**12, "n>1T")],
)  # fmt: skip
def test_size_categories_are_the_hub_s(n: int, category: str) -> None:
    assert size_category(n) == category

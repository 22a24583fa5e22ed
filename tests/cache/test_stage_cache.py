"""The stage cache in a run: a change to stage k runs no stage before k, and the version is
byte-identical to a build from scratch (curate.cache.replay, curate.cache.keys).

Each test builds a recipe, changes one thing, builds again in the same output root (the
cache's home) and in a fresh root (no cache to use), and compares every file of the two
versions but the manifest, whose timings differ; the manifests' counts must agree. What ran
and what was reused is read from the manifest's per-stage `cache` record.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, corpus, write_jsonl

import curate

TOKENIZER = str(REPO / "sample_data" / "chat" / "tokenizer" / "tokenizer.json")

STAGES: list[dict[str, Any]] = [
    {"normalize": {}},
    {"filter_length": {"min_words": 5}},
    {"exact_dedup": {}},
    {"minhash_dedup": {"threshold": 0.8}},
    {"filter_length": {"min_words": 6}},
    {"tokenize": {"source": TOKENIZER}},
]


def recipe_dict(**overrides: Any) -> dict[str, Any]:
    recipe: dict[str, Any] = {
        "name": "t",
        "inputs": ["data/a.jsonl", "data/b.jsonl"],
        "id_field": "id",
        "partition_size": "4KB",
        "batch_size": "2KB",
        "stages": copy.deepcopy(STAGES),
        "output": {"root": "out", "fsync": False},
        "engine": {"workers": 1},
    }
    recipe.update(overrides)
    return recipe


def make_data(folder: Path) -> None:
    docs = corpus(300, dup_every=6)
    for i in range(0, 300, 10):  # near-duplicates: one word more than an earlier document
        docs[i] = {"id": docs[i]["id"], "text": docs[i // 3]["text"] + " extra"}
    write_jsonl(folder / "data" / "a.jsonl", docs[:180])
    write_jsonl(folder / "data" / "b.jsonl", docs[180:])


def build(folder: Path, recipe: dict[str, Any], root: str = "out") -> Path:
    recipe = copy.deepcopy(recipe)
    recipe["output"]["root"] = root
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return curate.run(path).path


def files(version: Path) -> dict[str, str]:
    return {
        str(p.relative_to(version)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(version.rglob("*"))
        if p.is_file() and p.name not in ("manifest.json", "README.md")
    }


def card(version: Path, named: str) -> str:
    """The dataset card, with the version's name in it replaced (it names its version)."""
    text = (version / "README.md").read_text()
    return text.replace(f"t {version.name}", f"t {named}").replace(
        f"t/{version.name}", f"t/{named}"
    )


def manifest(version: Path) -> dict[str, Any]:
    return json.loads((version / "manifest.json").read_text())


def caching(version: Path) -> list[dict[str, Any] | None]:
    return [s.get("cache") for s in manifest(version)["stages"]]


def assert_same_as_scratch(folder: Path, recipe: dict[str, Any], cached: Path) -> None:
    scratch = build(folder, recipe, root=f"scratch-{len(list(folder.glob('scratch-*')))}")
    assert files(cached) == files(scratch)
    assert card(cached, "vN") == card(scratch, "vN")
    a, b = manifest(cached), manifest(scratch)
    assert a["counts"] == b["counts"]
    keep = ("docs_in", "docs_out", "changed", "removed", "counters")
    assert [{k: s[k] for k in keep} for s in a["stages"]] == [
        {k: s[k] for k in keep} for s in b["stages"]
    ]
    assert a["fingerprint"] == b["fingerprint"]
    assert json.dumps(details(a)) == json.dumps(details(b))  # in the same order, too


def details(m: dict[str, Any]) -> list[dict[str, Any]]:
    """Each stage's details as the manifest lists them, but for what says when and from
    where a decision was made."""
    out = []
    for stage in m["stages"]:
        d = {k: v for k, v in stage["details"].items() if not k.endswith("seconds")}
        if "decision" in d:
            d["decision"] = {
                k: v for k, v in d["decision"].items() if k not in ("seconds", "reused_from")
            }
        out.append(d)
    return out


CHANGES = {  # stage position -> a change of its parameters that changes its output
    0: {"form": "NFKC"},
    1: {"min_words": 4},  # fused after normalize, in the same pass
    3: {"threshold": 0.6},  # a barrier: its signatures are kept, only banding is redone
    4: {"min_words": 7},
    5: {"bos": True},
}


@pytest.mark.parametrize("k", sorted(CHANGES))
def test_changing_stage_k_runs_no_stage_before_it(tmp_path: Path, k: int) -> None:
    make_data(tmp_path)
    base = recipe_dict()
    first = build(tmp_path, base)
    assert all(c is not None and c["reused"] == 0 for c in caching(first))  # a cold run
    changed = recipe_dict()
    name = next(iter(changed["stages"][k]))
    changed["stages"][k][name].update(CHANGES[k])
    second = build(tmp_path, changed)
    assert second != first
    cache = caching(second)
    for i, c in enumerate(cache):
        assert c is not None
        if i < k or (i == k and name == "minhash_dedup"):
            assert c["ran"] == 0 and c["reused"] > 0, (i, c)  # not executed
            assert c["reused_from"] == [first.name]
        elif i == k:
            assert c["reused"] == 0 and c["ran"] > 0, (i, c)  # executed, for every partition
    assert_same_as_scratch(tmp_path, changed, second)


def test_changing_only_split_runs_no_stage(tmp_path: Path) -> None:
    make_data(tmp_path)
    build(tmp_path, recipe_dict())
    split = recipe_dict(split={"validation": 0.2, "seed": 3})
    second = build(tmp_path, split)
    assert all(c is not None and c["ran"] == 0 for c in caching(second))
    assert_same_as_scratch(tmp_path, split, second)


def test_a_new_file_that_removes_one_old_document_reruns_only_its_partition(
    tmp_path: Path,
) -> None:
    make_data(tmp_path)
    first = build(tmp_path, recipe_dict())
    parts = manifest(first)["partitions"]
    victim = json.loads((tmp_path / "data" / "b.jsonl").read_text().splitlines()[1])
    assert victim["id"] == "d181"  # unique: no duplicate or near-duplicate of it, or it of one
    write_jsonl(tmp_path / "data" / "0.jsonl", [{"id": "new", "text": victim["text"]}])
    grown = recipe_dict(inputs=["data/0.jsonl", "data/a.jsonl", "data/b.jsonl"])
    second = build(tmp_path, grown)
    assert manifest(second)["stages"][2]["removed"]["duplicate"] == (
        manifest(first)["stages"][2]["removed"]["duplicate"] + 1
    )
    cache = caching(second)
    for i in (0, 1):  # before the barrier: only the new file's partition runs
        assert (cache[i]["reused"], cache[i]["ran"]) == (len(parts), 1), (i, cache[i])
    for i in (4, 5):  # after it: the new partition and the one that lost a document
        assert cache[i]["ran"] == 2 and cache[i]["reused"] == len(parts) - 1, (i, cache[i])
    assert_same_as_scratch(tmp_path, grown, second)


def test_a_damaged_entry_is_recomputed_not_trusted(tmp_path: Path) -> None:
    make_data(tmp_path)
    first = build(tmp_path, recipe_dict())
    entries = tmp_path / "out" / "t" / ".cache" / "stages"
    damaged = sorted(entries.rglob("rows.arrow"))
    assert damaged
    for rows in damaged:  # one byte flipped in every map stage's kept rows
        data = bytearray(rows.read_bytes())
        data[len(data) // 2] ^= 0xFF
        os.chmod(rows, 0o640)
        rows.write_bytes(bytes(data))
    changed = recipe_dict()
    changed["stages"][5]["tokenize"]["bos"] = True
    second = build(tmp_path, changed)
    assert second != first
    for i in (0, 1, 4):  # map stages: recomputed everywhere; barriers kept their bases
        c = caching(second)[i]
        assert c is not None and c["reused"] == 0 and c["ran"] > 0, (i, c)
    assert_same_as_scratch(tmp_path, changed, second)


USER_STAGE = """
import pyarrow as pa
import pyarrow.compute as pc
from curate.stages.base import MapStage, StageParams, StageResult


class Shout(MapStage):
    name = "shout"
    Params = StageParams

    def process(self, batch):
        text = pc.utf8_upper(batch.column(self.text_field)){EDIT}
        at = batch.schema.get_field_index(self.text_field)
        return StageResult(batch.set_column(at, self.text_field, text), changed=batch.num_rows)
"""


def test_editing_a_stage_s_code_reruns_it_and_no_stage_before(tmp_path: Path) -> None:
    make_data(tmp_path)
    (tmp_path / "user_stages.py").write_text(USER_STAGE.replace("{EDIT}", ""))
    recipe = recipe_dict(stages=[{"normalize": {}}, {"user_stages:Shout": {}}, {"exact_dedup": {}}])
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}

    def run() -> Path:
        cmd = [sys.executable, "-m", "curate.cli", "run", "--quiet", "recipe.yaml"]
        subprocess.run(cmd, cwd=tmp_path, env=env, check=True, capture_output=True)
        root = tmp_path / "out" / "t"
        return root / (root / "LATEST").read_text().strip()

    first = run()
    (tmp_path / "user_stages.py").write_text(
        USER_STAGE.replace("{EDIT}", '\n        text = pc.replace_substring(text, "W", "V")')
    )
    second = run()
    assert second != first
    normalize, shout, exact = caching(second)
    assert normalize is not None and normalize["ran"] == 0
    assert shout is not None and shout["reused"] == 0 and shout["ran"] > 0
    assert exact is not None and exact["reused"] == 0


SETUP_STAGE = """
import os
from curate.stages.base import MapStage, StageParams, StageResult


class Logged(MapStage):
    name = "logged"
    Params = StageParams

    def setup(self):
        with open(os.environ["SETUP_LOG"], "a") as f:
            f.write("setup\\n")

    def process(self, batch):
        return StageResult(batch)
"""


def test_a_reused_stage_is_not_even_set_up(tmp_path: Path) -> None:
    """A stage taken from the cache loads nothing (a Presidio analyzer, a tokenizer): a
    rerun after changing a later stage pays for that stage only."""
    make_data(tmp_path)
    (tmp_path / "setup_stages.py").write_text(SETUP_STAGE)
    log = tmp_path / "setups.txt"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    env["SETUP_LOG"] = str(log)
    for min_words in (3, 4):
        stages = [{"setup_stages:Logged": {}}, {"filter_length": {"min_words": min_words}}]
        recipe = recipe_dict(stages=stages, engine={"workers": 1})
        (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
        cmd = [sys.executable, "-m", "curate.cli", "run", "--quiet", "recipe.yaml"]
        subprocess.run(cmd, cwd=tmp_path, env=env, check=True, capture_output=True)
    assert log.read_text().splitlines() == ["setup"]  # the first run's, none in the second


def test_a_change_after_the_barriers_reuses_their_decisions(tmp_path: Path) -> None:
    """Every partition's rows the same and the barrier the same: its decision (banding,
    pairs, clusters over the whole corpus) is taken from the cache, not made again."""
    make_data(tmp_path)
    first = build(tmp_path, recipe_dict())
    changed = recipe_dict()
    changed["stages"][5]["tokenize"]["bos"] = True
    second = build(tmp_path, changed)
    for i in (2, 3):
        decision = manifest(second)["stages"][i]["details"]["decision"]
        assert decision["reused_from"] == first.name, decision  # the version, by name
        assert "reused_from" not in manifest(first)["stages"][i]["details"]["decision"]
    assert_same_as_scratch(tmp_path, changed, second)
    threshold = recipe_dict()
    threshold["stages"][3]["minhash_dedup"]["threshold"] = 0.6
    third = build(tmp_path, threshold)  # MinHash decides again; exact dedup's is reused
    assert "reused_from" in manifest(third)["stages"][2]["details"]["decision"]
    assert "reused_from" not in manifest(third)["stages"][3]["details"]["decision"]
    assert_same_as_scratch(tmp_path, threshold, third)


def test_a_copied_project_folder_keeps_its_cache(tmp_path: Path) -> None:
    """Keys name what stages do, not where the recipe sits: a project folder copied or moved
    (recipe, inputs and output root together) reuses every entry."""
    here = tmp_path / "a"
    make_data(here)
    build(here, recipe_dict())
    moved = tmp_path / "b"
    shutil.copytree(here, moved, symlinks=True)
    changed = recipe_dict()
    changed["stages"][5]["tokenize"]["bos"] = True
    second = build(moved, changed)
    for record in caching(second)[:5]:
        assert record is not None and record["ran"] == 0 and record["reused"] > 0, record
    assert_same_as_scratch(moved, changed, second)

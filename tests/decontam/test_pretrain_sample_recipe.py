"""recipes/pretrain-sample.yaml: the complete pre-training recipe runs on sample_data/."""

from __future__ import annotations

from pathlib import Path

import yaml
from conftest import REPO

import curate


def test_pretrain_sample_recipe(tmp_path: Path) -> None:
    (tmp_path / "sample_data").symlink_to(REPO / "sample_data", target_is_directory=True)
    recipe = yaml.safe_load((REPO / "recipes" / "pretrain-sample.yaml").read_text())
    recipe["output"].update(root="../out", fsync=False)
    path = tmp_path / "recipes" / "pretrain-sample.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    version = curate.run(path)
    stages = {s["name"]: s for s in version.manifest["stages"]}
    assert list(stages) == [
        "normalize", "filter_length", "language_filter", "quality_filter",
        "exact_dedup", "minhash_dedup", "decontaminate", "pii", "tokenize",
    ]  # fmt: skip
    assert stages["decontaminate"]["removed"] == {"benchmark:quiz": 1}
    assert stages["decontaminate"]["details"]["benchmarks"][0]["name"] == "quiz"
    assert stages["language_filter"]["counters"]["language:en"] > 300
    kept = stages["quality_filter"]["docs_out"] / stages["quality_filter"]["docs_in"]
    assert 0.5 < kept < 0.95  # the sample's thresholds keep most of its prose
    assert "archive-doc-0008" not in version.to_arrow().column("id").to_pylist()

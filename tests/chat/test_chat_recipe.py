"""The instruction-tuning recipe end to end on sample_data/chat: counts, quarantine, labels."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
from conftest import REPO

import curate


def test_finetune_recipe_runs_on_the_samples(tmp_path: Path) -> None:
    shutil.copytree(REPO / "sample_data" / "chat", tmp_path / "sample_data" / "chat")
    (tmp_path / "recipes").mkdir()
    shutil.copy(REPO / "recipes" / "finetune-chat.yaml", tmp_path / "recipes")
    version = curate.run(tmp_path / "recipes" / "finetune-chat.yaml")
    folder = Path(version.path)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["recipe"]["chat"]["shape"] == "auto"
    stage = next(s for s in manifest["stages"] if s["name"] == "chat_template")
    assert (stage["docs_in"], stage["docs_out"]) == (13, 13)  # after the text stages
    assert stage["counters"] == {"content_has_special_token_text": 1}
    reasons = []
    for path in sorted((folder / "quarantine").glob("*.arrow")):
        reasons += pa.ipc.open_stream(path).read_all().column("reason").to_pylist()
    assert len(reasons) == 6 and "chat: no assistant turn" in reasons
    rows = []
    for path in sorted((folder / "shards").glob("*.arrow")):
        rows += pa.ipc.open_stream(path).read_all().to_pylist()
    assert len(rows) == 13
    for row in rows:
        assert len(row["input_ids"]) == len(row["labels"]) == row["num_tokens"]
        kept = [lab for lab in row["labels"] if lab != -100]
        assert kept and kept[-1] == 2001  # every assistant turn ends with <|im_end|>

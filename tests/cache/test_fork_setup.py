"""The driver sets up Presidio before forking the local engine's workers only when a
partition may run the pii stage (curate.fork_setup).

Each run is the CLI with two workers and `-vv`, whose log names the process that built a
Presidio analyzer: the driver (the CLI's own process, before the fork) or a worker.
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import corpus, write_jsonl

pytest.importorskip("presidio_analyzer")

RECIPE: dict[str, Any] = {
    "name": "t",
    "inputs": ["data/*.jsonl"],
    "id_field": "id",
    "partition_size": "8KB",
    "stages": [
        {"normalize": {}},
        {"exact_dedup": {}},
        {"pii": {}},
        {"filter_length": {"min_words": 3}},
    ],
    "output": {"root": "out", "fsync": False},
    "engine": {"workers": 2},
}


def run(folder: Path, min_words: int) -> list[int]:
    """The processes that built an analyzer in one `curate run`, the driver as 0."""
    recipe = copy.deepcopy(RECIPE)
    recipe["stages"][3]["filter_length"]["min_words"] = min_words
    (folder / "recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    env = {**os.environ, "CURATE_CACHE": str(folder / "home-cache")}
    cmd = [sys.executable, "-m", "curate.cli", "-vv", "run", "recipe.yaml"]
    proc = subprocess.Popen(cmd, cwd=folder, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    built = [int(p) for p in re.findall(r"pii: analyzer built in process (\d+)", err)]
    return [0 if pid == proc.pid else pid for pid in built]


def test_presidio_is_set_up_before_the_fork_only_when_pii_may_run(tmp_path: Path) -> None:
    docs = corpus(120)
    for i in range(0, 120, 7):
        docs[i]["text"] += f" Write to person{i}@mail.example.org or call (415) 555-{i:04d}."
    write_jsonl(tmp_path / "data" / "a.jsonl", docs[:60])
    write_jsonl(tmp_path / "data" / "b.jsonl", docs[60:])

    assert run(tmp_path, 3) == [0]  # cold: once, in the driver, inherited by both workers
    # A later stage changed: every partition replays pii from the stage cache, and nothing
    # builds an analyzer (before this, the driver built one anyway: 1.4 CPU seconds).
    assert run(tmp_path, 4) == []

    # A new file: its partition runs pii, and its digest was not known before the run.
    write_jsonl(tmp_path / "data" / "c.jsonl", corpus(40, prefix="c"))
    assert run(tmp_path, 4) == [0]
    assert run(tmp_path, 5) == []

    # The record is a hint read with suspicion: anything else in it is no record at all.
    (tmp_path / "out" / "t" / ".cache" / "setups.json").write_text('{"not": "a list"')
    assert run(tmp_path, 6) == [0]

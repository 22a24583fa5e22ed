"""Shared fixtures: small corpora written to tmp folders, recipes pointing at them, and the
chmods and bit flips that damage a published version as a user or a disk would."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return path


def write_recipe(folder: Path, **overrides: Any) -> Path:
    recipe: dict[str, Any] = {
        "name": "t",
        "inputs": ["data/*.jsonl"],
        "id_field": "id",
        "stages": [{"normalize": {}}, {"exact_dedup": {}}],
        "output": {"root": "out", "fsync": False},
        "engine": {"workers": 1},
    }
    recipe.update(overrides)
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return path


def run_verbose(
    folder: Path,
    inputs: str,
    partition_size: str,
    workers: int,
    stages: list[dict[str, Any]] | None = None,
    **recipe_keys: Any,
) -> str:
    """`curate -vv run` of a pii-only recipe (or of `stages`, with `recipe_keys` added) in a
    fresh process, in `folder` (made here, with a stage cache of its own); returns its
    stderr, where the workers' debug lines land. The version is `folder`/out/t/v1."""
    folder.mkdir()
    recipe = {
        "name": "t", "inputs": [inputs], "id_field": "id", "partition_size": partition_size,
        "stages": stages or [{"pii": {}}], "output": {"root": "out", "fsync": False},
        "engine": {"workers": workers}, **recipe_keys,
    }  # fmt: skip
    (folder / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    env = {**os.environ, "CURATE_CACHE": str(folder / "cache")}
    cmd = [sys.executable, "-m", "curate.cli", "-vv", "run", "recipe.yaml"]
    proc = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stderr


def shard_digests(version: Path) -> list[str]:
    """sha256 of each of a version's shards, in name order (at least one)."""
    shards = sorted((version / "shards").glob("*.arrow"))
    assert shards
    return [hashlib.sha256(s.read_bytes()).hexdigest() for s in shards]


def corpus(n: int, *, dup_every: int = 5, prefix: str = "d") -> list[dict[str, Any]]:
    """n documents of varied text; every `dup_every`-th repeats an earlier one."""
    out = []
    for i in range(n):
        if dup_every and i % dup_every == dup_every - 1:
            text = out[i // 2]["text"]
        else:
            text = f"Document {i} says: " + " ".join(
                f"w{(i * 7 + k) % 97}" for k in range(5 + i % 13)
            )
        out.append({"id": f"{prefix}{i}", "text": text})
    return out


def writable(folder: Path) -> None:
    """A published (read-only) version made writable, so a test can damage it; links are left
    as they are (chmod would change what they lead to)."""
    for p in [folder, *folder.rglob("*")]:
        if not p.is_symlink():
            os.chmod(p, 0o750 if p.is_dir() else 0o640)


def sealed(folder: Path) -> None:
    """Read-only again, as curate publishes it: only the damage differs from a real version."""
    for p in [*folder.rglob("*"), folder]:
        if not p.is_symlink():
            os.chmod(p, 0o550 if p.is_dir() else 0o440)


def flip_byte(path: Path, at: int | None = None) -> None:
    """Flip one bit of a file (its middle byte unless `at` says), keeping its size: damage only a
    hash sees."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2 if at is None else at] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder with data/a.jsonl and data/b.jsonl (with duplicates across them)."""
    docs = corpus(60)
    write_jsonl(tmp_path / "data" / "a.jsonl", docs[:30])
    write_jsonl(tmp_path / "data" / "b.jsonl", docs[30:])
    return tmp_path

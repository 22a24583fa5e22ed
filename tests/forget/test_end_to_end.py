"""Issue 20's end-to-end test, as a data-protection request goes: one person's name and e-mail
planted in 3 documents over 2 inputs; a recipe with normalize, MinHash, pii and packed
tokenize; `curate trace --match` finds all 3 with their files and lines; `curate forget
--match`; `curate gc --purge-forgotten`; then nothing under the root holds the person's text
or its token sequence (each shard's tokens read as one stream), every other document is
byte-identical to before, every remaining version verifies, and the next run is a no-op."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import yaml
from conftest import REPO
from tokenizers import Tokenizer

import curate
from curate.verify import verify

TOKENIZER = REPO / "sample_data" / "tokenizer"
NAME = "Orla Fenwick-Batts"
EMAIL = "orla.fenwick@example.net"
PERSON = f"{NAME} ({EMAIL})"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "curate.cli", *args], env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip


def run_killed_before_publishing(recipe: Path, phase_log: Path) -> None:
    """`curate run` of the recipe, SIGKILLed just before it publishes: what it staged stays."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "CURATE_KILL_AT": "publish:1",
           "CURATE_PHASE_LOG": str(phase_log)}  # fmt: skip
    killed = subprocess.run([sys.executable, "-m", "curate.cli", "run", str(recipe)], env=env,
                            capture_output=True, start_new_session=True, check=False)  # fmt: skip
    assert killed.returncode == -9, killed.stderr


def text_of(i: int) -> str:
    return f"Minutes {i} record " + " ".join(f"v{(i * 7 + k) % 83}" for k in range(16 + i % 5))


def make(folder: Path) -> Path:
    lines = [text_of(i) for i in range(90)]
    lines[8] = f"Contact {PERSON} for  the minutes of meeting 8."  # two spaces: normalize
    lines[9] = text_of(8) + " draft"  # near copies of other minutes: MinHash removes them
    lines[30] = f"Travel booked by {PERSON} on the 30th."
    lines[71] = f"{NAME} wrote: " + text_of(71) + f" Reply to {EMAIL}."
    (folder / "in").mkdir()
    (folder / "in" / "one.jsonl").write_text(
        "".join(json.dumps({"text": t}) + "\n" for t in lines[:50])
    )
    (folder / "in" / "two.jsonl").write_text(
        "".join(json.dumps({"text": t}) + "\n" for t in lines[50:])
    )
    recipe = {
        "name": "people",
        "inputs": ["in/*.jsonl"],
        "partition_size": 2000,
        "output": {"root": "out", "fsync": False, "shard_size": 3000},
        "engine": {"workers": 1},
        "stages": [
            {"normalize": {"collapse_spaces": True}},
            {"minhash_dedup": {"threshold": 0.7}},
            {"pii": {}},
            {"tokenize": {"source": str(TOKENIZER), "pack": {"seq_len": 24}}},
        ],
    }
    (folder / "recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    return folder / "recipe.yaml"


def documents(version: curate.Version) -> dict[str, list[int]]:
    """Each document's tokens, from the version's packed rows (pieces joined in order)."""
    out: dict[str, list[int]] = {}
    for shard in version.manifest["shards"]:
        table = read(version.path / shard["path"])
        for tokens, ids, starts in zip(table.column("input_ids").to_pylist(),
                                       table.column("doc_ids").to_pylist(),
                                       table.column("doc_starts").to_pylist(), strict=True):  # fmt: skip
            ends = [*starts[1:], len(tokens)]
            for doc_id, a, b in zip(ids, starts, ends, strict=True):
                out.setdefault(doc_id, []).extend(tokens[a:b])
    return out


def read(path: Path) -> pa.Table | None:
    for opener in (pa.ipc.open_stream, pa.ipc.open_file):
        try:
            with pa.memory_map(str(path)) as source:
                return opener(source).read_all()
        except (pa.ArrowInvalid, OSError):
            continue
    return None


def streams(root: Path) -> list[np.ndarray]:
    """Every Arrow file's token stream under root: each shard's rows read as one sequence."""
    out = []
    for path in root.rglob("*.arrow"):
        table = read(path) if path.is_file() else None
        if table is not None and "input_ids" in table.schema.names:
            out.append(np.asarray(pc.list_flatten(table.column("input_ids")), np.int64))
    return out


def contains(stream: np.ndarray, seq: list[int]) -> bool:
    n = len(seq)
    if len(stream) < n:
        return False
    windows = np.lib.stride_tricks.sliding_window_view(stream, n)
    return bool((windows == np.asarray(seq)).all(axis=1).any())


def texts_holding(root: Path, needles: list[str]) -> list[Path]:
    """Files whose bytes, or whose Arrow string columns once decompressed, hold a needle."""
    found = []
    for path in (p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if any(n.encode() in data for n in needles):
            found.append(path)
            continue
        table = read(path) if path.suffix == ".arrow" else None
        if table is None:
            continue
        for column in table.columns:
            if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
                values = "\n".join(v for v in column.to_pylist() if v)
                if any(n in values for n in needles):
                    found.append(path)
                    break
    return found


def test_a_person_is_forgotten_everywhere(tmp_path: Path) -> None:
    recipe = make(tmp_path)
    before = curate.run(recipe)
    store = before.path.parent
    name_tokens = (
        Tokenizer.from_file(str(TOKENIZER / "tokenizer.json"))
        .encode(" " + NAME.split()[1], add_special_tokens=False)
        .ids
    )
    assert any(contains(s, name_tokens) for s in streams(before.path))  # there to find
    assert texts_holding(store, [NAME])

    # trace --match finds all 3, with their files and lines
    out = cli("trace", str(before.path), "--match", re.escape(EMAIL))
    assert out.returncode == 0, out.stderr
    assert EMAIL not in out.stdout and NAME not in out.stdout
    blocks = out.stdout.strip().split("\n\n")
    assert len(blocks) == 3
    where = sorted(re.search(r"(one|two)\.jsonl", b).group(1) for b in blocks)  # type: ignore[union-attr]
    assert where == ["one", "one", "two"]
    for line in (9, 31, 22):  # one.jsonl lines 9 and 31, two.jsonl line 22
        assert any(re.search(rf"\bline\s+{line}\b", b) for b in blocks), (line, out.stdout)

    old = documents(before)
    before.release()  # a reader holding v1 would make the purge refuse (tested elsewhere)

    # forget them, then purge what still holds them
    out = cli("forget", str(recipe), "--match", re.escape(EMAIL), "--reason", "DSR 2026-04")
    assert out.returncode == 0, out.stderr
    assert "forgot 3 documents" in out.stdout
    out = cli("gc", str(store), "--purge-forgotten")
    assert out.returncode == 0, out.stdout + out.stderr

    # nothing under the root holds the person's text or tokens
    assert texts_holding(store, [NAME, EMAIL, "Fenwick"]) == []
    assert not any(contains(s, name_tokens) for s in streams(store))

    # every other document is byte-identical; every remaining version verifies
    after = curate.open(store)
    new = documents(after)
    gone = set(old) - set(new)
    assert len(gone) == 3 and set(new) < set(old)
    assert all(new[i] == old[i] for i in new)
    for version in (p for p in store.iterdir() if re.fullmatch(r"v\d+", p.name)):
        assert verify(version) == [], version
    # v1 was packed again without them (curate.forget.rewrite, .repack): built from the same
    # inputs by the same recipe, it is now the very version forget published, byte for byte
    assert "people/v1: rewritten without 3 forgotten document(s)" in out.stdout
    v1 = curate.open(store, "v1")
    assert [(s["path"], s["sha256"]) for s in v1.manifest["shards"]] == [
        (s["path"], s["sha256"]) for s in after.manifest["shards"]
    ]
    assert documents(v1) == new

    # and the next run is a no-op
    again = curate.run(recipe)
    assert again.up_to_date and again.name == after.name

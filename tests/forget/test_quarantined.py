"""Quarantined records can be forgotten (curate.forget.quarantined): a line curate could not
read is listed in `quarantine/` by file, line and offset, a pointer at the person's data in
the input, so `forget --match` and `--source` take those lines too; later versions list
them nowhere (still counted as quarantined), the erasure follows the line when it moves,
`--where` names what still lists them and the purge removes it."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import yaml
from conftest import REPO

import curate
from curate.forget_command import Selection, forget
from curate.verify import verify

NAME = "Ilse Marrowby"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "curate.cli", *args], env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip


def lines_a(extra: int = 0) -> str:
    good = [json.dumps({"text": f"Plain note number {i} of the ledger"}) for i in range(12)]
    good[3] = json.dumps({"text": f"Ask {NAME} about the ledger"})
    good.insert(6, '{"text": "' + NAME + " wrote this, unterminated")  # malformed JSON
    good.insert(9, json.dumps({"body": f"{NAME} in the wrong field"}))  # no text field
    good.insert(10, '{"text": "no name, malformed"')
    return "\n".join([json.dumps({"text": f"inserted {k}"}) for k in range(extra)] + good) + "\n"


def make(folder: Path) -> Path:
    (folder / "in").mkdir(parents=True)
    (folder / "in" / "a.jsonl").write_text(lines_a())
    b = [json.dumps({"text": f"Other file note {i}"}) for i in range(8)]
    b.insert(2, '{"text": "' + NAME + ' in a compressed file"')
    (folder / "in" / "b.jsonl.gz").write_bytes(gzip.compress(("\n".join(b) + "\n").encode()))
    recipe = {
        "name": "q",
        "inputs": ["in/a.jsonl", "in/b.jsonl.gz"],
        "output": {"root": "out", "fsync": False},
        "on_error": {"mode": "quarantine", "max_quarantined": 0.9},
        "stages": [{"normalize": {}}, {"exact_dedup": {}}],
    }
    (folder / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    return folder / "recipe.yaml"


def listed(version: curate.Version) -> list[tuple[str, int]]:
    out = []
    for record in version.manifest["quarantine"]:
        with pa.memory_map(str(version.path / record["path"])) as f:
            table = pa.ipc.open_stream(f).read_all()
        out += [(r["file"], r["line"]) for r in table.to_pylist()]
    return sorted(out)


def test_forget_match_takes_quarantined_lines_and_they_stay_out(tmp_path: Path) -> None:
    recipe = make(tmp_path)
    before = curate.run(recipe)
    assert listed(before) == [("in/a.jsonl", 7), ("in/a.jsonl", 10), ("in/a.jsonl", 11),
                              ("in/b.jsonl.gz", 3)]  # fmt: skip
    before.release()
    done = forget(recipe, Selection(match=re.compile(NAME)), "request 9")
    assert (done.found, done.lines) == (1, 3)
    after = done.version
    assert listed(after) == [("in/a.jsonl", 11)]  # the one without the name
    assert after.manifest["counts"]["quarantined"] == before.manifest["counts"]["quarantined"]
    assert after.manifest["forgotten"]["unlisted"] == 3
    exclusions = (tmp_path / "out" / "q" / ".forget" / "exclusions.json").read_text()
    assert NAME not in exclusions and "Marrowby" not in exclusions

    where = cli("forget", str(tmp_path / "out" / "q"), "--where")
    assert where.returncode == 0, where.stderr
    assert any(line.startswith("version") and "/v1/quarantine/" in line
               for line in where.stdout.splitlines())  # fmt: skip
    assert not any("/v2/" in line for line in where.stdout.splitlines())
    assert "Marrowby" not in where.stdout
    purged = cli("gc", str(tmp_path / "out" / "q"), "--purge-forgotten")
    assert purged.returncode == 0, purged.stdout + purged.stderr
    v1 = tmp_path / "out" / "q" / "v1"  # rewritten without them (curate.forget.rewrite)
    assert verify(v1) == [] and verify(after.path) == []
    assert listed(curate.open(tmp_path / "out" / "q", "v1")) == [("in/a.jsonl", 11)]

    # lines inserted before it: found again by its bytes, at its new place
    (tmp_path / "in" / "a.jsonl").write_text(lines_a(extra=2))
    moved = curate.run(recipe)
    assert listed(moved) == [("in/a.jsonl", 13)]


def test_forget_source_unlists_every_quarantined_record_of_it(tmp_path: Path) -> None:
    recipe = make(tmp_path)
    curate.run(recipe).release()
    done = forget(recipe, Selection(source="in/b.jsonl.gz"), "request 10")
    assert done.lines == 1
    assert listed(done.version) == [("in/a.jsonl", 7), ("in/a.jsonl", 10), ("in/a.jsonl", 11)]

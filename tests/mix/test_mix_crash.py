"""`curate mix` killed with SIGKILL (a power cut) while it links the sources' shards or writes
the index: nothing is visible (no version, no LATEST, no `.mixtures/` entry in a source), and
the next run publishes the same bytes an uninterrupted run does, and verifies. Killed just
after the rename, the version it made is found and kept by the next run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from mix_fixtures import mixture_file, source_recipe

import curate
from curate.verify import verify

SOURCES = [
    {"recipe": "web.yaml", "weight": 0.6, "max_epochs": 3},
    {"recipe": "code.yaml", "weight": 0.3},
    {"recipe": "docs.yaml", "weight": 0.1, "max_epochs": 2},
]
KILLS = ("mix_link:1", "mix_link:3", "mix_index:1", "publish:1")


def curate_mix(path: Path, log: Path, kill_at: str | None = None) -> int:
    env = {**os.environ, "PYTHONPATH": str(Path(curate.__file__).parent.parent),
           "CURATE_PHASE_LOG": str(log)}  # fmt: skip
    if kill_at:
        env["CURATE_KILL_AT"] = kill_at
    done = subprocess.run(
        [sys.executable, "-m", "curate.cli", "mix", str(path)],
        env=env, capture_output=True, text=True, start_new_session=True, timeout=300,
    )  # fmt: skip
    assert done.returncode in (0, -signal.SIGKILL), done.stderr
    return done.returncode


def made(version: Path) -> dict[str, object]:
    """What decides a mixture's bytes: its index, its shards, its record (paths aside)."""
    m = json.loads((version / "manifest.json").read_text())
    record = {k: v for k, v in m["mixture"].items() if k != "sources"}
    return {
        "shards": [(s["path"], s["sha256"]) for s in m["shards"]],
        "record": record,
        "sources": m["mixture"]["sources"],
        "tokens": m["tokens"],
    }


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mixcrash")
    for name, docs in (("web", 80), ("code", 50), ("docs", 30)):
        source_recipe(root, name, docs)
    curate.run(root / "web.yaml"), curate.run(root / "code.yaml"), curate.run(root / "docs.yaml")
    return root


@pytest.mark.parametrize("kill_at", KILLS)
def test_killed_mix_leaves_nothing_visible_and_reruns_to_the_same_bytes(
    folder: Path, kill_at: str
) -> None:
    whole = mixture_file(folder, SOURCES, file="whole.yaml", budget=3_000,
                         output={"root": "whole", "fsync": False})  # fmt: skip
    if not (folder / "whole" / "mix").exists():
        assert curate_mix(whole, folder / "whole.log") == 0
    want = made(folder / "whole" / "mix" / "v1")

    tag = kill_at.replace(":", "-")
    path = mixture_file(folder, SOURCES, file=f"{tag}.yaml", budget=3_000,
                        output={"root": tag, "fsync": False})  # fmt: skip
    log = folder / f"{tag}.log"
    assert curate_mix(path, log, kill_at) == -signal.SIGKILL
    assert kill_at.split(":")[0] in log.read_text()  # it was killed where asked
    dataset = folder / tag / "mix"
    entries = [e for n in ("web", "code", "docs") for e in (folder / "out" / n).glob(".mixtures/*")]
    refs = [e for e in entries if f"/{tag}/" in json.loads(e.read_text())["mixture"]]
    if kill_at.startswith("publish"):
        assert (dataset / "v1" / "manifest.json").is_file()  # renamed: complete, sealed
    else:
        assert not list(dataset.glob("v*")) and not (dataset / "LATEST").exists()
        assert refs == []  # no source was told of a mixture that does not exist
        assert curate.open(folder / "out" / "web").name == "v1"  # sources untouched

    assert curate_mix(path, folder / f"{tag}-again.log") == 0
    assert [p.name for p in dataset.glob("v*")] == ["v1"]
    assert (dataset / "LATEST").read_text().strip() == "v1"
    assert made(dataset / "v1") == want
    assert (dataset / "v1" / "index.arrow").read_bytes() == (
        folder / "whole" / "mix" / "v1" / "index.arrow"
    ).read_bytes()
    assert verify(dataset / "v1") == []
    assert not [p for p in dataset.iterdir() if p.name.startswith(".staging")]

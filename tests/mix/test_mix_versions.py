"""Mixtures are versions: `to_dataset()` and the loader's `dataset()` serve the samples in
index order, `curate export` writes them (megatron, parquet) as an uninterrupted reader would
see them, opening one holds its sources' read locks, and what a mixture draws from each
source is there for `curate forget --where`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from mix_fixtures import mixture_file, source_recipe

import curate
from curate.dirfd import Folder
from curate.export import export
from curate.mix.prepare import prepare
from curate.mixture_lookup import mixture_sources
from curate.mixture_refs import drawn_from
from curate.output.shards import read_stream
from curate.owned import is_held
from curate.verify import verify

SOURCES = [
    {"recipe": "web.yaml", "weight": 0.7, "max_epochs": 3},
    {"recipe": "code.yaml", "weight": 0.2},
    {"recipe": "docs.yaml", "weight": 0.1, "max_epochs": 2},
]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> curate.Version:
    root = tmp_path_factory.mktemp("mixv")
    for name, docs in (("web", 80), ("code", 50), ("docs", 20)):
        source_recipe(root, name, docs)
    return prepare(mixture_file(root, SOURCES, budget=4_000))


def samples(mixed: curate.Version) -> list[np.ndarray]:
    """The mixture's samples in index order, read straight from its sources' versions."""
    index = read_stream(mixed.path / "index.arrow")
    record = mixed.manifest["mixture"]["sources"]
    tables = [curate.open(Path(s["path"])).to_arrow() for s in record]
    return [
        tables[k].column("input_ids")[int(r)].values.to_numpy()
        for k, r in zip(index.column("source").to_numpy(), index.column("row").to_numpy(),
                        strict=True)
    ]  # fmt: skip


def test_to_dataset_is_the_samples_in_index_order(mixed: curate.Version) -> None:
    want = samples(mixed)
    ds = curate.open(mixed.path).to_dataset()
    assert len(ds) == mixed.manifest["mixture"]["samples"] == len(want) == 250
    got = ds.with_format("numpy")["input_ids"]
    assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
    from curate.loader import open_tokens

    arrow = open_tokens(mixed.path).dataset()  # the loader's, in stored types
    assert arrow[3]["input_ids"].to_pylist()[0] == want[3].tolist()
    assert not list(mixed.path.rglob("cache-*"))  # the indices went to the view, not here


def test_megatron_export_holds_the_samples_and_verifies(
    mixed: curate.Version, tmp_path: Path
) -> None:
    want = samples(mixed)
    out = tmp_path / "mega"
    manifest = export(mixed.path, "megatron", out)
    assert manifest.source.dataset == "mix" and manifest.parts[0].rows == len(want)
    assert manifest.parts[0].tokens == mixed.manifest["tokens"]
    data = np.fromfile(out / "data.bin", dtype=np.uint16)
    assert np.array_equal(data, np.concatenate(want))  # every sample, repeats, index order
    assert verify(out) == []


def test_parquet_export_by_the_cli(mixed: curate.Version, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(curate.__file__).parent.parent)}
    out = tmp_path / "pq"
    done = subprocess.run(
        [sys.executable, "-m", "curate.cli", "export", str(mixed.path), "--to", "parquet",
         str(out)], capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    table = pq.read_table(sorted((out / "data").glob("*.parquet")))
    got = table.column("input_ids").to_pylist()
    assert all(np.array_equal(a, b) for a, b in zip(got, samples(mixed), strict=True))
    assert json.loads((out / "export.json").read_text())["source"]["version"] == mixed.name


def test_opening_holds_the_sources_read_locks(mixed: curate.Version) -> None:
    from curate.loader import open_tokens

    paths = [Path(s["path"]) for s in mixed.manifest["mixture"]["sources"]]

    def held() -> list[bool]:
        found = []
        for p in paths:
            with Folder.open(p.parent) as dataset:
                found.append(is_held(dataset, ".locks", f"{p.name}.lock"))
        return found

    tokens = open_tokens(mixed.path)
    assert held() == [True, True, True]
    tokens.version.release()
    assert held() == [False, False, False]
    opened = curate.open(mixed.path)  # the plain reader of a version does the same
    assert held() == [True, True, True] and len(opened.held_sources) == 3
    opened.release()
    assert held() == [False, False, False]


def test_what_a_mixture_draws_is_there_for_forget(mixed: curate.Version) -> None:
    index = read_stream(mixed.path / "index.arrow")
    drawn = mixture_sources(mixed)
    assert [d.label for d in drawn] == ["web", "code", "docs"]
    for k, d in enumerate(drawn):
        assert drawn_from(d.path) == [mixed.path]
        want = np.unique(index.column("row").to_numpy()[index.column("source").to_numpy() == k])
        assert np.array_equal(d.rows, want)
        source = curate.open(d.path)
        assert d.shards == [s["path"] for s in source.manifest["shards"]]
        assert d.fingerprint == source.fingerprint
    assert mixture_sources(curate.open(drawn[0].path)) == []  # a plain version draws nothing


def test_a_copy_of_an_opened_mixture_does_not_release_its_sources(mixed: curate.Version) -> None:
    import copy

    opened = curate.open(mixed.path)
    source = Path(mixed.manifest["mixture"]["sources"][0]["path"])
    twin = copy.copy(opened)
    assert twin.held_sources == []
    twin.release()
    with Folder.open(source.parent) as dataset:
        assert is_held(dataset, ".locks", f"{source.name}.lock")
    opened.release()


def test_the_report_shows_target_vs_achieved(mixed: curate.Version) -> None:
    from curate.report import report

    page = report(curate.open(mixed.path)).html
    assert "Mixture: target vs achieved" in page
    for s in mixed.manifest["mixture"]["sources"]:
        assert f"<td>{s['name']}</td>" in page
        assert f"{s['tokens']:,}" in page and f"{round(s['target_tokens']):,}" in page

"""The Ray engine against the local one, on one small Ray cluster for the whole session.

Starting Ray costs ~7 s and ~0.7 GB, so these tests are few and share the cluster; the
rest of the suite runs on the local engine. They skip when Ray is not installed.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import yaml
from conftest import REPO, corpus, write_jsonl

import curate

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'curate[ray]'")

HERE = Path(__file__).resolve().parent
VOLATILE = {"seconds", "timings", "started", "finished", "engine", "decide_seconds"}


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    """One local Ray cluster for every Ray test of the session (they all live in this module,
    so it stops as soon as they are done and its memory goes back to the rest of the suite).
    Its workers import ray_stages from this folder."""
    os.environ["RAY_AUTH_MODE"] = "disabled"
    paths = [str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])]
    temp = tempfile.mkdtemp(prefix="ray-")  # short: Ray's socket paths must stay < 108 bytes
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _temp_dir=temp,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(paths)}},
    )
    try:
        yield
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)


def comparable(manifest: dict[str, Any]) -> dict[str, Any]:
    """A manifest without what may differ between engines: times, the engine, paths."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in VOLATILE}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    out = strip(manifest)
    out.pop("recipe_path")
    out["recipe"]["output"].pop("root")
    return dict(out)


def sample_recipe(folder: Path, kind: str) -> Path:
    """recipes/sample.yaml as it is today, on more partitions, and packed if it tokenizes.

    It is copied beside a link to sample_data/, so its relative paths resolve as they do
    in the repository.
    """
    if not (folder / "sample_data").exists():
        (folder / "sample_data").symlink_to(REPO / "sample_data", target_is_directory=True)
    recipe = yaml.safe_load((REPO / "recipes" / "sample.yaml").read_text())
    recipe["partition_size"] = "32KB"
    recipe["output"].update(root=f"../out-{kind}", fsync=False)
    recipe["output"]["examples"] = {"without_pii": True}  # examples, compared too (no pii stage)
    recipe["engine"] = {"kind": kind, "workers": 2}
    tokenize = [s["tokenize"] for s in recipe["stages"] if "tokenize" in s]
    if tokenize:  # packing runs in the shard writer: cover it too
        tokenize[0]["pack"] = {"seq_len": 256}
    else:
        recipe["stages"].append({"tokenize": {"source": "../sample_data/tokenizer"}})
    path = folder / "recipes" / f"{kind}.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return path


def files(version: curate.Version, key: str) -> list[tuple[str, str]]:
    return [(f["path"], f["sha256"]) for f in version.manifest[key]]


def local_and_ray(
    tmp_path: Path, name: str, partition_size: str, stage: dict[str, Any]
) -> tuple[curate.Version, curate.Version]:
    """The versions of `stage` then exact_dedup over tmp_path/data, built by the local
    engine and by Ray, 2 workers each."""
    versions = {}
    for kind in ("local", "ray"):
        recipe = {
            "name": name,
            "inputs": [str(tmp_path / "data" / "*.jsonl")],
            "id_field": "id",
            "partition_size": partition_size,
            "stages": [stage, {"exact_dedup": {}}],
            "output": {"root": str(tmp_path / f"out-{kind}"), "fsync": False},
            "engine": {"kind": kind, "workers": 2},
        }
        path = tmp_path / f"{kind}.yaml"
        path.write_text(yaml.safe_dump(recipe))
        versions[kind] = curate.run(path)
    return versions["local"], versions["ray"]


def same_bytes(local: curate.Version, on_ray: curate.Version) -> None:
    """Shards and rejected files byte for byte, manifests but for times and the engine."""
    for key in ("shards", "rejected"):
        assert files(on_ray, key) == files(local, key)
    assert comparable(on_ray.manifest) == comparable(local.manifest)


def test_sample_recipe_is_byte_identical_on_ray(ray_cluster: None, tmp_path: Path) -> None:
    local = curate.run(sample_recipe(tmp_path, "local"))
    on_ray = curate.run(sample_recipe(tmp_path, "ray"))
    assert on_ray.manifest["engine"]["kind"] == "ray"
    assert sum(i["partitions"] for i in local.manifest["inputs"]) >= 6
    assert local.manifest["packing"]["tail_shards"] == ["shards/tail-00000.arrow"]  # compared too
    for key in ("shards", "rejected", "quarantine", "examples", "lineage"):
        assert files(on_ray, key) == files(local, key)
    assert len(local.manifest["examples"]) >= 3  # filters' and barriers' examples
    assert comparable(on_ray.manifest) == comparable(local.manifest)
    barriers = [s for s in local.manifest["stages"] if s["kind"] == "barrier"]
    assert barriers and all(s["removed"] for s in barriers)  # the decisions did something
    # passes are plain tasks: Ray Data's import (0.8 s) and helper actors cost every run
    assert "ray.data" not in sys.modules


def tripwire_recipe(folder: Path, kind: str, marks: dict[str, Path]) -> Path:
    wire = {k: str(v) for k, v in marks.items()}
    recipe = {
        "name": "wired",
        "inputs": [str(folder / "data" / "*.jsonl")],
        "id_field": "id",
        "partition_size": "4KB",
        "stages": [
            {"normalize": {}},
            {"ray_stages:Tripwire": {"target": "d37", **wire, "fail": str(folder / "never")}},
            {"exact_dedup": {}},
            {"ray_stages:Tripwire": {"target": "d90", **wire, "log": str(folder / "log2")}},
        ],
        "output": {"root": str(folder / f"out-{kind}"), "fsync": False},
        "engine": {"kind": kind, "workers": 2},
    }
    path = folder / f"{kind}.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return path


def test_killed_worker_is_retried_and_an_interrupted_run_resumes(
    ray_cluster: None, tmp_path: Path
) -> None:
    docs = corpus(300, dup_every=4)
    write_jsonl(tmp_path / "data" / "a.jsonl", docs[:150])
    write_jsonl(tmp_path / "data" / "b.jsonl", docs[150:])
    marks = {"kill": tmp_path / "kill", "fail": tmp_path / "fail", "log": tmp_path / "log"}
    local = curate.run(tripwire_recipe(tmp_path, "local", marks))
    marks["log"].unlink()

    marks["kill"].touch()  # pass 1: the worker running d37's partition dies, Ray reruns it
    marks["fail"].touch()  # pass 2: d90's partition fails: the run stops after the barrier
    recipe = tripwire_recipe(tmp_path, "ray", marks)
    with pytest.raises(Exception, match="interrupted on purpose"):
        curate.run(recipe)
    assert not marks["kill"].exists()  # the worker was killed ...
    first_pass = marks["log"].read_text().split()
    assert sorted(first_pass) == sorted(d["id"] for d in docs)  # ... and its partition redone

    marks["fail"].unlink()
    resumed = curate.run(recipe)
    assert marks["log"].read_text().split() == first_pass  # pass 1 was not run again
    for key in ("shards", "rejected"):
        assert files(resumed, key) == files(local, key)
    assert resumed.manifest["counts"] == local.manifest["counts"]


def summary_tables(rng: np.random.Generator, partitions: int = 5, rows: int = 300) -> list:
    """Summary rows shaped like the barriers' (digest keys, band keys with nulls, shingle
    sets, signatures) in two segments per partition, with many shared keys."""
    out = []
    for p in range(partitions):
        for seg in range(2):
            start = seg * rows
            order = (np.uint64(p) << np.uint64(40)) + np.arange(
                start, start + rows, dtype=np.uint64
            )
            digest = np.zeros((rows, 16), np.uint8)
            digest[:, 0] = rng.integers(0, 3, rows)  # first 8 bytes collide often,
            digest[:, 15] = rng.integers(0, 40, rows)  # the whole key less often
            band = rng.integers(0, 400, (3, rows)).astype(np.uint64)
            shingles = [sorted(set(rng.integers(0, 30, 8).tolist())) for _ in range(rows)]
            signature = rng.integers(0, 4, rows * 8).astype(np.uint32)
            out.append(
                (
                    p,
                    pa.table(
                        {
                            "id": [f"p{p}-{start + i}" for i in range(rows)],
                            "_order": pa.array(order, pa.uint64()),
                            "digest": pa.array(list(map(bytes, digest)), pa.binary(16)),
                            "band_0": pa.array(band[0]),
                            "band_1": pa.array(band[1], mask=band[1] % 7 == 0),
                            "band_2": pa.array(band[2]),
                            "shingles": pa.array(shingles, pa.list_(pa.uint32())),
                            "signature": pa.FixedSizeListArray.from_arrays(pa.array(signature), 8),
                        }
                    ),
                )
            )
    return out


def test_collective_operations_equal_the_local_ones(ray_cluster: None, tmp_path: Path) -> None:
    """Every operation a barrier decides with gives the same rows on Ray as locally, with
    buckets small enough that both engines cut every shuffle into many pieces (the local
    one spilling them, Ray's going through files)."""
    from curate.collective.components import COMPONENTS_SCHEMA
    from curate.collective.local import LocalSummaries
    from curate.collective.piece_ops import EDGES_SCHEMA, FIRSTS_SCHEMA
    from curate.engines.ray.collective import RaySummaries
    from curate.minhash.verify import estimate_scores, exact_scores
    from curate.stages.base import ORDER

    spilled = []
    for i, (p, table) in enumerate(summary_tables(np.random.default_rng(7))):
        path = tmp_path / f"summary-{i:05d}.arrow"
        with pa.ipc.new_file(str(path), table.schema) as w:
            w.write_table(table)
        spilled.append((path, p))
    local = LocalSummaries.from_files(spilled, tmp_path / "spill")
    local.budget, local.spill_bytes = 8192, 1024
    dist = RaySummaries(spilled, cpus=2)
    dist.bucket_bytes = 4096  # many buckets on little data

    def same(op: Any, schema: pa.Schema, by: list[str]) -> pa.Table:
        here, there = (op(s).collect(schema) for s in (local, dist))
        here, there = (t.sort_by([(c, "ascending") for c in by]) for t in (here, there))
        assert there.equals(here)
        return here

    assert dist.count() == local.count() == 3000
    assert same(lambda s: s.first_by_key("digest"), FIRSTS_SCHEMA, [ORDER]).num_rows > 2000
    nulls = same(lambda s: s.first_by_key("band_1"), FIRSTS_SCHEMA, [ORDER])
    assert nulls.num_rows  # a null key is no value: it equals no other
    bands = ["band_0", "band_1", "band_2"]
    edges = same(lambda s: s.star_edges(bands), EDGES_SCHEMA, ["a", "b"])
    assert edges.num_rows > 1000
    scored = pa.schema([*EDGES_SCHEMA, pa.field("score", pa.float64())])
    for column, score in (("shingles", exact_scores), ("signature", estimate_scores)):

        def scores(s: Any, column: str = column, score: Any = score) -> Any:
            return s.score_pairs(s.star_edges(bands), column, score)

        same(scores, scored, ["a", "b"])
    comps = same(lambda s: s.connected_components(s.star_edges(bands)), COMPONENTS_SCHEMA, ["node"])
    assert comps.num_rows > 2000  # one component, found over many buckets and rounds
    named = pa.schema([*EDGES_SCHEMA, pa.field("name", pa.string())])
    same(lambda s: s.join(s.star_edges(bands), "b", ["id"], ["name"]), named, ["a", "b"])
    assert dist.repeated_id() is None and local.repeated_id() is None
    assert not list(tmp_path.glob("collective-*/shuffle-*"))  # each shuffle's files went
    local.close()
    dist.close()
    assert not (tmp_path / "spill").exists() and not list(tmp_path.glob("collective-*"))
    again = RaySummaries([*spilled, spilled[0]], cpus=2)  # partition 0's first segment twice
    first_segment = pa.ipc.open_file(str(spilled[0][0])).read_all().column("id").to_pylist()
    assert again.repeated_id() == min(first_segment)


def test_a_users_error_on_ray_is_one_line(ray_cluster: None, tmp_path: Path) -> None:
    from curate.errors import CurateError

    docs = corpus(40, dup_every=4)
    write_jsonl(tmp_path / "data" / "a.jsonl", docs)
    recipe: dict[str, Any] = {
        "name": "errors",
        "inputs": [str(tmp_path / "data" / "*.jsonl")],
        "id_field": "id",
        "on_error": "fail",
        "stages": [{"exact_dedup": {}}],
        "output": {"root": str(tmp_path / "out"), "fsync": False},
        "engine": {"kind": "ray"},
    }
    path = tmp_path / "recipe.yaml"
    with open(tmp_path / "data" / "b.jsonl", "w") as f:
        f.write('{"id": "x", "text": "fine"}\n{"id": "y", "te\n')  # raised in a worker
    path.write_text(yaml.safe_dump(recipe))
    with pytest.raises(CurateError) as caught:
        curate.run(path)
    assert type(caught.value) is CurateError, type(caught.value)
    assert "b.jsonl" in str(caught.value) and "\n" not in str(caught.value)

    (tmp_path / "data" / "b.jsonl").unlink()
    docs[3]["id"] = docs[2]["id"]  # found by the barrier's shuffle of ids
    write_jsonl(tmp_path / "data" / "a.jsonl", docs)
    with pytest.raises(CurateError, match="'d2' is not unique"):
        curate.run(path)


def test_progress_within_a_partition_reaches_the_driver_from_ray_workers(
    ray_cluster: None, tmp_path: Path
) -> None:
    """A Ray worker's progress file (on the staging folder every node mounts) is read by the
    driver while the one partition runs (tests/test_progress.py has the local engine's)."""
    from curate.progress import Work

    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(400, dup_every=0))
    recipe = {
        "name": "watched",
        "inputs": [str(tmp_path / "data" / "*.jsonl")],
        "id_field": "id",
        "batch_size": "2KB",
        "stages": [{"ray_stages:Pause": {"seconds": 0.2}}],
        "output": {"root": str(tmp_path / "out"), "fsync": False},
        "engine": {"kind": "ray", "workers": 2},
    }
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    seen: list[tuple[int, Work]] = []

    class Recorded:
        def __call__(self, phase: str, done: int, total: int) -> None:
            return None

        def work(self, phase: str, done: int, total: int, work: Work) -> None:
            seen.append((done, work))

    version = curate.run(path, progress=Recorded())
    running = sorted({w.docs for done, w in seen if done == 0 and w.docs})
    assert len(running) >= 2, seen  # default interval, 0.25 s: ~10 batches of 0.2 s
    assert seen[-1][0] == 1 and seen[-1][1].docs == version.manifest["counts"]["read"] == 400


def test_line_dedup_is_byte_identical_on_ray(ray_cluster: None, tmp_path: Path) -> None:
    """A barrier whose apply changes text: its decision rows (the lines each document
    loses) travel, are written and applied the same way on Ray."""
    docs = corpus(600, dup_every=0)
    boiler = ["Home | About | Contact", "We use cookies.", "All rights reserved."]
    for i, d in enumerate(docs):
        d["text"] = "\n".join([*boiler[: i % 4], d["text"], *boiler[i % 3 :]])
    docs[7]["text"] = "\n".join(boiler)  # emptied: dropped
    write_jsonl(tmp_path / "data" / "a.jsonl", docs[:300])
    write_jsonl(tmp_path / "data" / "b.jsonl", docs[300:])
    local, on_ray = local_and_ray(tmp_path, "lines", "16KB", {"line_dedup": {"keep_first": False}})
    assert local.manifest["stages"][0]["removed"] == {"all_repeated": 1}
    assert local.manifest["stages"][0]["changed"] > 500
    same_bytes(local, on_ray)


def test_minhash_cluster_sizes_are_byte_identical_on_ray(ray_cluster: None, tmp_path: Path) -> None:
    """minhash_dedup's cluster_size: the kept documents' rows of the decision (no reason,
    their cluster's size) are decided, written and joined back the same way on Ray."""
    from curate.minhash.planted import planted_corpus

    docs = [{"id": d["id"], "text": d["text"]} for d in planted_corpus(60, seed=5).docs]
    write_jsonl(tmp_path / "data" / "a.jsonl", docs[: len(docs) // 2])
    write_jsonl(tmp_path / "data" / "b.jsonl", docs[len(docs) // 2 :])
    local, on_ray = local_and_ray(
        tmp_path, "sizes", "8KB", {"minhash_dedup": {"cluster_size": True}}
    )
    sizes = local.to_arrow().column("cluster_size").to_pylist()
    assert sum(sizes) == len(docs) and max(sizes) >= 3
    same_bytes(local, on_ray)


def test_classifier_buckets_are_byte_identical_on_ray(ray_cluster: None, tmp_path: Path) -> None:
    """classifier_buckets: scores made in Ray's workers, percentile edges folded over the
    pieces Ray holds, and each kept document's scores and bucket joined back the same way."""
    import sys

    sys.path.insert(0, str(REPO / "tests" / "classify"))  # the classifier tests' helpers
    from fasttext_cli import train
    from labelled_docs import labelled_documents

    docs = labelled_documents(per_class=80)
    model = train(docs[::2], tmp_path / "model")
    records = [{"id": f"d{i}", "text": t} for i, (_, t) in enumerate(docs)]
    write_jsonl(tmp_path / "data" / "a.jsonl", records[: len(records) // 2])
    write_jsonl(tmp_path / "data" / "b.jsonl", records[len(records) // 2 :])
    stage = {"models": [{"model": str(model), "label": "web", "name": "q"}],
             "buckets": 5, "min_bucket": 2}  # fmt: skip
    local, on_ray = local_and_ray(tmp_path, "buckets", "64KB", {"classifier_buckets": stage})
    assert set(local.to_arrow().column("classifier_bucket").to_pylist()) == {2, 3, 4}
    assert len(local.manifest["partitions"]) > 2
    same_bytes(local, on_ray)


def test_what_a_ray_worker_learnt_reaches_the_others(ray_cluster: None, tmp_path: Path) -> None:
    """Each task returns what its stages learnt (`Stage.learnt`) and later tasks take it in,
    as the local engine's forked workers do through their log; the bytes stay local's."""
    data = tmp_path / "data"
    data.mkdir()
    rows = [json.dumps({"id": f"d{i}", "text": f"document {i} " * 40}) for i in range(400)]
    (data / "a.jsonl").write_text("\n".join(rows) + "\n")
    made = {}
    for kind in ("ray", "local"):
        log = tmp_path / f"recall-{kind}.log"
        recipe = {
            "name": "recall", "inputs": [str(data / "*.jsonl")], "id_field": "id",
            "partition_size": "8KB",
            "stages": [{"ray_stages:Pause": {"seconds": 0.05}},  # both workers get tasks
                       {"ray_stages:Recall": {"log": str(log)}}],
            "output": {"root": str(tmp_path / f"out-{kind}"), "fsync": False},
            "engine": {"kind": kind, "workers": 2},
        }  # fmt: skip
        path = tmp_path / f"{kind}.yaml"
        path.write_text(yaml.safe_dump(recipe, sort_keys=False))
        made[kind] = curate.run(path)
        taken = [line.split() for line in log.read_text().splitlines()] if log.exists() else []
        assert sum(int(n) for _, n in taken) > 0, kind  # ids another worker had seen
    assert files(made["ray"], "shards") == files(made["local"], "shards")

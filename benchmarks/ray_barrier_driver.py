"""The Ray driver's memory during a MinHash barrier decision: the old contract against the new.

Before issue 7's last point, `decide` handed tables to the driver (candidate and verified
edges, components, ids, the decision) and connected components ran there; now every step
runs in Ray tasks and the driver holds object references and counts. This script writes
a synthetic MinHash summary (clusters of `--cluster` documents with equal signatures, so
every candidate pair is verified and all but one member of each cluster is removed,
members scattered over the partitions), then runs the barrier's decision (`decide_once`,
as the engine does) in a fresh driver process per contender on a 2-CPU Ray instance, and
samples the driver's resident memory every 10 ms. Ray's workers are other processes and
are not counted: the question is what the driver must hold.

    /work/venv/bin/python -m benchmarks.ray_barrier_driver --docs 1000000 --old-ref HEAD~3

The old contender is the `curate` package of `--old-ref`, exported with `git archive` and
put first on the driver's (and so the workers') PYTHONPATH. Writes
`results/ray_barrier_driver.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WORK = HERE / "work" / "ray_driver"
PARAMS = {"num_perm": 16, "bands": 4, "rows": 4, "verify": "estimate", "threshold": 0.8}


def make_summaries(folder: Path, docs: int, cluster: int, partitions: int) -> list[Path]:
    """Summary files as workers spill them, one per partition (cached by shape)."""
    from curate.minhash.lsh import band_keys
    from curate.stages.minhash_dedup import MinHashDedup, MinHashDedupParams

    stage = MinHashDedup(MinHashDedupParams(**PARAMS))  # type: ignore[arg-type]
    files = [folder / f"summary-{p:05d}.arrow" for p in range(partitions)]
    if all(f.exists() for f in files):
        return files
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(11)
    groups = docs // cluster
    sigs = rng.integers(0, 2**32, (groups, PARAMS["num_perm"]), dtype=np.uint32)
    owner = rng.permutation(np.repeat(np.arange(groups), cluster))  # cluster of each position
    bands, rows = stage.band_shape()
    for p, chunk in enumerate(np.array_split(np.arange(len(owner)), partitions)):
        s = sigs[owner[chunk]]
        keys = band_keys(s, bands, rows)
        order = (np.uint64(p) << np.uint64(40)) + np.arange(len(chunk), dtype=np.uint64)
        columns = [pa.array([f"doc-{i:09d}" for i in chunk]), pa.array(order)]
        columns += [pa.array(keys[:, i]) for i in range(bands)]
        columns.append(pa.FixedSizeListArray.from_arrays(pa.array(s.reshape(-1)), s.shape[1]))
        table = pa.Table.from_arrays(columns, schema=stage.summary_schema())
        with pa.ipc.new_file(str(files[p]), table.schema) as w:
            w.write_table(table, max_chunksize=65536)
    return files


class Sampler:
    """Peak resident memory of this process, sampled from /proc every 10 ms."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.rss())
            time.sleep(0.01)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.rss())


def measure(folder: Path, staging: Path) -> dict[str, Any]:
    """In the contender's driver process: one barrier decision on Ray, driver memory sampled."""
    import ray

    import curate
    from curate.engines.barrier_step import decide_once
    from curate.engines.ray.collective import RaySummaries
    from curate.stages.minhash_dedup import MinHashDedup, MinHashDedupParams

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    worker_curate = ray.get(ray.remote(_curate_path).remote())
    stage = MinHashDedup(MinHashDedupParams(**PARAMS))  # type: ignore[arg-type]
    files = sorted(folder.glob("summary-*.arrow"))
    summaries = [(f, int(f.stem.split("-")[1])) for f in files]
    (staging / "pass-0").mkdir(parents=True, exist_ok=True)
    job = argparse.Namespace(staging=staging, fsync=False)
    baseline = Sampler.rss()
    started = time.perf_counter()
    with Sampler() as sampler:
        info = decide_once(
            job,  # type: ignore[arg-type]
            0,
            stage,
            lambda: RaySummaries(summaries, cpus=2),
            lambda *_: None,
        )
    seconds = time.perf_counter() - started
    ray.shutdown()
    try:
        from curate.engines.ray.exchange import CREATED

        created = dict(CREATED)
    except ImportError:  # the old contract did not count
        created = {}
    return {
        "curate": str(Path(curate.__file__).parent),
        "worker_curate": worker_curate,
        "baseline_rss": baseline,
        "peak_rss": sampler.peak,
        "driver_growth": sampler.peak - baseline,
        "decide_s": round(seconds, 2),
        "created": created,
        "dropped": info["dropped"],
        "details": {k: v for k, v in info["details"].items() if "pairs" in k or "clusters" in k},
    }


def _pieces(_: list[object], n: int, size: int) -> list[pa.Table]:
    return [pa.table({"x": np.full(max(1, size // 8), i, np.uint64)}) for i in range(n)]


def per_object(count: int, size: int, per_task: int = 500) -> dict[str, Any]:
    """Driver memory per object it owns: tasks of `per_task` pieces of `size` bytes each,
    as a shuffle's reading tasks make them, held until all exist, then released. Pieces
    under Ray's 100 KB limit are kept in the driver's memory; larger ones in the store."""
    import ray

    from curate.engines.ray.exchange import call

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.get(call(_pieces, (1, 8))[0])  # workers up, imports done
    baseline = Sampler.rss()
    with Sampler() as sampler:
        refs = [call(_pieces, (per_task, size), outputs=per_task) for _ in range(count // per_task)]
        ray.wait([r for rs in refs for r in rs], num_returns=count // per_task * per_task)
        held = Sampler.rss()
        del refs
        time.sleep(2)
    released = Sampler.rss()
    ray.shutdown()
    n = count // per_task * per_task
    return {
        "objects": n,
        "piece_bytes": size,
        "bytes_per_object_held": round((held - baseline) / n),
        "peak_bytes_per_object": round((sampler.peak - baseline) / n),
        "left_after_release": released - baseline,
    }


def _curate_path() -> str:
    import curate

    return str(Path(curate.__file__).parent)


def old_package(ref: str) -> Path:
    """`curate/` of git ref `ref`, exported once into the work folder."""
    sha = subprocess.run(
        ["git", "rev-parse", ref], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout.strip()
    target = WORK / f"old-{sha[:10]}"
    if not (target / "curate").exists():
        target.mkdir(parents=True, exist_ok=True)
        archive = target / "curate.tar"
        with open(archive, "wb") as f:
            subprocess.run(["git", "archive", sha, "curate"], cwd=REPO, check=True, stdout=f)
        with tarfile.open(archive) as tar:
            tar.extractall(target, filter="data")
        archive.unlink()
    return target


def run_contender(name: str, path: Path | None, folder: Path) -> dict[str, Any]:
    # Run outside the repository, so the first `curate` on the path is the contender's.
    env = dict(os.environ, RAY_AUTH_MODE="disabled")
    env["PYTHONPATH"] = os.pathsep.join([str(p) for p in (path, REPO) if p is not None])
    staging = WORK / f"staging-{name}"
    subprocess.run(["rm", "-rf", str(staging)], check=True)
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.ray_barrier_driver", "--measure", str(folder),
         "--staging", str(staging)],
        cwd=WORK, env=env, check=True, capture_output=True, text=True,
    )  # fmt: skip
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    result["name"] = name
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--cluster", type=int, default=4)
    parser.add_argument("--partitions", type=int, default=40)
    parser.add_argument("--old-ref", default=None, help="git ref of the old contract")
    parser.add_argument("--objects", type=int, default=0, help="also: driver bytes per object")
    parser.add_argument("--object-bytes", type=int, default=8, help="size of those objects")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--staging", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure is not None:
        print(json.dumps(measure(args.measure, args.staging)))
        return
    folder = WORK / f"summaries-{args.docs}-{args.cluster}-{args.partitions}"
    files = make_summaries(folder, args.docs, args.cluster, args.partitions)
    size = sum(f.stat().st_size for f in files)
    print(f"{args.docs:,} documents, summaries {size / 2**20:.0f} MiB in {len(files)} files")
    contenders: list[tuple[str, Path | None]] = [("new", None)]
    if args.old_ref:
        contenders.insert(0, ("old", old_package(args.old_ref)))
    runs = []
    for name, path in contenders:
        r = run_contender(name, path, folder)
        runs.append(r)
        print(
            f"{name}: driver grew {r['driver_growth'] / 2**20:,.0f} MiB (peak "
            f"{r['peak_rss'] / 2**20:,.0f} MiB), decide {r['decide_s']} s, "
            f"dropped {r['dropped']:,}, {r['details']}"
        )
    owned = per_object(args.objects, args.object_bytes) if args.objects else None
    if owned:
        print(f"driver memory per object owned: {owned}")
    out = {"docs": args.docs, "cluster": args.cluster, "partitions": args.partitions,
           "summary_bytes": size, "params": PARAMS, "runs": runs, "per_object": owned}  # fmt: skip
    (HERE / "results" / "ray_barrier_driver.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()

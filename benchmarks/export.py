"""`curate export` against a plain numpy write of the same arrays, both fsynced (target:
megatron at >= 0.8x numpy's speed), with mds, parquet and jsonl side by side.

The version holds `--bytes` of uint16 token ids (10^9 by default: 500 M tokens) in
documents of 200 to 1,800 tokens. Its shards are written here with curate's own shard
writer and the schema a tokenize run writes (id, input_ids, num_tokens), and its manifest is
a real tokenize run's on a small corpus with the shards, tokens and counts put in: a run
tokenizing 1.3 GB of text would take minutes on two cores and measure the tokenizer, not
the export. The floor reads the same memory-mapped shards and writes each shard's ids with
`ndarray.tofile` into one `.bin` and its lengths into one `.idx`, then fsyncs both: what
a hand-written export does with no index format, hashing, checks, manifest or rename.
Both read the shards from the page cache (warmed first); each output is removed and the
disk synced, untimed, before the next side; rounds alternate, medians count. Just before
each side, untimed, the output's size (x1.5) of memory is touched and freed
(`fresh_memory`): this VM hands free memory back to its host after about 2 s, and a side
writing into such pages paid 5-10x for its `write`s, whichever side it was. The machine
is shared: wall time moves with other processes (2 cores, load often above 5), so the
process's CPU time of each side and the best round are reported beside the medians.

Usage: python -m benchmarks.export [--bytes 1e9] [--rounds 3] [--formats megatron,mds,parquet,jsonl]
       [--no-fresh-memory]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

REPO = Path(__file__).resolve().parent.parent
SHARD_TOKENS = 100_000_000  # 200 MB of uint16 ids per shard


def make_version(folder: Path, total_bytes: int) -> Path:
    """A published tokenized version holding `total_bytes` of uint16 ids."""
    import yaml

    import curate
    from curate.output.shards import write_table

    data = folder / "data" / "a.jsonl"
    data.parent.mkdir(parents=True)
    data.write_text(
        "".join(json.dumps({"id": f"d{i}", "text": f"doc {i} a b c"}) + "\n" for i in range(10))
    )
    recipe = folder / "recipe.yaml"
    tokenizer = str(REPO / "sample_data" / "tokenizer")
    recipe.write_text(yaml.safe_dump({
        "name": "bench", "inputs": ["data/*.jsonl"], "id_field": "id",
        "stages": [{"tokenize": {"source": tokenizer}}],
        "output": {"root": "out", "fsync": False}, "engine": {"workers": 1},
    }))  # fmt: skip
    version = curate.run(recipe).path
    os.chmod(version, 0o750)
    for p in version.rglob("*"):
        os.chmod(p, 0o750 if p.is_dir() else 0o640)
    manifest = json.loads((version / "manifest.json").read_text())
    for old in manifest["shards"]:
        (version / old["path"]).unlink()
    rng = np.random.default_rng(0)
    remaining, shards, docs = total_bytes // 2, [], 0
    while remaining > 0:
        n = min(SHARD_TOKENS, remaining)
        lengths = rng.integers(200, 1800, size=n // 1000 + 2, dtype=np.int64)
        ends = np.cumsum(lengths)
        lengths = lengths[ends <= n]
        lengths = np.append(lengths, n - int(lengths.sum())) if lengths.sum() < n else lengths
        offsets = np.zeros(len(lengths) + 1, np.int32)
        np.cumsum(lengths, out=offsets[1:])
        ids = rng.integers(5, 2000, size=n, dtype=np.uint16)
        table = pa.table({
            "id": pa.array([f"d{docs + i}" for i in range(len(lengths))]),
            "input_ids": pa.ListArray.from_arrays(pa.array(offsets), pa.array(ids)),
            "num_tokens": pa.array(lengths.astype(np.int32)),
        })  # fmt: skip
        path = version / "shards" / f"part-{len(shards):016x}-00000.arrow"
        info = write_table(path, table, fsync=False)
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
        shards.append({"path": f"shards/{path.name}", "rows": table.num_rows, "bytes": info.bytes,
                       "sha256": sha, "tokens": n})  # fmt: skip
        docs += len(lengths)
        remaining -= n
    manifest["shards"] = shards
    manifest["tokens"] = total_bytes // 2
    counts = manifest["counts"]
    counts.update(read=docs, documents=docs, written=docs, removed={}, removed_total=0)
    (version / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return version


def floor(version: Path, out: Path) -> float:
    """ids and lengths of every shard, memory-mapped, written with numpy; fsynced."""
    from curate.output.shards import read_stream

    manifest = json.loads((version / "manifest.json").read_text())
    started = time.perf_counter()
    out.mkdir()
    with open(out / "data.bin", "wb") as bin_file, open(out / "data.idx", "wb") as idx_file:
        for shard in manifest["shards"]:
            column = read_stream(version / shard["path"]).column("input_ids")
            for chunk in column.chunks:
                offsets = chunk.offsets.to_numpy()
                chunk.values.to_numpy().tofile(bin_file)
                np.diff(offsets).astype(np.int32).tofile(idx_file)
        bin_file.flush()
        idx_file.flush()
        os.fsync(bin_file.fileno())
        os.fsync(idx_file.fileno())
    return time.perf_counter() - started


def curate_export(version: Path, out: Path, to: str) -> float:
    from curate.export import export

    started = time.perf_counter()
    export(version, to, out)
    return time.perf_counter() - started


def fresh_memory(nbytes: int) -> float:
    """Touch `nbytes` of anonymous memory and free it, untimed, just before a side: both
    sides then write their output into pages the guest touched a moment ago.

    Why: this machine is a VM whose balloon driver reports free memory to the host (free
    page reporting, about 2 s after pages are freed); touching a reported page again makes
    the host fault it back in. Writing 300 MB into the page cache took 0.4 s in pages freed
    just before and 2.8-5 s (0.8-1.2 s of system CPU, all in `write`) in pages freed 6 s
    before, in the same process with the same code; touching 300 MB of anonymous memory
    showed the same (0.05 s vs 1.3-8 s). Without this step, whichever side ran after the
    longer pause paid it: the export right after the floor, whose `settle` (unlink and
    sync of 1 GB with discard) is the longer one. Returns the seconds it took."""
    started = time.perf_counter()
    block = np.empty(nbytes, np.uint8)
    block[::4096] = 1
    del block
    return time.perf_counter() - started


def settle(out: Path) -> None:
    """Remove an output and let the disk finish with it, untimed: this root file system is
    mounted with `discard`, so freeing 1 GB is trimmed at the next journal commit, which the
    next side's first fsync would otherwise wait for (seen: 1.1 s vs 13-20 s)."""
    shutil.rmtree(out)
    os.sync()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bytes", type=float, default=1e9)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--formats", default="megatron,mds,parquet,jsonl")
    parser.add_argument(
        "--work", type=Path, default=None, help="folder for the data (default: a temp dir)"
    )
    parser.add_argument(
        "--no-fresh-memory", action="store_true",
        help="skip touching the output's size in memory before each side (see fresh_memory)",
    )  # fmt: skip
    args = parser.parse_args()
    total = int(args.bytes)
    import curate.export  # noqa: F401  (imports are not what is compared)

    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        version = make_version(root / "src", total)
        made = time.perf_counter() - t0
        os.sync()
        for shard in (version / "shards").iterdir():  # warm the page cache for both sides
            with open(shard, "rb") as f:
                while f.read(64 << 20):
                    pass
        times: dict[str, list[float]] = {"numpy": [], "megatron": []}
        cpu: dict[str, list[float]] = {"numpy": [], "megatron": []}
        warmed: list[float] = []
        for r in range(args.rounds):
            for side in ("numpy", "megatron") if r % 2 == 0 else ("megatron", "numpy"):
                out = root / f"out-{side}"
                if not args.no_fresh_memory:
                    warmed.append(fresh_memory(total + total // 2))
                started = time.process_time()
                times[side].append(
                    floor(version, out)
                    if side == "numpy"
                    else curate_export(version, out, "megatron")
                )
                cpu[side].append(time.process_time() - started)
                size = sum(p.stat().st_size for p in out.iterdir())
                settle(out)
        sizes = {}
        for to in [f for f in args.formats.split(",") if f != "megatron"]:
            out = root / f"out-{to}"
            if not args.no_fresh_memory:
                warmed.append(fresh_memory(total + total // 2))
            started = time.process_time()
            times[to] = [curate_export(version, out, to)]
            cpu[to] = [time.process_time() - started]
            sizes[to] = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
            settle(out)
        med = {k: statistics.median(v) for k, v in times.items()}
        med_cpu = {k: statistics.median(v) for k, v in cpu.items()}
        report = {
            "token_bytes": total, "tokens": total // 2, "version_built_s": round(made, 1),
            "rounds": args.rounds,
            "seconds": {k: [round(x, 3) for x in v] for k, v in times.items()},
            "median_s": {k: round(v, 3) for k, v in med.items()},
            "token_GB_per_s": {k: round(total / v / 1e9, 3) for k, v in med.items()},
            "cpu_s": {k: [round(x, 3) for x in v] for k, v in cpu.items()},
            "median_cpu_s": {k: round(v, 3) for k, v in med_cpu.items()},
            "megatron_vs_numpy": round(med["numpy"] / med["megatron"], 3),
            "megatron_vs_numpy_best": round(min(times["numpy"]) / min(times["megatron"]), 3),
            "megatron_vs_numpy_cpu": round(med_cpu["numpy"] / med_cpu["megatron"], 3),
            "fresh_memory": not args.no_fresh_memory,
            "fresh_memory_s": [round(x, 2) for x in warmed],
            "load_average": os.getloadavg(),
            "target": ">= 0.8", "floor_output_bytes": size, "output_bytes": sizes,
            "python": sys.version.split()[0], "cpus": os.cpu_count(),
        }  # fmt: skip
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

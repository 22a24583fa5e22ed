"""Random-access 2,048-token blocks from a mixture of 3 versions against the plain loader on
one version, in the same run (issue 22: target >= 0.8x the plain loader's rate).

Three packed versions (2,048-token rows, uint16 ids) are made from a real packed tokenize
run each on a small corpus, its shards replaced by synthetic ones of the same schema (id,
input_ids, num_tokens, doc_ids, doc_starts, doc_offsets) and its manifest updated and sealed
again: tokenizing hundreds of MB of text would take minutes on two cores and measure the
tokenizer. `curate mix` then publishes a mixture of the three (weights 0.6 / 0.3 / 0.1,
pinned by fingerprint, shards hard-linked), exactly as a user's mixture is made.

Each side opens its tokens (`open_tokens`, endless streams: `epochs=None`), then per round
reads `--samples` blocks: `random`, `blocks[k]` for k drawn at random (random access to the
version's blocks, or to the mixture's samples, which land on random rows of its three
sources), and `stream`, iterating `blocks()` (the plain version's seeded permutations, the
mixture's index order, epoch after epoch), each block copied into one preallocated buffer
as a collate would. The plain side
reads the largest source. Sides alternate their order each round; medians count; the
shards are read from the page cache (warmed first), as a trainer's second epoch would.

Usage: python -m benchmarks.mix_throughput [--rows 6000] [--rounds 5] [--samples 100000]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

REPO = Path(__file__).resolve().parent.parent
SEQ = 2048
SHARE = (0.6, 0.3, 0.1)


def _writable(version: Path) -> None:
    os.chmod(version, 0o750)
    for p in version.rglob("*"):
        os.chmod(p, 0o750 if p.is_dir() else 0o640)


def _seal(version: Path) -> None:
    for p in sorted(version.rglob("*"), reverse=True):
        os.chmod(p, 0o550 if p.is_dir() else 0o440)
    os.chmod(version, 0o550)


def make_packed(root: Path, name: str, rows: int, seed: int) -> Path:
    """A published packed version of `rows` full 2,048-token rows of uint16 ids."""
    import yaml

    import curate
    from curate.hf_layout import data_files
    from curate.output.shards import write_table

    data = root / "data" / name / "a.jsonl"
    data.parent.mkdir(parents=True)
    text = " ".join(f"w{i % 97}" for i in range(3000))
    data.write_text(
        "".join(json.dumps({"id": f"{name}{i}", "text": text}) + "\n" for i in range(4))
    )
    recipe = root / f"{name}.yaml"
    tokenizer = {"source": str(REPO / "sample_data" / "tokenizer"), "pack": {"seq_len": SEQ}}
    recipe.write_text(yaml.safe_dump({
        "name": name, "inputs": [f"data/{name}/*.jsonl"], "id_field": "id",
        "stages": [{"tokenize": tokenizer}], "output": {"root": "out", "fsync": False},
        "engine": {"workers": 1},
    }))  # fmt: skip
    version = curate.run(recipe).path
    _writable(version)
    manifest = json.loads((version / "manifest.json").read_text())
    for old in manifest["shards"]:
        (version / old["path"]).unlink()
    rng = np.random.default_rng(seed)
    shards, per_shard, done = [], 2000, 0
    while done < rows:
        n = min(per_shard, rows - done)
        ids = rng.integers(5, 2000, size=n * SEQ, dtype=np.uint16)
        offsets = np.arange(n + 1, dtype=np.int32) * SEQ
        docs = [f"{name}-{done + i}" for i in range(n)]
        table = pa.table({
            "id": pa.array(docs),
            "input_ids": pa.ListArray.from_arrays(pa.array(offsets), pa.array(ids)),
            "num_tokens": pa.array(np.full(n, SEQ, np.int32)),
            "doc_ids": pa.array([[d] for d in docs], pa.list_(pa.string())),
            "doc_starts": pa.array([[0]] * n, pa.list_(pa.int32())),
            "doc_offsets": pa.array([[0]] * n, pa.list_(pa.int64())),
        })  # fmt: skip
        path = version / "shards" / f"part-{len(shards):016x}-00000.arrow"
        info = write_table(path, table, fsync=False)
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
        shards.append({"path": f"shards/{path.name}", "rows": n, "bytes": info.bytes, "sha256": sha,
                       "tokens": n * SEQ, "documents": n, "split": None})  # fmt: skip
        done += n
    manifest["shards"] = shards
    manifest["tokens"] = rows * SEQ
    manifest["packing"].update(tokens=rows * SEQ, tokens_in_full_rows=rows * SEQ, tail_tokens=0,
                               tokens_lost=0, lost_fraction=0.0, tail_shards=[])  # fmt: skip
    manifest["counts"].update(read=rows, documents=rows, written=rows, removed={},
                              removed_total=0)  # fmt: skip
    (version / "manifest.json").write_text(json.dumps(manifest, indent=2))
    listed = data_files([(s["path"], None) for s in shards], [], manifest.get("layout"))
    for rel, names in listed.items():  # train/state.json (a version made before: state.json)
        state = json.loads((version / rel).read_text())
        state["_data_files"] = [{"filename": name} for name in names]
        (version / rel).write_text(json.dumps(state, indent=2))
    _seal(version)
    return version


def make_mixture(root: Path, sources: list[Path], budget: int) -> Path:
    import yaml

    import curate
    from curate.mix.prepare import prepare

    listed = []
    for path, weight in zip(sources, SHARE, strict=True):
        v = curate.open(path)
        listed.append({"dataset": v.dataset, "version": v.name, "fingerprint": v.fingerprint,
                       "weight": weight, "max_epochs": 1})  # fmt: skip
        v.release()
    spec = {"name": "mix", "budget": budget, "seed": 1, "sources": listed,
            "output": {"root": "out", "fsync": False}}  # fmt: skip
    (root / "mixture.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return prepare(root / "mixture.yaml").path


def read_random(blocks: Any, order: np.ndarray, buf: np.ndarray) -> tuple[float, float]:
    """(wall, CPU) seconds to read `blocks[k]` for every k of `order`."""
    started, cpu = time.perf_counter(), time.process_time()
    for k in order:
        np.copyto(buf, blocks[int(k)])
    return time.perf_counter() - started, time.process_time() - cpu


def read_stream(blocks: Any, n: int, buf: np.ndarray) -> tuple[float, float]:
    """(wall, CPU) seconds to iterate the first `n` blocks of the stream."""
    started, cpu = time.perf_counter(), time.process_time()
    for i, block in enumerate(blocks):
        np.copyto(buf, block)
        if i + 1 == n:
            break
    return time.perf_counter() - started, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=6000, help="rows of the largest source")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--samples", type=int, default=100_000, help="blocks read per side and round"
    )
    parser.add_argument("--work", type=Path, default=None, help="folder for the data")
    args = parser.parse_args()
    from curate.loader import open_tokens

    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        sizes = [args.rows, args.rows // 2, args.rows // 4]
        sources = [make_packed(root, f"src{k}", n, k) for k, n in enumerate(sizes)]
        made = time.perf_counter() - t0
        t0 = time.perf_counter()
        budget = int(sum(sizes) * SEQ * 0.5)  # a mixture of half their tokens, in their shares
        mixture = make_mixture(root, sources, budget)
        mixed_s = time.perf_counter() - t0
        for path in [*sources, mixture]:  # the page cache holds both sides' shards
            for shard in path.rglob("*.arrow"):
                shard.read_bytes()
        t0 = time.perf_counter()
        plain = open_tokens(sources[0]).blocks(SEQ, seed=3, epochs=None)
        plain_open = time.perf_counter() - t0
        t0 = time.perf_counter()
        mixed = open_tokens(mixture).blocks(SEQ, epochs=None)
        mixed_open = time.perf_counter() - t0
        n = args.samples
        per_epoch = {"plain": plain.stream.order.samples_per_epoch,
                     "mixture": mixed.stream.order.samples_per_epoch}  # fmt: skip
        rng = np.random.default_rng(7)
        buf = np.empty(SEQ, np.uint16)
        times: dict[str, list[float]] = {f"{m}_{s}": [] for m in ("random", "stream")
                                         for s in ("plain", "mixture")}  # fmt: skip
        cpu: dict[str, list[float]] = {k: [] for k in times}
        for r in range(args.rounds):
            sides = [("plain", plain), ("mixture", mixed)]
            for side, blocks in sides if r % 2 == 0 else sides[::-1]:
                order = rng.integers(0, per_epoch[side], n)
                wall, used = read_random(blocks, order, buf)
                times[f"random_{side}"].append(wall)
                cpu[f"random_{side}"].append(used)
                fresh = open_tokens(sources[0] if side == "plain" else mixture).blocks(
                    SEQ, epochs=None, **({"seed": 3} if side == "plain" else {})
                )
                wall, used = read_stream(fresh, n, buf)
                times[f"stream_{side}"].append(wall)
                cpu[f"stream_{side}"].append(used)
        med = {k: statistics.median(v) for k, v in times.items()}
        rate = {k: n * SEQ / v / 1e6 for k, v in med.items()}
        med_cpu = {k: statistics.median(v) for k, v in cpu.items()}
        report = {
            "source_rows": sizes, "seq_len": SEQ, "source_bytes": sum(sizes) * SEQ * 2,
            "mixture_samples": per_epoch["mixture"], "budget_tokens": budget,
            "samples_per_round": n,
            "rounds": args.rounds, "sources_made_s": round(made, 1),
            "mix_s": round(mixed_s, 2), "open_s": {"plain": round(plain_open, 3),
                                                  "mixture": round(mixed_open, 3)},
            "seconds": {k: [round(x, 4) for x in v] for k, v in times.items()},
            "M_tokens_per_s": {k: round(v, 1) for k, v in rate.items()},
            "cpu_s": {k: [round(x, 4) for x in v] for k, v in cpu.items()},
            "M_tokens_per_cpu_s": {k: round(n * SEQ / v / 1e6, 1) for k, v in med_cpu.items()},
            "random_mixture_vs_plain": round(med["random_plain"] / med["random_mixture"], 3),
            "stream_mixture_vs_plain": round(med["stream_plain"] / med["stream_mixture"], 3),
            "random_mixture_vs_plain_best": round(
                min(times["random_plain"]) / min(times["random_mixture"]), 3),
            "random_mixture_vs_plain_cpu": round(
                med_cpu["random_plain"] / med_cpu["random_mixture"], 3),
            "stream_mixture_vs_plain_cpu": round(
                med_cpu["stream_plain"] / med_cpu["stream_mixture"], 3),
            "target": ">= 0.8", "load_average": os.getloadavg(),
            "python": sys.version.split()[0], "cpus": os.cpu_count(),
        }  # fmt: skip
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

"""MinHash signature throughput: datasketch's per-document path against curate's batches.

Three contenders compute 128-permutation signatures of word 5-gram shingles (lowercased,
`str.split()` words) of every document of the same real-text corpus:

- datasketch (sha1): Python shingling, then per document `MinHash(num_perm=128)` and
  `update_batch(shingles)` with datasketch's default hash (sha1);
- datasketch (xxh32): the same with `hashfunc=xxhash.xxh32_intdigest`;
- curate: `curate.minhash` over record batches of ~8 MB of text (what the stage does in
  each worker). Its word-shingle hash is xxh32 of the shingle's words' xxh32 values; the
  harness checks, untimed, that datasketch given that hashfunc produces curate's
  signatures bit for bit.

Each runs once in one process (CPU seconds per MB: the work) and once as two processes,
one per half of the corpus (wall time on this 2-core machine). Inputs are each contender's
natural form, made before the clock starts: Python strings for datasketch, Arrow string
arrays of ~8 MB for curate (what the engine's batches are). The harness also checks that
curate's signatures equal datasketch (xxh32)'s bit for bit on every document.

    python -m benchmarks.minhash_signatures --size 100 [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.json as pj

WORK = Path(__file__).resolve().parent / "work"
BATCH_BYTES = 8 << 20


def load_texts(path: Path) -> list[str]:
    table = pj.read_json(path, read_options=pj.ReadOptions(block_size=64 << 20))
    return table.column("text").to_pylist()


def python_shingles(text: str) -> list[bytes]:
    words = text.lower().split()
    if not words:
        return []
    if len(words) < 5:
        return [" ".join(words).encode()]
    return [" ".join(words[i : i + 5]).encode() for i in range(len(words) - 4)]


def datasketch_signatures(texts: list[str], hashfunc: Callable[[bytes], int] | None) -> np.ndarray:
    from datasketch import MinHash

    out = np.empty((len(texts), 128), np.uint32)
    for i, text in enumerate(texts):
        m = MinHash(num_perm=128, seed=1, hashfunc=hashfunc)
        m.update_batch(python_shingles(text))
        out[i] = m.hashvalues
    return out


def arrow_batches(texts: list[str]) -> list[pa.Array]:
    """The texts as the engine hands them to a barrier: Arrow batches of about 8 MB."""
    array = pa.array(texts, pa.string())
    sizes = pa.compute.binary_length(array).to_numpy(zero_copy_only=False)
    cuts = np.searchsorted(np.cumsum(sizes), np.arange(BATCH_BYTES, sizes.sum(), BATCH_BYTES))
    return [array.slice(a, b - a) for a, b in zip([0, *cuts], [*cuts, len(texts)], strict=True)]


def curate_signatures(batches: list[pa.Array]) -> np.ndarray:
    from curate.minhash.hashes import hash_shingles
    from curate.minhash.signatures import signatures
    from curate.stages.minhash_dedup import permutations

    a, b = permutations(128, 1)
    parts = []
    for batch in batches:
        hashes, counts = hash_shingles(batch, "word", 5, True)
        parts.append(signatures(hashes, counts, a, b))
    return np.concatenate(parts) if parts else np.zeros((0, 128), np.uint32)


def run(name: str, texts: list[str]) -> tuple[np.ndarray, float, float]:
    import xxhash

    batches = arrow_batches(texts) if name == "curate" else []
    wall, cpu = time.perf_counter(), time.process_time()
    if name == "datasketch (sha1)":
        sig = datasketch_signatures(texts, None)
    elif name == "datasketch (xxh32)":
        sig = datasketch_signatures(texts, xxhash.xxh32_intdigest)
    else:
        sig = curate_signatures(batches)
    return sig, time.perf_counter() - wall, time.process_time() - cpu


def _half(args: tuple[str, str]) -> tuple[float, float, float]:
    name, path = args
    texts = load_texts(Path(path))
    run("curate", texts[:50]) if name == "curate" else None  # imports outside the timing
    start = time.time()
    _, wall, cpu = run(name, texts)
    return start, start + wall, cpu


def two_processes(name: str, files: list[Path]) -> tuple[float, float]:
    """Wall from the first start to the last finish, and CPU summed, one process per file."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(len(files)) as pool:
        got = pool.map(_half, [(name, str(f)) for f in files])
    return max(g[1] for g in got) - min(g[0] for g in got), sum(g[2] for g in got)


CONTENDERS = ["datasketch (sha1)", "datasketch (xxh32)", "curate"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--quiet", type=float, default=None, help="wait (up to 2 min) for other load <= this"
    )
    args = parser.parse_args()
    folder = WORK / f"corpus-{args.size}"
    info = json.loads((folder / "corpus.json").read_text())
    files = [folder / f for f in info["files"]]
    mb = info["bytes"] / 1e6
    texts = [t for f in files for t in load_texts(f)]
    text_mb = sum(len(t.encode()) for t in texts) / 1e6
    run("curate", texts[:50])  # imports and permutations outside the timing
    results: dict[str, dict[str, list[float]]] = {
        n: {"cpu": [], "wall1": [], "wall2": []} for n in CONTENDERS
    }
    sigs: dict[str, np.ndarray] = {}
    for r in range(args.rounds):
        for name in CONTENDERS if r % 2 == 0 else CONTENDERS[::-1]:
            if args.quiet is not None:  # the machine is shared: wait for the others to pause
                from benchmarks.measure import wait_for_quiet

                results[name].setdefault("load", []).append(wait_for_quiet(args.quiet, 120))
            sig, wall, cpu = run(name, texts)
            sigs[name] = sig
            results[name]["cpu"].append(cpu)
            results[name]["wall1"].append(wall)
            wall2, _ = two_processes(name, files)
            results[name]["wall2"].append(wall2)
            print(
                f"round {r} {name}: 1 process {wall:.1f}s wall {cpu:.1f}s CPU; "
                f"2 processes {wall2:.1f}s",
                flush=True,
            )
    # curate's word-shingle hash is xxh32 of the words' xxh32 values: given that hashfunc,
    # datasketch must produce curate's signatures exactly (checked on every 5th document).
    from curate.minhash.hashes import word_shingle_hash

    every = slice(None, None, 5)
    equal = bool(
        np.array_equal(
            sigs["curate"][every], datasketch_signatures(texts[every], word_shingle_hash)
        )
    )
    summary = {
        "corpus_mb": mb,
        "text_mb": text_mb,
        "documents": len(texts),
        "curate_equals_datasketch_same_hash": equal,
        "runs": results,
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "runs"}))
    for name in CONTENDERS:
        cpu = float(np.median(results[name]["cpu"]))
        w1 = float(np.median(results[name]["wall1"]))
        w2 = float(np.median(results[name]["wall2"]))
        print(
            f"{name:20s} {mb / cpu:6.1f} MB per CPU-s  {mb / w1:6.1f} MB/s (1 process)  "
            f"{mb / w2:6.1f} MB/s (2 processes)"
        )
    if args.out:
        args.out.write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()

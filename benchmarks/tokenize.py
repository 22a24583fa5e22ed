"""The tokenize benchmark: curate against the fastest exact encoder, HF datasets, datatrove.

    python -m benchmarks.tokenize --size 100 --rounds 2                # all contenders
    python -m benchmarks.tokenize --size 400 --rounds 1 --only curate --only limit

For each tokenizer (Mistral 7B v1 SentencePiece, Mistral tekken 240911) and corpus size,
in paired rounds (every contender once per round, in the same order):

- **limit**: each exact encoder on the corpus text already in memory, 2 threads, timed
  around the encode calls only (`sentencepiece` and `tokenizers` for the SentencePiece
  model, `tiktoken` and `tokenizers` for tekken); the fastest is the limit;
- **curate**: `curate run` (read JSONL, tokenize, write shards with sha256 and fsync, the
  manifest), 2 workers;
- **HF datasets**: `load_dataset('json')` + `.map(batched=True, num_proc=2)` with
  `encode_batch_fast` + `save_to_disk`;
- **datatrove**: `JsonlReader` + `DocumentTokenizer` (no shuffling), one task per file,
  2 workers.

The peers only take a `tokenizers` object: they get a tokenizer.json converted from the
same file (benchmarks/tokenize_convert.py). Every contender's ids (EOS after each
document) are digested in input order, and the benchmark fails if any differs.
Wall time and peak memory are of the whole process tree (benchmarks/measure.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

import numpy as np
import pyarrow as pa
import xxhash

from benchmarks.measure import MIB, Measurement, run_curate_recipe, run_measured
from benchmarks.tokenize_convert import prepare

ROOT = Path(__file__).resolve().parent
WORK = ROOT / "work"
TOKENIZERS = {
    "spm": {
        "label": "Mistral 7B v1 SentencePiece",
        "eos": 2,
        "eos_token": "</s>",
        "vocab": 32000,
        "limit": ["sentencepiece", "tokenizers"],
    },
    "tekken": {
        "label": "Mistral tekken 240911",
        "eos": 2,
        "eos_token": "</s>",
        "vocab": 131072,
        "limit": ["tiktoken", "tokenizers"],
    },
}
TARGETS = {
    "spm": {"HF datasets": 1.3, "datatrove": 1.5},
    "tekken": {"HF datasets": 4.0, "datatrove": 4.0},
}
LIMIT_TARGET = 0.85
MEMORY_LIMIT = 1 << 30


@dataclass
class Result:
    tokenizer: str
    size_mb: int
    contender: str
    round: int
    wall_s: float  # the limit: encode seconds only
    cpu_s: float
    peak_tree_mib: float
    bytes: int
    digest: str
    tokens: int
    load: float = 0.0  # the machine's 1-minute load average when the run ended (2 cores)

    @property
    def mb_s(self) -> float:
        return self.bytes / 1e6 / self.wall_s

    @property
    def mb_cpu_s(self) -> float:
        """MB per CPU-second of the whole tree: less sensitive to other load on the machine."""
        return self.bytes / 1e6 / self.cpu_s


def digest_arrays(arrays: list[np.ndarray]) -> tuple[str, int]:
    h, n = xxhash.xxh3_128(), 0
    for arr in arrays:
        arr = np.ascontiguousarray(arr, dtype=np.uint32)
        h.update(arr.tobytes())
        n += len(arr)
    return h.hexdigest(), n


def digest_table_column(paths: list[Path]) -> tuple[str, int]:
    arrays = []
    for path in paths:
        with pa.memory_map(str(path)) as src:
            table = pa.ipc.open_stream(src).read_all()
        arrays += [c.flatten().to_numpy() for c in table.column("input_ids").chunks]
    return digest_arrays(arrays)


def run_curate(
    tok: str, original: Path, corpus: Path, out: Path, log: Path
) -> tuple[Measurement, str, int]:
    recipe = {
        "name": "tok",
        "inputs": [str(corpus / "*.jsonl")],
        "id_field": "id",
        "stages": [{"tokenize": {"source": str(original), "bos": False, "eos": True}}],
        "output": {"root": str(out), "shard_size": "256MB", "rejected": False},
        "engine": {"kind": "local", "workers": 2},
    }
    m, version = run_curate_recipe(recipe, out, log)
    manifest = json.loads((version / "manifest.json").read_text())
    digest, n = digest_table_column([version / s["path"] for s in manifest["shards"]])
    assert n == manifest["tokens"], (n, manifest["tokens"])
    return m, digest, n


def run_peer(
    kind: str, tok: str, tokenizer_json: Path, corpus: Path, out: Path, log: Path
) -> tuple[Measurement, str, int]:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    spec = TOKENIZERS[tok]
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.tokenize_peers",
        kind,
        "--tokenizer",
        str(tokenizer_json),
        "--eos",
        str(spec["eos"]),
        "--eos-token",
        str(spec["eos_token"]),
        "--vocab",
        str(spec["vocab"]),
        "--corpus",
        str(corpus),
        "--out",
        str(out / "out"),
        "--scratch",
        str(out / "scratch"),
    ]
    m = run_measured(cmd, log)
    if kind == "hf":
        shards = sorted((out / "out").glob("data-*.arrow"))
        digest, n = digest_table_column(shards)
    else:
        dtype = np.uint16 if int(spec["vocab"]) <= 1 << 16 else np.uint32  # type: ignore[call-overload]
        files = sorted((out / "out").glob("*_unshuffled.ds"))
        digest, n = digest_arrays([np.fromfile(f, dtype=dtype) for f in files])
    return m, digest, n


def run_limit(
    encoder: str, source: Path, corpus: Path, log: Path, eos: int
) -> tuple[Measurement, dict[str, object]]:
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.tokenize_peers",
        "limit",
        "--encoder",
        encoder,
        "--tokenizer",
        str(source),
        "--eos",
        str(eos),
        "--threads",
        "2",
        "--corpus",
        str(corpus),
    ]
    m = run_measured(cmd, log)
    return m, json.loads(m.stdout.strip().splitlines()[-1])


def one_round(
    tok: str,
    size: int,
    rnd: int,
    only: set[str] | None,
    corpus: Path,
    save: Callable[[Result], None],
) -> None:
    spec = TOKENIZERS[tok]
    original, tokenizer_json = prepare(tok, WORK / "tok")
    nbytes = sum(p.stat().st_size for p in corpus.glob("*.jsonl"))  # JSONL bytes read end to end
    work = WORK / "tokenize" / f"{size}-{tok}"
    logs = WORK / "logs"
    logs.mkdir(parents=True, exist_ok=True)

    def record(
        name: str,
        m: Measurement,
        digest: str,
        n: int,
        wall: float | None = None,
        size_b: int = nbytes,
        cpu: float | None = None,
    ) -> None:
        r = Result(
            tok,
            size,
            name,
            rnd,
            wall or m.wall_s,
            cpu or m.cpu_s,
            m.peak_tree_rss / MIB,
            size_b,
            digest,
            n,
            os.getloadavg()[0],
        )
        save(r)
        print(
            f"  {tok} {size} MB r{rnd} {name:28s} {r.mb_s:7.2f} MB/s"
            f"  {r.peak_tree_mib:7.0f} MiB  {digest[:12]}",
            flush=True,
        )

    for encoder in spec["limit"]:  # type: ignore[attr-defined]
        name = f"limit: {encoder}"
        if only and "limit" not in only and name not in only:
            continue
        if (size > 100 or rnd > 0) and encoder == "tokenizers" and not (only and name in only):
            continue  # slow and never the limit: measured once, at 100 MB
        source = original if encoder != "tokenizers" else tokenizer_json
        m, info = run_limit(
            encoder,
            source,
            corpus,
            logs / f"tok-{size}-{tok}-{encoder}-r{rnd}.log",
            int(spec["eos"]),
        )
        text_bytes = int(info["bytes"])  # type: ignore[call-overload]
        record(
            name,
            m,
            str(info["digest"]),
            int(info["tokens"]),
            float(info["encode_s"]),
            text_bytes,  # type: ignore[call-overload]
            float(info["encode_cpu_s"]),
        )  # type: ignore[arg-type]
    if not only or "curate" in only:
        m, d, n = run_curate(
            tok, original, corpus, work / "curate", logs / f"tok-{size}-{tok}-curate-r{rnd}.log"
        )
        record("curate", m, d, n)
    for kind, name in (("hf", "HF datasets"), ("datatrove", "datatrove")):
        if only and name not in only:
            continue
        m, d, n = run_peer(
            kind,
            tok,
            tokenizer_json,
            corpus,
            work / kind,
            logs / f"tok-{size}-{tok}-{kind}-r{rnd}.log",
        )
        record(name, m, d, n)


def corpus_dir(size: int) -> Path:
    path = WORK / f"corpus-{size}"
    if not (path / "corpus.json").exists():
        subprocess.run(
            [sys.executable, "-m", "benchmarks.corpus", "--size", str(size)],
            check=True,
            cwd=ROOT.parent,
        )
    return path


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in (
        "curate",
        "tokenizers",
        "sentencepiece",
        "tiktoken",
        "datasets",
        "datatrove",
        "transformers",
        "pyarrow",
    ):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "-"
    return out


def report(results: list[Result], command: str) -> str:
    lines = ["# Tokenize benchmark", "", f"Command: `{command}`", ""]
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "curate"], capture_output=True, text=True, cwd=ROOT
    ).stdout
    lines.append(
        f"curate commit {commit}{' (curate/ had uncommitted changes)' if dirty.strip() else ''}; "
        f"{platform.node()}, {os.cpu_count()} cores; "
        + ", ".join(f"{k} {v}" for k, v in versions().items())
    )
    lines.append("")
    groups: dict[tuple[str, int], dict[str, list[Result]]] = {}
    for r in results:
        groups.setdefault((r.tokenizer, r.size_mb), {}).setdefault(r.contender, []).append(r)
    verdicts = []
    for (tok, size), by_name in groups.items():
        med = {name: statistics.median(r.mb_s for r in rs) for name, rs in by_name.items()}
        mem = {name: max(r.peak_tree_mib for r in rs) for name, rs in by_name.items()}
        digests = {r.digest for rs in by_name.values() for r in rs}
        limits = {n: v for n, v in med.items() if n.startswith("limit")}
        limit = max(limits.values()) if limits else None
        cur = med.get("curate")
        lines += [
            f"## {TOKENIZERS[tok]['label']}, {size} MB of JSONL",
            "",
            "| contender | MB/s per round | MB/s (median) | curate is | MB per CPU-s | "
            "curate is (CPU) | peak memory, tree (MiB) | load avg | ids |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        cpu_med = {n: statistics.median(r.mb_cpu_s for r in rs) for n, rs in by_name.items()}
        for name, rs in by_name.items():
            ratio = f"{cur / med[name]:.2f}x" if cur and name != "curate" else "-"
            per = ", ".join(f"{r.mb_s:.2f}" for r in rs)
            ids = "same" if len(digests) == 1 else rs[0].digest[:12]
            cpu = cpu_med[name]
            cpu_ratio = f"{cpu_med['curate'] / cpu:.2f}x" if cur and name != "curate" else "-"
            load = statistics.median(r.load for r in rs)
            lines.append(
                f"| {name} | {per} | {med[name]:.2f} | {ratio} | {cpu:.2f} | {cpu_ratio} "
                f"| {mem[name]:.0f} | {load:.1f} | {ids} |"
            )
        lines.append("")
        if len(digests) != 1:
            verdicts.append(f"FAIL {tok} {size} MB: contenders produced different ids")
        if cur and limit:
            ok = cur / limit >= LIMIT_TARGET
            verdicts.append(
                f"{'ok  ' if ok else 'MISS'} {tok} {size} MB: curate / limit = {cur / limit:.2f} "
                f"(target >= {LIMIT_TARGET})"
            )
        for peer, target in TARGETS[tok].items():
            if cur and peer in med:
                ok = cur / med[peer] >= target
                verdicts.append(
                    f"{'ok  ' if ok else 'MISS'} {tok} {size} MB: curate / {peer} = "
                    f"{cur / med[peer]:.2f}x (target >= {target}x)"
                )
        if "curate" in mem:
            ok = mem["curate"] * MIB < MEMORY_LIMIT
            verdicts.append(
                f"{'ok  ' if ok else 'MISS'} {tok} {size} MB: curate peak tree memory "
                f"{mem['curate']:.0f} MiB (target < 1024)"
            )
    for tok in TOKENIZERS:
        sizes = sorted(s for t, s in groups if t == tok and "curate" in groups[(t, s)])
        if len(sizes) > 1:
            lo = max(r.peak_tree_mib for r in groups[(tok, sizes[0])]["curate"])
            hi = max(r.peak_tree_mib for r in groups[(tok, sizes[-1])]["curate"])
            ok = hi <= lo * 1.25
            verdicts.append(
                f"{'ok  ' if ok else 'MISS'} {tok}: curate peak memory {lo:.0f} MiB at "
                f"{sizes[0]} MB, {hi:.0f} MiB at {sizes[-1]} MB (flat: within 1.25x)"
            )
    lines += ["## Verdicts", "", "```", *verdicts, "```", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, action="append")
    parser.add_argument("--tokenizer", action="append", choices=list(TOKENIZERS))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", action="append", help="curate, limit, 'HF datasets', datatrove")
    parser.add_argument("--results", default="tokenize", help="name under benchmarks/results/")
    parser.add_argument("--append", action="store_true", help="add to the results' raw runs")
    args = parser.parse_args()
    only = set(args.only) if args.only else None
    results_json = ROOT / "results" / f"{args.results}.json"
    results: list[Result] = []
    if args.append and results_json.exists():
        results = [Result(**r) for r in json.loads(results_json.read_text())["runs"]]
    commands = (
        json.loads(results_json.read_text()).get("commands", [])
        if args.append and results_json.exists()
        else []
    )
    command = "python -m benchmarks.tokenize " + " ".join(sys.argv[1:])
    commands.append(command)
    started = time.time()

    def save(result: Result) -> None:  # after every contender: a stopped run keeps its rounds
        results.append(result)
        runs = [asdict(r) for r in results]
        results_json.write_text(json.dumps({"commands": commands, "runs": runs}, indent=1))

    for size in args.size or [100]:
        corpus = corpus_dir(size)
        for rnd in range(args.rounds):
            for tok in args.tokenizer or list(TOKENIZERS):
                one_round(tok, size, rnd, only, corpus, save)
    text = report(results, " ; ".join(commands))
    (ROOT / "results" / f"{args.results}.md").write_text(text)
    print(text)
    print(f"({time.time() - started:.0f} s)")
    if any(line.startswith("FAIL") for line in text.splitlines()):
        sys.exit(1)


if __name__ == "__main__":
    main()

"""PII benchmark: the curate `pii` stage against plain Presidio, side by side in one run.

Contenders, on the same documents (real text: man pages, /usr/share/doc files such as
changelogs and copyright files, Python sources; the corpus of `benchmarks.corpus`):

- **plain Presidio**: `AnalyzerEngine.analyze` + `AnonymizerEngine.anonymize` per
  document, one process, with the same recognizers and settings as the stage's defaults
  (no-op NLP engine; e-mail, phone, card, IBAN, IP, US SSN, crypto; score >= 0.4;
  each value replaced by `<TYPE>`).
- **curate run**: `curate run` of a recipe holding only the `pii` stage with its
  defaults, the local engine with `--workers` processes (all cores by default).
- **curate stage, 1 process**: the stage's `process` over the same batches in this
  process (per-core speed, no engine).
- **plain Presidio, Presidio's defaults** (all 17 recognizers of the no-op engine,
  no threshold) on a prefix of the corpus, for the figure people quote.
- **datatrove PIIFormatter** (regex e-mail and IP, no validation), from its own venv,
  for contrast.

The output of `curate run` must equal plain Presidio's text for every document (the
benchmark exits non-zero otherwise). Wall seconds, CPU seconds (this process and its
children) and MB/s are reported, and where the time goes: each recognizer's seconds,
plain and as curate runs it, on a prefix.

    python -m benchmarks.pii --mb 50 [--workers 2] [--defaults-mb 5] [--profile-mb 5]

Writes benchmarks/results/pii.md and pii.json.
"""

# ruff: noqa: E501  (report lines)
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

HERE = Path(__file__).resolve().parent
WORK = HERE / "work" / "pii"
RESULTS = HERE / "results"
SOURCE = HERE / "work" / "corpus-100"
DATATROVE_PY = os.environ.get("DATATROVE_PYTHON", "/work/benchvenv/bin/python")


def cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    c0, t0 = cpu(), time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0, cpu() - c0


def build_corpus(mb: int) -> Path:
    """The first `mb` MB of documents of benchmarks.corpus's 100 MB corpus (a stable mix)."""
    path = WORK / f"corpus-{mb}.jsonl"
    if path.exists():
        return path
    parts = sorted(SOURCE.glob("part-*.jsonl"))
    if not parts:
        sys.exit("no corpus: run `python -m benchmarks.corpus --size 100` first")
    budget = mb * 10**6
    WORK.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        for part in parts:
            with open(part, encoding="utf-8") as f:
                for line in f:
                    if budget <= 0:
                        break
                    out.write(line)
                    budget -= len(json.loads(line)["text"].encode())
    return path


def load(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def plain_presidio(docs: list[dict[str, str]], defaults: bool = False) -> dict[str, str]:
    from presidio_anonymizer import AnonymizerEngine
    from presidio_anonymizer.entities import OperatorConfig

    from curate.pii.analyzer import Analysis, AnalyzerConfig
    from curate.stages.pii import DEFAULT_ENTITIES

    ents = tuple(DEFAULT_ENTITIES)
    engine = Analysis(AnalyzerConfig(("en",), ents, 0.4, fast=False)).engine
    anonymizer = AnonymizerEngine()
    ops = {e: OperatorConfig("replace") for e in ents}
    out = {}
    for d in docs:
        if defaults:
            found = engine.analyze(d["text"], language="en")
        else:
            found = engine.analyze(
                d["text"], language="en", entities=list(ents), score_threshold=0.4
            )
        out[d["id"]] = anonymizer.anonymize(d["text"], found, ops).text
    return out


def curate_run(corpus: Path, workers: int) -> tuple[dict[str, str], float, float, dict[str, Any]]:
    import shutil

    import yaml

    folder = WORK / "run"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    recipe = {
        "name": "pii-bench",
        "inputs": [str(corpus)],
        "id_field": "id",
        "stages": [{"normalize": {"form": None, "newlines": False, "remove_control": False,
                                  "max_newlines": 0, "strip": False}}, {"pii": {}}],
        "partition_size": "4MB",  # several partitions, so every worker has work
        "output": {"root": str(folder / "out"), "fsync": False, "rejected": True},
        "engine": {"workers": workers},
    }  # fmt: skip
    (folder / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    curate_cli = Path(sys.executable).with_name("curate")
    c0, t0 = cpu(), time.perf_counter()
    subprocess.run([str(curate_cli), "run", "--quiet", str(folder / "recipe.yaml")], check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    wall, cpu_s = time.perf_counter() - t0, cpu() - c0
    version = folder / "out" / "pii-bench" / "v1"
    texts: dict[str, str] = {}
    for shard in sorted((version / "shards").glob("*.arrow")):
        table = pa.ipc.open_stream(pa.memory_map(str(shard))).read_all()
        texts.update(
            zip(table.column("id").to_pylist(), table.column("text").to_pylist(), strict=True)
        )
    manifest = json.loads((version / "manifest.json").read_text())
    return texts, wall, cpu_s, manifest


def curate_stage(docs: list[dict[str, str]]) -> dict[str, str]:
    from curate.stages.base import StageContext
    from curate.stages.pii import Pii, PiiParams

    stage = Pii(PiiParams(), StageContext())
    stage.setup()
    out = {}
    for i in range(0, len(docs), 512):
        chunk = docs[i : i + 512]
        batch = pa.RecordBatch.from_pylist([{"id": d["id"], "text": d["text"]} for d in chunk])
        result = stage.process(batch).batch
        out.update(
            zip(result.column("id").to_pylist(), result.column("text").to_pylist(), strict=True)
        )
    return out


DATATROVE = """
import json, sys, time, resource
from datatrove.pipeline.formatters import PIIFormatter
f = PIIFormatter()
docs = [json.loads(l)["text"] for l in open(sys.argv[1], encoding="utf-8")]
t = time.perf_counter(); c = resource.getrusage(resource.RUSAGE_SELF)
for d in docs: f.format(d)
r = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"wall": time.perf_counter() - t, "cpu": r.ru_utime + r.ru_stime - c.ru_utime - c.ru_stime}))
"""


def datatrove(corpus: Path) -> dict[str, float] | None:
    if not Path(DATATROVE_PY).exists():
        return None
    proc = subprocess.run(
        [DATATROVE_PY, "-c", DATATROVE, str(corpus)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def recognizer_seconds(docs: list[dict[str, str]]) -> list[tuple[str, float, float]]:
    """Seconds per recognizer over docs: Presidio's own, and patched as curate runs them."""
    from curate.pii.analyzer import Analysis, AnalyzerConfig
    from curate.stages.pii import DEFAULT_ENTITIES

    ents = tuple(DEFAULT_ENTITIES)
    rows = []
    plain = Analysis(AnalyzerConfig(("en",), ents, 0.4, fast=False)).engine
    fast = Analysis(AnalyzerConfig(("en",), ents, 0.4)).engine
    nlp = plain.nlp_engine.process_text("", "en")
    for rp, rf in zip(
        sorted(plain.registry.recognizers, key=lambda r: r.name),
        sorted(fast.registry.recognizers, key=lambda r: r.name),
        strict=True,
    ):
        if not set(rp.supported_entities) & set(ents):
            continue
        times = []
        for rec in (rp, rf):
            t = time.process_time()
            for d in docs:
                rec.analyze(d["text"], rec.supported_entities, nlp)
            times.append(time.process_time() - t)
        rows.append((rp.name, times[0], times[1]))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=50)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--defaults-mb", type=float, default=5)
    ap.add_argument("--profile-mb", type=float, default=5)
    args = ap.parse_args()
    corpus = build_corpus(args.mb)
    docs = load(corpus)
    size = sum(len(d["text"].encode()) for d in docs) / 1e6
    prefix = lambda mb: [d for d, acc in _prefix(docs, mb)]  # noqa: E731
    rows: list[dict[str, Any]] = []

    def row(name: str, n_docs: int, mb: float, wall: float, cpu_s: float) -> None:
        rows.append({"contender": name, "docs": n_docs, "mb": round(mb, 2), "wall_s": round(wall, 2),
                     "cpu_s": round(cpu_s, 2), "mb_per_s": round(mb / wall, 3),
                     "docs_per_s": round(n_docs / wall, 1), "mb_per_cpu_s": round(mb / cpu_s, 3)})  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)

    ran, wall, cpu_s, manifest = curate_run(corpus, args.workers)
    row(f"curate run ({args.workers} workers)", len(docs), size, wall, cpu_s)
    stage_out, wall, cpu_s = timed(lambda: curate_stage(docs))
    row("curate stage, 1 process", len(docs), size, wall, cpu_s)
    plain, wall, cpu_s = timed(lambda: plain_presidio(docs))
    row("plain Presidio (same recognizers)", len(docs), size, wall, cpu_s)
    sub = prefix(args.defaults_mb)
    sub_mb = sum(len(d["text"].encode()) for d in sub) / 1e6
    _, wall, cpu_s = timed(lambda: plain_presidio(sub, defaults=True))
    row("plain Presidio, Presidio's defaults (17 recognizers)", len(sub), sub_mb, wall, cpu_s)
    dt = datatrove(corpus)
    if dt:
        row("datatrove PIIFormatter (regex e-mail + IP)", len(docs), size, dt["wall"], dt["cpu"])

    differ = [k for k in plain if ran.get(k) != plain[k] or stage_out.get(k) != plain[k]]
    changed = sum(1 for d in docs if plain[d["id"]] != d["text"])
    profile = recognizer_seconds(prefix(args.profile_mb))
    report(args, size, len(docs), rows, differ, changed, manifest, profile)
    if differ:
        sys.exit(f"{len(differ)} documents differ between curate and plain Presidio")


def _prefix(docs: list[dict[str, str]], mb: float) -> Any:
    acc = 0.0
    for d in docs:
        if acc >= mb * 1e6:
            return
        acc += len(d["text"].encode())
        yield d, acc


def report(args: Any, size: float, n: int, rows: list[dict[str, Any]], differ: list[str],
           changed: int, manifest: dict[str, Any], profile: list[tuple[str, float, float]]) -> None:  # fmt: skip
    by = {r["contender"]: r for r in rows}
    plain = by["plain Presidio (same recognizers)"]
    lines = [
        "# PII: curate `pii` stage vs plain Presidio",
        "",
        f"Corpus: {n} documents, {size:.1f} MB (benchmarks/work/pii/corpus-{args.mb}.jsonl: man pages, "
        "/usr/share/doc files, Python sources). Machine: "
        f"{os.cpu_count()} cores, {platform.python_version()}, load average at the end "
        f"{os.getloadavg()[0]:.1f} (shared with other engineers: ratios measured in this run count).",
        "",
        "| contender | docs | MB | wall s | CPU s | MB/s | docs/s | MB per CPU-s | wall vs plain | CPU vs plain |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['contender']} | {r['docs']} | {r['mb']} | {r['wall_s']} | {r['cpu_s']} | {r['mb_per_s']} "
            f"| {r['docs_per_s']} | {r['mb_per_cpu_s']} | {r['mb_per_s'] / plain['mb_per_s']:.1f}x "
            f"| {r['mb_per_cpu_s'] / plain['mb_per_cpu_s']:.1f}x |"
        )
    counters = manifest["stages"][-1].get("counters", {})
    lines += [
        "",
        f"Identical output: curate run and the in-process stage vs plain Presidio on every document: "
        f"**{'yes' if not differ else f'NO, {len(differ)} differ'}**; documents changed: {changed}.",
        "",
        "The stage's counters in the manifest: `" + json.dumps(counters) + "`",
        "",
        f"Where the time goes, first {args.profile_mb} MB (each recognizer's `analyze`, CPU seconds; "
        "curate's caches start cold here):",
        "",
        "| recognizer | plain Presidio | as curate runs it | ratio |",
        "|---|---|---|---|",
    ]
    for name, a, b in sorted(profile, key=lambda x: -x[1]):
        lines.append(f"| {name} | {a:.2f} | {b:.2f} | {a / max(b, 1e-9):.1f}x |")
    lines += [
        "",
        f"Command: `python -m benchmarks.pii --mb {args.mb} --workers {args.workers}`",
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "pii.md").write_text("\n".join(lines))
    (RESULTS / "pii.json").write_text(
        json.dumps({"rows": rows, "differ": len(differ), "profile": profile}, indent=1)
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()

"""Agreement of curate's `quality_filter` with datatrove's four filters run as a pipeline.

datatrove: GopherRepetitionFilter -> GopherQualityFilter -> C4QualityFilter ->
FineWebQualityFilter, each on the text the previous one left (`peers/datatrove_quality.py`,
run by the Python of a venv holding datatrove 0.10.1: `--datatrove-python`, default
/work/venv-dt/bin/python). curate: `quality_filter` with every default, so C4 removes
lines and FineWeb judges what is left; and, for comparison, with `c4: {remove_lines:
false}` (what the stage did before). Two corpora, each built by a committed script with a
stated seed:

- prose: the 10,500 documents of `benchmarks.quality_corpus`;
- docs: the 5,500 man pages, source files and documentation files of
  `benchmarks.quality_docs_corpus` (seed 20261204).

Reported per corpus: keep/drop agreement, Cohen's kappa, documents both keep whose texts
are identical, and the disagreements counted by (datatrove's reason, curate's reason).

    python3 -m venv /work/venv-dt
    /work/venv-dt/bin/pip install 'datatrove[io]==0.10.1' 'xxhash<4' spacy regex
    PYTHONPATH=. /work/venv/bin/python -m benchmarks.quality_pipeline

datatrove's verdicts are cached in work/quality/ by the corpus file's digest. Writes
results/quality_pipeline.md and .json; exits non-zero when a target is missed (>= 97.5%
agreement on each corpus, kappa >= 0.9 on prose, identical kept texts >= 99%).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa

from benchmarks.quality_agreement import kappa
from benchmarks.quality_corpus import WORK
from benchmarks.quality_corpus import build as build_prose
from benchmarks.quality_docs_corpus import build as build_docs

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
PEER = HERE / "peers" / "datatrove_quality.py"
TARGET_AGREEMENT, TARGET_KAPPA, TARGET_TEXTS = 0.975, 0.9, 0.99


def datatrove_pipeline(corpus: Path, python: str, workers: int) -> dict[str, dict]:
    digest = hashlib.sha1(corpus.read_bytes()).hexdigest()[:16]
    cache = WORK / f"datatrove-pipeline-{corpus.stem}-{digest}.jsonl"
    if not cache.exists():
        t0 = time.perf_counter()
        tmp = cache.with_suffix(".tmp")
        subprocess.run([python, str(PEER), str(corpus), str(tmp), str(workers)], check=True)
        tmp.rename(cache)
        print(f"datatrove judged {corpus.name} in {time.perf_counter() - t0:.0f}s", flush=True)
    return {r["id"]: r for r in map(json.loads, cache.open(encoding="utf-8"))}


def curate_pipeline(texts: list[str], remove_lines: bool, batch: int = 500) -> list[dict]:
    from curate.stages.quality_filter import QualityFilterParams, judge

    params = QualityFilterParams(c4={"remove_lines": remove_lines})
    out: list[dict] = []
    for start in range(0, len(texts), batch):
        chunk = pa.array(texts[start : start + batch], pa.string())
        j = judge(chunk, params)
        reasons = np.full(len(chunk), None, dtype=object)
        for rule, fails in j.verdicts:
            reasons[fails & (reasons == None)] = rule  # noqa: E711
        final = j.texts.to_pylist() if j.texts is not None else chunk.to_pylist()
        out += [
            {"reason": r, "text": t if r is None else None}
            for r, t in zip(reasons.tolist(), final, strict=True)
        ]
    return out


def compare(docs: list[dict], theirs: dict[str, dict], mine: list[dict]) -> dict:
    dt = [theirs[d["id"]] for d in docs]
    keep_dt = [r["reason"] is None for r in dt]
    keep_me = [r["reason"] is None for r in mine]
    agree, k = kappa(keep_dt, keep_me)
    both = [(a, b, d) for a, b, d in zip(dt, mine, docs, strict=True) if a["reason"] is None
            and b["reason"] is None]  # fmt: skip
    same = sum(a["text"] == b["text"] for a, b, _ in both)
    pairs = Counter(
        (a["reason"] or "kept", b["reason"] or "kept")
        for a, b in zip(dt, mine, strict=True)
        if (a["reason"] is None) != (b["reason"] is None)
    )
    return {
        "documents": len(docs),
        "datatrove_kept": sum(keep_dt),
        "curate_kept": sum(keep_me),
        "agreement": agree,
        "kappa": k,
        "both_kept": len(both),
        "identical_texts": same,
        "identical_share": same / len(both) if both else 1.0,
        "disagreements": {f"{a} / {b}": c for (a, b), c in pairs.most_common()},
        "differing_texts": [d["id"] for a, b, d in both if a["text"] != b["text"]][:20],
        "examples": {
            f"{a} / {b}": [
                d["id"] for t, m, d in zip(dt, mine, docs, strict=True)
                if (t["reason"] or "kept") == a and (m["reason"] or "kept") == b
            ][:5]
            for (a, b) in list(pairs)[:12]
        },
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datatrove-python", default="/work/venv-dt/bin/python")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    corpora = {"prose": build_prose(10500), "docs": build_docs()}
    report: dict[str, dict] = {}
    ok = True
    for name, corpus in corpora.items():
        docs = [json.loads(line) for line in corpus.open(encoding="utf-8")]
        theirs = datatrove_pipeline(corpus, args.datatrove_python, args.workers)
        texts = [d["text"] for d in docs]
        report[name] = {
            "corpus": corpus.name,
            "sources": dict(Counter(d["source"] for d in docs)),
            "remove_lines": compare(docs, theirs, curate_pipeline(texts, True)),
            "decide_only": compare(docs, theirs, curate_pipeline(texts, False)),
        }
        r = report[name]["remove_lines"]
        ok &= r["agreement"] >= TARGET_AGREEMENT and r["identical_share"] >= TARGET_TEXTS
        ok &= name != "prose" or r["kappa"] >= TARGET_KAPPA
    lines = [
        "# quality_filter against datatrove's four filters as a pipeline",
        "",
        "| corpus | documents | c4 | datatrove keeps | curate keeps | agreement "
        "| Cohen's kappa | both keep | kept texts identical |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, rep in report.items():
        for mode in ("remove_lines", "decide_only"):
            r = rep[mode]
            lines.append(
                f"| {name} | {r['documents']:,} | {mode} | {r['datatrove_kept']:,} "
                f"| {r['curate_kept']:,} | {r['agreement']:.2%} | {r['kappa']:.3f} "
                f"| {r['both_kept']:,} | {r['identical_share']:.2%} |"
            )
    lines += ["", "Disagreements with line removal (datatrove's reason / curate's rule):", ""]
    for name, rep in report.items():
        top = ", ".join(f"{k}: {v}" for k, v in rep["remove_lines"]["disagreements"].items())
        lines.append(f"- {name} ({rep['sources']}): {top or 'none'}")
    text = "\n".join(lines) + "\n"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "quality_pipeline.md").write_text(text)
    (RESULTS / "quality_pipeline.json").write_text(json.dumps(report, indent=1) + "\n")
    print(text)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

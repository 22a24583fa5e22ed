"""Agreement of curate's quality rule sets with datatrove's filters, document by document.

For each rule set, the keep/drop decision of curate's `quality_filter` with only that
set enabled (published defaults) is compared with datatrove's filter of the same rules
(GopherQualityFilter, GopherRepetitionFilter, C4QualityFilter, FineWebQualityFilter,
default arguments, English) on the prose corpus of `benchmarks.quality_corpus`.
Reported per rule set: documents, pass rates, agreement, Cohen's kappa, and the
disagreements counted by (datatrove's reason, curate's reason).

    /work/benchvenv-quality/bin/python -m benchmarks.quality_agreement --docs 10500

datatrove's verdicts are cached in work/quality/datatrove-verdicts.jsonl by document id
and text digest (they take a while: spaCy splits every document for every filter).
Writes results/quality_agreement.md and .json; exits non-zero when a rule set misses
the targets (>= 98% agreement, kappa >= 0.9).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa

from benchmarks.quality_corpus import WORK, build

RESULTS = Path(__file__).resolve().parent / "results"
RULE_SETS = ("gopher_quality", "gopher_repetition", "c4", "fineweb")
DATATROVE = {
    "gopher_quality": "GopherQualityFilter",
    "gopher_repetition": "GopherRepetitionFilter",
    "c4": "C4QualityFilter",
    "fineweb": "FineWebQualityFilter",
}
TARGET_AGREEMENT, TARGET_KAPPA = 0.98, 0.9

_FILTERS: dict[str, object] = {}


def _judge(row: tuple[str, str]) -> dict[str, str | None]:
    """datatrove's verdict on one document: None (kept) or its reason, per filter."""
    from datatrove.data import Document
    from datatrove.pipeline import filters

    if not _FILTERS:
        for name, cls in DATATROVE.items():
            _FILTERS[name] = getattr(filters, cls)()
    doc_id, text = row
    out: dict[str, str | None] = {"id": doc_id}
    for name, f in _FILTERS.items():
        try:
            verdict = f.filter(Document(text=text, id=doc_id))  # type: ignore[attr-defined]
        except Exception as exc:  # datatrove divides by zero on some inputs
            out[name] = f"error:{type(exc).__name__}"
            continue
        if isinstance(verdict, tuple):
            out[name] = verdict[1] if not verdict[0] else None
        else:
            out[name] = None if verdict else "removed"
    return out


def datatrove_verdicts(rows: list[tuple[str, str]], workers: int) -> list[dict]:
    """datatrove's verdicts, cached by document id and text digest (they are slow)."""
    cache = WORK / "datatrove-verdicts.jsonl"
    known: dict[str, dict] = {}
    if cache.exists():
        for line in cache.open():
            v = json.loads(line)
            known[v["key"]] = v
    keys = [f"{doc_id}@{hashlib.sha1(text.encode()).hexdigest()}" for doc_id, text in rows]
    todo = [(k, row) for k, row in zip(keys, rows, strict=True) if k not in known]
    if todo:
        t0 = time.perf_counter()
        with mp.get_context("fork").Pool(workers) as pool, open(cache, "a") as f:
            for (key, _), verdict in zip(
                todo, pool.imap(_judge, [row for _, row in todo], chunksize=16), strict=True
            ):
                verdict["key"] = key
                known[key] = verdict
                f.write(json.dumps(verdict) + "\n")
        print(f"datatrove judged {len(todo)} documents in {time.perf_counter() - t0:.0f}s")
    return [known[k] for k in keys]


def curate_verdicts(texts: list[str], rule_set: str, batch: int = 1000) -> list[str | None]:
    import numpy as np

    from curate.stages.quality_filter import QualityFilterParams, evaluate_rules

    params = QualityFilterParams(**{r: ({} if r == rule_set else None) for r in RULE_SETS})
    out: list[str | None] = []
    for start in range(0, len(texts), batch):
        chunk = pa.array(texts[start : start + batch], pa.string())
        reasons = np.full(len(chunk), None, dtype=object)
        for rule, fails in evaluate_rules(chunk, params):
            reasons[fails & (reasons == None)] = rule  # noqa: E711
        out.extend(reasons.tolist())
    return out


def kappa(a: list[bool], b: list[bool]) -> tuple[float, float]:
    n = len(a)
    agree = sum(x == y for x, y in zip(a, b, strict=True)) / n
    pa_, pb = sum(a) / n, sum(b) / n
    expected = pa_ * pb + (1 - pa_) * (1 - pb)
    return agree, (agree - expected) / (1 - expected) if expected < 1 else 1.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=10500)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--examples", type=int, default=0, help="print ids of disagreements")
    args = ap.parse_args()
    corpus = build(args.docs)
    docs = [json.loads(line) for line in corpus.open()]
    rows = [(d["id"], d["text"]) for d in docs]
    dt = datatrove_verdicts(rows, args.workers)
    texts = [d["text"] for d in docs]
    report: dict[str, dict] = {}
    lines = [
        "| rule set | documents | datatrove pass | curate pass | agreement | Cohen's kappa |",
        "|---|---|---|---|---|---|",
    ]
    ok = True
    for rs in RULE_SETS:
        t0 = time.perf_counter()
        mine = curate_verdicts(texts, rs)
        seconds = time.perf_counter() - t0
        theirs = [v[rs] for v in dt]
        keep_dt = [r is None for r in theirs]
        keep_me = [r is None for r in mine]
        agree, k = kappa(keep_dt, keep_me)
        pairs = Counter(
            (t or "kept", m.split(":", 1)[1] if m else "kept")
            for t, m in zip(theirs, mine, strict=True)
            if (t is None) != (m is None)
        )
        report[rs] = {
            "documents": len(texts),
            "datatrove_pass": sum(keep_dt) / len(texts),
            "curate_pass": sum(keep_me) / len(texts),
            "agreement": agree,
            "kappa": k,
            "curate_seconds": seconds,
            "disagreements": {f"{a} / {b}": c for (a, b), c in pairs.most_common()},
        }
        ok &= agree >= TARGET_AGREEMENT and k >= TARGET_KAPPA
        lines.append(
            f"| {rs} | {len(texts):,} | {sum(keep_dt) / len(texts):.1%} "
            f"| {sum(keep_me) / len(texts):.1%} | {agree:.2%} | {k:.3f} |"
        )
        if args.examples:
            for (a, b), _ in pairs.most_common(6):
                ids = [
                    d["id"]
                    for d, t, m in zip(docs, theirs, mine, strict=True)
                    if (t or "kept") == a and ((m.split(":", 1)[1] if m else "kept") == b)
                ]
                print(rs, a, "/", b, ids[: args.examples])
    table = "\n".join(lines)
    detail = ["", "Disagreements (datatrove's reason / curate's rule):", ""]
    for rs, r in report.items():
        top = ", ".join(f"{k}: {v}" for k, v in list(r["disagreements"].items())[:8]) or "none"
        detail.append(f"- {rs}: {top}")
    text = (
        f"# Quality rule sets: agreement with datatrove\n\nCorpus: {corpus.name} "
        f"(`python -m benchmarks.quality_corpus --docs {args.docs}`), sources "
        f"{dict(Counter(d['source'] for d in docs))}.\n\n{table}\n" + "\n".join(detail) + "\n"
    )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "quality_agreement.md").write_text(text)
    (RESULTS / "quality_agreement.json").write_text(json.dumps(report, indent=1) + "\n")
    print(text)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

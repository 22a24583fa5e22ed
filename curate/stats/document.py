"""The version's `statistics.json`: what every stage did, in counts and fixed bins.

Built at publish from the partitions' completion records (each holds its stages'
`StageCounts`, statistics included), merged in partition order, pass by pass. Every
figure is an integer sum or a histogram of integer counts, so the file is byte-identical
whatever the worker count, the engine, or how much of the run came from the stage cache.
It is listed in the manifest (`statistics`: path, bytes, sha256), so `curate verify`
checks it like a shard. It holds no document text: counts, bins, reasons, language codes.

Layout (format_version 1; keys sorted, two-space indent):

    {"format": "curate.statistics", "format_version": 1,
     "stages": [                          # one per recipe stage, in recipe order
       {"position": 0, "name": "normalize", "kind": "map",
        "documents_in": N, "documents_out": N, "changed": N, "removed": {reason: N},
        "sums": {"characters_in": N, ...},             # integer sums (see README)
        "histograms": {"length_in": HISTOGRAM, ...}}],
     "sources": [                         # one per input, in input order
       {"input": name, "documents": N, "quarantined": N, "written": N,
        "characters": N, "tokens": N | null,
        "stages": [{"position": 0, "documents_in": N, "documents_out": N,
                    "sums": {...}}]}],
     "quarantine": {reason: N}}

    HISTOGRAM = {"scheme": {"kind": "log2"} | {"kind": "linear", "lo": x, "hi": y, "bins": n},
                 "unit": "characters", "n": values binned, "total": exact sum (integers),
                 "marks": {"min": threshold, ...} (optional),
                 "bins": [[bin index, count], ...]}   # bins holding none left out

`curate.stats.bins.Scheme.edges` gives a bin's [lo, hi): log2 bin 0 is 0, bin k >= 1 is
[2**(k-1), 2**k); linear bin i is [lo + i*w, lo + (i+1)*w) with w = (hi - lo) / bins.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from curate.stats.container import Stats

NAME = "statistics.json"
FORMAT = "curate.statistics"
FORMAT_VERSION = 1
_GENERIC = ("characters_in", "characters_out", "tokens_in", "tokens_out")


class Counts(Protocol):
    """A stage's counts for one partition (`curate.stages.base.StageCounts`)."""

    docs_in: int
    docs_out: int
    changed: int
    removed: Counter[str]
    stats: Stats


class Record(Protocol):
    """A partition's completion record (`curate.staging.record.PartitionRecord`)."""

    input: str
    read: int
    quarantined: int
    quarantine_reasons: dict[str, int] | None
    stages: dict[int, Any]  # position -> Counts


@dataclass
class _Total:
    docs_in: int = 0
    docs_out: int = 0
    changed: int = 0
    removed: Counter[str] = field(default_factory=Counter)
    stats: Stats = field(default_factory=Stats)

    def add(self, c: Counts) -> None:
        self.docs_in += c.docs_in
        self.docs_out += c.docs_out
        self.changed += c.changed
        self.removed.update(c.removed)
        self.stats.add(c.stats)


def statistics(
    stages: Sequence[tuple[str, str]],
    records: Sequence[Sequence[Record]],
    inputs: Sequence[str],
    decisions: dict[int, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The document, from the stages (name, kind: map or barrier) in recipe order, every
    pass's records (each pass's in partition order) and the input names in input order;
    `decisions` are the barriers' (position -> what deciding learned), whose details'
    `statistics`, when present, join the barrier's own."""
    totals = [_Total() for _ in stages]
    per_source: dict[str, list[_Total]] = {n: [_Total() for _ in stages] for n in inputs}
    for pass_records in records:
        for r in pass_records:
            mine = per_source.setdefault(r.input, [_Total() for _ in stages])
            for pos, counts in sorted(r.stages.items()):
                totals[pos].add(counts)
                mine[pos].add(counts)
    for pos, decision in sorted((decisions or {}).items()):
        learned = decision.get("details", {}).get("statistics")
        if learned:  # a barrier's figures from deciding (`BarrierStage.decide_with_stats`)
            totals[pos].stats.add(Stats.from_dict(learned))
    first = records[0] if records else []
    documents: Counter[str] = Counter()
    quarantined: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    for r in first:
        documents[r.input] += r.read
        quarantined[r.input] += r.quarantined
        reasons.update(r.quarantine_reasons or {})
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "stages": [_stage(i, name, kind, totals[i]) for i, (name, kind) in enumerate(stages)],
        "sources": [
            _source(name, documents[name], quarantined[name], per_source[name])
            for name in per_source
        ],
        "quarantine": dict(sorted(reasons.items())),
    }


def _stage(position: int, name: str, kind: str, c: _Total) -> dict[str, Any]:
    return {
        "position": position,
        "name": name,
        "kind": kind,
        "documents_in": c.docs_in,
        "documents_out": c.docs_out,
        "changed": c.changed,
        "removed": dict(sorted(c.removed.items())),
        **c.stats.to_dict(),
    }


def _source(name: str, read: int, quarantined: int, stages: list[_Total]) -> dict[str, Any]:
    tokens = [c.stats.sums["tokens_out"] for c in stages if "tokens_out" in c.stats.sums]
    return {
        "input": name,
        "documents": read,
        "quarantined": quarantined,
        "written": stages[-1].docs_out if stages else read,
        "characters": stages[0].stats.sums.get("characters_in", 0) if stages else 0,
        "tokens": tokens[-1] if tokens else None,
        "stages": [
            {
                "position": i,
                "documents_in": c.docs_in,
                "documents_out": c.docs_out,
                "sums": {k: c.stats.sums[k] for k in _GENERIC if k in c.stats.sums},
            }
            for i, c in enumerate(stages)
        ],
    }


def dumps(document: dict[str, Any]) -> str:
    """The file's bytes: sorted keys, two-space indent, a final newline (stable forever)."""
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def read(folder: Path | str) -> dict[str, Any] | None:
    """A version's statistics (None when it was built without them), as listed by its
    manifest; the caller that must trust the bytes runs `curate verify` first."""
    folder = Path(folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    listed = manifest.get("statistics")
    if not listed:
        return None
    data: dict[str, Any] = json.loads((folder / NAME).read_text())
    return data

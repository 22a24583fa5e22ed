"""Removing documents that share word n-grams with evaluation benchmarks.

```yaml
- decontaminate:
    benchmarks:
      - {name: mmlu, path: bench/mmlu.jsonl, fields: [question, choices]}
      - {name: gsm8k, path: bench/gsm8k.parquet, fields: [question, answer]}
    n: 13                # words per n-gram (GPT-3's choice)
    max_items: 10        # n-grams in more benchmark items than this are not evidence
    ignore: [bench/licence.txt]
    action: drop         # or cut: remove the overlapping spans, keep the rest
```

A map stage: the benchmark n-gram set is built once per worker in `setup()` (see
`curate.decontam`), then each batch's n-grams are looked up in it at once. A document
sharing any n-gram with a benchmark is removed (reason `benchmark:<name>`, the first
benchmark in recipe order it overlaps) or has every overlapping span cut out. The
manifest records each benchmark's name, path, sha256, n and item counts in the stage's
details, and counts the documents affected per benchmark (`benchmark:<name>` counters;
a document overlapping two benchmarks counts under both). Benchmark files' digests enter
the fingerprint, so editing one makes a new version.

On chat records each message of the chosen `roles` (default: user and assistant; system
prompts are usually shared boilerplate) is checked on its own, n-grams never crossing
from one message into the next. A conversation with any overlapping message is removed
(`drop`), or has the spans cut out of those messages (`cut`); a message left with
nothing removes its conversation, since a conversation with an empty turn is impossible.
Counters count conversations.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from curate.chat.contents import Roles, put_back, roles_field
from curate.decontam.cut import cut
from curate.decontam.index import BenchmarkFile, NGramIndex, build_index
from curate.decontam.words import ngram_keys, normalized_words
from curate.digests import sha256_file
from curate.errors import CurateError, shown
from curate.io.batches import ID
from curate.reasons import BENCHMARK
from curate.stages.base import MapStage, StageParams, StageResult, rejected_table


class BenchmarkSpec(StageParams):
    name: str = Field(description="Name used in reasons and counters.")
    path: str = Field(description="A .jsonl or .parquet file; relative to the recipe.")
    fields: list[str] = Field(
        default_factory=lambda: ["text"], description="Fields holding benchmark text."
    )


class DecontaminateParams(StageParams):
    benchmarks: list[BenchmarkSpec] = Field(
        min_length=1, description="Benchmark files: [{name, path, fields}]."
    )
    n: int = Field(13, ge=3, description="Words per n-gram.")
    max_items: int = Field(
        10, ge=1, description="Ignore n-grams found in more benchmark items than this."
    )
    ignore: list[str] = Field(
        default_factory=list, description="Text files whose n-grams are ignored (licences)."
    )
    action: Literal["drop", "cut"] = Field(
        "drop", description="drop the document, or cut the overlapping spans out of it."
    )
    roles: Roles | None = roles_field("user and assistant")


class Decontaminate(MapStage[DecontaminateParams]):
    """Drops (or cuts) documents sharing word n-grams with benchmark files."""

    name = "decontaminate"
    Params = DecontaminateParams
    reads = ("text",)
    shapes = ("text", "chat")
    default_roles = ("user", "assistant")

    def _path(self, path: str) -> Path:
        return (Path(self.context.base_dir) / path).resolve()

    def _files(self) -> list[BenchmarkFile]:
        p = self.params
        out = []
        for b in p.benchmarks:
            path = self._path(b.path)
            if not path.is_file():
                raise CurateError(f"decontaminate: benchmark {b.name}: no file {shown(path)}")
            out.append(BenchmarkFile(b.name, path, b.fields))
        return out

    def _digests(self) -> dict[str, str]:
        """sha256 of each benchmark and ignore file, cached by path, size and mtime."""
        p = self.params
        paths = [self._path(b.path) for b in p.benchmarks] + [self._path(i) for i in p.ignore]
        stamp = tuple((str(x), *(lambda s: (s.st_size, s.st_mtime_ns))(x.stat())) for x in paths)
        cached = self.__dict__.get("_digest_cache")
        if cached is None or cached[0] != stamp:
            cached = (stamp, {str(x): sha256_file(x) for x in paths})
            self.__dict__["_digest_cache"] = cached
        return cached[1]

    def setup(self) -> None:
        p = self.params
        self._index: NGramIndex = build_index(
            self._files(), [self._path(i) for i in p.ignore], p.n, p.max_items
        )

    def software(self) -> dict[str, str]:
        try:
            digests = self._digests()
        except OSError as exc:
            raise CurateError(
                f"decontaminate: cannot read {shown(exc.filename)}: {exc.strerror}"
            ) from None
        return {f"decontaminate:{k}": v for k, v in digests.items()}

    def describe(self) -> dict[str, Any]:
        p = self.params
        digests = self._digests()
        return {
            "n": p.n,
            "benchmarks": [
                {
                    "name": b.name,
                    "path": str(self._path(b.path)),
                    "sha256": digests[str(self._path(b.path))],
                    "fields": b.fields,
                    "n": p.n,
                }
                for b in p.benchmarks
            ],
            "ignore": [{"path": i, "sha256": digests[str(self._path(i))]} for i in p.ignore],
        }

    def process(self, batch: pa.RecordBatch) -> StageResult:
        p = self.params
        if getattr(self, "_index", None) is None:
            self.setup()
        u = self.text_units(batch)  # documents, or the chosen messages of conversations
        w = normalized_words(u.texts)
        keys, first = ngram_keys(w, p.n)  # n-grams never cross a document's or message's end
        masks = self._index.lookup(keys)
        hit = masks != 0
        if not hit.any():
            return StageResult(batch)
        hit_unit = np.repeat(np.arange(len(u.texts)), w.counts)[first[hit]]
        unit_mask = np.zeros(len(u.texts), np.uint64)
        np.bitwise_or.at(unit_mask, hit_unit, masks[hit])
        doc_mask = np.zeros(batch.num_rows, np.uint64)
        np.bitwise_or.at(doc_mask, u.rows, unit_mask)
        counters: Counter[str] = Counter()
        first_bench = np.full(batch.num_rows, -1)
        for b in reversed(range(len(self._index.names))):
            has = ((doc_mask >> np.uint64(b)) & np.uint64(1)).astype(bool)
            counters[f"benchmark:{self._index.names[b]}"] += int(has.sum())
            first_bench[has] = b
        counters = Counter({k: v for k, v in counters.items() if v})
        affected = np.flatnonzero(doc_mask != 0)
        keep = np.ones(batch.num_rows, bool)
        changed = 0
        if p.action == "cut":
            texts = u.texts.to_pylist()
            new = list(texts)
            starts = w.starts
            for k in np.flatnonzero(unit_mask):
                grams = first[hit][hit_unit == k] - starts[k]
                cut_text = cut(texts[k] or "", grams, p.n, int(w.counts[k]))
                if cut_text:
                    new[k] = cut_text
                else:  # nothing left (or words not lining up): the whole document goes
                    keep[u.rows[k]] = False
            changed = int(keep[affected].sum())
            batch = put_back(batch, self.text_field, u, pa.array(new, pa.string()))
        else:
            keep[affected] = False
        removed = None
        if not keep.all():
            gone = np.flatnonzero(~keep)
            reasons = [BENCHMARK(benchmark=self._index.names[first_bench[d]]) for d in gone]
            removed = rejected_table(self.name, pc.take(batch.column(ID), pa.array(gone)), reasons)
            batch = batch.filter(pa.array(keep))
        return StageResult(batch, changed=changed, removed=removed, counters=dict(counters))

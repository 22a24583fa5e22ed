"""Near-duplicate removal with MinHash, LSH banding, verification and connected components.

summarize (per batch, in the workers): shingles, signatures equal to datasketch's
`MinHash(num_perm, seed, hashfunc=curate.minhash.hashes.shingle_hash(unit))` fed the same
shingles (xxh32 based; see `curate.minhash.hashes`), and one 64-bit key per LSH band. A
summary row per document that has words: `id`, `_order`, the band keys, the signature and
(verify: exact) the shingle hashes. Documents without words get no row: they are never
clustered (empty ones are exact dedup's job).

decide (once, against the engine's collective operations): documents sharing a band key
become candidate pairs (a star from each bucket's first document); each pair is verified,
by the share of equal signature values (`estimate`) or by the Jaccard similarity of the two
shingle sets read back for candidate pairs only (`exact`), and pairs under the threshold
are dropped; connected components of the verified pairs are clusters, and each cluster
keeps its first document in input order. A removed document's rejected row names the kept
one (`duplicate_of`) and their similarity measured as pairs are verified: the Jaccard
similarity of their shingle sets (`exact`) or its estimate from the signatures. A document
that joined its cluster through another member (a ~ b ~ c) can be below the threshold
with the kept one: its own verified pair is with that other member.

On chat records a conversation is shingled as the contents of its messages of the chosen
`roles` (default: all) joined by a blank line, every word tagged with its speaker
(`u|word`, `a|word`; `curate.chat.contents.labelled`): near-duplicates are conversations
in which the same speakers say nearly the same things.

Defaults favour recall: bands and rows come from datasketch's `_optimal_param` with false
negatives weighted 0.98, so a pair at the threshold is a candidate 98% of the time (with
equal weights, 9 x 13 at 0.8, it would be 40%); verification then removes the extra
candidates, which only cost time. Exact verification is the default because an estimate
from 128 values misses about half of the pairs that sit right at the threshold.
"""

from __future__ import annotations

import time
import unicodedata
from functools import lru_cache
from importlib.metadata import version
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash
from pydantic import Field, model_validator

from curate.chat.contents import Roles, labelled, roles_field
from curate.collective.frame import Frame, Summaries
from curate.collective.piece_ops import at_least
from curate.io.batches import ID, ORDER
from curate.minhash import band_table
from curate.minhash.hashes import hash_shingles
from curate.minhash.lsh import band_keys, candidate_probability
from curate.minhash.signatures import signatures
from curate.minhash.verify import estimate_scores, exact_scores
from curate.progress import step
from curate.stages.base import (
    DECISION_SCHEMA,
    STATISTICS,
    BarrierStage,
    StageParams,
    rejected_table,
)
from curate.stats import LOG2, Stats, linear
from curate.stats.bins import piece_bins

SIGNATURE = "signature"
SHINGLES = "shingles"
REASON = "near_duplicate"


def band_column(i: int) -> str:
    return f"band_{i:03d}"


class MinHashDedupParams(StageParams):
    unit: Literal["word", "char"] = Field(
        "word", description="Shingle unit: words (of str.split()) or characters."
    )
    size: int = Field(5, ge=1, le=64, description="Units per shingle (n-gram size).")
    lowercase: bool = Field(True, description="Lowercase (str.lower()) before shingling.")
    num_perm: int = Field(128, ge=2, le=1024, description="MinHash permutations.")
    threshold: float = Field(
        0.8, gt=0.0, le=1.0, description="Jaccard similarity at which documents are duplicates."
    )
    bands: int | None = Field(
        None, ge=1, description="LSH bands; default: datasketch's optimal choice (see weight)."
    )
    rows: int | None = Field(None, ge=1, description="Rows per LSH band; set with bands.")
    false_negative_weight: float = Field(
        0.98,
        gt=0.0,
        lt=1.0,
        description="Weight of missed pairs (false positives get 1 minus it) when bands and "
        "rows are chosen by datasketch's _optimal_param.",
    )
    verify: Literal["exact", "estimate"] = Field(
        "exact",
        description="Check candidate pairs by exact Jaccard of shingle sets, or by "
        "signature estimate; pairs under the threshold are dropped.",
    )
    seed: int = Field(1, ge=0, description="MinHash seed (datasketch's default is 1).")
    roles: Roles | None = roles_field()

    @model_validator(mode="after")
    def _bands(self) -> MinHashDedupParams:
        if (self.bands is None) != (self.rows is None):
            raise ValueError("bands and rows go together: give both or neither")
        if (
            self.bands is not None
            and self.rows is not None
            and self.bands * self.rows > self.num_perm
        ):
            raise ValueError(
                f"bands x rows ({self.bands} x {self.rows}) exceeds num_perm ({self.num_perm})"
            )
        return self


@lru_cache(maxsize=16)
def optimal_bands(threshold: float, num_perm: int, fn_weight: float) -> tuple[int, int]:
    """datasketch's own choice of (bands, rows) for these weights (from the precomputed
    table when it holds them: importing datasketch's LSH module pulls in scipy)."""
    table = band_table.known(threshold, num_perm, fn_weight, version("datasketch"))
    if table is not None:
        return table
    from datasketch.lsh import _optimal_param

    b, r = _optimal_param(threshold, num_perm, 1.0 - fn_weight, fn_weight)
    return int(b), int(r)


@lru_cache(maxsize=16)
def permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """datasketch's `affine32` permutation parameters (a odd, b), as uint32 arrays."""
    from datasketch import MinHash

    m = MinHash(num_perm=num_perm, seed=seed, scheme="affine32")
    a, b = m.permutations
    return np.asarray(a, np.uint32), np.asarray(b, np.uint32)


class MinHashDedup(BarrierStage[MinHashDedupParams]):
    """Drops near-duplicates (MinHash + LSH, verified), keeping each cluster's first document."""

    name = "minhash_dedup"
    Params = MinHashDedupParams
    reads = ("text",)
    shapes = ("text", "chat")
    _stats: dict[str, Any] | None = None
    """What the last `decide()` learned, for `describe()` (never shipped: leading underscore)."""

    def band_shape(self) -> tuple[int, int]:
        p = self.params
        if p.bands is not None and p.rows is not None:
            return p.bands, p.rows
        return optimal_bands(p.threshold, p.num_perm, p.false_negative_weight)

    def software(self) -> dict[str, str]:
        return {
            "datasketch": version("datasketch"),
            "minhash_scheme": "affine32",
            "xxhash": xxhash.VERSION,
            "shingle_hash": "xxh32",
            "unicode": unicodedata.unidata_version,
        }

    def describe(self) -> dict[str, Any]:
        p = self.params
        bands, rows = self.band_shape()
        shingles = f"{p.size} consecutive {'words' if p.unit == 'word' else 'characters'}"
        details: dict[str, Any] = {
            "shingles": f"{shingles} of ' '.join(text{'.lower()' if p.lowercase else ''}"
            ".split()), UTF-8; fewer units make one shingle; no words, no shingle",
            "shingle_hash": "xxh32 (seed 0) of the shingle's UTF-8 bytes"
            if p.unit == "char"
            else "xxh32 (seed 0) of the shingle's words' xxh32 values, 4 little-endian bytes each",
            "scheme": "datasketch affine32: fmix32(h), then a*h+b mod 2^32",
            "seed": p.seed,
            "num_perm": p.num_perm,
            "bands": bands,
            "rows": rows,
            "bands_from": "recipe"
            if p.bands is not None
            else f"datasketch _optimal_param(threshold, num_perm, "
            f"{1 - p.false_negative_weight:.4g}, {p.false_negative_weight:.4g})",
            "candidate_probability_at_threshold": round(
                candidate_probability(p.threshold, bands, rows), 4
            ),
            "verify": p.verify,
            "keep": "first in input order within each cluster",
            "similarity": "rejected/: Jaccard similarity of the shingle sets with the kept "
            "document (duplicate_of), "
            + ("exact" if p.verify == "exact" else "estimated from the signatures")
            + "; below the threshold when the document joined its cluster through another",
        }
        if self._stats is not None:
            details.update({k: v for k, v in self._stats.items() if k != STATISTICS})
        return details

    # -- summarize (workers) ------------------------------------------------------------

    def summary_schema(self) -> pa.Schema:
        bands, _ = self.band_shape()
        fields = [pa.field(ID, pa.string()), pa.field(ORDER, pa.uint64())]
        fields += [pa.field(band_column(i), pa.uint64()) for i in range(bands)]
        fields.append(pa.field(SIGNATURE, pa.list_(pa.uint32(), self.params.num_perm)))
        if self.params.verify == "exact":
            fields.append(pa.field(SHINGLES, pa.list_(pa.uint32())))
        return pa.schema(fields)

    def basis_schema(self) -> pa.Schema:
        """What `summary_basis` returns: the summary without its band keys."""
        bands, _ = self.band_shape()
        schema = self.summary_schema()
        for i in range(bands):
            schema = schema.remove(schema.get_field_index(band_column(i)))
        return schema

    def basis_params(self) -> dict[str, Any]:
        """Signatures (and shingle hashes) depend on these; the threshold, bands and rows
        only decide the band keys, which `summary_from_basis` derives."""
        p = self.params
        kept = p.model_dump(mode="json", include={"unit", "size", "lowercase", "num_perm", "seed",
                                                  "roles"})  # fmt: skip
        return {**kept, "shingles": p.verify == "exact"}

    def summarize(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        return self.summary_from_basis(self.summary_basis(batch))

    def summary_basis(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Each document's signature (and, to verify exactly, its shingle hashes): the costly
        part of a summary, which the stage cache keeps."""
        p = self.params
        a, b = permutations(p.num_perm, p.seed)
        u = self.text_units(batch)
        texts = labelled(batch, u) if u.chat else u.texts
        hashes, counts = hash_shingles(texts, p.unit, p.size, p.lowercase)
        sigs = signatures(hashes, counts, a, b)
        kept = np.flatnonzero(counts > 0)
        sigs = sigs[kept]
        take = pa.array(kept, pa.int64())
        columns: list[pa.Array] = [
            pc.take(batch.column(ID), take).cast(pa.string()),
            pc.take(batch.column(ORDER), take),
            pa.FixedSizeListArray.from_arrays(pa.array(sigs.reshape(-1)), p.num_perm),
        ]
        if p.verify == "exact":
            offsets = np.concatenate([[0], np.cumsum(counts[kept])]).astype(np.int32)
            columns.append(pa.ListArray.from_arrays(pa.array(offsets), pa.array(hashes)))
        return pa.RecordBatch.from_arrays(columns, schema=self.basis_schema())

    def summary_from_basis(self, basis: pa.RecordBatch) -> pa.RecordBatch:
        """The band keys, from the signatures under this threshold's bands and rows."""
        bands, rows = self.band_shape()
        signature = basis.column(SIGNATURE)
        flat = signature.flatten().to_numpy(zero_copy_only=False)
        sigs = flat.reshape(len(signature), self.params.num_perm).astype(np.uint32, copy=False)
        keys = band_keys(sigs, bands, rows)
        columns = [basis.column(ID), basis.column(ORDER)]
        columns += [pa.array(keys[:, i]) for i in range(bands)]
        columns += basis.columns[2:]
        return pa.RecordBatch.from_arrays(columns, schema=self.summary_schema())

    # -- decide (once, global) ----------------------------------------------------------

    def decide(self, summaries: Summaries) -> Frame:
        """The decision; what making it learned is then in `describe()` too (engines take it
        from `decide_with_stats` instead)."""
        decision, self._stats = self.decide_with_stats(summaries)
        return decision

    def decide_with_stats(self, summaries: Summaries) -> tuple[Frame, dict[str, Any]]:
        """Every step runs where the engine holds the rows; only counts come back here."""
        p = self.params
        bands, _ = self.band_shape()
        stats: dict[str, Any] = {"documents_summarized": summaries.count()}
        seconds: dict[str, float] = {}
        clock = time.perf_counter()

        def lap(step: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            seconds[step] = round(now - clock, 3)
            clock = now

        step(f"banding: {bands} bands of {stats['documents_summarized']:,} documents")
        edges = summaries.star_edges([band_column(i) for i in range(bands)])
        stats["candidate_pairs"] = edges.count()
        lap("candidates")
        step(f"verify: {stats['candidate_pairs']:,} candidate pairs")
        if stats["candidate_pairs"]:
            if p.verify == "exact":
                scored = summaries.score_pairs(edges, SHINGLES, exact_scores)
            else:
                scored = summaries.score_pairs(edges, SIGNATURE, estimate_scores)
            edges = scored.map(at_least, p.threshold)
            del scored
        stats["verified_pairs"] = edges.count()
        lap("verify")
        step(f"clusters: {stats['verified_pairs']:,} similar pairs")
        clusters = summaries.connected_components(edges)
        del edges
        grouped = clusters.group("root", cluster_sizes)
        stats.update(merge_size_counts(grouped.fold(size_counts)))
        figures = Stats()  # the statistics (curate.stats), when the recipe collects them
        if self.context.stats:
            figures.count("candidate_pairs", stats["candidate_pairs"])
            figures.count("verified_pairs", stats["verified_pairs"])
            figures.count("clusters", stats["clusters"])
            sizes = grouped.fold(piece_bins, "size", LOG2)
            figures.histogram_of_counts("cluster_size", sizes, LOG2, "documents")
        del grouped
        removed = clusters.map(later_members)
        del clusters
        stats["removed"] = removed.count()
        lap("components")
        stats["decide_seconds"] = seconds
        step(f"similarity of {stats['removed']:,} removed to the kept")
        # each removed document scored against its cluster's kept one, as pairs were verified
        if p.verify == "exact":
            scored = summaries.score_pairs(removed, SHINGLES, exact_scores)
        else:
            scored = summaries.score_pairs(removed, SIGNATURE, estimate_scores)
        del removed
        kept = summaries.join(scored, "a", [ID], ["_kept_id"], row_bytes=24 + 40)
        del scored
        both = summaries.join(kept, "b", [ID], ["_id"], row_bytes=24 + 2 * 40)
        decision = both.map(decision_rows, self.name)
        if self.context.stats:  # each removed document's similarity with its kept one
            similar = decision.fold(piece_bins, "similarity", SIMILARITY)
            figures.histogram_of_counts(
                "similarity", similar, SIMILARITY, "jaccard", threshold=p.threshold
            )
            stats[STATISTICS] = figures.to_dict()
        lap("similarity_and_ids")
        return decision, stats


# -- piece functions of decide (run wherever the engine holds the pieces) ---------------


def later_members(clusters: pa.Table) -> pa.Table:
    """(a: the cluster's first document, b: a later one) for every document removed."""
    node = clusters.column("node").to_numpy()
    root = clusters.column("root").to_numpy()
    later = node != root
    return pa.table(
        {"a": pa.array(root[later], pa.uint64()), "b": pa.array(node[later], pa.uint64())}
    )


def decision_rows(pairs: pa.Table, stage: str) -> pa.Table:
    """The decision rows of removed documents (b), naming the kept one (a) and their
    similarity (`score`)."""
    n = pairs.num_rows
    if n == 0:
        return DECISION_SCHEMA.empty_table()
    similarity = pairs.column("score").to_numpy().astype(np.float32)
    table = rejected_table(
        stage,
        pairs.column("_id"),
        [REASON] * n,
        duplicate_of=pairs.column("_kept_id"),
        similarity=pa.array(similarity),
    )
    return _with_order(table, pairs.column("b").to_numpy())


def _with_order(table: pa.Table, orders: np.ndarray) -> pa.Table:
    return table.append_column(ORDER, pa.array(orders, pa.uint64()))


SIZE_BINS = [2, 3, 5, 9, 17, 33, 65, 129, 1025, 10**4 + 1, 10**5 + 1]

SIMILARITY = linear(0.0, 1.0, 50)
"""A removed document's similarity with its cluster's kept one: fifty bins of 0.02."""


def cluster_sizes(clusters: pa.Table) -> pa.Table:
    """Documents per cluster (the kept one included), for the clusters whose roots are here."""
    if clusters.num_rows == 0:
        return pa.table({"size": pa.array([], pa.int64())})
    roots = np.sort(clusters.column("root").to_numpy())
    starts = np.flatnonzero(np.concatenate([[True], roots[1:] != roots[:-1]]))
    return pa.table({"size": pa.array(np.diff(np.append(starts, len(roots))), pa.int64())})


def size_counts(sizes: pa.Table) -> tuple[int, int, list[int]]:
    """Clusters, the largest, and clusters per size bin, for one piece."""
    s = sizes.column("size").to_numpy() if sizes.num_rows else np.zeros(0, np.int64)
    bins = np.searchsorted(SIZE_BINS, s, side="right") - 1
    per_bin = np.bincount(bins[bins >= 0], minlength=len(SIZE_BINS)).tolist()
    return len(s), int(s.max()) if len(s) else 0, per_bin


def merge_size_counts(parts: list[tuple[int, int, list[int]]]) -> dict[str, Any]:
    """Number of clusters and their sizes (documents, the kept one included), by powers of two."""
    clusters = sum(p[0] for p in parts)
    if not clusters:
        return {"clusters": 0, "largest_cluster": 0, "cluster_sizes": {}}
    per_bin = np.sum([p[2] for p in parts], axis=0)
    hist: dict[str, int] = {}
    for i, (lo, hi) in enumerate(zip(SIZE_BINS, [*SIZE_BINS[1:], None], strict=True)):
        if per_bin[i]:
            name = str(lo) if hi == lo + 1 else f"{lo}-{hi - 1}" if hi else f"{lo}+"
            hist[name] = int(per_bin[i])
    largest = max(p[1] for p in parts)
    return {"clusters": clusters, "largest_cluster": largest, "cluster_sizes": hist}

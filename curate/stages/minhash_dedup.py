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

With `cluster_size`, the decision also holds a row without a reason for each cluster's
kept document, carrying the cluster's size (every member paired with its first, the first
with itself, counted where the cluster's rows meet), and `apply` writes it into a
`cluster_size` column: 1 for a kept document in no cluster. Without it the decision and
the output are what they were before the option existed.

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
    StageContext,
    StageParams,
    StageResult,
    rejected_table,
)
from curate.stats import LOG2, Stats, linear
from curate.stats.bins import piece_bins

SIGNATURE = "signature"
SHINGLES = "shingles"
REASON = "near_duplicate"
CLUSTER_SIZE = "cluster_size"
CLUSTER_SIZE_FIELD = pa.field(CLUSTER_SIZE, pa.int64())


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
    cluster_size: bool = Field(
        False,
        description="Add a `cluster_size` column to the documents kept: the documents of "
        "its near-duplicate cluster, itself included (1: no duplicate), for upsampling by it "
        "(FineWeb-2's rehydration) or judging a threshold.",
    )
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

    def __init__(self, params: MinHashDedupParams, context: StageContext | None = None) -> None:
        super().__init__(params, context)
        # with cluster_size, the decision also holds a row (no reason) for each cluster's
        # kept document, carrying its size; without it the decision is only the drops
        self.decision_fields = (CLUSTER_SIZE_FIELD,) if params.cluster_size else ()

    def output_schema(self, schema: pa.Schema) -> pa.Schema:
        if not self.params.cluster_size:
            return schema
        i = schema.get_field_index(CLUSTER_SIZE)
        return schema.set(i, CLUSTER_SIZE_FIELD) if i >= 0 else schema.append(CLUSTER_SIZE_FIELD)

    def apply(
        self, batch: pa.RecordBatch, drop_ids: pa.Array, changes: pa.Table | None = None
    ) -> StageResult:
        """The drops, and with cluster_size each kept document's cluster size: the size its
        decision row carries (joined on the id), 1 for a document in no cluster."""
        result = super().apply(batch, drop_ids)
        if not self.params.cluster_size:
            return result
        kept = result.batch
        sizes = np.ones(kept.num_rows, np.int64)
        if changes is not None and changes.num_rows and kept.num_rows:
            at = pc.index_in(changes.column(ID), value_set=kept.column(ID)).to_numpy(
                zero_copy_only=False
            )
            found = ~np.isnan(at) if at.dtype.kind == "f" else at >= 0
            sizes[at[found].astype(np.int64)] = changes.column(CLUSTER_SIZE).to_numpy()[found]
        column = pa.array(sizes, pa.int64())
        i = kept.schema.get_field_index(CLUSTER_SIZE)
        if i >= 0:
            kept = kept.set_column(i, CLUSTER_SIZE_FIELD, column)
        else:
            kept = kept.append_column(CLUSTER_SIZE_FIELD, column)
        return StageResult(kept)

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
        if p.cluster_size:  # every member, the kept one paired with itself
            removed = clusters.map(all_members)
            stats["removed"] = int(sum(removed.fold(later_count)))
        else:
            removed = clusters.map(later_members)
            stats["removed"] = removed.count()
        del clusters
        lap("components")
        stats["decide_seconds"] = seconds
        step(f"similarity of {stats['removed']:,} removed to the kept")
        # each removed document scored against its cluster's kept one, as pairs were verified
        if p.verify == "exact":
            scored = summaries.score_pairs(removed, SHINGLES, exact_scores)
        else:
            scored = summaries.score_pairs(removed, SIGNATURE, estimate_scores)
        del removed
        if p.cluster_size:  # a cluster's rows (its kept one's self-pair too) brought together
            scored = scored.group("a", with_sizes)
        kept = summaries.join(scored, "a", [ID], ["_kept_id"], row_bytes=24 + 40)
        del scored
        both = summaries.join(kept, "b", [ID], ["_id"], row_bytes=24 + 2 * 40)
        decision = both.map(decision_rows, self.name, p.cluster_size)
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


def all_members(clusters: pa.Table) -> pa.Table:
    """(a: the cluster's first document, b: a member) for every member, the first one
    included (a == b): what cluster_size decides on."""
    return pa.table(
        {
            "a": pa.array(clusters.column("root").to_numpy(), pa.uint64()),
            "b": pa.array(clusters.column("node").to_numpy(), pa.uint64()),
        }
    )


def with_sizes(members: pa.Table) -> pa.Table:
    """`members` (all rows of each cluster whose first document `a` is here) with `size`:
    the cluster's rows, which are its documents."""
    if members.num_rows == 0:
        return members.append_column("size", pa.array([], pa.int64()))
    _, first, counts = np.unique(members.column("a").to_numpy(), return_inverse=True,
                                 return_counts=True)  # fmt: skip
    return members.append_column("size", pa.array(counts[first], pa.int64()))


def later_count(members: pa.Table) -> int:
    """Members of this piece that are not their cluster's first: the documents removed."""
    if members.num_rows == 0:
        return 0
    return int(np.sum(members.column("a").to_numpy() != members.column("b").to_numpy()))


def decision_rows(pairs: pa.Table, stage: str, sizes: bool = False) -> pa.Table:
    """The decision rows of removed documents (b), naming the kept one (a) and their
    similarity (`score`); with `sizes` (cluster_size: the pairs have a `size` column), also
    a row without a reason for each kept document (a == b) carrying its cluster's size."""
    if sizes:
        return _rows_with_sizes(pairs, stage)
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


def _rows_with_sizes(pairs: pa.Table, stage: str) -> pa.Table:
    schema = pa.schema([*DECISION_SCHEMA, CLUSTER_SIZE_FIELD])
    if pairs.num_rows == 0:  # an empty piece may not carry the pairs' columns
        return schema.empty_table()
    a, b = pairs.column("a").to_numpy(), pairs.column("b").to_numpy()
    kept = a == b
    removed = decision_rows(pairs.filter(pa.array(~kept)).drop_columns(["size"]), stage)
    removed = removed.append_column(CLUSTER_SIZE_FIELD, pa.nulls(removed.num_rows, pa.int64()))
    roots = pairs.filter(pa.array(kept))
    n = roots.num_rows
    table = pa.table(
        {
            ID: roots.column("_id"),
            "stage": pa.array([stage] * n, pa.string()),
            "reason": pa.nulls(n, pa.string()),
            "duplicate_of": pa.nulls(n, pa.string()),
            "similarity": pa.nulls(n, pa.float32()),
            ORDER: pa.array(b[kept], pa.uint64()),
            CLUSTER_SIZE: roots.column("size"),
        },
        schema=schema,
    )
    return pa.concat_tables([removed.cast(schema), table])


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
